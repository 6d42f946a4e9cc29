"""Fuzzing the SASL / credentials input surface: `auth.scram.ScramExchange`,
`auth.plain.authenticate_plain`, `auth.session.SaslSession` and `auth.users.UserStore`.

The store holds three users (one with both SCRAM mechanisms, one whose name needs saslname
escaping and one with SCRAM-SHA-512 only), at Kafka's minimum of 4096 iterations so that the
hashing a PLAIN attempt costs stays small. Inputs are arbitrary bytes, and messages built from
their grammar (RFC 5802 client-first / client-final, RFC 4616 PLAIN) with hostile choices per
field, then byte-level mutations. The oracles are computed independently with hashlib/hmac:

* nothing raises; every failure is an `AuthFailure` whose `client_message` is one of the fixed
  texts, so it names no user and holds no secret, and whose `detail` holds no password and no
  stored key;
* SCRAM authenticates only a user of the store with that mechanism, and only when the proof
  is ClientKey XOR HMAC(StoredKey, AuthMessage) for that user's real password over the
  messages actually exchanged; the server signature it sends back is the right one; an honest
  client with the right password always gets in;
* PLAIN authenticates exactly when the message is `authzid NUL authcid NUL password` with a
  known authcid, its real password and an authzid that is empty or the authcid;
* a failed exchange stays failed (a later start or finish, even an honest one, fails too);
  a session that failed or succeeded refuses further tokens;
* `UserStore.from_json` on JSON-like documents (arbitrary ones and mutations of a valid one)
  and `UserStore.load` on arbitrary file contents raise only `UsersFileError`; a valid store
  round-trips through `to_json`.

It found three users-file loading bugs (a lone surrogate in a name, non-ASCII base64, JSON
nested deeper than the stack), fixed in auth/users.py; a regression test each is at the end.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rafka_actors.auth.plain import authenticate_plain
from rafka_actors.auth.scram import (
    MIN_ITERATIONS,
    AuthFailure,
    FailureKind,
    Mechanism,
    ScramExchange,
    derive_credential,
    escape_saslname,
)
from rafka_actors.auth.session import IllegalState, SaslSession
from rafka_actors.auth.users import User, UsersFileError, UserStore

from .budget import COUNTS, fuzz_settings

SHA256, SHA512 = Mechanism.SCRAM_SHA_256, Mechanism.SCRAM_SHA_512
PASSWORDS = {"alice": "alice-Pw-7Qx!", "b,o=b": "bob secret ü 42", "carol": "carol-Pw-3Zz"}
MECHANISMS = {"alice": (SHA256, SHA512), "b,o=b": (SHA256,), "carol": (SHA512,)}
FAKE_KEY = b"fuzz broker secret"
STORE = UserStore(
    {
        name: User(
            name=name,
            org_id=i + 1,
            credentials={
                m: derive_credential(m, PASSWORDS[name], iterations=MIN_ITERATIONS)
                for m in MECHANISMS[name]
            },
        )
        for i, name in enumerate(PASSWORDS)
    }
)
CLIENT_MESSAGES = {f"Authentication failed: {kind.value}" for kind in FailureKind}
SECRETS = [
    text
    for user in STORE.users.values()
    for c in user.credentials.values()
    for key in (c.stored_key, c.server_key)
    for text in (base64.b64encode(key).decode(), key.hex())
] + list(PASSWORDS.values())
NAMES = [*PASSWORDS, "mallory", "ALICE", "alice ", "b,o", "", "é" * 3]
WRONG_PASSWORDS = ["", "alice-pw-7qx!", "alice-Pw-7Qx", "alice-Pw-7Qx!!", "bob secret u 42"]


# -- independent SCRAM arithmetic (hashlib / hmac only) ---------------------------------------
@lru_cache(maxsize=4096)
def salted(mechanism: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def proof_and_signature(
    mechanism: Mechanism, salted_password: bytes, auth_message: bytes
) -> tuple[bytes, bytes]:
    h = mechanism.hash_name
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    stored_key = hashlib.new(h, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", h).digest()
    signature = hmac.new(stored_key, auth_message, h).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return proof, hmac.new(server_key, auth_message, h).digest()


def check_failure(outcome: object, *attempted: str) -> None:
    assert isinstance(outcome, AuthFailure), outcome
    assert outcome.client_message in CLIENT_MESSAGES
    for secret in SECRETS:
        assert secret not in outcome.client_message
        assert secret not in outcome.detail, (secret, outcome.detail)
    for name in PASSWORDS:
        assert name not in outcome.client_message
    for password in attempted:
        assert password not in outcome.client_message


# -- mutations -------------------------------------------------------------------------------
BAD_BYTES = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b",", b"=", b"=2C", b"=3D", b"\n"]


@st.composite
def mutate(draw: st.DrawFn, message: bytes, max_ops: int = 3) -> bytes:
    for _ in range(draw(st.integers(0, max_ops))):
        n = len(message)
        at = draw(st.integers(0, n))
        kind = draw(st.integers(0, 5))
        if kind == 0 and at < n:  # flip a byte
            flipped = bytes([message[at] ^ draw(st.integers(1, 255))])
            message = message[:at] + flipped + message[at + 1 :]
        elif kind == 1:  # truncate
            message = message[:at]
        elif kind == 2:  # insert a troublesome byte sequence
            message = message[:at] + draw(st.sampled_from(BAD_BYTES)) + message[at:]
        elif kind == 3:  # insert random bytes
            message = message[:at] + draw(st.binary(min_size=1, max_size=8)) + message[at:]
        elif kind == 4:  # delete a run
            message = message[:at] + message[at + draw(st.integers(1, 6)) :]
        else:  # blow it up past the size bound (4096)
            message = message * draw(st.sampled_from([2, 50, 200]))
    return message


# -- SCRAM -----------------------------------------------------------------------------------
NONCE_TEXT = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=","),
    min_size=1,
    max_size=24,
)


def spoil(draw: st.DrawFn, hostile: dict[str, Any]) -> set[str]:
    """Which parts of a message to make hostile: none half of the time, else one or two."""
    if draw(st.booleans()):
        return set()
    return draw(st.sets(st.sampled_from(sorted(hostile)), min_size=1, max_size=2))


@st.composite
def client_first(draw: st.DrawFn) -> bytes:
    """A client-first message: well-formed with up to two hostile parts, or noise."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    name = draw(st.sampled_from([*PASSWORDS, "mallory"] * 6 + [""]))
    name = name or draw(st.text(min_size=1, max_size=12))
    parts = {
        "flag": draw(st.sampled_from(["n", "n", "y"])),
        "authz": draw(st.sampled_from(["", "", "a=" + escape_saslname(name)])),
        "name": escape_saslname(name),
        "nonce": draw(NONCE_TEXT),
        "extensions": draw(st.sampled_from(["", "", ",ext=1", ",m=x,E9=a=b"])),
    }
    hostile = {
        "flag": st.sampled_from(["p=tls-unique", "x", "", "nn"]),
        "authz": st.sampled_from(["a=mallory", "a=", "b=x", "a==ZZ", "a=" + name]),
        "name": st.sampled_from(["", "=", "a=2", "a,b", name]) | st.sampled_from(NAMES),
        "nonce": st.sampled_from(["", "a,b", "ü", " ", "\x7f"]),
        "extensions": st.sampled_from([",tokenauth=true", ",x", ",=", ",1=a", ","]),
        "mutation": st.just(""),
        "order": st.just(""),
    }
    spoiled = spoil(draw, hostile)
    for key in spoiled & set(parts):
        parts[key] = draw(hostile[key])
    fields = [f"n={parts['name']}", f"r={parts['nonce']}"]
    if "order" in spoiled:
        fields.reverse()
    text = f"{parts['flag']},{parts['authz']}," + ",".join(fields) + parts["extensions"]
    if "mutation" in spoiled:
        return draw(mutate(text.encode()))
    return text.encode()


@st.composite
def client_final(
    draw: st.DrawFn, mechanism: Mechanism, first: bytes, server_first: bytes
) -> tuple[bytes, bool]:
    """(client-final, whether it is an honest one with the right password, unmutated)."""
    if draw(st.integers(0, 14)) == 0:
        return draw(st.binary(max_size=200)), False
    gs2_header = ",".join(first.decode().split(",", 2)[:2]) + ","
    bare = first.decode().split(",", 2)[2]
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
    name = bare.split(",")[0][2:].replace("=2C", ",").replace("=3D", "=")
    proof_of = {  # honest client: the proof for the password given, over the message sent
        "binding": base64.b64encode(gs2_header.encode()).decode(),
        "nonce": fields["r"],
        "password": PASSWORDS.get(name, "mallory-guess"),
        "extension": draw(st.sampled_from(["", "", "ext=1", "k=v=w"])),  # ignored by servers
    }
    hostile = {
        "binding": st.sampled_from(["biws", "eSws", "", "!!", "biwsAA=="]),
        "nonce": st.sampled_from([fields["r"][:-1], fields["r"] + "x", "", fields["r"][:8]]),
        "password": st.sampled_from(WRONG_PASSWORDS),
        "extension": st.sampled_from(["tokenauth=x", "bad", "=", "1=a"]),
        "proof": st.just(None),
        "mutation": st.just(None),
    }
    spoiled = spoil(draw, hostile)
    for key in spoiled & set(proof_of):
        proof_of[key] = draw(hostile[key])
    extensions = [proof_of["extension"]] if proof_of["extension"] else []
    without_proof = ",".join([f"c={proof_of['binding']}", f"r={proof_of['nonce']}", *extensions])
    auth_message = f"{bare},{server_first.decode()},{without_proof}".encode()
    secret = salted(mechanism, proof_of["password"], salt, iterations)
    proof, _ = proof_and_signature(mechanism, secret, auth_message)
    proof_text = base64.b64encode(proof).decode()
    if "proof" in spoiled:
        proof_text = draw(st.sampled_from([proof_text[:-4], "", "====", "p", proof_text[::-1]]))
    final = f"{without_proof},p={proof_text}".encode()
    if "mutation" in spoiled:
        final = draw(mutate(final, max_ops=3))
    return final, not spoiled


def scram_exchange(mechanism: Mechanism, nonce: str = "fuzzServerNonce") -> ScramExchange:
    return ScramExchange(
        mechanism,
        STORE.scram_lookup(mechanism),
        server_nonce=nonce,
        fake_salt_key=FAKE_KEY,
        fake_iterations=MIN_ITERATIONS,
    )


def expect_stays_failed(exchange: ScramExchange, first: bytes, final: bytes) -> None:
    assert not exchange.done and exchange.username is None
    check_failure(exchange.start(first))
    check_failure(exchange.finish(final))
    assert not exchange.done and exchange.username is None


def verify_success(
    mechanism: Mechanism, first: bytes, server_first: bytes, final: bytes, reply: bytes
) -> str:
    """The independent oracle for an exchange that authenticated; returns the user name."""
    bare = first.decode().split(",", 2)[2]
    name = bare.split(",")[0][2:].replace("=2C", ",").replace("=3D", "=")
    assert name in PASSWORDS and mechanism in MECHANISMS[name], name
    without_proof, _, proof_field = final.decode().rpartition(",")
    credential = STORE.users[name].credentials[mechanism]
    secret = salted(mechanism, PASSWORDS[name], credential.salt, credential.iterations)
    auth_message = f"{bare},{server_first.decode()},{without_proof}".encode()
    proof, signature = proof_and_signature(mechanism, secret, auth_message)
    assert proof_field == "p=" + base64.b64encode(proof).decode()
    assert reply == b"v=" + base64.b64encode(signature)
    return name


@fuzz_settings(400, deadline_ms=None)
@given(st.sampled_from([SHA256, SHA512]), client_first(), st.data())
def test_scram_exchange_authenticates_only_the_right_proof(
    mechanism: Mechanism, first: bytes, data: st.DataObject
) -> None:
    exchange = scram_exchange(mechanism)
    COUNTS["auth: scram client-first"] += 1
    server_first = exchange.start(first)
    if not isinstance(server_first, bytes):
        check_failure(server_first)
        expect_stays_failed(exchange, b"n,,n=alice,r=x", b"c=biws,r=xfuzzServerNonce,p=AA==")
        return
    COUNTS["auth: scram client-first accepted"] += 1
    final, honest = data.draw(client_final(mechanism, first, server_first))
    COUNTS["auth: scram client-final"] += 1
    reply = exchange.finish(final)
    if isinstance(reply, AuthFailure):
        check_failure(reply)
        name = first.decode().split(",", 2)[2].split(",")[0][2:]
        name = name.replace("=2C", ",").replace("=3D", "=")
        refused = honest and name in PASSWORDS and mechanism in MECHANISMS[name]
        assert not refused, f"an honest client with the right password was refused: {reply}"
        expect_stays_failed(exchange, first, final)
        return
    COUNTS["auth: scram authenticated"] += 1
    assert exchange.done
    assert exchange.username == verify_success(mechanism, first, server_first, final, reply)
    check_failure(exchange.finish(final))  # a finished exchange takes no more messages


# -- PLAIN -----------------------------------------------------------------------------------
@st.composite
def plain_message(draw: st.DrawFn) -> bytes:
    """A PLAIN message: well-formed with up to two hostile parts, or noise."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    name = draw(st.sampled_from([*PASSWORDS, "mallory"] * 6 + [""]))
    name = name or draw(st.text(max_size=12))
    parts = {
        "authz": draw(st.sampled_from(["", "", name])),
        "authc": name,
        "password": PASSWORDS.get(name, "guess-" + name),
    }
    hostile = {
        "authz": st.sampled_from(["mallory", "x" * 300, "alice", name + " "]),
        "authc": st.sampled_from(["", "x" * 256, "\u00e9" * 128, "ALICE", "alice\x00"]),
        "password": st.sampled_from(WRONG_PASSWORDS) | st.text(max_size=12),
        "mutation": st.just(""),
    }
    spoiled = spoil(draw, hostile)
    for key in spoiled & set(parts):
        parts[key] = draw(hostile[key])
    message = b"\0".join(parts[key].encode() for key in ("authz", "authc", "password"))
    return draw(mutate(message)) if "mutation" in spoiled else message


def plain_oracle(message: bytes) -> str | None:
    """RFC 4616 with Kafka's rules: the user it must authenticate, or None."""
    parts = message.split(b"\0")
    if len(message) > 4096 or len(parts) != 3:
        return None
    try:
        authz, authc, password = (part.decode() for part in parts)
    except UnicodeDecodeError:
        return None
    if len(parts[0]) > 255 or len(parts[1]) > 255 or authz not in ("", authc):
        return None
    return authc if PASSWORDS.get(authc) == password else None


@fuzz_settings(300, deadline_ms=None)
@given(plain_message())
def test_plain_authenticates_exactly_the_right_password(message: bytes) -> None:
    COUNTS["auth: plain messages"] += 1
    outcome = authenticate_plain(message, STORE.plain_lookup())
    expected = plain_oracle(message)
    if expected is None:
        parts = message.split(b"\0")
        attempted = parts[2].decode(errors="replace") if len(parts) == 3 else ""
        names = b"".join(parts[:2]).decode(errors="replace")
        # the password tried must not reach the failure (unless it is also part of a name)
        distinct = len(attempted) >= 6 and attempted not in names
        check_failure(outcome, *([attempted] if distinct else []))
        return
    COUNTS["auth: plain authenticated"] += 1
    assert outcome == expected


# -- SaslSession: sequences of handshakes and tokens -----------------------------------------
@st.composite
def session_token(draw: st.DrawFn) -> bytes:
    return draw(plain_message() | client_first() | st.binary(max_size=64))


@fuzz_settings(200, deadline_ms=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["handshake", "step", "step"]),
            st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", ""]),
            session_token(),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_sasl_session_sequences(ops: list[tuple[str, str, bytes]]) -> None:
    session = SaslSession(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), STORE, fake_salt_key=FAKE_KEY
    )
    over = False  # failed, or authenticated: no more tokens
    for op, mechanism, token in ops:
        COUNTS["auth: session ops"] += 1
        was_authenticated = session.authenticated
        try:
            if op == "handshake":
                chosen = session.handshake(mechanism)
                over = over or not chosen
                continue
            outcome = session.step(token)
        except IllegalState:
            continue
        assert not over, "a token was taken after the exchange had ended"
        assert not was_authenticated
        if isinstance(outcome, AuthFailure):
            check_failure(outcome)
            over = True
        elif outcome.user is not None:
            COUNTS["auth: session authenticated"] += 1
            assert session.authenticated and outcome.user.name in PASSWORDS
            over = True
    if over:
        with pytest.raises(IllegalState):
            session.step(b"\0alice\0" + PASSWORDS["alice"].encode())


# -- the users file --------------------------------------------------------------------------
EDGE_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 4095, 4096, 16384, 16385, 2**63, -(2**63), 1.0, 4096.0,
    float("nan"), float("inf"), "", "é", "\ud800", "=", "A" * 5000, "QUFBQQ==", " QQ==",
    "QQ==\n", "QQ", [], {}, [""], ["a", 1], {"": 1}, "SCRAM-SHA-1",
]  # fmt: skip
EDGE_NAMES = ["", "x" * 256, "ü" * 128, "\x00", "a\u2028", "\ud800", "alice", "SCRAM-SHA-512"]
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(EDGE_VALUES)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.sampled_from(EDGE_NAMES), inner, max_size=4)
    ),
    max_leaves=20,
)


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, dict | list):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            _containers(child, out)
    return out


@st.composite
def mutated_users_document(draw: st.DrawFn) -> Any:
    document = copy.deepcopy(STORE.to_json())
    if draw(st.integers(0, 3)) == 0:  # rename a user
        users = document["users"]
        users[draw(st.sampled_from(EDGE_NAMES))] = users.pop(draw(st.sampled_from(sorted(users))))
    for _ in range(draw(st.integers(0, 4))):
        target = draw(st.sampled_from(_containers(document, [])))
        # a copy: EDGE_VALUES holds lists and dicts that later mutations may change
        value = copy.deepcopy(draw(st.sampled_from(EDGE_VALUES) | JSON_VALUES))
        if isinstance(target, list):
            if target and draw(st.booleans()):
                target[draw(st.integers(0, len(target) - 1))] = value
            else:
                target.append(value)
            continue
        key = draw(st.sampled_from(sorted(target)) if target else st.just("k"))
        kind = draw(st.integers(0, 3))
        if kind == 0:
            target.pop(key, None)
        elif kind == 1:
            target[key] = value
        elif kind == 2:
            target[draw(st.sampled_from(EDGE_NAMES) | st.text(max_size=8))] = value
        else:  # rename a key
            target[draw(st.sampled_from(EDGE_NAMES))] = target.pop(key, value)
    return document


def expect_users_error_only(what: str, load: Any, *args: Any) -> None:
    COUNTS[f"auth: {what}"] += 1
    try:
        store = load(*args)
    except UsersFileError:
        COUNTS[f"auth: {what} refused"] += 1
        return
    COUNTS[f"auth: {what} accepted"] += 1
    assert isinstance(store, UserStore)
    assert UserStore.from_json(json.loads(json.dumps(store.to_json()))) == store


@fuzz_settings(400, deadline_ms=None)
@given(mutated_users_document() | JSON_VALUES)
def test_users_documents_raise_only_users_file_error(document: Any) -> None:
    expect_users_error_only("users documents", UserStore.from_json, document)


@fuzz_settings(200, deadline_ms=None)
@given(
    st.binary(max_size=300)
    | mutated_users_document().map(lambda d: json.dumps(d).encode())
    | st.sampled_from([1, 10, 500, 5000, 100_000]).map(lambda d: ("[" * d + "]" * d).encode())
    | mutated_users_document().flatmap(lambda d: mutate(json.dumps(d).encode()))
)
def test_users_file_contents_raise_only_users_file_error(contents: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "users.json"
        path.write_bytes(contents)
        expect_users_error_only("users files", UserStore.load, path)


def test_the_store_round_trips() -> None:
    assert UserStore.from_json(json.loads(json.dumps(STORE.to_json()))) == STORE


# -- regression tests of the three users-file findings (fixed) -------------------------------
def _valid_document_with(path: tuple[str, ...], value: Any) -> Any:
    document = copy.deepcopy(STORE.to_json())
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return document


def test_users_file_name_with_a_lone_surrogate_is_a_users_file_error() -> None:
    with pytest.raises(UsersFileError):
        UserStore.from_json({"version": 1, "users": {"a\ud800": {}}})


def test_users_file_non_ascii_base64_is_a_users_file_error() -> None:
    path = ("users", "alice", "scram", "SCRAM-SHA-256", "salt")
    with pytest.raises(UsersFileError):
        UserStore.from_json(_valid_document_with(path, "é"))


def test_users_file_deeply_nested_is_a_users_file_error(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UsersFileError):
        UserStore.load(path)

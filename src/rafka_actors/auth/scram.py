"""Server side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka speaks it.

One `ScramExchange` per authentication attempt, a pure state machine with no I/O and no clock:

    exchange = ScramExchange(Mechanism.SCRAM_SHA_256, lookup, server_nonce=new_server_nonce(),
                             fake_salt_key=broker_secret)
    server_first = exchange.start(client_first)    # bytes, or AuthFailure
    server_final = exchange.finish(client_final)   # bytes, or AuthFailure; then .username

Messages (RFC 5802 §7; Kafka's SaslScramServer accepts the same shapes):

    client-first  gs2-header client-first-bare
                  gs2-header = ("n" | "y") "," ["a=" authzid] ","   ("p=..." binding: refused)
                  client-first-bare = "n=" saslname ",r=" c-nonce ["," extensions]
    server-first  "r=" c-nonce s-nonce ",s=" base64(salt) ",i=" iterations
    client-final  "c=" base64(gs2-header) ",r=" c-nonce s-nonce ["," extensions] ",p=" base64(proof)
    server-final  "v=" base64(ServerSignature)

A saslname escapes "," as "=2C" and "=" as "=3D"; an authzid must be empty or the user itself;
Kafka's `tokenauth` extension (delegation tokens) is refused, other extensions are ignored.
Passwords are UTF-8 without SASLprep, as Kafka's ScramFormatter does.

Every failure is an `AuthFailure` value (never an exception): `client_message` is the only text a
client may see, `detail` is for the broker's log and never holds a secret (nor the name of
an unknown user, which may be a password typed in the wrong field: `unknown_user`). An
unknown user gets a server-first like any other, with a salt derived deterministically from
the name and a broker secret (RFC 5802 §5.1), and fails at the final step exactly as a wrong
password does, so whether a user exists doesn't leak.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism maximum (AlterUserScramCredentials refuses more)
DEFAULT_ITERATIONS = 8192
SALT_BYTES = 32
MAX_MESSAGE_BYTES = 4096  # far above any honest SCRAM message; bounds parsing work


class Mechanism(enum.Enum):
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"

    @property
    def hash_name(self) -> str:
        return "sha256" if self is Mechanism.SCRAM_SHA_256 else "sha512"

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()


class FailureKind(enum.Enum):
    MALFORMED = "malformed message"
    UNSUPPORTED = "unsupported feature"
    INVALID_CREDENTIALS = "invalid credentials"
    OUT_OF_ORDER = "message out of order"


@dataclass(frozen=True, slots=True)
class AuthFailure:
    """Why an authentication attempt failed. Send only `client_message` to the client."""

    kind: FailureKind
    detail: str

    @property
    def client_message(self) -> str:
        return f"Authentication failed: {self.kind.value}"


def unknown_user(name: str) -> str:
    """A user name that matches no user, as the broker's log shows it: by a fingerprint, never
    its text, since a client may have typed its password into the name (the same name, the
    same fingerprint)."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"an unknown user (name sha256:{digest[:12]})"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a password: enough to verify a proof, not to make one."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def salted_password(mechanism: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: Mechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def derive_credential(
    mechanism: Mechanism,
    password: str,
    *,
    salt: bytes | None = None,
    iterations: int = DEFAULT_ITERATIONS,
) -> ScramCredential:
    """Salt (randomly unless given) and hash `password` into a `ScramCredential`."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    if not password:
        raise ValueError("empty password")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def new_server_nonce() -> str:
    """A fresh server nonce: printable ASCII without ','."""
    return secrets.token_urlsafe(24)


def escape_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_saslname(text: str) -> str | None:
    """Undo `=2C`/`=3D` escaping; None if any other '=' appears."""
    if re.search(r"=(?!2C|3D)", text):
        return None
    return text.replace("=2C", ",").replace("=3D", "=")


CredentialLookup = Callable[[str], ScramCredential | None]

_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII except ','
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_EXTENSION = re.compile(r"([A-Za-z][A-Za-z0-9]*)=([^,]*)")


def _b64decode(text: str) -> bytes | None:
    if not _BASE64.fullmatch(text):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return None


def _malformed(detail: str) -> AuthFailure:
    return AuthFailure(FailureKind.MALFORMED, detail)


@dataclass(frozen=True, slots=True)
class _ClientFirst:
    gs2_header: str
    username: str
    client_nonce: str
    bare: str


def _parse_gs2_header(text: str) -> tuple[str, str, str] | AuthFailure:
    """Split `flag,[a=authzid],rest` into (header, authzid, rest)."""
    parts = text.split(",", 2)
    if len(parts) != 3:
        return _malformed("client-first without a gs2 header")
    flag, authz, rest = parts
    if flag.startswith("p="):
        return AuthFailure(FailureKind.UNSUPPORTED, "channel binding requested")
    if flag not in ("n", "y"):
        return _malformed("bad gs2 channel-binding flag")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            return _malformed("bad gs2 authzid")
        name = unescape_saslname(authz[2:])
        if not name:
            return _malformed("bad gs2 authzid")
        authzid = name
    return f"{flag},{authz},", authzid, rest


def _check_extensions(fields: list[str]) -> AuthFailure | None:
    for item in fields:
        match = _EXTENSION.fullmatch(item)
        if match is None:
            return _malformed("bad extension")
        if match.group(1) == "tokenauth":
            return AuthFailure(FailureKind.UNSUPPORTED, "delegation tokens are not supported")
    return None


def parse_client_first(message: bytes) -> _ClientFirst | AuthFailure:
    try:
        text = message.decode()
    except UnicodeDecodeError:
        return _malformed("client-first is not UTF-8")
    header = _parse_gs2_header(text)
    if isinstance(header, AuthFailure):
        return header
    gs2_header, authzid, bare = header
    fields = bare.split(",")
    if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r="):
        # also catches the reserved mandatory extension "m=" (RFC 5802 §5.1)
        return _malformed("client-first-bare must be n=...,r=...")
    username = unescape_saslname(fields[0][2:])
    if not username:
        return _malformed("bad username")
    nonce = fields[1][2:]
    if not _NONCE.fullmatch(nonce):
        return _malformed("bad client nonce")
    if authzid and authzid != username:
        return AuthFailure(FailureKind.UNSUPPORTED, "authzid differs from the user")
    failure = _check_extensions(fields[2:])
    if failure is not None:
        return failure
    return _ClientFirst(gs2_header, username, nonce, bare)


class _State(enum.Enum):
    START = enum.auto()
    FIRST_SENT = enum.auto()
    DONE = enum.auto()
    FAILED = enum.auto()


class ScramExchange:
    """One SCRAM authentication: `start` then `finish`; any failure ends the exchange."""

    def __init__(
        self,
        mechanism: Mechanism,
        lookup: CredentialLookup,
        *,
        server_nonce: str,
        fake_salt_key: bytes,
        fake_iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        if not _NONCE.fullmatch(server_nonce):
            raise ValueError("server nonce must be printable ASCII without ','")
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._fake_salt_key = fake_salt_key
        self._fake_iterations = fake_iterations
        self._state = _State.START
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._client_first: _ClientFirst | None = None
        self._server_first = ""
        self.username: str | None = None  # set once authenticated

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    def _fail(self, failure: AuthFailure) -> AuthFailure:
        self._state = _State.FAILED
        return failure

    def _fake_credential(self, username: str) -> ScramCredential:
        tag = f"{self.mechanism.value}\0{username}".encode()
        salt = hmac.new(self._fake_salt_key, tag, "sha256").digest()
        # Random keys: no proof can match, and no password can be found for them.
        return ScramCredential(
            salt=salt,
            stored_key=secrets.token_bytes(self.mechanism.digest_size),
            server_key=secrets.token_bytes(self.mechanism.digest_size),
            iterations=self._fake_iterations,
        )

    def start(self, client_first: bytes) -> bytes | AuthFailure:
        if self._state is not _State.START:
            return self._fail(AuthFailure(FailureKind.OUT_OF_ORDER, "start called twice"))
        if len(client_first) > MAX_MESSAGE_BYTES:
            return self._fail(_malformed("client-first too long"))
        parsed = parse_client_first(client_first)
        if isinstance(parsed, AuthFailure):
            return self._fail(parsed)
        credential = self._lookup(parsed.username)
        self._known_user = credential is not None
        self._credential = credential or self._fake_credential(parsed.username)
        self._client_first = parsed
        salt = base64.b64encode(self._credential.salt).decode()
        nonce = parsed.client_nonce + self._server_nonce
        self._server_first = f"r={nonce},s={salt},i={self._credential.iterations}"
        self._state = _State.FIRST_SENT
        return self._server_first.encode()

    def finish(self, client_final: bytes) -> bytes | AuthFailure:
        if self._state is not _State.FIRST_SENT:
            return self._fail(AuthFailure(FailureKind.OUT_OF_ORDER, "finish before start"))
        assert self._client_first is not None and self._credential is not None
        if len(client_final) > MAX_MESSAGE_BYTES:
            return self._fail(_malformed("client-final too long"))
        try:
            text = client_final.decode()
        except UnicodeDecodeError:
            return self._fail(_malformed("client-final is not UTF-8"))
        without_proof, sep, proof_field = text.rpartition(",")
        fields = without_proof.split(",")
        if not sep or len(fields) < 2 or not proof_field.startswith("p="):
            return self._fail(_malformed("client-final must be c=...,r=...,p=..."))
        if not fields[0].startswith("c=") or not fields[1].startswith("r="):
            return self._fail(_malformed("client-final must be c=...,r=...,p=..."))
        binding = _b64decode(fields[0][2:])
        if binding != self._client_first.gs2_header.encode():
            return self._fail(_malformed("channel binding differs from the gs2 header"))
        expected_nonce = self._client_first.client_nonce + self._server_nonce
        if not hmac.compare_digest(fields[1][2:].encode(), expected_nonce.encode()):
            return self._fail(_malformed("nonce mismatch"))
        failure = _check_extensions(fields[2:])
        if failure is not None:
            return self._fail(failure)
        proof = _b64decode(proof_field[2:])
        if proof is None or len(proof) != self.mechanism.digest_size:
            return self._fail(_malformed("bad proof encoding"))
        return self._verify(proof, without_proof)

    def _verify(self, proof: bytes, without_proof: str) -> bytes | AuthFailure:
        assert self._client_first is not None and self._credential is not None
        auth_message = f"{self._client_first.bare},{self._server_first},{without_proof}".encode()
        signature = self.mechanism.hmac(self._credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        matches = hmac.compare_digest(self.mechanism.hash(client_key), self._credential.stored_key)
        if not (matches and self._known_user):
            username = self._client_first.username
            who = repr(username) if self._known_user else unknown_user(username)
            return self._fail(AuthFailure(FailureKind.INVALID_CREDENTIALS, f"bad proof for {who}"))
        self._state = _State.DONE
        self.username = self._client_first.username
        server_signature = self.mechanism.hmac(self._credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)

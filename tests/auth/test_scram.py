"""SCRAM-SHA-256/512 server: RFC 7677's vector, kafka-python's client, and every way to fail."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from rafka_actors.auth.scram import (
    MIN_ITERATIONS,
    AuthFailure,
    FailureKind,
    Mechanism,
    ScramCredential,
    ScramExchange,
    derive_credential,
    escape_saslname,
    new_server_nonce,
    unescape_saslname,
)

FAKE_KEY = b"broker secret for fake salts"

# RFC 7677 §3
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    return derive_credential(Mechanism.SCRAM_SHA_256, "pencil", salt=salt, iterations=4096)


def exchange(
    users: dict[str, ScramCredential],
    mechanism: Mechanism = Mechanism.SCRAM_SHA_256,
    nonce: str = RFC_SERVER_NONCE,
) -> ScramExchange:
    return ScramExchange(mechanism, users.get, server_nonce=nonce, fake_salt_key=FAKE_KEY)


def rfc_exchange() -> ScramExchange:
    return exchange({"user": rfc_credential()})


def test_rfc7677_vector() -> None:
    server = rfc_exchange()
    assert server.start(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.finish(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.done and server.username == "user"


@pytest.mark.parametrize("mechanism", list(Mechanism))
@pytest.mark.parametrize("iterations", [MIN_ITERATIONS, 8192])
def test_full_exchange_with_kafka_python_client(mechanism: Mechanism, iterations: int) -> None:
    credential = derive_credential(mechanism, "s3cret-é", iterations=iterations)
    server = exchange({"alice": credential}, mechanism, new_server_nonce())
    client = ScramClient("alice", "s3cret-é", mechanism.value)
    server_first = server.start(client.first_message())
    assert isinstance(server_first, bytes)
    client.process_server_first_message(server_first)
    server_final = server.finish(client.final_message())
    assert isinstance(server_final, bytes)
    client.process_server_final_message(server_final)  # raises on a wrong server signature
    assert server.username == "alice"


def client_run(server: ScramExchange, user: str, password: str, mechanism: str) -> bytes:
    """Drive kafka-python's client up to its final message; return that message."""
    client = ScramClient(user, password, mechanism)
    server_first = server.start(client.first_message())
    assert isinstance(server_first, bytes)
    client.process_server_first_message(server_first)
    return bytes(client.final_message())


def assert_fails(result: bytes | AuthFailure, kind: FailureKind) -> AuthFailure:
    assert isinstance(result, AuthFailure), result
    assert result.kind is kind
    return result


def test_wrong_password() -> None:
    server = exchange({"alice": derive_credential(Mechanism.SCRAM_SHA_256, "right")})
    final = client_run(server, "alice", "wrong", "SCRAM-SHA-256")
    failure = assert_fails(server.finish(final), FailureKind.INVALID_CREDENTIALS)
    assert "wrong" not in failure.detail and "right" not in failure.detail
    assert not server.done and server.username is None


def test_credential_of_the_other_mechanism_does_not_work() -> None:
    credential = derive_credential(Mechanism.SCRAM_SHA_512, "pw")
    server = exchange({"alice": credential}, Mechanism.SCRAM_SHA_256)
    # The lookup is per mechanism in real use; a SHA-512 credential can't pass a SHA-256 proof.
    final = client_run(server, "alice", "pw", "SCRAM-SHA-256")
    assert_fails(server.finish(final), FailureKind.INVALID_CREDENTIALS)


def test_unknown_user_gets_a_deterministic_fake_server_first_and_fails_at_the_end() -> None:
    first = exchange({}).start(b"n,,n=mallory,r=abc")
    again = exchange({}).start(b"n,,n=mallory,r=abc")
    other = exchange({}).start(b"n,,n=trudy,r=abc")
    assert isinstance(first, bytes) and first == again and first != other
    assert first.startswith(b"r=abc" + RFC_SERVER_NONCE.encode() + b",s=")
    salt = base64.b64decode(first.split(b",")[1][2:])
    assert len(salt) == 32
    server = exchange({}, nonce=new_server_nonce())
    final = client_run(server, "mallory", "anything", "SCRAM-SHA-256")
    failure = assert_fails(server.finish(final), FailureKind.INVALID_CREDENTIALS)
    wrong_pw = exchange({"alice": derive_credential(Mechanism.SCRAM_SHA_256, "x")})
    known = assert_fails(
        wrong_pw.finish(client_run(wrong_pw, "alice", "y", "SCRAM-SHA-256")),
        FailureKind.INVALID_CREDENTIALS,
    )
    assert failure.client_message == known.client_message


def test_a_password_typed_as_the_user_name_stays_out_of_the_log() -> None:
    server = exchange({"alice": derive_credential(Mechanism.SCRAM_SHA_256, "wonderland")})
    final = client_run(server, "wonderland", "wonderland", "SCRAM-SHA-256")
    failure = assert_fails(server.finish(final), FailureKind.INVALID_CREDENTIALS)
    assert "wonderland" not in failure.detail
    assert "unknown user (name sha256:" in failure.detail


def test_wrong_nonce() -> None:
    server = rfc_exchange()
    server.start(RFC_CLIENT_FIRST)
    tampered = RFC_CLIENT_FINAL.replace(b"hNlF$k0", b"hNlF$k1")
    assert_fails(server.finish(tampered), FailureKind.MALFORMED)


def test_tampered_proof() -> None:
    server = rfc_exchange()
    server.start(RFC_CLIENT_FIRST)
    proof = bytearray(base64.b64decode(RFC_CLIENT_FINAL.rsplit(b"p=", 1)[1]))
    proof[0] ^= 1
    final = RFC_CLIENT_FINAL.rsplit(b"p=", 1)[0] + b"p=" + base64.b64encode(bytes(proof))
    assert_fails(server.finish(final), FailureKind.INVALID_CREDENTIALS)


def test_tampered_channel_binding() -> None:
    server = rfc_exchange()
    server.start(RFC_CLIENT_FIRST)
    final = RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws")  # "y,," instead of "n,,"
    assert_fails(server.finish(final), FailureKind.MALFORMED)


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (b"p=tls-unique,,n=user,r=abc", FailureKind.UNSUPPORTED),
        (b"x,,n=user,r=abc", FailureKind.MALFORMED),
        (b"n,b=user,n=user,r=abc", FailureKind.MALFORMED),
        (b"n,a=,n=user,r=abc", FailureKind.MALFORMED),
        (b"n,a=admin,n=user,r=abc", FailureKind.UNSUPPORTED),
        (b"n=user,r=abc", FailureKind.MALFORMED),
        (b"n,,m=ext,n=user,r=abc", FailureKind.MALFORMED),
        (b"n,,n=,r=abc", FailureKind.MALFORMED),
        (b"n,,n=us=er,r=abc", FailureKind.MALFORMED),
        (b"n,,n=user,r=", FailureKind.MALFORMED),
        (b"n,,n=user,r=a\x7fb", FailureKind.MALFORMED),
        (b"n,,n=user", FailureKind.MALFORMED),
        (b"n,,r=abc,n=user", FailureKind.MALFORMED),
        (b"n,,n=user,r=abc,tokenauth=true", FailureKind.UNSUPPORTED),
        (b"n,,n=user,r=abc,=x", FailureKind.MALFORMED),
        (b"n,,n=\xff,r=abc", FailureKind.MALFORMED),
        (b"", FailureKind.MALFORMED),
        (b"n,,n=user,r=" + b"a" * 5000, FailureKind.MALFORMED),
    ],
)
def test_bad_client_first(message: bytes, kind: FailureKind) -> None:
    server = rfc_exchange()
    assert_fails(server.start(message), kind)
    assert_fails(server.finish(RFC_CLIENT_FINAL), FailureKind.OUT_OF_ORDER)


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"garbage",
        b"\xff\xfe",
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,c=biws,p=AAAA",
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=not base64!",
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA",
        b"c=!!,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA",
        RFC_CLIENT_FINAL.replace(b",p=", b",tokenauth=true,p="),
    ],
)
def test_bad_client_final(message: bytes) -> None:
    server = rfc_exchange()
    server.start(RFC_CLIENT_FIRST)
    result = server.finish(message)
    assert isinstance(result, AuthFailure)
    assert result.kind in (FailureKind.MALFORMED, FailureKind.UNSUPPORTED)
    assert server.finish(RFC_CLIENT_FINAL) == AuthFailure(
        FailureKind.OUT_OF_ORDER, "finish before start"
    )


def test_authzid_equal_to_user_and_y_flag_are_accepted() -> None:
    server = rfc_exchange()
    first = server.start(b"y,a=user,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == RFC_SERVER_FIRST
    # the proof covers c=base64("y,a=user,"), so the RFC's proof (for "n,,") no longer matches
    final = RFC_CLIENT_FINAL.replace(b"c=biws", b"c=" + base64.b64encode(b"y,a=user,"))
    assert_fails(server.finish(final), FailureKind.INVALID_CREDENTIALS)


def test_escaped_username() -> None:
    name = "a,b=c"
    assert escape_saslname(name) == "a=2Cb=3Dc"
    assert unescape_saslname("a=2Cb=3Dc") == name
    assert unescape_saslname("a=2Xb") is None
    credential = derive_credential(Mechanism.SCRAM_SHA_256, "pw")
    server = exchange({name: credential}, nonce="srv")
    first = server.start(f"n,,n={escape_saslname(name)},r=cli".encode())
    assert isinstance(first, bytes)
    # the user is found: the real salt is sent
    assert base64.b64encode(credential.salt) in first


def test_start_twice_is_out_of_order() -> None:
    server = rfc_exchange()
    server.start(RFC_CLIENT_FIRST)
    assert_fails(server.start(RFC_CLIENT_FIRST), FailureKind.OUT_OF_ORDER)


def test_derive_credential_refuses_few_iterations_and_empty_password() -> None:
    with pytest.raises(ValueError):
        derive_credential(Mechanism.SCRAM_SHA_256, "pw", iterations=MIN_ITERATIONS - 1)
    with pytest.raises(ValueError):
        derive_credential(Mechanism.SCRAM_SHA_256, "")


def test_credential_repr_hides_keys() -> None:
    credential = rfc_credential()
    assert credential.stored_key.hex() not in repr(credential)
    assert "stored_key" not in repr(credential)

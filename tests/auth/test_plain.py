"""SASL PLAIN against stored SCRAM credentials."""

from __future__ import annotations

import pytest
from kafka.net.sasl.plain import SaslMechanismPlain

from rafka_actors.auth.plain import authenticate_plain, parse_plain, verify_password
from rafka_actors.auth.scram import AuthFailure, FailureKind, Mechanism, derive_credential
from rafka_actors.auth.users import User, UserStore

STORE = UserStore(
    {
        "alice": User(
            "alice",
            1,
            credentials={
                Mechanism.SCRAM_SHA_512: derive_credential(
                    Mechanism.SCRAM_SHA_512, "wonderland", iterations=4096
                )
            },
        ),
        "bob": User(
            "bob",
            2,
            credentials={m: derive_credential(m, "builder", iterations=4096) for m in Mechanism},
        ),
    }
)


def test_kafka_python_plain_message_authenticates() -> None:
    client = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="wonderland")
    assert authenticate_plain(client.auth_bytes(), STORE.plain_lookup()) == "alice"


@pytest.mark.parametrize("message", [b"\0bob\0builder", b"bob\0bob\0builder"])
def test_good(message: bytes) -> None:
    assert authenticate_plain(message, STORE.plain_lookup()) == "bob"


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (b"\0alice\0wrong", FailureKind.INVALID_CREDENTIALS),
        (b"\0alice\0builder", FailureKind.INVALID_CREDENTIALS),
        (b"\0nobody\0x", FailureKind.INVALID_CREDENTIALS),
        (b"bob\0alice\0wonderland", FailureKind.UNSUPPORTED),
        (b"alice\0wonderland", FailureKind.MALFORMED),
        (b"\0alice\0wonder\0land", FailureKind.MALFORMED),
        (b"\0\0pw", FailureKind.MALFORMED),
        (b"\0alice\0", FailureKind.MALFORMED),
        (b"\0al\xffice\0pw", FailureKind.MALFORMED),
        (b"\0" + b"a" * 256 + b"\0pw", FailureKind.MALFORMED),
        (b"\0alice\0" + b"p" * 5000, FailureKind.MALFORMED),
        (b"", FailureKind.MALFORMED),
    ],
)
def test_bad(message: bytes, kind: FailureKind) -> None:
    result = authenticate_plain(message, STORE.plain_lookup())
    assert isinstance(result, AuthFailure) and result.kind is kind
    assert b"wonderland".decode() not in result.detail


def test_unknown_user_and_wrong_password_look_alike_to_the_client() -> None:
    unknown = authenticate_plain(b"\0nobody\0x", STORE.plain_lookup())
    wrong = authenticate_plain(b"\0alice\0x", STORE.plain_lookup())
    assert isinstance(unknown, AuthFailure) and isinstance(wrong, AuthFailure)
    assert unknown.client_message == wrong.client_message


def test_a_password_typed_as_the_user_name_stays_out_of_the_log() -> None:
    # what the fuzzer found: the name of an unknown user was logged as sent, and a client
    # that puts its password in the name field (here alice's, inside a longer name) sends it
    lookup = STORE.plain_lookup()
    first = authenticate_plain(b"\0wonderland\0x", lookup)
    inside = authenticate_plain(b"\0alice\x01wonderland\0alice\x01wonderland", lookup)
    again = authenticate_plain(b"\0wonderland\0y", lookup)
    assert isinstance(first, AuthFailure) and isinstance(inside, AuthFailure)
    assert isinstance(again, AuthFailure)
    for failure in (first, inside):
        assert failure.kind is FailureKind.INVALID_CREDENTIALS
        assert "wonderland" not in failure.detail
        assert "unknown user (name sha256:" in failure.detail
    assert first.detail == again.detail != inside.detail  # the same name, the same fingerprint
    known = authenticate_plain(b"\0alice\0x", lookup)
    assert isinstance(known, AuthFailure) and "'alice'" in known.detail  # a real user's name


def test_verify_password() -> None:
    credential = derive_credential(Mechanism.SCRAM_SHA_256, "pw", iterations=4096)
    assert verify_password(Mechanism.SCRAM_SHA_256, credential, "pw")
    assert not verify_password(Mechanism.SCRAM_SHA_256, credential, "pW")
    assert not verify_password(Mechanism.SCRAM_SHA_512, credential, "pw")


def test_parsed_password_is_not_in_repr() -> None:
    parsed = parse_plain(b"\0alice\0wonderland")
    assert not isinstance(parsed, AuthFailure)
    assert parsed.password == "wonderland" and "wonderland" not in repr(parsed)

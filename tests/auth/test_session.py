"""The per-connection SASL conversation: handshake, then one (PLAIN) or two (SCRAM) tokens."""

from __future__ import annotations

import pytest
from kafka.net.sasl.scram import ScramClient

from rafka_actors.auth.scram import AuthFailure, FailureKind, Mechanism, derive_credential
from rafka_actors.auth.session import IllegalState, Reply, SaslSession
from rafka_actors.auth.users import User, UserStore

ALL = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def store() -> UserStore:
    credentials = {m: derive_credential(m, "pw", iterations=4096) for m in Mechanism}
    return UserStore({"alice": User("alice", 7, ("team-a.",), (), credentials)})


def session(mechanisms: tuple[str, ...] = ALL) -> SaslSession:
    return SaslSession(mechanisms, store(), fake_salt_key=b"k" * 32)


def test_plain_authenticates_to_the_stored_user_in_one_step() -> None:
    s = session()
    assert s.handshake("PLAIN") and s.expensive
    reply = s.step(b"\0alice\0pw")
    assert isinstance(reply, Reply) and reply.auth_bytes == b""
    assert reply.user is not None and reply.user.org_id == 7
    assert s.authenticated


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_takes_two_steps_with_a_real_client(mechanism: str) -> None:
    s = session()
    assert s.handshake(mechanism) and not s.expensive
    client = ScramClient("alice", "pw", mechanism)
    first = s.step(client.first_message())
    assert isinstance(first, Reply) and first.user is None and not s.authenticated
    client.process_server_first_message(first.auth_bytes)
    final = s.step(client.final_message())
    assert isinstance(final, Reply) and final.user is not None and final.user.name == "alice"
    client.process_server_final_message(final.auth_bytes)
    assert s.authenticated


def test_wrong_password_fails_and_the_session_stays_failed() -> None:
    s = session()
    s.handshake("PLAIN")
    failure = s.step(b"\0alice\0nope")
    assert isinstance(failure, AuthFailure) and failure.kind is FailureKind.INVALID_CREDENTIALS
    assert "alice" not in failure.client_message
    with pytest.raises(IllegalState):
        s.step(b"\0alice\0pw")


def test_a_mechanism_not_enabled_is_refused() -> None:
    s = session(("SCRAM-SHA-512",))
    assert not s.handshake("PLAIN")
    with pytest.raises(IllegalState):
        s.step(b"\0alice\0pw")


def test_out_of_order_requests_are_illegal() -> None:
    s = session()
    with pytest.raises(IllegalState):
        s.step(b"\0alice\0pw")  # a token before the handshake
    s.handshake("PLAIN")
    with pytest.raises(IllegalState):
        s.handshake("PLAIN")  # a second handshake

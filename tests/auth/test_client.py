"""Our client side of PLAIN and SCRAM against our server side (and a lying server)."""

from __future__ import annotations

import pytest

from rafka_actors.auth.client import ClientAuthError, client_exchange
from rafka_actors.auth.scram import Mechanism, derive_credential
from rafka_actors.auth.session import Reply, SaslSession
from rafka_actors.auth.users import User, UserStore


def session(password: str = "pw=,é") -> SaslSession:
    credentials = {m: derive_credential(m, password, iterations=4096) for m in Mechanism}
    users = UserStore({"a,b=c": User("a,b=c", 3, (), (), credentials)})
    return SaslSession(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), users, fake_salt_key=b"k")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree(mechanism: str) -> None:
    server = session()
    assert server.handshake(mechanism)
    client = client_exchange(mechanism, "a,b=c", "pw=,é")
    token: bytes | None = client.first()
    while token is not None:
        reply = server.step(token)
        assert isinstance(reply, Reply)
        token = client.next(reply.auth_bytes)
    assert server.authenticated


def test_a_server_that_does_not_know_the_password_is_caught() -> None:
    client = client_exchange("SCRAM-SHA-256", "a,b=c", "pw=,é")
    server = session(password="other")
    server.handshake("SCRAM-SHA-256")
    first = server.step(client.first())
    assert isinstance(first, Reply)
    client.next(first.auth_bytes)
    with pytest.raises(ClientAuthError):
        client.next(b"v=" + b"A" * 44)

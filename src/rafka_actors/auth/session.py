"""One connection's SASL conversation, as Kafka's SaslServerAuthenticator runs it.

A pure state machine: SaslHandshake picks a mechanism, then each SaslAuthenticate token is one
`step`. PLAIN takes one token; SCRAM takes two (client-first, then client-final). The outcome
of a step is the bytes to send back, with `user` set once authentication has succeeded, or an
`AuthFailure` after which the connection must close. Anything out of order (a token before the
handshake, a second handshake) is an `IllegalState`, Kafka's ILLEGAL_SASL_STATE.

`step` for PLAIN hashes the password (PBKDF2, milliseconds of CPU): callers run it in a worker
thread, see `expensive`. A SCRAM step costs two HMACs and runs inline.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .plain import authenticate_plain
from .scram import AuthFailure, FailureKind, Mechanism, ScramExchange, new_server_nonce
from .users import User, UserStore

PLAIN = "PLAIN"


class IllegalState(Exception):
    """A SASL request that is not legal in the conversation's current state."""


class _Phase(enum.Enum):
    HANDSHAKE = enum.auto()
    AUTHENTICATE = enum.auto()
    DONE = enum.auto()
    FAILED = enum.auto()


@dataclass(frozen=True, slots=True)
class Reply:
    """Bytes for the client; `user` once the exchange has authenticated someone."""

    auth_bytes: bytes
    user: User | None = None


class SaslSession:
    def __init__(
        self, mechanisms: tuple[str, ...], users: UserStore, *, fake_salt_key: bytes
    ) -> None:
        self.mechanisms = mechanisms
        self._users = users
        self._fake_salt_key = fake_salt_key
        self._phase = _Phase.HANDSHAKE
        self.mechanism: str | None = None
        self._scram: ScramExchange | None = None
        self._scram_started = False  # client-first answered; the next token is client-final

    @property
    def authenticated(self) -> bool:
        return self._phase is _Phase.DONE

    @property
    def expensive(self) -> bool:
        """Whether the next `step` hashes a password (run it off the event loop)."""
        return self.mechanism == PLAIN

    def handshake(self, mechanism: str) -> bool:
        """Choose `mechanism`; False if it isn't enabled (the connection then closes)."""
        if self._phase is not _Phase.HANDSHAKE:
            raise IllegalState("SaslHandshake after the mechanism was chosen")
        if mechanism not in self.mechanisms:
            self._phase = _Phase.FAILED
            return False
        self.mechanism = mechanism
        if mechanism != PLAIN:
            scram = Mechanism(mechanism)
            self._scram = ScramExchange(
                scram,
                self._users.scram_lookup(scram),
                server_nonce=new_server_nonce(),
                fake_salt_key=self._fake_salt_key,
            )
        self._phase = _Phase.AUTHENTICATE
        return True

    def step(self, token: bytes) -> Reply | AuthFailure:
        if self._phase is not _Phase.AUTHENTICATE:
            raise IllegalState(f"SaslAuthenticate in phase {self._phase.name.lower()}")
        outcome = self._plain(token) if self._scram is None else self._scram_step(token)
        if isinstance(outcome, AuthFailure):
            self._phase = _Phase.FAILED
        elif outcome.user is not None:
            self._phase = _Phase.DONE
        return outcome

    def _plain(self, token: bytes) -> Reply | AuthFailure:
        name = authenticate_plain(token, self._users.plain_lookup())
        return name if isinstance(name, AuthFailure) else self._authenticated(name, b"")

    def _scram_step(self, token: bytes) -> Reply | AuthFailure:
        assert self._scram is not None
        if not self._scram_started:
            self._scram_started = True
            first = self._scram.start(token)
            return first if isinstance(first, AuthFailure) else Reply(first)
        final = self._scram.finish(token)
        if isinstance(final, AuthFailure):
            return final
        assert self._scram.username is not None
        return self._authenticated(self._scram.username, final)

    def _authenticated(self, name: str, auth_bytes: bytes) -> Reply | AuthFailure:
        user = self._users.get(name)
        if user is None:  # removed between the lookup and now: can't happen with a fixed store
            return AuthFailure(FailureKind.INVALID_CREDENTIALS, f"user {name!r} vanished")
        return Reply(auth_bytes, user)

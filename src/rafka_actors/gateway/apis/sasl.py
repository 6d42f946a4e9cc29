"""SaslHandshake (17) and SaslAuthenticate (36): authenticate a connection, fix its org.

On a SASL listener every connection starts with a `SaslSession` and a gate: only ApiVersions
and these two APIs are served (anything else closes the connection) until the exchange
succeeds. Success fixes `conn.user` and `conn.org_id` for the connection's lifetime and opens
the gate. A failure is answered (UNSUPPORTED_SASL_MECHANISM or SASL_AUTHENTICATION_FAILED with
a message that names no user) and the connection closes, as Kafka's SaslServerAuthenticator
does; a request out of sequence closes it unanswered.

On a listener without SASL, or once authenticated, both APIs get ILLEGAL_SASL_STATE and the
connection stays open (Kafka's KafkaApis answers them the same way; we offer no
re-authentication, so the session lifetime is 0).

PLAIN hashes the password, milliseconds of CPU, so it runs in a worker thread under a small
limiter: a flood of PLAIN attempts costs at most that many cores, never the event loop.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...auth.scram import AuthFailure
from ...auth.session import IllegalState, Reply
from ..context import BrokerContext, ConnectionInfo
from ..idle import CloseConnection
from ..steps import InWorkerThread, Pause
from ._build import make, schema

log = logging.getLogger(__name__)

HANDSHAKE_KEY = 17
AUTHENTICATE_KEY = 36


def sasl_handshake(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(HANDSHAKE_KEY, version)
    session = conn.sasl
    if session is None or session.authenticated:
        return mod.SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    try:
        chosen = session.handshake(request.mechanism)
    except IllegalState as exc:
        raise CloseConnection(str(exc)) from None
    if not chosen:
        conn.close_after_reply = f"asked for SASL mechanism {request.mechanism!r}"
        code = ErrorCode.unsupported_sasl_mechanism
    else:
        code = ErrorCode.none
    return mod.SaslHandshakeResponse(error_code=code, mechanisms=session.mechanisms)


def sasl_authenticate(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(AUTHENTICATE_KEY, version)
    session = conn.sasl
    if session is None or session.authenticated:
        return _response(mod, ErrorCode.illegal_sasl_state, "already authenticated or no SASL")

    def stepped(outcome: Reply | AuthFailure) -> Any:
        if isinstance(outcome, AuthFailure):
            return _refuse(ctx, mod, conn, outcome.client_message, outcome.detail)
        if outcome.user is not None:
            refused = _authenticated(ctx, conn, outcome)
            if refused is not None:
                return _refuse(ctx, mod, conn, refused, refused)
        return _response(mod, ErrorCode.none, None, outcome.auth_bytes)

    def step() -> Reply | AuthFailure:
        try:
            return session.step(request.auth_bytes)
        except IllegalState as exc:
            raise CloseConnection(str(exc)) from None

    if session.expensive:
        return InWorkerThread(step, ctx.security().hash_limiter, stepped)
    return stepped(step())


def _authenticated(ctx: BrokerContext, conn: ConnectionInfo, reply: Reply) -> str | None:
    """Bind the connection to the user; a refusal message if the user is at its limit."""
    user = reply.user
    assert user is not None
    if not ctx.limits.bind_user(user.name):
        return "Too many connections for this user"
    conn.user = user
    conn.org_id = user.org_id
    conn.gate = None
    log.info(
        "authenticated %r (org %d) from %s:%d with %s",
        user.name,
        user.org_id,
        conn.peer_host,
        conn.peer_port,
        conn.sasl.mechanism if conn.sasl else "?",
    )
    return None


def _refuse(ctx: BrokerContext, mod: Any, conn: ConnectionInfo, message: str, detail: str) -> Any:
    """Kafka's connection.failed.authentication.delay.ms: a guesser (or a client retrying a
    wrong password in a loop) gets one attempt per delay per connection."""
    if ctx.metrics is not None:
        ctx.metrics.auth_failed(conn.sasl.mechanism if conn.sasl else None)

    def refused(_: None) -> Any:
        conn.close_after_reply = f"authentication failed: {detail}"
        return _response(mod, ErrorCode.sasl_authentication_failed, message)

    return Pause(ctx.config.connection_failed_authentication_delay_ms / 1000, refused)


def _response(mod: Any, code: ErrorCode, message: str | None, auth_bytes: bytes = b"") -> Any:
    return make(
        mod.SaslAuthenticateResponse,
        error_code=code,
        error_message=message,
        auth_bytes=auth_bytes,
    )

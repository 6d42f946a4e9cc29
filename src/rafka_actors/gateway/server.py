"""The gateway's listeners: bind them, and give each accepted connection its task.

`open_listeners` binds (plain TCP or TLS) or refuses to start naming the address;
`serve_client` admits a connection against the connection limits and serves it
(connection.py; a plain TCP one over lean_stream.py) until it closes. The broker (broker.py)
runs them in the gateway's nursery.
"""

from __future__ import annotations

import logging
import ssl
from typing import Any

import trio

from ..config import BrokerConfig, ConfigError
from ..refusals import CannotListen
from .connection import serve_connection
from .context import PRE_AUTH_APIS, BrokerContext, ConnectionInfo
from .lean_stream import LeanSocketStream

log = logging.getLogger(__name__)


async def open_listeners(config: BrokerConfig) -> list[trio.abc.Listener[Any]]:
    try:
        return await _open_listeners(config)
    except OSError as exc:
        raise CannotListen(
            f"cannot listen on {config.listen}: {exc.strerror or exc}",
            "stop whatever listens there (ss -ltnp shows it) or choose another address "
            "with --listen HOST:PORT",
        ) from exc


async def _open_listeners(config: BrokerConfig) -> list[trio.abc.Listener[Any]]:
    if not config.ssl_enabled:
        tcp = await trio.open_tcp_listeners(config.listen_port, host=config.listen_host)
        return list(tcp)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(
            config.ssl_certificate_location,
            config.ssl_key_location,
            password=config.ssl_key_password or None,
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"can't load the TLS certificate or key: {exc}") from exc
    tls = await trio.open_ssl_over_tcp_listeners(
        config.listen_port, context, host=config.listen_host
    )
    return list(tls)


def bound_address(listener: trio.abc.Listener[Any]) -> tuple[str, int]:
    if isinstance(listener, trio.SSLListener):
        listener = listener.transport_listener
    assert isinstance(listener, trio.SocketListener)
    host, port = listener.socket.getsockname()[:2]
    return host, port


async def serve_client(ctx: BrokerContext, stream: trio.abc.Stream) -> None:
    try:
        peer_host, peer_port = _peer(stream)
    except OSError:  # already gone
        await stream.aclose()
        return
    refused = ctx.limits.admit(peer_host)
    if refused is not None:
        ctx.refusal_log.warning("refused a connection from %s: %s", peer_host, refused)
        await trio.aclose_forcefully(stream)
        return
    conn = ConnectionInfo(peer_host, peer_port)
    if ctx.sasl is not None:
        conn.sasl = ctx.new_sasl_session()
        conn.gate = PRE_AUTH_APIS
    if ctx.metrics is not None:
        ctx.metrics.connections[id(conn)] = conn
    if type(stream) is trio.SocketStream:  # (TLS keeps trio's SSLStream)
        stream = LeanSocketStream(stream)
    try:
        await serve_connection(stream, ctx, ctx.apis, conn)
    finally:
        ctx.limits.release(peer_host, conn.user.name if conn.user is not None else None)
        if ctx.metrics is not None:
            ctx.metrics.connections.pop(id(conn), None)


def _peer(stream: trio.abc.Stream) -> tuple[str, int]:
    transport = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    assert isinstance(transport, trio.SocketStream)
    host, port = transport.socket.getpeername()[:2]
    return host, port

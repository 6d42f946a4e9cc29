"""One client connection: read a frame, answer it, read the next.

Requests on a connection are handled one at a time, in arrival order, exactly as Kafka does
(its network processor mutes a channel until the response to its current request is sent).
Responses are therefore in request order without any reordering buffer, and a parked JoinGroup
or long-polling Fetch holds back only its own connection. `max.in.flight.requests.per.connection`
above 1 lets a reader task read that many requests ahead (still answered one at a time, in
order); at 1 (the default) nothing is read until the current request is answered.

On a SASL listener the connection starts gated: only ApiVersions and the SASL exchange are
served, frames are bounded by `sasl.server.max.receive.size`, and anything else closes the
connection (see apis/sasl.py).

Anything we can't answer correctly closes the connection with one log line and never touches
another connection: a frame length that is not positive or exceeds `socket.request.max.bytes`,
a malformed header or body, an api key or version we don't serve (except ApiVersions, which
gets Kafka's v0-format UNSUPPORTED_VERSION reply so the client retries lower), a peer that
goes quiet for `connections.max.idle.ms`, or a peer that hangs up mid-frame. A handler that
sets `conn.close_after_reply` (a failed authentication) has its reply sent, then the close.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping

import trio
from tricycle import BufferedReceiveStream

from ..protocol.api_versions_error import encode_api_versions_fallback
from ..protocol.codec import decode_request, encode_response
from ..protocol.errors import ProtocolError
from ..protocol.headers import RequestHeader, parse_request_header
from .context import Api, BrokerContext, ConnectionInfo
from .identities import WithGroupIdentities
from .limits import ByteBudget

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_LENGTH = struct.Struct(">i")


class CloseConnection(Exception):
    """The connection must end; the message says why (logged once)."""


_CHUNK = 1 << 20  # frames up to this are read in one piece; bigger ones hold ByteBudget room


async def _read_frame(
    stream: BufferedReceiveStream, max_bytes: int, idle_seconds: float, budget: ByteBudget
) -> bytes | None:
    """The next frame's bytes, or None on a clean hang-up between frames. A frame bigger
    than _CHUNK holds `len(frame)` bytes of `budget`: release them once it is answered."""
    try:
        return await _read_frame_or_eof(stream, max_bytes, idle_seconds, budget)
    except ValueError as exc:  # tricycle's word for an EOF inside a frame
        raise CloseConnection(f"peer hung up mid-frame ({exc})") from exc


async def _read_frame_or_eof(
    stream: BufferedReceiveStream, max_bytes: int, idle_seconds: float, budget: ByteBudget
) -> bytes | None:
    # connections.max.idle.ms bounds every wait for the peer, inside a frame too (a length
    # prefix followed by silence must not hold a connection forever)
    with trio.move_on_after(idle_seconds) as idle:
        prefix = await stream.receive_all_or_none(4)
    if idle.cancelled_caught:
        raise CloseConnection(f"idle for {idle_seconds:.0f}s")
    if prefix is None:
        return None
    (length,) = _LENGTH.unpack(prefix)
    if length <= 0 or length > max_bytes:
        raise CloseConnection(f"frame length {length} outside 1..{max_bytes}")
    if length <= _CHUNK:
        with trio.move_on_after(idle_seconds):
            # kio's native decoder wants an immutable buffer; tricycle hands out bytearrays
            return bytes(await stream.receive_exactly(length))
        raise CloseConnection(f"idle for {idle_seconds:.0f}s inside a frame")
    await budget.acquire(length)
    try:
        return await _read_big_body(stream, length, idle_seconds)
    except BaseException:
        budget.release(length)
        raise


async def _read_big_body(stream: BufferedReceiveStream, length: int, idle_seconds: float) -> bytes:
    # Chunks joined once at the end: one copy of the whole frame, not one per chunk.
    chunks, left = [], length
    while left:
        chunk = b""
        with trio.move_on_after(idle_seconds):
            chunk = await stream.receive_exactly(min(_CHUNK, left))
        if not chunk:
            raise CloseConnection(f"idle for {idle_seconds:.0f}s inside a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


async def serve_connection(
    stream: trio.abc.Stream,
    ctx: BrokerContext,
    apis: Mapping[int, Api],
    conn: ConnectionInfo,
) -> None:
    """Answer requests on `stream` until the peer leaves or misbehaves; never raises."""
    reader = BufferedReceiveStream(stream)
    try:
        if ctx.config.max_in_flight_requests_per_connection <= 1:
            await _one_at_a_time(reader, stream, ctx, apis, conn)
        else:
            await _pipelined(reader, stream, ctx, apis, conn)
    except CloseConnection as exc:
        ctx.close_log.warning(
            "closing connection from %s:%d: %s", conn.peer_host, conn.peer_port, exc
        )
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        log.debug("connection from %s:%d dropped", conn.peer_host, conn.peer_port)
    except Exception:  # a bug in a handler: this connection ends, the broker carries on
        log.exception(
            "closing connection from %s:%d after an internal error", conn.peer_host, conn.peer_port
        )
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await stream.aclose()


def _frame_limit(ctx: BrokerContext, conn: ConnectionInfo) -> int:
    """Before authentication only SASL-sized frames are read (Kafka's pre-auth bound)."""
    if conn.gate is None:
        return ctx.config.socket_request_max_bytes
    return ctx.config.sasl_server_max_receive_size


async def _one_at_a_time(
    reader: BufferedReceiveStream,
    stream: trio.abc.Stream,
    ctx: BrokerContext,
    apis: Mapping[int, Api],
    conn: ConnectionInfo,
) -> None:
    idle_seconds = ctx.config.connections_max_idle_ms / 1000
    while True:
        frame = await _read_frame(reader, _frame_limit(ctx, conn), idle_seconds, ctx.frame_bytes)
        if frame is None:
            return
        await _reply(frame, stream, ctx, apis, conn)


async def _reply(
    frame: bytes,
    stream: trio.abc.Stream,
    ctx: BrokerContext,
    apis: Mapping[int, Api],
    conn: ConnectionInfo,
) -> None:
    try:
        reply = await _answer(frame, ctx, apis, conn)
    finally:
        _release(ctx, frame)
    if reply is not None:
        idle_seconds = ctx.config.connections_max_idle_ms / 1000
        with trio.move_on_after(idle_seconds) as stuck:
            await stream.send_all(reply)
        if stuck.cancelled_caught:
            raise CloseConnection(f"peer has not read its reply for {idle_seconds:.0f}s")
    if conn.close_after_reply is not None:
        raise CloseConnection(conn.close_after_reply)


async def _pipelined(
    reader: BufferedReceiveStream,
    stream: trio.abc.Stream,
    ctx: BrokerContext,
    apis: Mapping[int, Api],
    conn: ConnectionInfo,
) -> None:
    """Read up to `max.in.flight.requests.per.connection` requests ahead; answer in order.

    One request is being answered, one may wait in the reader's hands and the rest in the
    channel. A read error travels through the channel too, so it closes the connection only
    after every request read before it has been answered, as it would without read-ahead.
    """
    idle_seconds = ctx.config.connections_max_idle_ms / 1000
    ahead = ctx.config.max_in_flight_requests_per_connection
    send, receive = trio.open_memory_channel[bytes | CloseConnection](ahead - 2)

    async def read_ahead() -> None:
        async with send:
            while True:
                try:
                    frame = await _read_frame(
                        reader, _frame_limit(ctx, conn), idle_seconds, ctx.frame_bytes
                    )
                except CloseConnection as exc:
                    await send.send(exc)
                    return
                if frame is None:
                    return
                try:
                    await send.send(frame)
                except BaseException:
                    _release(ctx, frame)
                    raise

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_ahead)
        async with receive:
            try:
                async for item in receive:
                    if isinstance(item, CloseConnection):
                        raise item
                    await _reply(item, stream, ctx, apis, conn)
            finally:  # frames read ahead but never answered give their budget back
                while True:
                    try:
                        item = receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    if not isinstance(item, CloseConnection):
                        _release(ctx, item)
        nursery.cancel_scope.cancel()


def _release(ctx: BrokerContext, frame: bytes) -> None:
    if len(frame) > _CHUNK:
        ctx.frame_bytes.release(len(frame))


async def _answer(
    frame: bytes, ctx: BrokerContext, apis: Mapping[int, Api], conn: ConnectionInfo
) -> bytes | None:
    try:
        header, body_offset = parse_request_header(frame)
    except ProtocolError as exc:
        raise CloseConnection(f"malformed request header: {exc}") from exc
    api = apis.get(header.api_key)
    if api is None:
        raise CloseConnection(f"unknown api key {header.api_key}")
    if conn.gate is not None and header.api_key not in conn.gate:
        raise CloseConnection(f"{api.name} before authentication")
    if not api.supports(header.api_version):
        if header.api_key == API_VERSIONS_KEY:
            ranges = {a.key: (a.min_version, a.max_version) for a in apis.values()}
            return encode_api_versions_fallback(header.correlation_id, ranges)
        raise CloseConnection(
            f"unsupported version {header.api_version} of {api.name} "
            f"(we serve {api.min_version}..{api.max_version})"
        )
    conn.client_id = header.client_id
    return await _dispatch(header, frame, body_offset, api, ctx, conn)


async def _dispatch(
    header: RequestHeader,
    frame: bytes,
    body_offset: int,
    api: Api,
    ctx: BrokerContext,
    conn: ConnectionInfo,
) -> bytes | None:
    try:
        request = decode_request(header, frame, body_offset)
    except ProtocolError as exc:
        raise CloseConnection(f"malformed {api.name} v{header.api_version}: {exc}") from exc
    response = await api.handler(ctx, conn, header.api_version, request)
    if response is None:
        return None
    if type(response) is WithGroupIdentities:
        # Identities only for a request that asked (our admin tool): real clients get
        # exactly Kafka's bytes.
        if header.group_identities:
            return encode_response(header, response.response, response.header_tags())
        response = response.response
    return encode_response(header, response)

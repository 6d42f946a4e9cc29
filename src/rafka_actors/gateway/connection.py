"""One client connection, one trio task: read a frame, answer it, read the next.

A request's path: the frame is cut from the stream (frames.py), its header parsed and its body
decoded (protocol/), and the API's handler (apis/) turns it into the response or into a step
to take first (steps.py): for a group API, an op asked of the group's actor through its
mailbox (actors/actor_registry.py), whose answer the handler then turns into the response. The
response is encoded and sent, and only then is the next frame read.

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
gets Kafka's v0-format UNSUPPORTED_VERSION reply so the client retries lower), a file a
handler writes failing where no error code says so (a full disk), a peer that goes quiet for
`connections.max.idle.ms`, or a peer that hangs up mid-frame. A handler that sets
`conn.close_after_reply` (a failed authentication) has its reply sent, then the close.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from time import perf_counter
from typing import Any

import trio

from .. import telemetry
from ..protocol.api_versions_error import encode_api_versions_fallback
from ..protocol.codec import decode_request, encode_response
from ..protocol.errors import ProtocolError
from ..protocol.headers import RequestHeader, parse_request_header
from ..storage.failures import STORAGE_LOG, reason
from .background import run_beside
from .context import Api, BrokerContext, ConnectionInfo
from .frames import BIG_FRAME, SENDING, FrameReader
from .identities import WithGroupIdentities
from .idle import CloseConnection, IdleClock, run_watched
from .steps import settle

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18


async def serve_connection(
    stream: trio.abc.Stream,
    ctx: BrokerContext,
    apis: Mapping[int, Api],
    conn: ConnectionInfo,
) -> None:
    """Answer requests on `stream` until the peer leaves or misbehaves; never raises."""
    try:
        if ctx.config.max_in_flight_requests_per_connection <= 1:
            await _one_at_a_time(stream, ctx, apis, conn)
        else:
            await _pipelined(stream, ctx, apis, conn)
    except CloseConnection as exc:
        ctx.close_log.warning(
            "closing connection from %s:%d: %s", conn.peer_host, conn.peer_port, exc
        )
        if conn.close_after_reply is not None:
            await _let_the_client_close(stream)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        log.debug("connection from %s:%d dropped", conn.peer_host, conn.peer_port)
    except OSError as exc:  # a file the handler wrote (a full disk): one budgeted line
        STORAGE_LOG.log(
            "closing connection from %s:%d: %s", conn.peer_host, conn.peer_port, reason(exc)
        )
    except Exception:  # a bug in a handler: this connection ends, the broker carries on
        log.exception(
            "closing connection from %s:%d after an internal error", conn.peer_host, conn.peer_port
        )
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await stream.aclose()


LINGER_S = 1.0


async def _let_the_client_close(stream: trio.abc.Stream) -> None:
    """After a last reply (a failed authentication), wait up to LINGER_S for the client to
    close first, discarding what it sends. A client that reads the reply and our close in one
    go may drop the reply and report only a lost connection: kafka-python 3.0's transport does
    (`_sock_recv` returns the error, not the bytes it read before it)."""
    with trio.move_on_after(LINGER_S):
        try:
            while await stream.receive_some(4096):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


def _frame_limit(ctx: BrokerContext, conn: ConnectionInfo) -> int:
    """Before authentication only SASL-sized frames are read (Kafka's pre-auth bound)."""
    if conn.gate is None:
        return ctx.config.socket_request_max_bytes
    return ctx.config.sasl_server_max_receive_size


async def _one_at_a_time(
    stream: trio.abc.Stream, ctx: BrokerContext, apis: Mapping[int, Api], conn: ConnectionInfo
) -> None:
    idle = IdleClock(ctx.config.connections_max_idle_ms / 1000)
    reader = FrameReader(stream, ctx.frame_bytes, idle)

    async def answer_in_turn() -> None:
        while True:
            frame = await reader.next_frame(_frame_limit(ctx, conn))
            if frame is None:
                return
            idle.busy()
            await _reply(frame, stream, ctx, apis, conn, idle)

    await run_watched(idle, answer_in_turn)


async def _reply(
    frame: bytes,
    stream: trio.abc.Stream,
    ctx: BrokerContext,
    apis: Mapping[int, Api],
    conn: ConnectionInfo,
    idle: IdleClock,
) -> None:
    """Answer one frame and send the reply; `idle` must be busy() and its scope entered."""
    try:
        reply = await answer(frame, ctx, apis, conn)
    finally:
        _release(ctx, frame)
    if reply is not None:
        idle.waiting(SENDING)
        await stream.send_all(reply)
        idle.busy()
    if conn.close_after_reply is not None:
        raise CloseConnection(conn.close_after_reply)


async def _pipelined(
    stream: trio.abc.Stream, ctx: BrokerContext, apis: Mapping[int, Api], conn: ConnectionInfo
) -> None:
    """Read up to `max.in.flight.requests.per.connection` requests ahead; answer in order.

    One request is being answered, one may wait in the reader's hands and the rest in the
    channel. A read error travels through the channel too, so it closes the connection only
    after every request read before it has been answered, as it would without read-ahead.
    The reader's idle clock runs whenever it waits on the peer, even while a request is
    being answered; the answering side's only while it sends.
    """
    seconds = ctx.config.connections_max_idle_ms / 1000
    ahead = ctx.config.max_in_flight_requests_per_connection
    send, receive = trio.open_memory_channel[bytes | CloseConnection](ahead - 2)
    reading, answering = IdleClock(seconds), IdleClock(seconds)
    reader = FrameReader(stream, ctx.frame_bytes, reading)

    async def read_frames() -> None:
        while True:
            frame = await reader.next_frame(_frame_limit(ctx, conn))
            if frame is None:
                return
            reading.busy()
            try:
                await send.send(frame)
            except BaseException:
                _release(ctx, frame)
                raise

    async def read_ahead() -> None:
        async with send:
            try:
                await run_watched(reading, read_frames)
            except CloseConnection as exc:
                await send.send(exc)

    async def answer_in_order() -> None:
        async for item in receive:
            if isinstance(item, CloseConnection):
                raise item
            answering.busy()
            await _reply(item, stream, ctx, apis, conn, answering)

    async def answer() -> None:
        async with receive:
            try:
                await run_watched(answering, answer_in_order)
            finally:  # frames read ahead but never answered give their budget back
                while True:
                    try:
                        item = receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    if not isinstance(item, CloseConnection):
                        _release(ctx, item)

    await run_beside(answer, read_ahead)


def _release(ctx: BrokerContext, frame: bytes) -> None:
    if len(frame) > BIG_FRAME:
        ctx.frame_bytes.release(len(frame))


async def answer(
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
    metrics = ctx.metrics
    started = perf_counter() if metrics is not None else 0.0
    with _span(api, header.api_version, request):
        answer = api.handler(ctx, conn, header.api_version, request)
        response = await settle(answer, ctx)
    if metrics is not None:  # one histogram observation (metrics/instruments.py)
        metrics.observe_request(api.key, api.name, conn.org_id, perf_counter() - started)
    if response is None:
        return None
    if type(response) is WithGroupIdentities:
        # Identities only for a request that asked (our admin tool): real clients get
        # exactly Kafka's bytes.
        if header.group_identities:
            return encode_response(header, response.response, response.header_tags())
        response = response.response
    return encode_response(header, response)


def _span(api: Api, version: int, request: Any) -> Any:
    """The API's gateway span (design note 000), around the handler and what it waits for."""
    if api.span is None or not telemetry.tracing():
        return telemetry.NOT_TRACING
    group_id = getattr(request, "group_id", None)  # (the APIs of one group name it)
    if group_id is None:
        return telemetry.span(api.span, version=version)
    return telemetry.span(api.span, version=version, group_id=group_id)

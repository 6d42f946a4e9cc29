"""The metrics listener: HTTP GET of the exposition, on the broker's own event loop.

A scrape runs the collector on the trio thread, between requests, so it reads snapshots and
partition indexes that nothing changes under it (no lock, no worker thread). The bytes are
prometheus-client's encoder of choice for the scraper's Accept header (text 0.0.4 or
OpenMetrics). One request per connection; anything but GET gets 405, a path other than
`/metrics` or `/` 404.
"""

from __future__ import annotations

import logging
from functools import partial

import trio
from prometheus_client.exposition import choose_encoder

from .instruments import BrokerMetrics

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 16384
READ_TIMEOUT_S = 10.0


async def open_metrics_listener(host: str, port: int) -> trio.SocketListener:
    listeners = await trio.open_tcp_listeners(port, host=host)
    return listeners[0]


async def serve_metrics(
    metrics: BrokerMetrics,
    listener: trio.SocketListener,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await trio.serve_listeners(partial(_answer, metrics), [listener], task_status=task_status)


async def _answer(metrics: BrokerMetrics, stream: trio.SocketStream) -> None:
    async with stream:
        head = b""
        with trio.move_on_after(READ_TIMEOUT_S):
            while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_BYTES:
                try:
                    chunk = await stream.receive_some(4096)
                except trio.BrokenResourceError:
                    return
                if not chunk:
                    break
                head += chunk
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path = rest.partition(" ")[0].partition("?")[0]
        headers = {
            name.strip().lower(): value.strip()
            for name, sep, value in (line.partition(":") for line in lines[1:])
            if sep
        }
        if method != "GET":
            await _send(stream, "405 Method Not Allowed", "text/plain", b"GET only\n")
        elif path not in ("/metrics", "/"):
            await _send(stream, "404 Not Found", "text/plain", b"see /metrics\n")
        else:
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            try:
                body = encoder(metrics.registry)
            except Exception:
                log.exception("metrics: a scrape failed")
                await _send(stream, "500 Internal Server Error", "text/plain", b"failed\n")
                return
            await _send(stream, "200 OK", content_type, body)


async def _send(stream: trio.SocketStream, status: str, content_type: str, body: bytes) -> None:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1")
    try:
        await stream.send_all(head + body)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass

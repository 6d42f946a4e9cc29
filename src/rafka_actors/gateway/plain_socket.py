"""A plain TCP connection's reads and writes, without trio's per-call wrappers.

Every request costs its connection one read and one write. trio's `SocketStream` wraps each
in an async context manager (`_try_sync`), an error-translating context manager and, for
`send_all`, a conflict detector and a memoryview loop: about 3.5 us per read and 4 us per
write here, on requests whose whole Python answer costs 7-45 us (docs/performance-history.md).
`PlainSocketStream` makes the same system calls with `os.read` and `os.write` on the
socket's descriptor and keeps what the wrappers promise:

- one checkpoint per call that succeeds: a cancelled task is not read for, a call that did
  not have to wait still lets the other tasks run after it (as trio's does), and a call that
  would block waits in trio's `wait_readable` / `wait_writable` (a failed call raises at
  once: the connection is over);
- a closed stream raises `trio.ClosedResourceError`, a broken connection
  `trio.BrokenResourceError`. The descriptor is read afresh before every system call, so a
  closed socket's number, which the kernel may give to the next file, is never used.

After a reply, a connection answered one request at a time polls its own socket: while the
idle poller's budget for its reply lasts (`idle.poll.time.us`, gateway/idle_poll.py), a read
that finds nothing tries again at the next pass of trio's scheduler instead of waiting in
`wait_readable`. The loop keeps polling epoll for every other socket meanwhile, as it does
for the poller's own task, and the peer's next request is read without an `epoll_ctl`, an
event to dispatch and a task to wake: a synchronous client's round trip of a small request
took 6-7 us less (docs/performance.md).

It does not detect two tasks sending (or receiving) at once: a connection has one reader and
one writer (gateway/connection.py). TLS connections keep trio's `SSLStream`.
"""

from __future__ import annotations

import errno
import os

import trio
from trio.lowlevel import (
    cancel_shielded_checkpoint,
    checkpoint_if_cancelled,
    wait_readable,
    wait_writable,
)

from .idle_poll import IdlePoller

_CLOSED_ERRNOS = frozenset({errno.EBADF, errno.ENOTSOCK})


class PlainSocketStream(trio.abc.Stream):
    __slots__ = ("_socket", "_stream", "poller")

    def __init__(self, stream: trio.SocketStream, poller: IdlePoller | None = None) -> None:
        self._stream = stream  # owns the socket: closing goes through it
        self._socket = stream.socket
        self.poller = poller  # polls for the next request after each reply, if set

    def fileno(self) -> int:
        return self._socket.fileno()

    def _fd(self) -> int:
        fd = self._socket.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("the connection was already closed")
        return fd

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Up to `max_bytes` (64 KiB if None) of what the peer sent; b"" at end of stream."""
        size = 65536 if max_bytes is None else max_bytes
        if size < 1:
            raise ValueError("max_bytes must be >= 1")
        data = await self._receive(size, wait=True)
        assert data is not None  # (it waits once polling stops)
        return data

    async def receive_while_polling(self, max_bytes: int) -> bytes | None:
        """`receive_some` only while this stream polls for itself (its reply was the latest
        and the budget lasts); None once it does not (the reactor watches it then)."""
        poller = self.poller
        if poller is None or not poller.polls_for(self):
            return None
        return await self._receive(max_bytes, wait=False)

    async def _receive(self, size: int, *, wait: bool) -> bytes | None:
        """Read at once, or poll while our reply was the latest, then `wait` for the socket
        (or return None)."""
        await checkpoint_if_cancelled()
        try:
            try:
                data = os.read(self._fd(), size)
            except BlockingIOError:
                pass
            else:
                await cancel_shielded_checkpoint()
                return data
            poller = self.poller
            while True:
                if poller is not None and poller.polls_for(self):
                    await poller.poll_again()  # our reply was the latest: the peer's is near
                elif wait:
                    await wait_readable(self._fd())
                else:
                    return None
                try:
                    return os.read(self._fd(), size)
                except BlockingIOError:
                    pass
        except OSError as exc:
            raise stream_error(exc) from exc

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of `data`, waiting for room in the socket's buffer when it is full."""
        await checkpoint_if_cancelled()
        try:
            try:
                sent = os.write(self._fd(), data)
            except BlockingIOError:
                sent = 0
            if sent == len(data):
                await cancel_shielded_checkpoint()
                return
            with memoryview(data) as view:
                while sent < len(view):
                    await wait_writable(self._fd())
                    try:
                        sent += os.write(self._fd(), view[sent:])
                    except BlockingIOError:
                        pass
        except OSError as exc:
            raise stream_error(exc) from exc

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


def stream_error(exc: OSError) -> trio.ClosedResourceError | trio.BrokenResourceError:
    if exc.errno in _CLOSED_ERRNOS:
        return trio.ClosedResourceError("the connection was already closed")
    return trio.BrokenResourceError(f"socket connection broken: {exc}")

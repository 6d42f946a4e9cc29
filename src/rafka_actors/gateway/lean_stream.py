"""A plain TCP connection's bytes with two scheduler passes per request instead of three.

`trio.SocketStream` makes every call a checkpoint: a receive tries `recv`, usually finds
nothing yet (the client is still writing its next request), waits with `wait_readable`, tries
again and then yields once more; a send yields after the kernel took the bytes. That is three
passes of the scheduler per request on the connection's task alone. `LeanSocketStream` reads
and writes the socket's file descriptor itself with trio's public low-level API:

- `receive_some` reads at once; only when nothing is there does it wait (`wait_readable`), and
  when something was there it still yields once (`cancel_shielded_checkpoint`): every receive
  is a checkpoint, so cancellation (`connections.max.idle.ms`, shutdown) and fairness are as
  before, and as in trio's stream a cancellation is taken before bytes are read, never after;
- `send_all` writes at once and waits (`wait_writable`) only for what the kernel did not take;
  once all is taken it yields once (`cancel_shielded_checkpoint`), as trio's stream does.
  Without that yield the connection's task went from its reply straight into its next
  receive and the wait for the peer; a client answering each reply with its next request
  (librdkafka's synchronous `committed()`) was served slower: bench/run.py (d), 3 runs side by
  side, 5 877 calls/s with the yield against 4 711 without (1.25x), p99 0.344 against 0.454 ms;
  `bench/request_cost.py --ops fetch --rounds 7` 9 049 against 8 060 OffsetFetch/s (1.12x),
  the broker's CPU a request 110 against 124 us. (A subscribed member's commits with its
  fetcher running read 0.80x in that run, still 1.16x the build before this stream.)

Socket errors become `trio.BrokenResourceError`, a use after `aclose` `ClosedResourceError`,
as trio's own stream raises them; `aclose` closes the wrapped stream (which wakes a waiter).
TLS connections keep `trio.SSLStream`.

Measured side by side in one run, rounds taking turns, against the same tree over
`trio.SocketStream` (default configuration, a 2-core machine shared with other work;
``bench/request_cost.py --ops fetch,heartbeat,apiversions --rounds 11 --brokers
'new=rafka-actors,old=rafka-actors@OLD_PYTHON'``), requests/s and broker CPU a request:
OffsetFetch 6 264 against 5 226 (1.20x), 101 against 120 us; ApiVersions 12 238 against
9 598 (1.28x), 54 against 67 us; a heartbeat 4 413 against 4 380 (1.01x), 151 against 160 us
(its actor hop dominates). Earlier runs: OffsetFetch 1.21x and 1.05x, committed() 1.47x
(bench/run.py (d)), a member's commits 1.22x and 1.65x (bench/run.py (c)).
"""

from __future__ import annotations

import os

import trio

RECEIVE_BYTES = 1 << 16


class LeanSocketStream(trio.abc.Stream):
    __slots__ = ("_closed", "_fd", "_stream")

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._fd = stream.socket.fileno()
        self._closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        size = max_bytes or RECEIVE_BYTES
        await trio.lowlevel.checkpoint_if_cancelled()
        data = self._read(size)
        if data is not None:
            await trio.lowlevel.cancel_shielded_checkpoint()  # (what was read is returned)
            return data
        while True:
            await trio.lowlevel.wait_readable(self._fd)
            data = self._read(size)
            if data is not None:
                return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        with memoryview(data) as view:
            sent, total = 0, len(view)
            while sent < total:
                self._check_open()
                try:
                    sent += os.write(self._fd, view[sent:])
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self._fd)
                except OSError as exc:
                    raise trio.BrokenResourceError(f"send failed: {exc}") from exc
        await trio.lowlevel.cancel_shielded_checkpoint()  # (see the module's docstring)

    async def wait_send_all_might_not_block(self) -> None:
        self._check_open()
        await trio.lowlevel.wait_writable(self._fd)

    async def aclose(self) -> None:
        self._closed = True
        await self._stream.aclose()

    def _read(self, size: int) -> bytes | None:
        """What the peer sent (b"" at its end), or None if nothing has come yet."""
        self._check_open()
        try:
            return os.read(self._fd, size)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise trio.BrokenResourceError(f"receive failed: {exc}") from exc

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the connection is closed")

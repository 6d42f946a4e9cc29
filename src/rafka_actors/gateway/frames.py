"""Kafka request frames cut from a connection's byte stream.

One receive buffer per connection: a small request usually arrives whole, so it costs one
`receive_some` and one copy out of the buffer (kio's native decoder wants immutable bytes).
Frames bigger than `BIG_FRAME` first take their size from the broker-wide `ByteBudget`
(`queued.max.request.bytes`); the caller gives it back once the frame is answered.
Every wait on the peer starts the connection's idle clock (idle.py).
"""

from __future__ import annotations

import struct

import trio

from .idle import CloseConnection, IdleClock
from .limits import ByteBudget

BIG_FRAME = 1 << 20  # frames above this hold ByteBudget room while read and answered
_LENGTH = struct.Struct(">i")
_RECEIVE = 1 << 16
# what IdleClock.check reports ({} is the idle time)
BETWEEN_FRAMES, _INSIDE = "idle for {}", "idle for {} inside a frame"
SENDING = "peer has not read its reply for {}"


class FrameReader:
    """Frames from `stream`, one at a time. Raises `CloseConnection` for a bad length or a
    hang-up inside a frame; the idle clock's scope (entered by the caller) ends long waits."""

    __slots__ = ("_budget", "_buffer", "_idle", "_stream")

    def __init__(self, stream: trio.abc.ReceiveStream, budget: ByteBudget, idle: IdleClock):
        self._stream = stream
        self._buffer = bytearray()
        self._budget = budget
        self._idle = idle

    async def next_frame(self, max_bytes: int) -> bytes | None:
        """The next frame's bytes (without the length), or None on a clean hang-up between
        frames. A frame bigger than BIG_FRAME holds its size in the budget."""
        buffer = self._buffer
        while len(buffer) < 4:
            if not await self._fill():
                if buffer:
                    raise CloseConnection("peer hung up mid-frame")
                return None
        (length,) = _LENGTH.unpack_from(buffer)
        if length <= 0 or length > max_bytes:
            raise CloseConnection(f"frame length {length} outside 1..{max_bytes}")
        end = 4 + length
        if length <= BIG_FRAME:
            await self._fill_to(end)
        else:
            await self._budget.acquire(length)
            try:
                await self._fill_to(end)
            except BaseException:
                self._budget.release(length)
                raise
        with memoryview(buffer) as view:
            frame = bytes(view[4:end])
        if length <= BIG_FRAME:
            del buffer[:end]
        else:  # a fresh buffer: don't keep the big one's capacity for the connection's life
            self._buffer = buffer[end:]
        return frame

    async def _fill_to(self, end: int) -> None:
        while len(self._buffer) < end:
            if not await self._fill(end - len(self._buffer)):
                raise CloseConnection(
                    f"peer hung up mid-frame ({len(self._buffer) - 4} of {end - 4} bytes)"
                )

    async def _fill(self, wanted: int = _RECEIVE) -> bool:
        """Append what the peer sent next; False on end of stream."""
        inside = bool(self._buffer)
        self._idle.waiting(_INSIDE if inside else BETWEEN_FRAMES)
        data = await self._stream.receive_some(min(max(wanted, _RECEIVE), BIG_FRAME))
        self._buffer += data
        return bool(data)

"""Kafka request frames cut from a connection's byte stream.

One receive buffer per connection: a small request usually arrives whole, so it costs one
`receive_some` and one copy out of the buffer (kio's native decoder wants immutable bytes).
Frames bigger than `BIG_FRAME` first take their size from the broker-wide `ByteBudget`
(`queued.max.request.bytes`); the caller gives it back once the frame is answered.
Every wait on the peer starts the connection's idle clock (idle.py).
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable

import trio

from .idle import CloseConnection, IdleClock
from .limits import ByteBudget

BIG_FRAME = 1 << 20  # frames above this hold ByteBudget room while read and answered
_LENGTH = struct.Struct(">i")
_RECEIVE = 1 << 16
# what IdleClock.check reports ({} is the idle time)
BETWEEN_FRAMES, _INSIDE = "idle for {}", "idle for {} inside a frame"
SENDING = "peer has not read its reply for {}"


def same_request(frame: bytes, kept: bytes) -> bool:
    """Whether request frame `frame` (no size prefix) equals `kept` but for its correlation
    id, bytes 4-8 after the api key and version (the repeat paths: commit_repeat.py and
    the others beside it)."""
    return len(frame) == len(kept) and frame[8:] == kept[8:] and frame[:4] == kept[:4]


def reply_for(frame: bytes, kept_reply: bytes) -> bytes:
    """`kept_reply` (size prefix, correlation id, the rest) with `frame`'s correlation id."""
    return kept_reply[:4] + frame[4:8] + kept_reply[8:]


class FrameReader:
    """Frames from `stream`, one at a time. Raises `CloseConnection` for a bad length or a
    hang-up inside a frame; the idle clock's scope (entered by the caller) ends long waits."""

    __slots__ = ("_between", "_budget", "_buffer", "_idle", "_stream")

    def __init__(
        self,
        stream: trio.abc.ReceiveStream,
        budget: ByteBudget,
        idle: IdleClock,
        between: Callable[[], Awaitable[bytes]] | None = None,
    ):
        """`between`, if given, is awaited instead of the stream for the bytes after a
        whole frame (the reactor's `next_bytes`: it may answer some requests itself)."""
        self._stream = stream
        self._buffer = bytearray()
        self._budget = budget
        self._idle = idle
        self._between = between

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
        data: bytes | bytearray
        if self._between is not None and not inside:
            data = await self._between()
        else:
            data = await self._stream.receive_some(min(max(wanted, _RECEIVE), BIG_FRAME))
        self._buffer += data
        return bool(data)

"""A one-shot reply slot: the gateway waits on it, the group actor fills it once.

Cheaper than a memory channel per request (a channel pair plus its statistics and close
bookkeeping): one Event and a value. Filling a slot whose waiter has gone (the connection
closed) is harmless. Anything with `send_nowait(value)` can stand in for it (tests use
memory channels).
"""

from __future__ import annotations

from typing import Any, Protocol

import trio


class ReplyTo(Protocol):
    def send_nowait(self, value: Any, /) -> None: ...


class ReplySlot:
    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: Any = None

    def send_nowait(self, value: Any, /) -> None:
        if not self._event.is_set():  # the first answer counts
            self._value = value
            self._event.set()

    async def receive(self) -> Any:
        await self._event.wait()
        return self._value

"""`connections.max.idle.ms`: how long a connection may wait on its peer.

The clock runs while we wait for the peer (between frames, inside a frame, for it to read a
reply) and stops while a request is being answered. Starting and stopping it is a timestamp
write, because it happens on every request: a watchdog task per connection sleeps until the
latest possible expiry and, when it wakes, either finds the peer idle too long and cancels
the connection's scope, or sleeps again until the new expiry. A cancel scope per wait
(`move_on_after`) cost ~10 us here, and even moving one scope's deadline ~2.5 us.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio

from .background import run_beside


class CloseConnection(Exception):
    """The connection must end; the message says why (logged once)."""


class IdleClock:
    """`waiting(reason)` before each wait on the peer (`reason` is a template whose {}
    becomes the idle time), `busy()` while answering. Run `watch` beside the work and enter
    `scope` around it; after the scope, `check()` raises if the peer was idle too long."""

    __slots__ = ("reason", "scope", "seconds", "since")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.scope = trio.CancelScope()
        self.reason = ""
        self.since = math.inf  # when the current wait on the peer began; inf: not waiting

    def waiting(self, reason: str) -> None:
        self.reason = reason
        self.since = trio.current_time()

    def busy(self) -> None:
        self.since = math.inf

    async def watch(self) -> None:
        """Cancel `scope` once a wait on the peer has lasted `seconds`."""
        while True:
            now = trio.current_time()
            expiry = self.since + self.seconds
            if expiry <= now:
                self.scope.cancel()
                return
            await trio.sleep_until(min(expiry, now + self.seconds))

    def check(self) -> None:
        """After leaving `scope`: close the connection if the peer was idle too long."""
        if self.scope.cancelled_caught:
            raise CloseConnection(self.reason.format(f"{self.seconds:.0f}s"))


async def run_watched(idle: IdleClock, work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` inside `idle.scope` with the watchdog beside it; then `idle.check()`."""

    async def scoped() -> None:
        with idle.scope:
            await work()

    await run_beside(scoped, idle.watch)
    idle.check()

"""Idle polling: after each reply, keep the event loop polling the sockets for a moment.

A synchronous client sends its next request a few tens of microseconds after it reads a
reply. If the broker's thread has gone to sleep in ``epoll_wait`` by then, the request must
wake it, and waking a sleeping core costs more than answering a small request: on a VM whose
idle cores halt (every halt a VM exit), a broker that kept polling for
``idle.poll.time.us`` (100) after each reply took 60% more ``committed()`` calls/s and 20%
more synchronous commits/s from one librdkafka client (docs/performance.md). Seastar, under
Redpanda, does the same for the same reason (its ``--idle-poll-time-us``, 0 on overprovisioned
machines).

A plain TCP connection answered one request at a time polls its own socket instead
(gateway/plain_socket.py): the poller's task only polls for the replies of other streams
(TLS, read-ahead), and the stream that sent the latest reply asks `polls_for` whether its
budget lasts. One stream or the task polls at a time, never more, so a thousand idle
connections cost what one does.

The poller's task: while the budget after the latest reply lasts it yields at every
pass of trio's scheduler, and a scheduler with a runnable task polls epoll without
sleeping. It never delays other tasks (they run between its yields), costs nothing while no
replies go out, and at most one budget of CPU per reply. Real time, not trio's clock: under
a test's MockClock trio's time stands still while a task is runnable.

Every turn of polling first offers the core to any other thread waiting for it
(`sched_yield`), so polling never delays another process, such as the client itself when
the kernel puts it on the broker's core. That happened after every pause of a second or
more on the 2-core machine: for the next 40 ms or so a quarter of a synchronous client's
OffsetFetches took 0.15-0.25 ms instead of 0.07, each waiting out the broker's budget
(docs/performance-history.md, session 23).

Polling pays only while the clients and the broker fit in the machine's cores: with 16
committing clients on 2 cores it cost the broker 8-10 us of CPU per commit, a core the
clients needed. So the reactor tells the poller which sockets each of its passes answered
(`passed`), and once as many peers as there are cores sent requests within a window of
CROWD_WINDOW_PASSES passes, replies start no budget until a window has fewer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import trio

# Passes of the reactor over which the peers that sent requests are counted (`passed`).
CROWD_WINDOW_PASSES = 32


class IdlePoller:
    def __init__(
        self,
        budget_s: float,
        now: Callable[[], float] = time.perf_counter,
        give_way: Callable[[], None] = os.sched_yield,
        cores: int | None = None,
    ) -> None:
        self.budget_s = budget_s
        self._now = now
        self._give_way = give_way  # lets a thread waiting for this core run first
        self._cores = usable_cores() if cores is None else cores
        self._peers: set[int] = set()  # sockets answered in this window of passes
        self._passes = 0  # passes in this window
        self.crowded = False  # as many peers as cores in the last window: no polling
        self._until = 0.0  # poll until then (self._now's time)
        self._asleep: trio.Event | None = None  # set to wake the parked poller
        self._by: object | None = None  # the stream polling for itself, if any

    def replied(self, by: object | None = None) -> None:
        """A reply went out: poll for the next request for the budget from now. `by`, the
        stream that sent it, polls its own socket instead of this task (plain_socket.py).
        No budget while crowded."""
        self._until = 0.0 if self.crowded else self._now() + self.budget_s
        self._by = by
        if by is None and self._asleep is not None:
            self._asleep.set()
            self._asleep = None

    def passed(self, events: list[tuple[int, int]]) -> None:
        """A pass of the reactor answered the sockets of `events` (epoll's (fd, mask)s)."""
        peers = self._peers
        for fd, _mask in events:
            peers.add(fd)
        self._passes += 1
        if self._passes == CROWD_WINDOW_PASSES:
            self.crowded = len(peers) >= self._cores
            peers.clear()
            self._passes = 0

    def polls_for(self, by: object) -> bool:
        """Whether `by` sent the latest reply and its budget lasts."""
        return self._by is by and self._now() < self._until

    async def poll_again(self) -> None:
        """One turn of polling: the core to whoever waits for it, then one pass of trio's
        scheduler, which polls epoll without sleeping as long as the caller is runnable."""
        self._give_way()
        await trio.lowlevel.checkpoint()

    async def run(self) -> None:
        while True:
            if self._by is None and self._now() < self._until:
                await self.poll_again()  # cancellable: shutdown may come mid-budget
            else:
                self._asleep = trio.Event()
                await self._asleep.wait()


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # sched_getaffinity is Linux's
        return os.cpu_count() or 1

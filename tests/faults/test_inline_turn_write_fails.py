"""Fault: the log write of an idle actor's turn run on the asking task fails (issue 53,
lever 1: actors/inline_turn.py; `append` raises CoordinatorLogError: a full disk).

Guarantee: as for a turn on the actor's task (test_log_write_fails.py): the asking caller
gets NOT_COORDINATOR and nothing of its turn is seen; requests queued behind the failed turn
are stepped by the actor task on the group rebuilt from the log; the actor holds nothing,
keeps serving, and what was acknowledged is there after a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio
import trio.testing

from rafka_actors.actors.inline_turn import may_turn_here
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.coordinator_segments import CoordinatorLogError

from .helpers import (
    NOT_COORDINATOR,
    OK,
    commit_error,
    commit_op,
    describe_op,
    fetch_op,
    held_by_actor,
    join_and_sync,
    key,
    member_ids,
    offsets_of,
    reread,
    running_registry,
)

G = key("g")


class FailsOnRelease(MemoryCoordinatorLog):
    """After `stall()`, the next append waits for `release()` and then fails (a disk that
    took its time to report it is full), so that requests queue behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.gate = trio.Event()
        self.failures = 0

    def stall(self) -> None:
        self.armed = True

    def release(self) -> None:
        self.gate.set()

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        if not self.armed:
            await super().append(key, records)
            return
        self.armed = False
        await self.gate.wait()
        self.failures += 1
        raise CoordinatorLogError("injected: no space left on device")


async def test_a_failed_write_of_a_turn_on_the_asking_task_acknowledges_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = FailsOnRelease()
    async with running_registry(log, passivate_after_s=10) as registry:
        a = await join_and_sync(registry, "g", "a")
        assert commit_error(await registry.ask(G, commit_op("g", 0, 1, a))) == OK
        await trio.testing.wait_all_tasks_blocked()
        assert may_turn_here(registry._running[G])
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any) -> None:
            answers[name] = await registry.ask(G, op)

        log.stall()
        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                callers.start_soon(ask, "inline", commit_op("g", 0, 5, a))
                await trio.testing.wait_all_tasks_blocked()  # its turn's append stalls
                callers.start_soon(ask, "queued", commit_op("g", 1, 9, a))
                await trio.testing.wait_all_tasks_blocked()
                log.release()
        assert log.failures == 1
        assert commit_error(answers["inline"]) == NOT_COORDINATOR
        assert commit_error(answers["queued"]) == OK  # the next turn, on the rebuilt group
        assert held_by_actor(registry, "g") == 0
        assert offsets_of(await registry.ask(G, fetch_op("g"))) == {0: 1, 1: 9}
        described = await registry.ask(G, describe_op("g"))
        assert (described.state, member_ids(described)) == ("Stable", {"a"})
        assert commit_error(await registry.ask(G, commit_op("g", 0, 6, a))) == OK
    assert await reread(log, "g") == {0: 6, 1: 9}

"""Fault: the task that asks is cancelled while it runs an idle actor's turn (issue 53,
lever 1: actors/inline_turn.py), its append hung on a stalled disk.

Guarantee: a turn that has started finishes. Its records, once the disk answers, are the
group's state too (what a read sees is what a restart reads); the actor holds nothing for the
caller that left; a request queued behind the hung turn waits for it and is stepped after
it, on the state it left, not beside it; and the group serves the next request.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rafka_actors.actors.inline_turn import may_turn_here

from .helpers import (
    OK,
    HangingLog,
    commit_error,
    commit_op,
    fetch_op,
    held_by_actor,
    join_and_sync,
    key,
    offsets_of,
    reread,
    running_registry,
)

G = key("g")


async def test_a_turn_on_a_cancelled_asking_task_finishes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = HangingLog()
    async with running_registry(log, passivate_after_s=10) as registry:
        a = await join_and_sync(registry, "g", "a")  # a Stable group: its actor stays, idle
        assert commit_error(await registry.ask(G, commit_op("g", 0, 1, a))) == OK
        await trio.testing.wait_all_tasks_blocked()
        assert may_turn_here(registry._running[G])  # the next ask runs the turn itself
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any, scope: trio.CancelScope | None = None) -> None:
            with scope or trio.CancelScope():
                answers[name] = await registry.ask(G, op)

        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                log.hang()
                asker = trio.CancelScope()
                callers.start_soon(ask, "asker", commit_op("g", 0, 2, a), asker)
                await trio.testing.wait_all_tasks_blocked()  # in its turn; the append hung
                callers.start_soon(ask, "queued", commit_op("g", 1, 7, a))
                await trio.testing.wait_all_tasks_blocked()
                asker.cancel()  # the asking task gives up mid-turn
                await trio.testing.wait_all_tasks_blocked()
                await log.recover()
        assert asker.cancelled_caught and "asker" not in answers
        assert commit_error(answers["queued"]) == OK
        assert held_by_actor(registry, "g") == 0
        # the abandoned turn's commit is stored and seen; the queued one stepped after it
        assert offsets_of(await registry.ask(G, fetch_op("g"))) == {0: 2, 1: 7}
        assert commit_error(await registry.ask(G, commit_op("g", 0, 3, a))) == OK
    assert await reread(log, "g") == {0: 3, 1: 7}

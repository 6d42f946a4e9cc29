"""Fault: an actor's step raises (a bug in the state machine, for one op of one group).

Guarantee: the fault stays inside that group's actor. Every request the actor holds -- the
whole batch the raising op came in, and members parked from earlier batches -- is answered
with COORDINATOR_NOT_AVAILABLE at once; nothing of that batch is stored or becomes visible;
the group is rebuilt from its log and works again once the fault is gone; other groups never
notice; and what was acknowledged is still there for a fresh registry on the same log.

That includes the requests queued behind the raising op in its batch (the test at the end).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rafka_actors.coordinator import machine
from rafka_actors.group_common.ops import (
    DescribeGroupOp,
    TimerFired,
)

from .helpers import (
    NOT_AVAILABLE,
    OK,
    SESSION_MS,
    HangingLog,
    commit_error,
    commit_op,
    describe_op,
    fetch_op,
    heartbeat_op,
    held_by_actor,
    join_and_sync,
    join_op,
    key,
    member_ids,
    offsets_of,
    reread,
    running_registry,
    sync_op,
)

G = key("g")


def step_raises(monkeypatch: pytest.MonkeyPatch, raises_on: Any) -> None:
    """From now on, stepping an op for which `raises_on(op)` holds raises; the others step."""
    real_handle = machine.handle

    def handle(group: Any, op: Any, *args: Any, **kw: Any) -> Any:
        if raises_on(op):
            raise RuntimeError("injected: a bug in the state machine")
        return real_handle(group, op, *args, **kw)

    monkeypatch.setattr(machine, "handle", handle)


def describe_of_g_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    step_raises(monkeypatch, lambda op: isinstance(op, DescribeGroupOp) and op.group_id == "g")


async def test_a_raising_step_fails_its_whole_batch_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    log = HangingLog()  # used only to hold the actor in an append while a batch queues
    async with running_registry(log, passivate_after_s=10) as registry:
        a = await join_and_sync(registry, "g", "a")
        assert commit_error(await registry.ask(G, commit_op("g", 0, 1, a))) == OK
        o = await join_and_sync(registry, "other", "o")
        assert commit_error(await registry.ask(key("other"), commit_op("other", 0, 1, o))) == OK
        describe_of_g_raises(monkeypatch)

        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any) -> None:
            answers[name] = await registry.ask(G, op)

        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                log.hang()
                callers.start_soon(ask, "first commit", commit_op("g", 0, 2, a))
                await trio.testing.wait_all_tasks_blocked()  # stepped alone; its append waits
                # queued meanwhile, in this order: they are stepped as one batch
                for name, op in [
                    ("second commit", commit_op("g", 1, 7, a)),
                    ("heartbeat", heartbeat_op("g", a)),
                    ("describe", describe_op("g")),  # raises
                ]:
                    callers.start_soon(ask, name, op)
                    await trio.testing.wait_all_tasks_blocked()
                await log.recover()
        # the batch before the fault is acknowledged; every caller of the failed one gets a
        # retriable error (what was queued behind the raising op too: see the test below)
        assert commit_error(answers["first commit"]) == OK
        assert commit_error(answers["second commit"]) == NOT_AVAILABLE
        assert answers["describe"].error_code == NOT_AVAILABLE
        assert answers["heartbeat"].error_code == NOT_AVAILABLE
        assert held_by_actor(registry, "g") == 0

        # the fault is still there: the other group never notices it
        other = key("other")
        assert (await registry.ask(other, heartbeat_op("other", o))).error_code == OK
        assert commit_error(await registry.ask(other, commit_op("other", 0, 2, o))) == OK
        assert offsets_of(await registry.ask(other, fetch_op("other"))) == {0: 2}
        assert member_ids(await registry.ask(other, describe_op("other"))) == {"o"}

        # ... and group g, rebuilt from its log, answers everything but the raising op
        assert (await registry.ask(G, describe_op("g"))).error_code == NOT_AVAILABLE
        assert (await registry.ask(G, heartbeat_op("g", a))).error_code == OK
        # the second commit was stepped, but its batch was never stored: not visible
        assert offsets_of(await registry.ask(G, fetch_op("g"))) == {0: 2}

        monkeypatch.undo()  # the fault goes away: the same group works again
        described = await registry.ask(G, describe_op("g"))
        assert (described.state, member_ids(described)) == ("Stable", {"a"})
        assert commit_error(await registry.ask(G, commit_op("g", 1, 8, a))) == OK
    assert await reread(log, "g") == {0: 2, 1: 8}
    assert await reread(log, "other") == {0: 2}


async def test_a_raising_step_answers_the_members_parked_in_the_rebalance(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """A JoinGroup parked from an earlier batch is held by the actor too: it is answered at
    the fault, not left to wait for a rebalance the rebuilt group knows nothing of."""
    log = HangingLog()
    async with running_registry(log) as registry:
        a = await join_and_sync(registry, "g", "a")
        parked: list[Any] = []

        async def b_joins() -> None:
            parked.append(await registry.ask(G, join_op("g", new_id="b")))

        start = trio.current_time()
        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                callers.start_soon(b_joins)  # parks: the rebalance waits for a to rejoin
                await trio.testing.wait_all_tasks_blocked()
                assert held_by_actor(registry, "g") == 1
                describe_of_g_raises(monkeypatch)
                assert (await registry.ask(G, describe_op("g"))).error_code == NOT_AVAILABLE
        assert parked[0].error_code == NOT_AVAILABLE
        assert trio.current_time() == start  # answered at the fault, not at a timeout
        assert held_by_actor(registry, "g") == 0

        monkeypatch.undo()
        # the rebuilt group is the stored one: a alone, Stable; b retries and a rebalance runs
        assert (await registry.ask(G, heartbeat_op("g", a))).error_code == OK
        rejoined: dict[str, Any] = {}

        async def join(name: str, member: str, new_id: str) -> None:
            rejoined[name] = await registry.ask(G, join_op("g", new_id=new_id, member=member))

        with trio.fail_after(60):
            async with trio.open_nursery() as members:
                members.start_soon(join, "b", "", "b")
                await trio.testing.wait_all_tasks_blocked()
                members.start_soon(join, "a", a.member_id, "")
        assert rejoined["a"].generation_id == rejoined["b"].generation_id == 2
        leader = rejoined["a"] if rejoined["a"].leader_id == "a" else rejoined["b"]
        assert (await registry.ask(G, sync_op("g", leader))).error_code == OK
        assert member_ids(await registry.ask(G, describe_op("g"))) == {"a", "b"}


@pytest.mark.parametrize("raising", ["describe", "timer"])
async def test_requests_queued_behind_the_raising_step_in_its_batch_are_answered(
    raising: str, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    log = HangingLog()
    async with running_registry(log, commit_timeout_s=60) as registry:
        a = await join_and_sync(registry, "g", "a")
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any) -> None:
            answers[name] = await registry.ask(G, op)

        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                log.hang()
                callers.start_soon(ask, "commit", commit_op("g", 0, 1, a))
                await trio.testing.wait_all_tasks_blocked()  # stepped alone; its append waits
                if raising == "describe":  # the batch: [describe (raises), heartbeat]
                    describe_of_g_raises(monkeypatch)
                    callers.start_soon(ask, "describe", describe_op("g"))
                    await trio.testing.wait_all_tasks_blocked()
                else:  # the batch: [TimerFired (raises), heartbeat]
                    await trio.sleep(SESSION_MS / 1000 + 1)  # a's session deadline passes
                    step_raises(monkeypatch, lambda op: isinstance(op, TimerFired))
                callers.start_soon(ask, "heartbeat", heartbeat_op("g", a))
                await trio.testing.wait_all_tasks_blocked()
                await log.recover()
        assert commit_error(answers["commit"]) == OK
        assert answers["heartbeat"].error_code == NOT_AVAILABLE

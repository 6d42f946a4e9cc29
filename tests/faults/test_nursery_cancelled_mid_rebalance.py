"""Fault: the registry's nursery is cancelled mid-rebalance (the broker shuts down), with
members parked in JoinGroup and SyncGroup whose callers run outside that nursery.

Guarantee: every parked caller is answered COORDINATOR_NOT_AVAILABLE (retriable: the client
finds the coordinator again), and so is a commit whose batch is in the middle of its fsync;
none is left waiting; shutdown is ordered as `run_broker` nests it -- the actors answer what
they hold before the coordinator log closes, and the log closes only once the fsync under
way has finished; and everything acknowledged before the cancel is in the log when it is
reopened.

The nurseries are nested as broker.py's `run_broker` nests them (tricycle service
nurseries: storage outside, services inside), on the real DurableCoordinatorLog. On the real
clock: nothing here waits for a timer, and the log fsyncs in worker threads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from tricycle import open_service_nursery

from rafka_actors.actors import actor_registry as registry_module
from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.reply import ReplySlot
from rafka_actors.storage.durable_log import DurableCoordinatorLog

from .helpers import (
    NO_DELAY,
    NOT_AVAILABLE,
    OK,
    SlowFsync,
    commit_error,
    commit_op,
    describe_op,
    held_by_actor,
    join_and_sync,
    join_op,
    key,
    member_ids,
    reread,
    running_registry,
    sync_op,
)


def answers_are_recorded(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> None:
    """Every answer an actor sends is an event, at the moment it is sent (the caller may run
    later)."""

    class RecordingSlot(ReplySlot):
        __slots__ = ()

        def send_nowait(self, value: Any, /) -> None:
            events.append(f"answered {type(value).__name__}")
            super().send_nowait(value)

    monkeypatch.setattr(registry_module, "ReplySlot", RecordingSlot)


class RecordedFsync(SlowFsync):
    """An fsync that takes 0.2 s, and is an event when it ends."""

    def __init__(self, events: list[str]) -> None:
        super().__init__(0.2)
        self._events = events

    def __call__(self, fd: int) -> None:
        try:
            super().__call__(fd)
        finally:
            self._events.append("fsync done")


async def test_cancelling_the_registry_answers_every_parked_caller_before_the_log_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    answers_are_recorded(monkeypatch, events)
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="always")
    shutdown = trio.CancelScope()

    real_close = log.close

    def close() -> None:  # what log.run calls as it ends
        events.append("log closing")
        real_close()

    log.close = close  # type: ignore[method-assign]

    async def run_log(*, task_status: trio.TaskStatus[None]) -> None:
        try:
            await log.run(task_status=task_status)
        finally:
            events.append("log closed")

    async def broker(*, task_status: trio.TaskStatus[GroupRegistry]) -> None:
        """run_broker's nesting: the log in the storage nursery, the actors inside it in the
        services nursery (the gateway's place is this body)."""
        with shutdown:
            async with open_service_nursery() as storage:
                await storage.start(run_log)
                try:
                    async with open_service_nursery() as services:
                        task_status.started(GroupRegistry(services, NO_DELAY, log))
                        await trio.sleep_forever()
                finally:
                    events.append("actors stopped")

    parked: dict[str, Any] = {}

    async def ask(name: str, group: str, op: Any) -> None:
        parked[name] = await registry.ask(key(group), op)

    with trio.fail_after(10):
        async with trio.open_nursery() as callers:  # outside the registry's nursery
            registry = await callers.start(broker)
            # acknowledged before the cancel: a simple consumer's commit, and a member's
            assert commit_error(await registry.ask(key("h"), commit_op("h", 0, 7))) == OK
            a = await join_and_sync(registry, "g", "a")
            assert commit_error(await registry.ask(key("g"), commit_op("g", 0, 1, a))) == OK
            # g: b's JoinGroup parks, the rebalance waiting for a to rejoin
            callers.start_soon(ask, "b joins g", "g", join_op("g", new_id="b"))
            # s: y and x join generation 2; y's SyncGroup parks, waiting for the leader x
            x = await join_and_sync(registry, "s", "x")
            callers.start_soon(ask, "y joins s", "s", join_op("s", new_id="y"))
            await trio.testing.wait_all_tasks_blocked()
            rejoined = await registry.ask(key("s"), join_op("s", member=x.member_id))
            assert rejoined.generation_id == 2
            await trio.testing.wait_all_tasks_blocked()
            y = parked.pop("y joins s")
            callers.start_soon(ask, "y syncs s", "s", sync_op("s", y))
            await trio.testing.wait_all_tasks_blocked()
            assert held_by_actor(registry, "g") == held_by_actor(registry, "s") == 1
            # w: a commit whose batch is in its fsync when the cancel comes
            slow = RecordedFsync(events)
            monkeypatch.setattr(os, "fsync", slow)
            callers.start_soon(ask, "w commits", "w", commit_op("w", 0, 1))
            while not slow.calls:  # noqa: ASYNC110 (set by the log's worker thread)
                await trio.sleep(0.001)

            events.append("cancel")
            shutdown.cancel()
    # every parked caller was answered, retriably, and the commit caught mid-fsync too
    assert parked["b joins g"].error_code == NOT_AVAILABLE
    assert parked["y syncs s"].error_code == NOT_AVAILABLE
    assert commit_error(parked["w commits"]) == NOT_AVAILABLE
    # ... by the actors, before the log closed
    cancelled = events[events.index("cancel") + 1 :]
    assert sorted(cancelled[:3]) == [
        "answered JoinGroupOpResp",
        "answered OffsetCommitOpResp",
        "answered SyncGroupOpResp",
    ]
    # then the actors' nursery ends; the log closes once the fsync under way is done (and
    # fsyncs a last time)
    assert cancelled[3:] == [
        "actors stopped",
        "fsync done",
        "log closing",
        "fsync done",
        "log closed",
    ]
    monkeypatch.undo()

    reopened = DurableCoordinatorLog.open(tmp_path)  # the restart
    try:
        assert await reread(reopened, "h") == {0: 7}
        assert await reread(reopened, "g") == {0: 1}
        async with running_registry(reopened) as restarted:
            # the stored generations: g and s as they were before the rebalances began
            assert member_ids(await restarted.ask(key("g"), describe_op("g"))) == {"a"}
            assert member_ids(await restarted.ask(key("s"), describe_op("s"))) == {"x"}
    finally:
        reopened.close()

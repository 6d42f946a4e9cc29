"""Fault: a coordinator-log write fails (`append` raises CoordinatorLogError: a full disk).

Guarantee: nothing of the failed batch is acknowledged. Every caller the actor holds -- the
batch's and members parked in the rebalance the batch would have completed -- gets
NOT_COORDINATOR (retriable; what Kafka's coordinator answers when its log's disk
fails); the group is rebuilt from what the log has, so no read sees what
was not stored; other groups carry on; once the log takes writes again the group works; and
everything acknowledged is there after a restart. Checked on a fake log and on the real
DurableCoordinatorLog, whose `os.pwrite` fails once with ENOSPC.
"""

from __future__ import annotations

import gc
import os
import types
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rafka_actors.storage.durable_log import DurableCoordinatorLog

from ..disk_faults import failing_pwrite
from .helpers import (
    NOT_COORDINATOR,
    OK,
    FailingLog,
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


async def test_a_failed_write_acknowledges_nothing_of_its_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = FailingLog()
    g, j, other = key("g"), key("j"), key("other")
    async with running_registry(log, passivate_after_s=10) as registry:
        joins: dict[str, Any] = {}
        synced: dict[str, Any] = {}
        commits: list[Any] = []

        async def join(name: str, new_id: str = "", member: str = "") -> None:
            joins[name] = await registry.ask(j, join_op("j", new_id=new_id, member=member))

        async def sync(name: str) -> None:
            synced[name] = await registry.ask(j, sync_op("j", joins[name]))

        async def commit(partition: int) -> None:
            commits.append(await registry.ask(g, commit_op("g", partition, 2)))

        assert commit_error(await registry.ask(g, commit_op("g", 0, 1))) == OK
        a = await join_and_sync(registry, "j", "a")
        o = await join_and_sync(registry, "other", "o")
        assert commit_error(await registry.ask(other, commit_op("other", 0, 1, o))) == OK
        # a rebalance of j: b and a join generation 2 (nothing is stored before the
        # leader's SyncGroup)
        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                callers.start_soon(join, "b", "b")  # parks: the rebalance waits for a
                await trio.testing.wait_all_tasks_blocked()
                callers.start_soon(join, "a", "", a.member_id)
        assert joins["a"].generation_id == joins["b"].generation_id == 2

        log.failing = {"g", "j"}  # their writes fail from now on
        start = trio.current_time()
        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                for partition in range(5):  # however they are batched, none is acknowledged
                    callers.start_soon(commit, partition)
                callers.start_soon(sync, "b")  # parks: waits for the leader's assignment
                await trio.testing.wait_all_tasks_blocked()
                assert held_by_actor(registry, "j") == 1
                callers.start_soon(sync, "a")  # the leader's: its records cannot be stored
        assert trio.current_time() == start  # answered at the failure, not at a timeout
        assert [commit_error(answer) for answer in commits] == [NOT_COORDINATOR] * 5
        assert synced["a"].error_code == synced["b"].error_code == NOT_COORDINATOR
        assert held_by_actor(registry, "j") == 0

        # the other group never noticed
        assert (await registry.ask(other, heartbeat_op("other", o))).error_code == OK
        assert commit_error(await registry.ask(other, commit_op("other", 0, 2, o))) == OK
        assert offsets_of(await registry.ask(other, fetch_op("other"))) == {0: 2}
        # no read sees what was not stored: g and j are what the log says (the generation
        # the leader's SyncGroup would have stored is gone with it, as in a failover)
        assert offsets_of(await registry.ask(g, fetch_op("g"))) == {0: 1}
        described = await registry.ask(j, describe_op("j"))
        assert (described.state, member_ids(described)) == ("Stable", {"a"})
        assert (await registry.ask(j, heartbeat_op("j", a))).error_code == OK

        log.failing = set()  # the disk has room again: both groups work
        assert commit_error(await registry.ask(g, commit_op("g", 0, 3))) == OK
        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                callers.start_soon(join, "b", "b")
                await trio.testing.wait_all_tasks_blocked()
                callers.start_soon(join, "a", "", a.member_id)
        assert joins["a"].generation_id == joins["b"].generation_id == 2
        assert (await registry.ask(j, sync_op("j", joins["a"]))).error_code == OK
        assert member_ids(await registry.ask(j, describe_op("j"))) == {"a", "b"}
    assert log.failures >= 2
    assert await reread(log, "g") == {0: 3}
    assert await reread(log, "other") == {0: 2}


@pytest.mark.parametrize("fsync_policy", ["always", "never"])
async def test_a_write_refused_by_a_full_disk_is_not_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync_policy: str
) -> None:
    """The real durable log (on the real clock: under `always` its fsyncs run in a worker
    thread, which a mock clock would jump past)."""
    g, other = key("g"), key("other")
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy=fsync_policy)
    with trio.fail_after(10):
        async with trio.open_nursery() as storage:
            await storage.start(log.run)
            async with running_registry(log, passivate_after_s=10) as registry:
                assert commit_error(await registry.ask(g, commit_op("g", 0, 1))) == OK
                o = await join_and_sync(registry, "other", "o")
                assert commit_error(await registry.ask(other, commit_op("other", 0, 1, o))) == OK

                monkeypatch.setattr(os, "pwrite", failing_pwrite(once=True))  # ENOSPC, once
                assert commit_error(await registry.ask(g, commit_op("g", 0, 2))) == NOT_COORDINATOR
                assert offsets_of(await registry.ask(g, fetch_op("g"))) == {0: 1}
                assert log.stats.failed_batches == 1

                # the other group carries on, and g works again
                assert (await registry.ask(other, heartbeat_op("other", o))).error_code == OK
                assert commit_error(await registry.ask(other, commit_op("other", 0, 2, o))) == OK
                assert commit_error(await registry.ask(g, commit_op("g", 0, 3))) == OK
                assert offsets_of(await registry.ask(g, fetch_op("g"))) == {0: 3}
            storage.cancel_scope.cancel()
    reopened = DurableCoordinatorLog.open(tmp_path)  # a restart
    try:
        assert await reread(reopened, "g") == {0: 3}
        assert await reread(reopened, "other") == {0: 2}
    finally:
        reopened.close()


def _failure_cycle(o: object) -> bool:
    """A frame of the broker's code: every exception-traceback-frame cycle has one."""
    return isinstance(o, types.FrameType) and "rafka_actors" in o.f_code.co_filename


async def test_failed_writes_leave_no_cycles_for_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a failure keeps (the appenders' error) has no traceback holding the batch: such
    cycles wait for a full collection, which the broker runs rarely (gc_policy.py), and on a
    full disk they grew its RSS by megabytes a second. 50 failures made 1 198 before."""
    g = key("g")
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="always")
    with trio.fail_after(30):
        async with trio.open_nursery() as storage:
            await storage.start(log.run)
            async with running_registry(log, passivate_after_s=10) as registry:
                assert commit_error(await registry.ask(g, commit_op("g", 0, 1))) == OK
                monkeypatch.setattr(os, "pwrite", failing_pwrite())  # the disk is full
                assert commit_error(await registry.ask(g, commit_op("g", 0, 2))) != OK
                gc.collect()
                gc.disable()
                gc.set_debug(gc.DEBUG_SAVEALL)  # keep what a collection finds, to look at it
                try:
                    for offset in range(3, 53):
                        answer = await registry.ask(g, commit_op("g", 0, offset))
                        assert commit_error(answer) == NOT_COORDINATOR
                    gc.collect()
                    # Only the broker's cycles count: threads left by other tests in this
                    # worker (a Spark gateway's) may make garbage of their own meanwhile.
                    assert [o for o in gc.garbage if _failure_cycle(o)] == []
                finally:
                    gc.set_debug(0)
                    gc.garbage.clear()
                    gc.enable()
            storage.cancel_scope.cancel()

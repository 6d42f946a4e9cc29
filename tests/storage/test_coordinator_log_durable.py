"""The durable coordinator log under trio: replay, group commit, failures, policies, actors."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    OffsetCommitOp,
    OffsetFetchOp,
)
from rafka_actors.group_common.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage.durable_log import (
    CoordinatorLogError,
    DurableCoordinatorLog,
    FsyncPolicy,
)

from ..disk_faults import failing_pwrite


def commit(group: str, topic: str, offset: int, partition: int = 0) -> OffsetCommitRecord:
    return OffsetCommitRecord(group, topic, partition, offset, -1, None, 1000)


def metadata(group: str, generation: int) -> GroupMetadataRecord:
    member = ("m-1", None, "client", "/127.0.0.1", 30_000, 10_000, b"sub", b"assign")
    return GroupMetadataRecord(group, "cgp_x", "consumer", generation, "range", "m-1", 5, (member,))


def snapshot(log: DurableCoordinatorLog) -> dict[GroupKey, list[Record]]:
    return {key: log.records_of(key) for key in sorted(log.keys())}


@asynccontextmanager
async def running(data_dir: Path, **kw: Any) -> AsyncIterator[DurableCoordinatorLog]:
    log = DurableCoordinatorLog.open(data_dir, **kw)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        yield log
        nursery.cancel_scope.cancel()


async def test_replay_after_reopen_equals_what_was_appended(tmp_path: Path) -> None:
    a, b, c = GroupKey(1, "a"), GroupKey(1, "b"), GroupKey(2, "a")
    async with running(tmp_path) as log:
        await log.append(a, [metadata("a", 1), commit("a", "t", 1), commit("a", "u", 7)])
        await log.append(a, [commit("a", "t", 2), OffsetTombstone("a", "u", 0)])
        await log.append(b, [commit("b", "t", 3)])
        await log.append(b, [GroupTombstone("b")])
        await log.append(c, [metadata("a", 4)])
        await log.append(a, [metadata("a", 2)])
        before = snapshot(log)
    assert set(before) == {a, c}
    assert before[a] == [metadata("a", 2), commit("a", "t", 2)]  # group record first
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert snapshot(reopened) == before
    assert reopened.records_of(b) == []
    reopened.close()


async def test_group_commit_shares_fsyncs_between_groups(tmp_path: Path) -> None:
    groups, rounds = 50, 20
    async with running(tmp_path, fsync_policy="always") as log:

        async def committer(n: int) -> None:
            key = GroupKey(1, f"g{n}")
            for i in range(rounds):
                await log.append(key, [commit(key.group_id, "t", i)])

        async with trio.open_nursery() as nursery:
            for n in range(groups):
                nursery.start_soon(committer, n)
        appends, batches, fsyncs = log.stats.appends, log.stats.batches, log.fsyncs
    print(f"\n{appends} appends from {groups} groups: {batches} batches, {fsyncs} fsyncs")
    assert appends == groups * rounds
    assert fsyncs == batches  # policy always: one fsync per batch
    assert fsyncs <= appends // 10
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert len(reopened.keys()) == groups
    assert reopened.records_of(GroupKey(1, "g7")) == [commit("g7", "t", rounds - 1)]
    reopened.close()


async def test_a_failed_write_makes_append_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = GroupKey(1, "g")
    async with running(tmp_path) as log:
        await log.append(key, [commit("g", "t", 1)])
        monkeypatch.setattr(os, "pwrite", failing_pwrite(28, once=True))
        with pytest.raises(CoordinatorLogError, match="not stored") as info:
            await log.append(key, [commit("g", "t", 2)])
        assert "No space left" in str(info.value.__cause__)
        assert log.records_of(key) == [commit("g", "t", 1)]  # nothing unacknowledged shows
        await log.append(key, [commit("g", "t", 3)])  # a write error does not poison the log
        assert log.stats.failed_batches == 1
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert reopened.records_of(key) == [commit("g", "t", 3)]
    reopened.close()


async def append_together(log: DurableCoordinatorLog, groups: list[str], offset: int) -> list[str]:
    """Append one commit for each group at once (one batch); the groups whose append raised
    CoordinatorLogError."""
    refused: list[str] = []

    async def append(group: str) -> None:
        try:
            await log.append(GroupKey(1, group), [commit(group, "t", offset)])
        except CoordinatorLogError:
            refused.append(group)

    async with trio.open_nursery() as nursery:
        for group in groups:
            nursery.start_soon(append, group)
    return sorted(refused)


@pytest.mark.parametrize("appenders", [["g"], ["g", "h"]])
async def test_a_failed_fsync_refuses_every_later_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, appenders: list[str]
) -> None:
    """A lone append's batch or a batch of several: after a failed fsync the kernel may have
    dropped the dirty pages, so nothing more can be promised."""
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        monkeypatch.setattr(os, "fsync", real_fsync)
        raise OSError(5, "Input/output error")

    async with running(tmp_path / "log") as log:
        monkeypatch.setattr(os, "fsync", fsync)
        assert await append_together(log, appenders, 1) == appenders
        assert await append_together(log, ["g"], 2) == ["g"]
        assert await append_together(log, ["g", "h"], 3) == ["g", "h"]
        assert log.keys() == []


@pytest.mark.parametrize("policy", ["interval", "never"])
async def test_relaxed_policies_acknowledge_before_fsync(tmp_path: Path, policy: str) -> None:
    key = GroupKey(1, "g")
    # An interval long enough that a loaded machine still acknowledges 20 appends inside it.
    async with running(tmp_path, fsync_policy=policy, fsync_interval_ms=500) as log:
        for i in range(20):
            await log.append(key, [commit("g", "t", i)])
        assert log.fsyncs == 0  # acknowledged from the page cache
        expected = 1 if policy == FsyncPolicy.INTERVAL else 0
        for _ in range(200):  # the interval's fsync comes (generously: CI machines are shared)
            if log.fsyncs >= expected:
                break
            await trio.sleep(0.05)
        assert log.fsyncs == expected
        await trio.sleep(1.1)  # no writes since, over two intervals: no more fsyncs
        assert log.fsyncs == expected
    # Data written under either policy is readable after the process is gone.
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert reopened.records_of(key) == [commit("g", "t", 19)]
    reopened.close()


async def test_background_compaction_keeps_the_log_small(tmp_path: Path) -> None:
    key = GroupKey(1, "g")
    settings: dict[str, Any] = {
        "fsync_policy": "never",
        "segment_bytes": 16 << 10,
        "compaction_dirty_bytes": 32 << 10,
    }
    async with running(tmp_path, **settings) as log:

        async def partition(p: int) -> None:
            for i in range(400):
                await log.append(key, [commit("g", "t", i, partition=p)])

        async with trio.open_nursery() as nursery:
            for p in range(20):
                nursery.start_soon(partition, p)
        # Compaction runs in a child process: wait for it (generously: CI machines are shared).
        for _ in range(3000):
            if log.stats.compactions > 0 and log.segments.dirty_bytes < (32 << 10):
                break
            await trio.sleep(0.01)
        assert log.stats.compactions > 0
        assert log.segments.size_bytes < 64 << 10
        expected = log.records_of(key)
    assert len(expected) == 20
    reopened = DurableCoordinatorLog.open(tmp_path, **settings)
    assert sorted(reopened.records_of(key), key=repr) == sorted(expected, key=repr)
    assert all(r.offset == 399 for r in reopened.records_of(key))  # type: ignore[union-attr]
    reopened.close()


async def test_closing_fails_what_is_still_queued(tmp_path: Path) -> None:
    log = DurableCoordinatorLog.open(tmp_path)  # no flusher running
    outcome: list[BaseException] = []

    async def appender() -> None:
        try:
            await log.append(GroupKey(1, "g"), [commit("g", "t", 1)])
        except CoordinatorLogError as exc:
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(appender)
        await trio.testing.wait_all_tasks_blocked()
        log.close()
    assert len(outcome) == 1
    with pytest.raises(CoordinatorLogError, match="closed"):
        await log.append(GroupKey(1, "g"), [commit("g", "t", 2)])


async def test_a_cancelled_appender_stops_waiting_but_its_records_may_still_be_written(
    tmp_path: Path,
) -> None:
    """An appender cancelled while its batch is queued is not told the outcome; the batch is
    written all the same (an actor cancelled at shutdown acknowledged nothing of it)."""
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="always")  # no flusher yet
    seen: list[str] = []

    async def appender() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            await log.append(GroupKey(1, "free"), [commit("free", "t", 1)])
            seen.append("returned")
        seen.append("cancelled")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(appender)
        await trio.testing.wait_all_tasks_blocked()
        assert seen == ["cancelled"]
        await nursery.start(log.run)
        with trio.fail_after(10):  # queued after it, so written after it
            await log.append(GroupKey(1, "later"), [commit("later", "t", 1)])
        nursery.cancel_scope.cancel()
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert [key.group_id for key in snapshot(reopened)] == ["free", "later"]
    reopened.close()


async def test_acknowledged_commits_survive_a_broker_restart(tmp_path: Path) -> None:
    key = GroupKey(0, "simple")
    offsets = (("t", 0, 42, -1, "meta"), ("t", 1, 7, -1, None))

    async def ask(op: Any) -> Any:
        async with running(tmp_path) as log, trio.open_nursery() as nursery:
            registry = GroupRegistry(nursery, GroupConfig(), log)
            answer = await registry.ask(key, op)
            nursery.cancel_scope.cancel()
        return answer

    committed = await ask(OffsetCommitOp("simple", offsets, api_version=8))
    assert committed.results == (("t", 0, ErrorCode.none), ("t", 1, ErrorCode.none))
    fetched = await ask(OffsetFetchOp("simple", None))  # a new log and registry: a restart
    assert sorted(o[:5] for o in fetched.offsets) == [
        ("t", 0, 42, -1, "meta"),
        ("t", 1, 7, -1, ""),  # the machine stores a missing metadata as ""
    ]


async def test_under_fsync_always_a_slow_fsync_runs_beside_the_loop_and_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `always` a batch is fsynced in a worker thread: the event loop serves meanwhile
    (a slow disk delays only the groups that write), and appends that come during a flush
    share the next one."""
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(0.3)
        real_fsync(fd)

    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.005)
            ticks += 1

    async with running(tmp_path / "log", fsync_policy="always") as log, trio.open_nursery() as n:
        await log.append(GroupKey(1, "lone"), [commit("lone", "t", 1)])  # a real, quick fsync
        monkeypatch.setattr(os, "fsync", slow_fsync)
        n.start_soon(tick)
        assert await append_together(log, [f"g{i}" for i in range(5)], 1) == []
        assert ticks >= 20  # the loop kept running through the 0.3 s flush
        assert log.fsyncs == 2 and log.stats.batches == 2  # the five shared one
        n.cancel_scope.cancel()
    reopened = DurableCoordinatorLog.open(tmp_path / "log")
    assert len(reopened.keys()) == 6
    reopened.close()

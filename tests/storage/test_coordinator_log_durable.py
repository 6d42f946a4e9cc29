"""The durable coordinator log under trio: replay, group commit, failures, policies, actors."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.actors import durable_log
from rafka_actors.actors.durable_log import (
    LOOP_FSYNC_LIMIT_S,
    CoordinatorLogError,
    DurableCoordinatorLog,
    FsyncPolicy,
)
from rafka_actors.actors.fsync_process import FsyncProcess
from rafka_actors.actors.registry import GroupRegistry
from rafka_actors.group.records import GroupMetadataRecord
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import OffsetCommitOp, OffsetFetchOp
from rafka_actors.group_common.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage import fsync_worker

WORKER_DIR = Path(fsync_worker.__file__).parent


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


def failing(errno: int, once: bool = False) -> Callable[..., Any]:
    """A stand-in for ``os.pwrite`` (how the log writes its frames) that fails."""
    real = os.pwrite
    state = {"failed": False}

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if once and state["failed"]:
            return real(fd, data, offset)
        state["failed"] = True
        raise OSError(errno, os.strerror(errno))

    return pwrite


async def test_a_failed_write_makes_append_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = GroupKey(1, "g")
    async with running(tmp_path) as log:
        await log.append(key, [commit("g", "t", 1)])
        monkeypatch.setattr(os, "pwrite", failing(28, once=True))
        with pytest.raises(CoordinatorLogError, match="not stored") as info:
            await log.append(key, [commit("g", "t", 2)])
        assert "No space left" in str(info.value.__cause__)
        assert log.records_of(key) == [commit("g", "t", 1)]  # nothing unacknowledged shows
        await log.append(key, [commit("g", "t", 3)])  # a write error does not poison the log
        assert log.stats.failed_batches == 1
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert reopened.records_of(key) == [commit("g", "t", 3)]
    reopened.close()


def fake_fsync_worker(tmp_path: Path, fsync: str) -> list[str]:
    """The real worker's program with ``os.fsync`` replaced: ``fsync`` is the source of a
    ``def fsync(fd)``, which may call ``real_fsync``."""
    script = tmp_path / "fake_fsync_worker.py"
    script.write_text(
        f"import os, sys, time\nsys.path.insert(0, {str(WORKER_DIR)!r})\nimport fsync_worker\n"
        f"real_fsync = os.fsync\n{fsync}\nos.fsync = fsync\n"
        "sys.exit(fsync_worker.main(sys.argv))\n"
    )
    return [sys.executable, "-I", "-S", str(script)]


def use_fsync_worker(monkeypatch: pytest.MonkeyPatch, command: list[str] | None) -> None:
    """Logs that start from now on get this fsync worker (None: none; the thread and loop)."""

    def start() -> FsyncProcess | None:
        return None if command is None else FsyncProcess.start(command)

    monkeypatch.setattr(DurableCoordinatorLog, "_start_fsync_process", staticmethod(start))


FAILING_FSYNC = "def fsync(fd):\n    raise OSError(5, 'Input/output error')"
SLOW_FSYNC = "def fsync(fd):\n    time.sleep(0.3)\n    real_fsync(fd)"


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


@pytest.mark.parametrize("where", ["worker", "thread", "loop"])
async def test_a_failed_fsync_refuses_every_later_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Wherever the fsync runs: the fsync worker (a batch of several, which is also where a
    thread would run it without the worker) or the event loop (a lone append)."""
    worker = fake_fsync_worker(tmp_path, FAILING_FSYNC) if where == "worker" else None
    use_fsync_worker(monkeypatch, worker)
    async with running(tmp_path / "log") as log:
        assert (log.fsync_worker_pid is not None) == (where == "worker")
        if where != "worker":
            real_fsync = os.fsync

            def fsync(fd: int) -> None:
                monkeypatch.setattr(os, "fsync", real_fsync)
                raise OSError(5, "Input/output error")

            monkeypatch.setattr(os, "fsync", fsync)
        groups = ["g"] if where == "loop" else ["g", "h"]
        assert await append_together(log, groups, 1) == groups
        assert await append_together(log, ["g"], 2) == ["g"]
        assert await append_together(log, ["g", "h"], 3) == ["g", "h"]
        assert log.keys() == []


@pytest.mark.parametrize("policy", ["interval", "never"])
async def test_relaxed_policies_acknowledge_before_fsync(tmp_path: Path, policy: str) -> None:
    key = GroupKey(1, "g")
    async with running(tmp_path, fsync_policy=policy, fsync_interval_ms=50) as log:
        for i in range(20):
            await log.append(key, [commit("g", "t", i)])
        assert log.fsyncs == 0  # acknowledged from the page cache
        await trio.sleep(0.2)
        assert log.fsyncs == (1 if policy == FsyncPolicy.INTERVAL else 0)
        await trio.sleep(0.2)  # no writes since: no more fsyncs
        assert log.fsyncs == (1 if policy == FsyncPolicy.INTERVAL else 0)
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
        for _ in range(100):  # compaction runs in a child process: give it a moment to finish
            if log.segments.dirty_bytes < (32 << 10):
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


async def test_a_shielded_append_waits_out_a_cancel_and_an_unshielded_one_does_not(
    tmp_path: Path,
) -> None:
    """A commit its caller steps under `always` (GroupActor.answer_durably) must be settled
    whatever happens to the caller: `append(shielded=True)` waits for its batch through a
    cancel, which the caller meets at its next checkpoint. Any other appender stops waiting
    when cancelled; its records may still be written."""
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="always")  # no flusher yet
    seen: list[str] = []
    held_done = trio.Event()

    async def appender(group: str, *, shielded: bool) -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            await log.append(GroupKey(1, group), [commit(group, "t", 1)], shielded=shielded)
            seen.append(f"{group} returned")
            await trio.lowlevel.checkpoint()
            seen.append(f"{group} passed a checkpoint")
        seen.append(f"{group} cancelled")
        if shielded:
            held_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(appender, "free", shielded=False))
        nursery.start_soon(partial(appender, "held", shielded=True))
        await trio.testing.wait_all_tasks_blocked()
        assert seen == ["free cancelled"]  # the shielded appender still waits for its batch
        await nursery.start(log.run)
        with trio.fail_after(10):
            await held_done.wait()
        nursery.cancel_scope.cancel()
    assert seen == ["free cancelled", "held returned", "held cancelled"]
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert [key.group_id for key in snapshot(reopened)] == ["free", "held"]  # both written
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


async def test_append_now_writes_before_returning_where_the_policy_allows(tmp_path: Path) -> None:
    key = GroupKey(1, "g")
    async with running(tmp_path, fsync_policy="always") as log:
        assert not log.writable_now()  # an fsync runs in a worker thread: appends wait
    async with running(tmp_path / "never", fsync_policy="never") as log:
        assert log.writable_now()
        with trio.testing.assert_no_checkpoints():
            log.append_now(key, [commit("g", "t", 1)])
        assert log.records_of(key) == [commit("g", "t", 1)]
        assert (log.stats.appends, log.stats.records, log.stats.batches) == (1, 1, 1)
        log.close()
        assert not log.writable_now()
    reopened = DurableCoordinatorLog.open(tmp_path / "never")
    assert reopened.records_of(key) == [commit("g", "t", 1)]
    reopened.close()


async def test_a_failed_append_now_raises_and_shows_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = GroupKey(1, "g")
    async with running(tmp_path, fsync_policy="never") as log:
        log.append_now(key, [commit("g", "t", 1)])
        monkeypatch.setattr(os, "pwrite", failing(28, once=True))
        with pytest.raises(CoordinatorLogError, match="not stored"):
            log.append_now(key, [commit("g", "t", 2)])
        assert log.records_of(key) == [commit("g", "t", 1)]
        assert (log.stats.appends, log.stats.failed_batches) == (1, 1)


def counting_pwrites(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the log's writes: each call's size."""
    real, sizes = os.pwrite, []

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        sizes.append(len(data))
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    return sizes


async def test_held_appends_are_written_together_at_write_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = GroupKey(1, "a"), GroupKey(2, "b")
    async with running(tmp_path, fsync_policy="never") as log:
        writes = counting_pwrites(monkeypatch)
        log.hold_appends()
        with trio.testing.assert_no_checkpoints():
            log.append_now(a, [commit("a", "t", 1)])
            log.append_now(b, [commit("b", "t", 2), commit("b", "t", 3, partition=1)])
            log.append_now(a, [commit("a", "t", 4)])
        assert writes == [] and log.stats.records == 0  # kept, not written
        assert log.write_held() == []
        assert len(writes) == 1  # one write for all three appends
        assert (log.stats.appends, log.stats.records, log.stats.batches) == (3, 4, 1)
        assert log.records_of(a) == [commit("a", "t", 4)]
        log.append_now(a, [commit("a", "t", 5)])  # not held any more: written at once
        assert len(writes) == 2
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert reopened.records_of(a) == [commit("a", "t", 5)]
    assert reopened.records_of(b) == [commit("b", "t", 2), commit("b", "t", 3, partition=1)]
    reopened.close()


async def test_a_read_of_a_group_whose_appends_are_held_writes_them_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An actor spawned in the same pass reads its group from the view: it must see what an
    actor dropped a moment ago appended."""
    a, b = GroupKey(1, "a"), GroupKey(1, "b")
    async with running(tmp_path, fsync_policy="never") as log:
        writes = counting_pwrites(monkeypatch)
        log.hold_appends()
        log.append_now(a, [commit("a", "t", 1)])
        assert log.records_of(b) == [] and writes == []  # another group's: no need
        assert log.records_of(a) == [commit("a", "t", 1)]
        assert log.keys() == [a]
        log.append_now(a, [commit("a", "t", 2)])
        assert log.membership_of(a) == []  # (offsets only) but written all the same
        assert len(writes) == 2
        assert log.write_held() == [] and len(writes) == 2  # nothing was left to write
        assert log.records_of(a) == [commit("a", "t", 2)]


async def test_a_group_holds_from_its_held_append_until_write_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`holds`: what the reactor asks before letting a reply about the group out."""
    a, b = GroupKey(1, "a"), GroupKey(1, "b")
    async with running(tmp_path, fsync_policy="never") as log:
        log.hold_appends()
        log.append_now(a, [commit("a", "t", 1)])
        assert log.holds(a) and not log.holds(b)
        assert log.write_held() == [] and not log.holds(a)
        log.hold_appends()
        log.append_now(b, [commit("b", "t", 2)])
        monkeypatch.setattr(os, "pwrite", failing(28, once=True))
        assert log.records_of(b) == []  # a read's early write, which failed
        assert log.holds(b)  # not stored: still held until write_held names it
        assert log.write_held() == [b] and not log.holds(b)


async def test_held_appends_that_fail_to_write_are_named_and_show_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = GroupKey(1, "a"), GroupKey(1, "b")
    async with running(tmp_path, fsync_policy="never") as log:
        log.append_now(a, [commit("a", "t", 1)])
        log.hold_appends()
        log.append_now(a, [commit("a", "t", 2)])
        log.append_now(b, [commit("b", "t", 3)])
        monkeypatch.setattr(os, "pwrite", failing(28, once=True))
        assert log.write_held() == [a, b]
        assert snapshot(log) == {a: [commit("a", "t", 1)]}  # nothing unstored shows
        assert log.stats.failed_batches == 1
        log.append_now(b, [commit("b", "t", 4)])  # the log goes on
        assert log.write_held() == []  # nothing held: nothing failed
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert snapshot(reopened) == {a: [commit("a", "t", 1)], b: [commit("b", "t", 4)]}
    reopened.close()


async def test_under_fsync_always_held_appends_are_written_and_fsynced_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = GroupKey(1, "a"), GroupKey(1, "b")
    async with running(tmp_path, fsync_policy="always") as log:
        assert not log.writable_now()  # outside a hold, an append waits for the flusher
        log.hold_appends()
        assert log.writable_now()
        writes, fsyncs = counting_pwrites(monkeypatch), log.fsyncs
        with trio.testing.assert_no_checkpoints():
            log.append_now(a, [commit("a", "t", 1)])
            log.append_now(b, [commit("b", "t", 2)])
            assert writes == [] and log.fsyncs == fsyncs
            assert log.write_held() == []
        assert len(writes) == 1 and log.fsyncs == fsyncs + 1  # on the loop, before returning
        assert not log.writable_now()
        assert snapshot(log) == {a: [commit("a", "t", 1)], b: [commit("b", "t", 2)]}


async def test_under_fsync_always_appends_are_held_only_while_fsyncs_are_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass's fsync holds up every other request: on a slow disk, commits go to the
    flusher (whose worker fsyncs beside the loop) until fsyncs are fast again."""
    key = GroupKey(1, "g")
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(3 * LOOP_FSYNC_LIMIT_S)
        real_fsync(fd)

    def held_then_written(offset: int) -> bool:
        log.hold_appends()
        held = log.writable_now()
        if held:
            log.append_now(key, [commit("g", "t", offset)])
        assert log.write_held() == []
        return held

    use_fsync_worker(monkeypatch, None)  # fsyncs on the loop or in a thread: timed here
    monkeypatch.setattr(durable_log, "LOOP_FSYNC_PROBE_S", 60.0)  # no probe in this test
    async with running(tmp_path, fsync_policy="always") as log:
        assert held_then_written(1)
        monkeypatch.setattr(os, "fsync", slow_fsync)
        offset = 1
        while held_then_written(offset := offset + 1):
            assert offset < 10
        assert not held_then_written(offset + 1)  # slow: nothing is held
        await log.append(key, [commit("g", "t", 20)])  # through the flusher
        monkeypatch.setattr(os, "fsync", real_fsync)
        for offset in range(21, 40):
            await log.append(key, [commit("g", "t", offset)])  # fast again...
            if held_then_written(100 + offset):
                break  # ...so held again
        else:
            raise AssertionError("appends never held again after fast fsyncs")
        assert log.records_of(key)[-1].offset == 100 + offset  # type: ignore[union-attr]


async def test_under_fsync_always_a_failed_fsync_of_held_appends_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for the flusher's batches: nothing shows, and every later append is refused."""
    key = GroupKey(1, "g")
    monkeypatch.setattr(durable_log, "LOOP_FSYNC_LIMIT_S", 60.0)  # held however slow
    async with running(tmp_path, fsync_policy="always") as log:
        await log.append(key, [commit("g", "t", 1)])
        log.hold_appends()
        log.append_now(key, [commit("g", "t", 2)])

        def fsync(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", fsync)
        assert log.write_held() == [key]
        assert log.records_of(key) == [commit("g", "t", 1)]
        with pytest.raises(CoordinatorLogError):
            await log.append(key, [commit("g", "t", 3)])


async def test_a_group_whose_held_records_failed_restarts_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its inline commit was answered (the reply is the caller's to drop) but not stored: the
    actor must not go on with the offset in memory."""
    key = GroupKey(1, "g")

    def commit_op(offset: int) -> OffsetCommitOp:
        return OffsetCommitOp("g", (("t", 0, offset, -1, ""),))

    def committed_offsets(registry: GroupRegistry) -> list[int]:
        fetched = registry.answer_now(key, OffsetFetchOp("g", None))
        return [offset for _topic, _partition, offset, *_ in fetched.offsets]

    async with running(tmp_path, fsync_policy="never") as log, trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=60)
        assert registry.answer_now(key, commit_op(1)).results == (("t", 0, 0),)
        registry.hold_writes()
        assert registry.answer_now(key, commit_op(2)).results == (("t", 0, 0),)
        actor = registry._actors[key]  # kept (passivation): it holds offset 2 in memory
        monkeypatch.setattr(os, "pwrite", failing(28, once=True))
        assert not registry.release_writes()
        assert registry._actors[key] is actor and committed_offsets(registry) == [1]
        registry.hold_writes()
        registry.answer_now(key, commit_op(3))
        assert registry.release_writes()
        assert committed_offsets(registry) == [3]
        nursery.cancel_scope.cancel()
    assert [r.offset for r in log.records_of(key) if isinstance(r, OffsetCommitRecord)] == [3]


async def test_without_the_worker_a_lone_append_is_fsynced_on_the_loop_and_a_crowd_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `always` with no fsync worker, a batch of one append is written and fsynced on
    the event loop (two thread hand-offs cost more than the fsync); several appenders share
    one in a thread."""
    use_fsync_worker(monkeypatch, None)
    threaded: list[int] = []
    real_run_sync = trio.to_thread.run_sync

    async def counting_run_sync(fn: Any, *args: Any, **kw: Any) -> Any:
        threaded.append(len(args[0]) if args else 0)
        return await real_run_sync(fn, *args, **kw)

    monkeypatch.setattr(trio.to_thread, "run_sync", counting_run_sync)
    async with running(tmp_path, fsync_policy="always") as log:
        await log.append(GroupKey(1, "lone"), [commit("lone", "t", 1)])
        assert threaded == [] and log.fsyncs == 1
        async with trio.open_nursery() as nursery:
            for n in range(5):
                key = GroupKey(1, f"g{n}")
                nursery.start_soon(log.append, key, [commit(key.group_id, "t", 1)])
        assert threaded == [5] and log.fsyncs == 2  # one batch, one fsync, in a thread
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert len(reopened.keys()) == 6
    reopened.close()


async def test_the_fsync_worker_syncs_a_crowd_while_the_loop_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `always` a batch of several appends is made durable by the fsync worker process,
    and the event loop serves meanwhile (an fsync on the loop would stop it for the whole
    flush, and one in a thread waits for the GIL); a lone append is fsynced on the loop."""
    use_fsync_worker(monkeypatch, fake_fsync_worker(tmp_path, SLOW_FSYNC))  # 0.3 s a flush
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.005)
            ticks += 1

    async with running(tmp_path / "log", fsync_policy="always") as log, trio.open_nursery() as n:
        assert log.fsync_worker_pid is not None
        await log.append(GroupKey(1, "lone"), [commit("lone", "t", 1)])  # a real, quick fsync
        n.start_soon(tick)
        assert await append_together(log, [f"g{i}" for i in range(5)], 1) == []
        assert ticks >= 20  # the loop kept running through the worker's 0.3 s flush
        assert log.fsyncs == 2 and log.stats.batches == 2  # the five shared one
        n.cancel_scope.cancel()
    reopened = DurableCoordinatorLog.open(tmp_path / "log")
    assert len(reopened.keys()) == 6
    reopened.close()


async def test_if_the_fsync_worker_dies_fsyncs_go_to_a_thread(tmp_path: Path) -> None:
    groups = ["g", "h"]
    async with running(tmp_path, fsync_policy="always") as log:
        pid = log.fsync_worker_pid
        assert pid is not None
        assert await append_together(log, groups, 1) == []
        os.kill(pid, signal.SIGKILL)
        assert await append_together(log, groups, 2) == []  # acknowledged all the same
        assert log.fsync_worker_pid is None and log.fsyncs == 2
        assert await append_together(log, groups, 3) == []
        assert log.fsyncs == 3
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert [reopened.records_of(GroupKey(1, g)) for g in groups] == [
        [commit(g, "t", 3)] for g in groups
    ]
    reopened.close()


async def test_closing_the_log_stops_its_fsync_worker(tmp_path: Path) -> None:
    async with running(tmp_path, fsync_policy="always") as log:
        pid = log.fsync_worker_pid
        assert pid is not None
    assert log.fsync_worker_pid is None
    assert not await trio.Path(f"/proc/{pid}").exists()  # exited and reaped: no zombie

"""Fault: a coordinator-log write hangs (`append` does not return: a disk that stopped
answering).

Guarantee: a caller whose batch waits for the log is answered COORDINATOR_NOT_AVAILABLE after
`commit_timeout_s` (Kafka's offsets.commit.timeout.ms), never left waiting; requests queued
behind it are stepped next and answered the same way if they too must write; reads (from the
snapshot, even of the stuck group) and heartbeats of other groups go on meanwhile, without
waiting; once the log answers again every group works; and everything acknowledged is there
after a restart. The log is one for all groups, so other groups' writes wait for it too.
Checked on a fake log and on the real DurableCoordinatorLog whose fsync blocks.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rafka_actors.storage.durable_log import DurableCoordinatorLog

from .helpers import (
    NOT_AVAILABLE,
    OK,
    HangingLog,
    commit_error,
    commit_op,
    describe_op,
    fetch_op,
    heartbeat_op,
    held_by_actor,
    join_and_sync,
    key,
    member_ids,
    offsets_of,
    reread,
    running_registry,
)

G, OTHER = key("g"), key("other")


async def test_a_hung_write_is_answered_at_the_commit_timeout_and_reads_go_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = HangingLog()
    async with running_registry(log, passivate_after_s=10, commit_timeout_s=5) as registry:
        a = await join_and_sync(registry, "g", "a")
        assert commit_error(await registry.ask(G, commit_op("g", 0, 1, a))) == OK
        o = await join_and_sync(registry, "other", "o")
        assert commit_error(await registry.ask(OTHER, commit_op("other", 0, 1, o))) == OK

        log.hang()
        start = trio.current_time()
        answers: dict[str, Any] = {}
        answered_after: dict[str, float] = {}
        beats: list[tuple[float, float, int]] = []  # (sent, answered, error) of o's

        async def ask(name: str, group: str, op: Any) -> None:
            answers[name] = await registry.ask(key(group), op)
            answered_after[name] = trio.current_time() - start

        async def other_member_heartbeats() -> None:
            for _ in range(4):  # as a consumer does, every 3 s
                sent = trio.current_time() - start
                beat = await registry.ask(OTHER, heartbeat_op("other", o))
                beats.append((sent, trio.current_time() - start, beat.error_code))
                await trio.sleep(3)

        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                callers.start_soon(ask, "commit", "g", commit_op("g", 0, 2, a))
                await trio.testing.wait_all_tasks_blocked()  # its append hangs
                callers.start_soon(ask, "heartbeat", "g", heartbeat_op("g", a))
                callers.start_soon(ask, "later commit", "g", commit_op("g", 0, 3, a))
                await trio.testing.wait_all_tasks_blocked()  # queued behind it
                # a write of a third group waits for the same log
                callers.start_soon(ask, "third commit", "third", commit_op("third", 0, 1))
                callers.start_soon(other_member_heartbeats)

                # meanwhile reads are answered at once (no time passes)
                assert member_ids(await registry.ask(OTHER, describe_op("other"))) == {"o"}
                assert offsets_of(await registry.ask(OTHER, fetch_op("other"))) == {0: 1}
                # g's own committed offsets, from its snapshot, while its actor waits
                assert offsets_of(await registry.ask(G, fetch_op("g"))) == {0: 1}
                assert trio.current_time() == start

        # the other group's heartbeats were each answered at once, all through the fault
        assert beats == [(pytest.approx(t), pytest.approx(t), OK) for t in (0, 3, 6, 9)]
        assert commit_error(answers["commit"]) == NOT_AVAILABLE
        assert answered_after["commit"] == pytest.approx(5)
        assert commit_error(answers["third commit"]) == NOT_AVAILABLE
        assert answered_after["third commit"] == pytest.approx(5)
        # the two queued behind the first were stepped together at 5 s, and their batch
        # (with the later commit's record) waited one more commit timeout
        assert answers["heartbeat"].error_code == NOT_AVAILABLE
        assert commit_error(answers["later commit"]) == NOT_AVAILABLE
        assert answered_after["heartbeat"] == answered_after["later commit"] == pytest.approx(10)
        assert held_by_actor(registry, "g") == 0

        await log.recover()  # the disk answers again: every group works
        assert (await registry.ask(G, heartbeat_op("g", a))).error_code == OK
        assert commit_error(await registry.ask(G, commit_op("g", 0, 4, a))) == OK
        assert offsets_of(await registry.ask(G, fetch_op("g"))) == {0: 4}
        assert commit_error(await registry.ask(OTHER, commit_op("other", 0, 5, o))) == OK
        assert commit_error(await registry.ask(key("third"), commit_op("third", 0, 2))) == OK
    assert await reread(log, "g") == {0: 4}
    assert await reread(log, "other") == {0: 5}
    assert await reread(log, "third") == {0: 2}


class StuckFsync:
    """A stand-in for ``os.fsync`` that blocks its worker thread until `release()`."""

    def __init__(self) -> None:
        self._real = os.fsync
        self._released = threading.Event()

    def __call__(self, fd: int) -> None:
        self._released.wait(timeout=60)  # (a bound, so that a failing test cannot hang)
        self._real(fd)

    def release(self) -> None:
        self._released.set()


async def test_a_durable_log_whose_fsync_hangs_fails_writes_in_time_and_serves_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real clock: the fsync runs in a worker thread, which a mock clock would jump
    past."""
    commit_timeout_s = 0.5
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="always")
    stuck = StuckFsync()
    with trio.fail_after(10):
        async with trio.open_nursery() as storage:
            await storage.start(log.run)
            async with running_registry(
                log, passivate_after_s=10, commit_timeout_s=commit_timeout_s
            ) as registry:
                assert commit_error(await registry.ask(G, commit_op("g", 0, 1))) == OK
                o = await join_and_sync(registry, "other", "o")
                assert commit_error(await registry.ask(OTHER, commit_op("other", 0, 1, o))) == OK

                monkeypatch.setattr(os, "fsync", stuck)
                try:
                    start = trio.current_time()
                    failed = await registry.ask(G, commit_op("g", 0, 2))
                    assert commit_error(failed) == NOT_AVAILABLE
                    assert trio.current_time() - start >= commit_timeout_s
                    # the flusher is still stuck in the fsync: reads and heartbeats go on
                    start = trio.current_time()
                    assert (await registry.ask(OTHER, heartbeat_op("other", o))).error_code == OK
                    assert member_ids(await registry.ask(OTHER, describe_op("other"))) == {"o"}
                    assert offsets_of(await registry.ask(OTHER, fetch_op("other"))) == {0: 1}
                    assert offsets_of(await registry.ask(G, fetch_op("g"))) == {0: 1}
                    assert trio.current_time() - start < commit_timeout_s
                    other_commit = await registry.ask(OTHER, commit_op("other", 0, 2, o))
                    assert commit_error(other_commit) == NOT_AVAILABLE
                finally:
                    stuck.release()
                # the disk answers again: what waited is written, and both groups work
                assert commit_error(await registry.ask(G, commit_op("g", 0, 3))) == OK
                assert offsets_of(await registry.ask(G, fetch_op("g"))) == {0: 3}
                assert commit_error(await registry.ask(OTHER, commit_op("other", 0, 3, o))) == OK
            storage.cancel_scope.cancel()
    reopened = DurableCoordinatorLog.open(tmp_path)
    try:
        assert await reread(reopened, "g") == {0: 3}
        assert await reread(reopened, "other") == {0: 3}
    finally:
        reopened.close()

"""Commit throughput of the durable coordinator log per fsync policy (deselected by default).

Run with: ``pytest tests/storage/test_coordinator_log_bench.py -m slow -s -q``

Each of N groups appends one OffsetCommit record at a time, waiting for each append (as a group
actor does), for two seconds. Reported: acknowledged appends per second, group-commit batches
(one write each, plus one fsync under ``always``) per second, and fsyncs. The raw latency of a
4 KiB write + fsync on the same filesystem is printed first for scale.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
import trio

from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey
from rafka_actors.storage.durable_log import DurableCoordinatorLog

SECONDS = 2.0


def fsync_latency_ms(directory: Path, rounds: int = 200) -> float:
    fd, name = tempfile.mkstemp(dir=directory)
    try:
        started = time.perf_counter()
        for _ in range(rounds):
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
        return (time.perf_counter() - started) / rounds * 1000
    finally:
        os.close(fd)
        os.unlink(name)


async def measure(data_dir: Path, policy: str, groups: int) -> tuple[float, float, int]:
    log = DurableCoordinatorLog.open(data_dir, fsync_policy=policy, fsync_interval_ms=1000)
    stop = trio.current_time() + SECONDS

    async def committer(n: int) -> None:
        key = GroupKey(1, f"group-{n}")
        offset = 0
        while trio.current_time() < stop:
            record = OffsetCommitRecord(key.group_id, "topic", 0, offset, -1, "", 0)
            await log.append(key, [record])
            offset += 1

    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        started = trio.current_time()
        async with trio.open_nursery() as committers:
            for n in range(groups):
                committers.start_soon(committer, n)
        elapsed = trio.current_time() - started
        nursery.cancel_scope.cancel()
    return log.stats.appends / elapsed, log.stats.batches / elapsed, log.fsyncs


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["always", "interval", "never"])
def test_commit_throughput(tmp_path: Path, policy: str) -> None:
    print(f"\nwrite+fsync of 4 KiB here: {fsync_latency_ms(tmp_path):.3f} ms")
    for groups in (1, 10, 100, 1000):
        data_dir = tmp_path / f"{policy}-{groups}"
        appends, batches, fsyncs = trio.run(measure, data_dir, policy, groups)
        print(
            f"{policy:>8} {groups:>5} groups: {appends:>9,.0f} appends/s "
            f"{batches:>8,.0f} batches/s {fsyncs:>6} fsyncs"
        )
        assert appends > 0

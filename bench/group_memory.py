"""The Python memory each live group costs, in process: groups created by a first commit.

Workload (g) of `bench/run.py` reads the broker's RSS after 100 000 groups each got one
commit; this counts the same groups' Python objects with `tracemalloc`, without sockets or a
second process: the registry, its resting groups and their snapshots, and the coordinator
log's view. Each group gets one OffsetCommit through `GroupRegistry.ask`, and every group
stays in memory (`group.passivation.idle.ms` of 10 minutes); the line says how many of them
still have a running actor (none: an idle actor stops, its group rests).
The rate is groups created per second while tracemalloc traces (which slows it down).
Below the line, where the bytes go: per group, by allocation site (the innermost frame in
rafka_actors, and the callee's line where a dataclass's `__init__` or a library allocated).

Then the retention sweep (`offsets.retention.check.interval.ms`) visits every group from a
fresh registry, as the first sweep after a restart does: the Python memory it adds at its
peak, the tasks it starts and the actors it leaves behind.

    .venv/bin/python bench/group_memory.py [--groups 5000] [--fsync never|interval|always]
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

# As in the broker (cli.py): without this, importing kio in a dev install runs Hypothesis's
# trio plugin, which sorts and shuffles every batch of runnable tasks.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")

import trio
import trio.testing

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import OffsetCommitOp
from rafka_actors.ids import GroupKey
from rafka_actors.storage.durable_log import DurableCoordinatorLog

FRAMES = 6  # frames of each allocation traced: its site in rafka_actors
WARM_UP = 200  # groups created before measuring: caches, interned strings, the first segment


async def measure(data_dir: Path, groups: int, fsync: str) -> None:
    log = DurableCoordinatorLog.open(data_dir, fsync_policy=fsync)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=600)
        background = len(nursery.child_tasks)  # the log's and the passivation sweeper's

        async def first_commit(i: int) -> None:
            op = OffsetCommitOp(f"g{i}", (("t", 0, 1, -1, ""),))
            answer = await registry.ask(GroupKey(1, op.group_id), op)
            if answer.results[0][2] != 0:
                raise RuntimeError(f"commit failed: {answer}")

        for i in range(WARM_UP):
            await first_commit(i)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        tracemalloc.start(FRAMES)
        before = tracemalloc.get_traced_memory()[0]
        first = tracemalloc.take_snapshot()
        start = time.perf_counter()
        for i in range(WARM_UP, WARM_UP + groups):
            await first_commit(i)
        elapsed = time.perf_counter() - start
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
        running = len(nursery.child_tasks) - background
        where = tracemalloc.take_snapshot().compare_to(first, "traceback")
        print(
            f"{groups:,} groups: {used / groups:,.0f} B of Python objects per group; "
            f"{len(registry):,} groups held, {running:,} actors running; "
            f"{groups / elapsed:,.0f} groups created/s (traced)"
        )
        _where_it_goes(where, groups)
        await _sweep(log, groups)
        tracemalloc.stop()
        nursery.cancel_scope.cancel()


def _where_it_goes(where: list[tracemalloc.StatisticDiff], groups: int) -> None:
    """The bytes per group by allocation site, largest first: the innermost frame in
    rafka_actors (or the bench), with the allocating line when that is elsewhere."""
    sites: dict[str, int] = {}
    for stat in where:
        ours = [f for f in stat.traceback if "rafka_actors" in f.filename or "bench" in f.filename]
        frame = ours[-1] if ours else stat.traceback[-1]
        inner = stat.traceback[-1]
        site = f"{_short(frame.filename)}:{frame.lineno}"
        if inner != frame:  # allocated in a callee: a dataclass's __init__, a library
            site += f" (in {_short(inner.filename)}:{inner.lineno})"
        sites[site] = sites.get(site, 0) + stat.size_diff
    for site, size in sorted(sites.items(), key=lambda kv: -kv[1]):
        if abs(size) / groups >= 4:
            print(f"  {size / groups:7,.0f} B  {site}")


def _short(filename: str) -> str:
    for marker in ("rafka_actors/", "site-packages/", "bench/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename.rsplit("/", 1)[-1]


async def _sweep(log: DurableCoordinatorLog, groups: int) -> None:
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=600)
        gc.collect()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        tasks = len(nursery.child_tasks)
        await registry.expire_offsets(retention_ms=7 * 24 * 3_600_000)  # nothing expires
        peak = tracemalloc.get_traced_memory()[1] - before
        print(
            f"retention sweep from a fresh registry: peak {peak / groups:,.0f} B per group; "
            f"{len(nursery.child_tasks) - tasks:,} tasks running and {len(registry):,} groups "
            "held after it"
        )
        nursery.cancel_scope.cancel()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--fsync", default="never", choices=("never", "interval", "always"))
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/group_memory.py', *sys.argv[1:]])}")
    with tempfile.TemporaryDirectory() as tmp:
        trio.run(measure, Path(tmp), args.groups, args.fsync)
    return 0


if __name__ == "__main__":
    sys.exit(main())

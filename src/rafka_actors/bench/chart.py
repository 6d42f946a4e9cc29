"""Rebalance time and commit latency against group size: the chart of docs/performance.md.

For each group size N, a fleet of N classic members (the direct-protocol load generator,
heartbeating every second) forms a Stable group; then, for a fixed window, one member's
generation-checked OffsetCommits are timed back to back on a connection of their own while
the others keep heartbeating; then one member leaves and the rebalance is timed (total, and
the coordinator's share after the last member's JoinGroup was sent).

    python -m rafka_actors.bench.chart [--bootstrap HOST:PORT] [--sizes 1,10,100,300,1000]
                                       [--runs 3] [--png FILE] [-o KEY=VALUE ...]

Without --bootstrap it starts rafka-actors itself (group.initial.rebalance.delay.ms=100 and
any -o settings). Prints one row per size, and the command.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shlex
import statistics
import sys
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import trio

from .brokers import Broker, running
from .core import Target
from .loadgen import OFFSET_COMMIT, Connection, Fleet, create_topic, make, percentile, schema
from .loadgen import running as fleet_running
from .scale_workloads import REBALANCE_S, SESSION_S, TOPIC, _prefix

SIZES = (2, 10, 50, 100, 300, 1000)
COMMIT_WINDOW_S = 2.0
# A member's heartbeat interval: librdkafka's default is 3 s; at (f)'s 100 ms a group of
# 1 000 sends 10 000 heartbeats/s through one actor, and the chart would show that load.
HEARTBEAT_S = 1.0


@dataclass
class Row:
    size: int
    rebalance_s: float
    coordinator_s: float
    commit_p50_ms: float
    commit_p99_ms: float


async def _commit_latencies(bootstrap: str, group: str, member: str, generation: int) -> array:
    conn = await Connection.open(bootstrap)
    latencies = array("d")
    try:
        await create_topic(conn, TOPIC, 1)
        nested = schema(OFFSET_COMMIT, conn.version(OFFSET_COMMIT))
        end = trio.current_time() + COMMIT_WINDOW_S
        offset = 0
        while (start := trio.current_time()) < end:
            offset += 1
            partition = make(
                nested.OffsetCommitRequestPartition,
                partition_index=0,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
            request = conn.request(
                OFFSET_COMMIT,
                group_id=group,
                generation_id_or_member_epoch=generation,
                member_id=member,
                group_instance_id=None,
                topics=(nested.OffsetCommitRequestTopic(name=TOPIC, partitions=(partition,)),),
            )
            answer = await conn.call(request)
            error = answer.topics[0].partitions[0].error_code
            if error != 0:
                raise RuntimeError(f"commit by a member of {group} failed: error {error}")
            latencies.append(trio.current_time() - start)
    finally:
        await conn.aclose()
    return latencies


async def _one(bootstrap: str, size: int) -> Row:
    fleet = Fleet(
        bootstrap,
        session_timeout_s=SESSION_S,
        rebalance_timeout_s=REBALANCE_S,
        heartbeat_interval_s=HEARTBEAT_S,
    )
    group = _prefix("chart")
    tracker = fleet.add_group(group, size, max(size, 1))
    async with fleet_running(fleet, connect_timeout=60):
        if not await fleet.wait_stable(60):
            raise TimeoutError(f"{size} members not Stable within 60 s")
        committer = fleet.members[0]
        latencies = await _commit_latencies(
            bootstrap, group, committer.member_id, committer.generation
        )
        leavers = [m for m in fleet.members if not m.is_leader and m is not committer]
        leaver = random.choice(leavers or fleet.members)
        fleet.last_join_sent = 0.0
        leaver.leave()
        with trio.fail_after(REBALANCE_S + 30):
            await tracker.stable.wait()
        assert leaver.left_at is not None
        total = tracker.stable_at - leaver.left_at
        coordinator = tracker.stable_at - max(fleet.last_join_sent, leaver.left_at)
    return Row(
        size, total, coordinator, percentile(latencies, 50) * 1e3, percentile(latencies, 99) * 1e3
    )


def sweep(target: Target, sizes: Sequence[int], runs: int) -> list[Row]:
    """Median over `runs` of each figure, per size."""
    rows = []
    for size in sizes:
        measured = [trio.run(_one, target.bootstrap, size) for _ in range(runs)]
        rows.append(
            Row(
                size,
                *(
                    statistics.median(getattr(m, name) for m in measured)
                    for name in ("rebalance_s", "coordinator_s", "commit_p50_ms", "commit_p99_ms")
                ),
            )
        )
        print(f"size {size}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def draw(rows: Sequence[Row], png: str, subtitle: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r.size for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.plot(sizes, [r.rebalance_s for r in rows], "o-", label="rebalance after one leaves")
    left.plot(sizes, [r.coordinator_s for r in rows], "s--", label="of which coordinator")
    left.set(xscale="log", xlabel="members in the group", ylabel="seconds")
    left.set_title(f"Rebalance time (members heartbeat every {HEARTBEAT_S:g} s)")
    right.plot(sizes, [r.commit_p50_ms for r in rows], "o-", label="p50")
    right.plot(sizes, [r.commit_p99_ms for r in rows], "s--", label="p99")
    right.set(xscale="log", xlabel="members in the group", ylabel="milliseconds")
    right.set_title("OffsetCommit latency of one member")
    for axes in (left, right):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
        axes.set_ylim(bottom=0)
    fig.suptitle(subtitle, fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rafka_actors.bench.chart")
    parser.add_argument("--bootstrap")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--png", default="group-size.png")
    parser.add_argument("-o", dest="settings", action="append", default=[])
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.monotonic()
    if args.bootstrap:
        rows = sweep(Target("external", args.bootstrap), sizes, args.runs)
    else:
        settings = ("group.initial.rebalance.delay.ms=100", *args.settings)
        with running(Broker("rafka-actors", "rafka-actors", settings)) as target:
            rows = sweep(target, sizes, args.runs)
    command = "python -m rafka_actors.bench.chart " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    took = time.monotonic() - started
    subtitle = (
        f"rafka-actors, {datetime.date.today()}, {os.cpu_count()} cores shared with the load "
        f"generator; median of {args.runs} runs; `{command}`"
    )
    print(f"# {command}  ({took:.0f} s)")
    print("| members | rebalance s | of which coordinator s | commit p50 ms | commit p99 ms |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.size} | {r.rebalance_s:.3f} | {r.coordinator_s:.3f} | "
            f"{r.commit_p50_ms:.2f} | {r.commit_p99_ms:.2f} |"
        )
    draw(rows, args.png, subtitle)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Rebalance time and commit latency against group size (the chart of docs/performance.md).

For each group size N, one run is: N classic members (the direct-protocol load generator,
`fleet.Fleet`, heartbeating every `HEARTBEAT_S`) start together and form a Stable group;
after one heartbeat interval (so heartbeats are spread out, as in a group that has lived a
while) the leader times generation-checked OffsetCommits (its own member id and generation,
one partition, the next request sent as soon as the last is answered) for a window while the
other members keep heartbeating; then one other member leaves and we time the rebalance.

- rebalance: LeaveGroup sent -> the last remaining member holds its assignment of the new
  generation. Members learn of the rebalance on their next heartbeat, so up to `HEARTBEAT_S`
  of it is the clients' share; the coordinator's share is the rest, from the last member's
  JoinGroup sent (workload f's split). With N = 1 nobody is left to rebalance, so the figure
  is the lone member's join instead: first JoinGroup sent -> its assignment received (two
  JoinGroups, as MEMBER_ID_REQUIRED asks, and a SyncGroup), all of it the coordinator's.
- join: the N members start together (all connected) -> all hold an assignment.
- commits go on a connection of their own: a member's connection is its heartbeat loop's.

Each figure is the median over the runs that completed; a run that failed (a timeout, an
error from the broker) is logged and left out, and `SweepRow.runs` counts the good ones.

    python -m rafka_actors.bench.sweep [--bootstrap HOST:PORT] [--sizes 1,10,50,100,300,1000]
        [--runs 3] [--quick] [--png FILE] [--csv FILE] [-o KEY=VALUE ...]

Without --bootstrap it starts rafka-actors on a free port with a temporary data dir and
`group.initial.rebalance.delay.ms=0` (then any -o settings).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import logging
import os
import random
import shlex
import statistics
import sys
import time
from array import array
from collections.abc import Sequence

import trio

from . import brokers
from .chart import chart
from .fleet import Fleet, GroupTracker, Member, running
from .loadgen import Connection, LoadgenError, create_topic, percentile
from .scale_workloads import REBALANCE_S, SESSION_S, TOPIC, _commit, _prefix, _why
from .sweep_row import SweepRow

log = logging.getLogger(__name__)

SIZES, QUICK_SIZES = (1, 10, 50, 100, 300, 1000), (1, 5, 20)
WINDOW_S, QUICK_WINDOW_S = 2.0, 1.0
# librdkafka's default is 3 s; at workload f's 100 ms a group of 1 000 would send 10 000
# heartbeats/s through one group actor, and the commit figures would show that load instead.
HEARTBEAT_S = 1.0
STABLE_S = 60.0
SETTINGS = ("group.initial.rebalance.delay.ms=0",)
_NO_RETENTION = datetime.timedelta(milliseconds=-1)
_MEASURED = ("join_s", "rebalance_s", "coordinator_s", "commit_p50_ms", "commit_p99_ms", "commits")


def sweep(
    bootstrap: str, sizes: Sequence[int], runs: int, *, window_s: float = WINDOW_S
) -> list[SweepRow]:
    """One row per size: the median of each figure over `runs` runs against `bootstrap`."""
    rows = []
    for size in sizes:
        measured = []
        for run in range(runs):
            try:
                measured.append(trio.run(_one, bootstrap, size, window_s))
            except Exception as exc:
                log.warning("size %d, run %d failed: %s", size, run + 1, _why(exc))
                continue
            shown = ", ".join(f"{k} {v:.4g}" for k, v in measured[-1].items())
            print(f"size {size}, run {run + 1}: {shown}", file=sys.stderr, flush=True)
        medians = {
            k: statistics.median(m[k] for m in measured) if measured else None for k in _MEASURED
        }
        rows.append(SweepRow(size, runs=len(measured), **medians))
    return rows


async def _one(bootstrap: str, size: int, window_s: float) -> dict[str, float]:
    fleet = Fleet(
        bootstrap,
        session_timeout_s=SESSION_S,
        rebalance_timeout_s=REBALANCE_S,
        heartbeat_interval_s=HEARTBEAT_S,
    )
    tracker = fleet.add_group(_prefix("sweep"), size)
    got: dict[str, float] = {}
    async with running(fleet, connect_timeout=60):
        if not await fleet.wait_stable(STABLE_S):
            raise LoadgenError(f"{size} members not Stable within {STABLE_S:g} s")
        got["join_s"] = tracker.stable_at - fleet.started_at
        lone_join = tracker.stable_at - fleet.last_join_sent
        committer = next(m for m in fleet.members if m.is_leader)
        await trio.sleep(HEARTBEAT_S)
        latencies = await _commits(bootstrap, tracker, committer, window_s)
        got["commit_p50_ms"] = percentile(latencies, 50) * 1000
        got["commit_p99_ms"] = percentile(latencies, 99) * 1000
        got["commits"] = len(latencies)
        if size == 1:
            got["rebalance_s"] = got["coordinator_s"] = lone_join
        else:
            got["rebalance_s"], got["coordinator_s"] = await _one_leaves(fleet, tracker, committer)
        if tracker.bad_assignments:
            raise LoadgenError(f"{tracker.name}: an assignment was not disjoint and complete")
    return got


async def _commits(
    bootstrap: str, tracker: GroupTracker, member: Member, window_s: float
) -> array[float]:
    """Seconds per OffsetCommit of `member` (its id and generation), back to back."""
    conn = await Connection.open(bootstrap)
    latencies = array("d")
    try:
        await create_topic(conn, TOPIC, 1)
        member_id, generation = member.member_id, member.generation
        offset, end = 0, trio.current_time() + window_s
        while (start := trio.current_time()) < end:
            offset += 1
            request = _commit(
                conn, tracker.name, offset, member_id=member_id, generation=generation
            )
            code = (await conn.call(request)).topics[0].partitions[0].error_code
            if code != 0:
                raise LoadgenError(f"{tracker.name}: a member's OffsetCommit failed: {code.name}")
            latencies.append(trio.current_time() - start)
    finally:
        await conn.aclose()
    return latencies


async def _one_leaves(fleet: Fleet, tracker: GroupTracker, stays: Member) -> tuple[float, float]:
    """(total, coordinator's share) of the rebalance after a member other than `stays` left."""
    leaver = random.choice([m for m in fleet.members if m is not stays])
    fleet.last_join_sent = 0.0
    leaver.leave()
    with trio.move_on_after(REBALANCE_S + 30):
        await tracker.stable.wait()
    if not tracker.stable.is_set() or leaver.left_at is None:
        raise LoadgenError(f"{tracker.expected} members did not rebalance after one left")
    total = tracker.stable_at - leaver.left_at
    return total, tracker.stable_at - max(fleet.last_join_sent, leaver.left_at)


def write_csv(rows: Sequence[SweepRow], path: str) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(field.name for field in dataclasses.fields(SweepRow))
        for row in rows:
            writer.writerow("" if v is None else v for v in dataclasses.astuple(row))


def table(rows: Sequence[SweepRow]) -> str:
    def cell(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [
        "| members | join s | rebalance s | of which coordinator s "
        "| commit p50 ms | commit p99 ms | commits | runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        size = f"{r.size}*" if r.size == 1 else str(r.size)
        figures = [cell(r.join_s, 3), cell(r.rebalance_s, 3), cell(r.coordinator_s, 3)]
        figures += [cell(r.commit_p50_ms, 2), cell(r.commit_p99_ms, 2), cell(r.commits, 0)]
        lines.append(f"| {size} | {' | '.join(figures)} | {r.runs} |")
    if any(r.size == 1 for r in rows):
        lines.append(
            "\n\\* one member: the rebalance is its own join (nobody is left to rebalance)"
        )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rafka_actors.bench.sweep", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--bootstrap", help="a running broker (default: start rafka-actors)")
    parser.add_argument("--sizes", help=f"group sizes (default {','.join(map(str, SIZES))})")
    parser.add_argument("--runs", type=int, help="runs per size, median shown (default 3)")
    parser.add_argument("--quick", action="store_true", help="sizes 1,5,20, a 1 s window, 1 run")
    parser.add_argument("--png", help="write the chart here")
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("-o", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    sizes = sizes or list(QUICK_SIZES if args.quick else SIZES)
    runs = args.runs or (1 if args.quick else 3)
    window = QUICK_WINDOW_S if args.quick else WINDOW_S
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = shlex.join(
        ["python", "-m", "rafka_actors.bench.sweep", *(sys.argv[1:] if argv is None else argv)]
    )
    load_before, started = os.getloadavg(), time.monotonic()
    if args.bootstrap:
        where = args.bootstrap
        rows = sweep(args.bootstrap, sizes, runs, window_s=window)
    else:
        settings = (*SETTINGS, *args.settings)
        where = f"rafka-actors -o {' -o '.join(settings)}"
        with brokers.running(brokers.Broker("rafka-actors", "rafka-actors", settings)) as target:
            rows = sweep(target.bootstrap, sizes, runs, window_s=window)
    took, load_after = time.monotonic() - started, os.getloadavg()
    print(table(rows))
    print(f"\n$ {command}")
    print(
        f"# {where}; {os.cpu_count()} cores shared by the broker and the load generator; "
        f"members heartbeat every {HEARTBEAT_S:g} s; commit window {window:g} s; median of "
        f"{runs} runs; wall {took:.0f} s; load average {_load(load_before)} before, "
        f"{_load(load_after)} after"
    )
    if args.csv:
        write_csv(rows, args.csv)
    if args.png:
        title = "rafka-actors: rebalance time and commit latency against group size"
        chart(
            rows,
            args.png,
            title,
            note=f"members heartbeat every {HEARTBEAT_S:g} s; median of {runs} runs; {command}",
        )
    return 0 if all(r.runs for r in rows) else 1


def _load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    sys.exit(main())

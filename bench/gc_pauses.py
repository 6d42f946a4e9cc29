"""The cycle collector's pauses with many groups, for each set of collector thresholds.

In process and in one trio task, as `handler_cost.py` does (the gateway's `answer`, the group
registry, the durable coordinator log in a temp dir under fsync `never`): commit once to each
of --groups new groups, then --rounds rounds of 5 000 OffsetFetches of random groups, 0.7 s
apart, so that the passivation sweep (`group.passivation.idle.ms`, here 2 s) drops resting
groups and the fetches rebuild them, as in (g) of `bench/run.py`. `gc.callbacks` time
every collection. Each thresholds setting runs in a fresh child process (the collector's
state is the process's), one after another; the first is the broker's (`gc_policy.py`).

    .venv/bin/python bench/gc_pauses.py [--groups 100000] [--rounds 8]
        [--thresholds 50000,20,10 --thresholds 10000,20,50 ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")  # as handler_cost.py

import trio

from rafka_actors import gc_policy

sys.path.insert(0, str(Path(__file__).parent))
from handler_cost import (  # the same broker parts as the in-process bench
    API_TABLE,
    TOPIC,
    answer,
    encode_request,
    in_process_broker,
)
from request_cost import request

FETCHES_PER_ROUND = 5_000


class Pauses:
    """The collections' durations (ms) by generation, since the last `take`."""

    def __init__(self) -> None:
        self._start = 0.0
        self._by_gen: dict[int, list[float]] = {0: [], 1: [], 2: []}
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self._by_gen[info["generation"]].append((time.perf_counter() - self._start) * 1e3)

    def take(self) -> dict[int, list[float]]:
        taken = self._by_gen
        self._by_gen = {0: [], 1: [], 2: []}
        return taken


async def _measure(data_dir: Path, groups: int, rounds: int) -> dict[str, object]:
    pauses = Pauses()
    async with in_process_broker(data_dir, "never", passivate_after_s=2) as (ctx, conn):
        gc_policy.serving()  # as the broker once it listens: start-up state frozen
        start = time.perf_counter()
        for i in range(groups):
            frame = encode_request(request("commit", f"g-{i}", TOPIC), 1, "bench")[4:]
            await answer(frame, ctx, API_TABLE, conn)
        creating = time.perf_counter() - start, pauses.take()
        fetching, slowest = [], []
        for _ in range(rounds):
            await trio.sleep(0.7)
            pauses.take()  # (collections while asleep delay no request)
            worst = 0.0
            for _ in range(FETCHES_PER_ROUND):
                group = f"g-{random.randrange(groups)}"
                frame = encode_request(request("fetch", group, TOPIC), 1, "bench")[4:]
                begun = time.perf_counter()
                await answer(frame, ctx, API_TABLE, conn)
                worst = max(worst, time.perf_counter() - begun)
            fetching.append(pauses.take())
            slowest.append(worst * 1e3)
    by_gen = {g: [ms for r in fetching for ms in r[g]] for g in (0, 1, 2)}
    return {
        "create_s": creating[0],
        "create_pauses": {g: _summary(v) for g, v in creating[1].items()},
        "fetch_pauses": {g: _summary(v) for g, v in by_gen.items()},
        "slowest_fetch_ms": max(slowest),
    }


def _summary(pauses: list[float]) -> str:
    if not pauses:
        return "-"
    return f"{len(pauses)} x, max {max(pauses):.1f} ms"


def _child(thresholds: str, groups: int, rounds: int) -> None:
    gc_policy.THRESHOLDS = tuple(int(x) for x in thresholds.split(","))  # type: ignore[assignment]
    gc_policy.starting()
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(trio.run(_measure, Path(tmp), groups, rounds)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--thresholds", action="append", help="young,middle,full (repeatable)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.groups, args.rounds)
        return 0
    print(f"# {shlex.join(['bench/gc_pauses.py', *sys.argv[1:]])}")
    settings = args.thresholds or [",".join(map(str, gc_policy.THRESHOLDS)), "700,10,10"]
    for setting in settings:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                setting,
                "--groups",
                str(args.groups),
                "--rounds",
                str(args.rounds),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        got = json.loads(out.splitlines()[-1])
        create, fetch = got["create_pauses"], got["fetch_pauses"]
        print(
            f"thresholds {setting}: {args.groups:,} groups created in {got['create_s']:.2f} s "
            f"(young {create['0']}; middle {create['1']}; full {create['2']}); "
            f"{args.rounds} rounds of {FETCHES_PER_ROUND:,} fetches: young {fetch['0']}; "
            f"middle {fetch['1']}; full {fetch['2']}; "
            f"slowest fetch {got['slowest_fetch_ms']:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

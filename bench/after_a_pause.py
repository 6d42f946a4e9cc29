"""OffsetFetch latency right after a pause: does a broker that has been idle hold up its client?

One synchronous client (the bench's own, on one connection per round) fetches a random
group's committed offset 1 000 times a round. The rounds follow each other at once or after a
pause, during which the broker has nothing to do and sleeps in epoll_wait. Per round: p50 and
p99 latency, how many fetches took over 0.15 ms, and in which hundred of the round they fell.
Brokers take turns round by round, so a drift of the machine shows in every broker's rounds.

It was written for the broker's idle polling (`idle.poll.time.us`, session 23): on the 2-core
machine a pause of a second or more made the kernel wake the client on the broker's core for
a while, where the broker, still polling after each reply, kept it waiting (a quarter of the
round's first 500 fetches took 0.15-0.25 ms). It measures only what a client sees over the
wire, so it applies to any broker of `--brokers`, with or without such polling.

    .venv/bin/python bench/after_a_pause.py [--brokers 'rafka-actors,noida-db']
        [--groups 100000] [--pauses 0,0,1,0,0.2,0,2,0]
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time

import trio

from harness.brokers import parse_brokers, running, split_broker_list
from harness.scale_workloads import commit_all, fetch_random

FETCHES = 1_000
SLOW_MS = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="rafka-actors,noida-db")
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--pauses", default="0,0,1,0,0.2,0,2,0", help="seconds before each round")
    args = parser.parse_args()
    pauses = [float(p) for p in args.pauses.split(",")]
    brokers = parse_brokers(split_broker_list(args.brokers), [])
    print(f"# {shlex.join(['bench/after_a_pause.py', *sys.argv[1:]])}", flush=True)
    with contextlib.ExitStack() as stack:
        targets = [(b.name, stack.enter_context(running(b))) for b in brokers]
        for name, target in targets:
            started = time.perf_counter()
            trio.run(commit_all, target.bootstrap, "p", args.groups)
            print(f"{name}: {args.groups} groups in {time.perf_counter() - started:.1f} s")
        for pause in pauses:
            for name, target in targets:
                time.sleep(pause)  # every broker sits idle for the pause before its round
                latencies = trio.run(fetch_random, target.bootstrap, "p", args.groups, FETCHES)
                print(_round(name, pause, [s * 1000 for s in latencies]), flush=True)


def _round(name: str, pause: float, ms: list[float]) -> str:
    ordered = sorted(ms)
    slow = [i for i, x in enumerate(ms) if x > SLOW_MS]
    by_hundred = [sum(1 for i in slow if i // 100 == k) for k in range(len(ms) // 100)]
    return (
        f"{name:<14} after {pause:>3} s: p50 {ordered[len(ms) // 2]:.3f} ms, "
        f"p99 {ordered[len(ms) * 99 // 100]:.3f} ms, {len(slow)} over {SLOW_MS} ms, "
        f"by hundred {by_hundred}"
    )


if __name__ == "__main__":
    main()

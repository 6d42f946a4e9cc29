"""Would a second broker process raise the 16-client commit rate on this machine?

Issue 8 asks for stateless gateway processes in front of the coordinator if one core is the
limit. Under (c)'s 16 synchronous committers it is: the broker uses a whole core. This
measures the most such a split could give, with no hop between processes at all: the same 16
confluent-kafka committers (threads of this process, each in its own group, as in (c)) against
one broker, then split 8 + 8 between two independent brokers, alternating, so that each
process does half of every request's work. If two whole brokers take no more commits/s than
one, gateway processes (which add a hop to every request) cannot either.

    .venv/bin/python bench/split_brokers.py [--rounds 3] [--seconds 5] [--clients 16]
        [-o KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from contextlib import ExitStack

from harness.brokers import Broker, running
from harness.consumer_workloads import aggregate_commits, create_topic
from harness.core import Target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("-o", dest="settings", action="append", default=[])
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/split_brokers.py', *sys.argv[1:]])}")
    broker = Broker("rafka-actors", "rafka-actors", tuple(args.settings))
    with ExitStack() as stack:
        targets: list[Target] = [stack.enter_context(running(broker)) for _ in range(2)]
        places = [(target, create_topic(target, 1)) for target in targets]
        rates: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(args.rounds):
            for brokers in (1, 2):
                rate = aggregate_commits(places[:brokers], args.clients, args.seconds)
                rates[brokers].append(rate)
                print(f"  {brokers} broker(s): {rate:,.0f} commits/s", flush=True)
    one, two = (statistics.median(rates[n]) for n in (1, 2))
    print(
        f"{args.clients} committers: one broker {one:,.0f}/s, two brokers {two:,.0f}/s "
        f"(medians of {args.rounds}): two/one = {two / one:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

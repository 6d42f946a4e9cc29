"""What the metrics endpoint costs: heartbeats/s and commits/s with metrics off and on.

Two rafka-actors brokers are started, one with `metrics.listen` (and a scraper reading it
every second, as Prometheus would, so the scrape-time gauges are paid for too) and one
without; their rounds alternate (off, on, off, on, ...) so that a machine whose speed drifts
during the run treats both alike. Each round, `--clients` processes replay one pre-encoded
request as fast as the broker answers (bench/request_cost.py's replay): a classic member's
Heartbeat (each client its own group, joined and synced first), or a simple OffsetCommit.
The figures are the medians over `--rounds`, side by side, with the cost in percent. The
coordinator log runs with `coordinator.log.fsync=interval`: with `always`, the fsync per batch
is most of a commit's time and varies more than the cost measured here.

    .venv/bin/python bench/metrics_cost.py [--clients 4] [--seconds 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from harness.brokers import Broker, free_port, running
from harness.consumer_workloads import create_topic
from harness.core import Target
from rafka_actors.protocol.codec import encode_request
from request_cost import heartbeat_frame, replay, request

# fsync=interval: an fsync per commit batch (always) varies more than what is measured here
SETTINGS = ("group.initial.rebalance.delay.ms=0", "coordinator.log.fsync=interval")


@contextmanager
def scraped(url: str | None) -> Iterator[list[int]]:
    """Scrape `url` every second meanwhile (as Prometheus does); yields the scrapes' sizes."""
    sizes: list[int] = []
    if url is None:
        yield sizes
        return
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(1.0):
            with urllib.request.urlopen(url, timeout=10) as answer:
                sizes.append(len(answer.read()))

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    try:
        yield sizes
    finally:
        stop.set()
        thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4, help="at once, one group each")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/metrics_cost.py', *sys.argv[1:]])}")
    metrics_port = free_port()
    variants = {
        "off": Broker("off", "rafka-actors", SETTINGS),
        "on": Broker("on", "rafka-actors", (*SETTINGS, f"metrics.listen=127.0.0.1:{metrics_port}")),
    }
    urls = {"off": None, "on": f"http://127.0.0.1:{metrics_port}/metrics"}
    with ExitStack() as stack:
        targets: dict[str, Target] = {
            name: stack.enter_context(running(broker)) for name, broker in variants.items()
        }
        frames: dict[tuple[str, str], list[bytes]] = {}
        for name, target in targets.items():
            topic = create_topic(target, 1)
            frames[(name, "commits/s")] = [
                encode_request(request("commit", f"cost-commit-{i}", topic), 1, "bench")
                for i in range(args.clients)
            ]
            frames[(name, "heartbeats/s")] = [
                heartbeat_frame(target.bootstrap, f"cost-beat-{i}") for i in range(args.clients)
            ]
        rates: dict[tuple[str, str], list[float]] = {key: [] for key in frames}
        cpu: dict[tuple[str, str], list[float]] = {key: [] for key in frames}
        scrapes: list[int] = []
        for round_ in range(args.rounds):
            order = list(targets.items())[:: 1 if round_ % 2 == 0 else -1]
            for figure in ("heartbeats/s", "commits/s"):
                for name, target in order:
                    assert target.pid is not None
                    with scraped(urls[name]) as sizes:
                        rate, us = replay(
                            target.bootstrap, target.pid, frames[(name, figure)], args.seconds
                        )
                    rates[(name, figure)].append(rate)
                    cpu[(name, figure)].append(us)
                    scrapes += sizes
    print(f"{args.clients} clients, {args.rounds} rounds of {args.seconds:g}s, medians")
    print(f"{'figure':30} {'metrics off':>12} {'metrics on':>12} {'cost':>7}")
    for figure in ("heartbeats/s", "commits/s"):
        for label, values, worse in ((figure, rates, -1), ("  broker CPU us/request", cpu, 1)):
            off = statistics.median(values[("off", figure)])
            on = statistics.median(values[("on", figure)])
            cost = 100 * worse * (on - off) / off
            print(f"{label:30} {off:12,.1f} {on:12,.1f} {cost:6.1f}%")
    for key in sorted(rates):
        print(f"# {key}: " + " ".join(f"{r:,.0f}" for r in rates[key]))
    if scrapes:
        print(f"scrapes while measuring: {len(scrapes)}, {statistics.median(scrapes)} bytes each")
    return 0


if __name__ == "__main__":
    sys.exit(main())

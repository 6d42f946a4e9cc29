"""Quick figures for the data plane and the group coordinator, through confluent-kafka.

Starts `rafka-actors serve` on a free port with a temporary data dir (or uses --bootstrap),
then measures, over --runs runs: produce throughput (acks=all), fetch throughput, time from
subscribe to first assignment, synchronous commits/s and committed() (OffsetFetch) calls/s.
Prints min/median/max per figure, the core count and the command that made them. The full
suite against peer brokers is issue 8's `bench/run.py`.

    .venv/bin/python bench/quick.py [--bootstrap HOST:PORT] [--runs 3] [--records 50000]
                                    [-o KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic


@contextmanager
def broker(bootstrap: str | None, overrides: list[str]) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory() as data:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rafka_actors",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                data,
                "-o",
                "group.initial.rebalance.delay.ms=0",
                *(arg for item in overrides for arg in ("-o", item)),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                found = re.search(r"listening on (\S+:\d+)", line)
                if found:
                    # keep draining the broker's log so a full pipe never blocks it
                    threading.Thread(target=proc.stderr.read, daemon=True).start()
                    yield found.group(1)
                    break
        finally:
            proc.terminate()
            proc.wait(10)


def produce(bootstrap: str, topic: str, records: int) -> float:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    )
    value = b"x" * 100
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, str(i).encode())
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)
    return records / (time.perf_counter() - start)


def fetch(bootstrap: str, topic: str, records: int) -> float:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False}
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(6)
        ]
    )
    start, seen = time.perf_counter(), 0
    while seen < records and time.perf_counter() - start < 60:
        seen += len([m for m in consumer.consume(1000, 0.5) if not m.error()])
    elapsed = time.perf_counter() - start
    consumer.close()
    return seen / elapsed


def group_figures(bootstrap: str, topic: str, seconds: float = 2.0) -> tuple[float, float, float]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    start = time.perf_counter()
    consumer.subscribe([topic])
    while not consumer.assignment() and time.perf_counter() - start < 30:
        consumer.poll(0.01)
    first_assignment = time.perf_counter() - start
    parts = [confluent_kafka.TopicPartition(topic, 0, 1)]
    commits = _rate(lambda: consumer.commit(offsets=parts, asynchronous=False), seconds)
    fetches = _rate(lambda: consumer.committed(parts, timeout=10), seconds)
    consumer.close()
    return first_assignment, commits, fetches


def _rate(call: Callable[[], object], seconds: float) -> float:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        count += 1
    return count / (time.perf_counter() - start)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--bootstrap")
    args.add_argument("--runs", type=int, default=3)
    args.add_argument("--records", type=int, default=50_000)
    args.add_argument(
        "-o",
        dest="overrides",
        action="append",
        default=[],
        help="broker setting KEY=VALUE, e.g. -o coordinator.log.fsync=interval",
    )
    opts = args.parse_args()
    figures: dict[str, list[float]] = {}
    with broker(opts.bootstrap, opts.overrides) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for run in range(opts.runs):
            topic = f"bench-{run}-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
            figures.setdefault("produce records/s", []).append(
                produce(bootstrap, topic, opts.records)
            )
            figures.setdefault("fetch records/s", []).append(fetch(bootstrap, topic, opts.records))
            first, commits, fetches = group_figures(bootstrap, topic)
            figures.setdefault("subscribe -> first assignment s", []).append(first)
            figures.setdefault("sync commits/s (1 client)", []).append(commits)
            figures.setdefault("committed() calls/s", []).append(fetches)
    print(f"cores: {os.cpu_count()}  runs: {opts.runs}  command: {' '.join(sys.argv)}")
    for name, values in figures.items():
        print(
            f"{name:36} min {min(values):12.3f}  median {statistics.median(values):12.3f}"
            f"  max {max(values):12.3f}"
        )


if __name__ == "__main__":
    main()

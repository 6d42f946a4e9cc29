"""Share groups (KIP-932): records acknowledged per second on one partition.

Starts `rafka-actors serve` (tests/broker_process.py's BrokerProcess on 127.0.0.1:0, temporary
data dir, `share.auto.offset.reset=earliest`), produces --records small records into a topic
of one partition, then, --runs times each, with a fresh group every time, measures:

* "share, 1 consumer": one confluent-kafka ShareConsumer in implicit acknowledgement mode,
  `commit_sync()` after every poll (so every record is acknowledged, and stored, before the
  next poll); records/s from the first poll until the broker has accepted every record;
* "share, 4 consumers": the same with four ShareConsumers in one group (one thread each);
* "classic, 1 consumer": one classic-group Consumer reading the same topic, committing its
  offset synchronously after every batch of up to max.poll.records (500) messages.

Every run checks that each record was received (share: exactly once overall). The share
consumers use librdkafka's defaults (max.poll.records 500). Progress goes to stderr; the table
and the command that produced it go to stdout.

    .venv/bin/python bench/share_groups.py [--records 20000] [--runs 3] [-o KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.broker_process import BrokerProcess

TOPIC = "share-bench"
BATCH = 500


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def produce(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(records):
        producer.produce(TOPIC, b"%08d" % i)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("records left unsent")


def share_run(bootstrap: str, records: int, consumers: int, timeout: float) -> float:
    """Seconds until `consumers` share consumers have accepted every record once."""
    group = f"share-{uuid.uuid4().hex[:8]}"
    seen: list[list[int]] = [[] for _ in range(consumers)]
    done = threading.Event()
    started = threading.Barrier(consumers + 1)
    errors: list[BaseException] = []

    def consume(index: int) -> None:
        consumer = confluent_kafka.ShareConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group}
        )
        try:
            consumer.subscribe([TOPIC])
            started.wait()
            while not done.is_set():
                for message in consumer.poll(0.2):
                    offset = message.offset()
                    if message.error() is None and offset is not None:
                        seen[index].append(offset)
                consumer.commit_sync()
        except BaseException as exc:
            errors.append(exc)
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for thread in threads:
        thread.start()
    started.wait()
    start = time.perf_counter()
    deadline = time.monotonic() + timeout
    while sum(map(len, seen)) < records and time.monotonic() < deadline:
        time.sleep(0.005)
    elapsed = time.perf_counter() - start
    done.set()
    for thread in threads:
        thread.join(30)
    offsets = sorted(o for each in seen for o in each)
    if errors or offsets != list(range(records)):
        raise RuntimeError(f"share run with {consumers}: {len(offsets)} records, {errors[:3]}")
    return elapsed


def classic_run(bootstrap: str, records: int, timeout: float) -> float:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"classic-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    got = 0
    start = None
    deadline = time.monotonic() + timeout
    try:
        while got < records and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(BATCH, 0.2) if m.error() is None]
            if batch and start is None:
                start = time.perf_counter()
            got += len(batch)
            if batch:
                consumer.commit(asynchronous=False)
        elapsed = time.perf_counter() - (start or time.perf_counter())
    finally:
        consumer.close()
    if got != records:
        raise RuntimeError(f"classic run: {got} of {records} records")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("-o", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    settings = ["share.auto.offset.reset=earliest", *args.overrides]
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as data_dir:
        broker = BrokerProcess(Path(data_dir), *settings).start()
        try:
            produce(broker.bootstrap, args.records)
            for run in range(1, args.runs + 1):
                for name, measure in (
                    (
                        "share, 1 consumer",
                        lambda: share_run(broker.bootstrap, args.records, 1, args.timeout),
                    ),
                    (
                        "share, 4 consumers",
                        lambda: share_run(broker.bootstrap, args.records, 4, args.timeout),
                    ),
                    (
                        "classic, 1 consumer",
                        lambda: classic_run(broker.bootstrap, args.records, args.timeout),
                    ),
                ):
                    seconds = measure()
                    figures.setdefault(name, []).append(args.records / seconds)
                    log(f"run {run}: {name}: {args.records / seconds:,.0f} records/s")
        finally:
            broker.stop()
    print("    " + shlex.join(["bench/share_groups.py", *sys.argv[1:]]))
    print()
    print("| workload | records/s acknowledged (median) | runs |")
    print("|---|---|---|")
    for name, values in figures.items():
        runs = ", ".join(f"{v:,.0f}" for v in values)
        print(f"| {name} | {statistics.median(values):,.0f} | {runs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Transactions/s: one confluent-kafka producer committing transactions of 10 records each.

Each broker of `--brokers` (see harness/brokers.py) is started on a temporary data dir; one
transactional producer (`transactional.id`, acks=all, linger 0) runs `--transactions`
transactions after a warm-up, each with `--records` records of `--size` bytes to one
partition, every commit acknowledged before the next transaction begins. The figure is the
median of `--rounds` rounds; every round's output is checked afterwards by a read_committed
consumer (the count of committed records must match). A broker that does not serve
transactions is reported as such (`init_transactions` fails). With `--offsets`, each
transaction also sends an offset to a group (`send_offsets_to_transaction`), as
consume-transform-produce does, so its end writes a group marker beside the partition's.

    .venv/bin/python bench/transactions.py [--brokers rafka-actors,noida-db,tansu]
        [--transactions 300] [--records 10] [--size 100] [--rounds 3] [--offsets]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from harness.brokers import BrokerUnavailable, parse_brokers, running, split_broker_list
from harness.consumer_workloads import create_topic
from harness.core import Target

WARM_UP = 20
TIMEOUT_S = 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="rafka-actors,noida-db,tansu")
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--records", type=int, default=10, help="per transaction")
    parser.add_argument("--size", type=int, default=100, help="bytes per record")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--offsets", action="store_true", help="send offsets to a group too")
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/transactions.py', *sys.argv[1:]])}")
    print("| broker | transactions/s (median) | rounds | records/s |")
    print("|---|---|---|---|")
    for broker in parse_brokers(split_broker_list(args.brokers), []):
        try:
            with running(broker) as target:
                rates = [
                    one_round(target, n, args.transactions, args.records, args.size, args.offsets)
                    for n in range(args.rounds)
                ]
        except BrokerUnavailable as exc:
            print(f"| {broker.name} | not run: {exc} | | |")
            continue
        except KafkaException as exc:
            print(f"| {broker.name} | transactions not served: {exc.args[0].str()} | | |")
            continue
        median = statistics.median(rates)
        shown = ", ".join(f"{r:.0f}" for r in rates)
        print(f"| {broker.name} | {median:.0f} | {shown} | {median * args.records:.0f} |")
    return 0


def one_round(
    target: Target, n: int, transactions: int, records: int, size: int, offsets: bool
) -> float:
    topic = create_topic(target, 1)
    group = Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"bench-copier-{n}"})
    sent = 0
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "transactional.id": f"bench-{n}-{time.monotonic_ns()}",
            "linger.ms": 0,
        }
    )
    producer.init_transactions(TIMEOUT_S)
    value = b"x" * size

    def transaction() -> None:
        nonlocal sent
        producer.begin_transaction()
        for _ in range(records):
            producer.produce(topic, value, partition=0)
        if offsets:
            sent += 1
            position = [TopicPartition(topic, 0, sent)]
            producer.send_offsets_to_transaction(
                position, group.consumer_group_metadata(), TIMEOUT_S
            )
        producer.commit_transaction(TIMEOUT_S)

    for _ in range(WARM_UP):
        transaction()
    started = time.perf_counter()
    for _ in range(transactions):
        transaction()
    rate = transactions / (time.perf_counter() - started)
    group.close()
    committed = _committed_records(target, topic)
    expected = (WARM_UP + transactions) * records
    if committed != expected:
        raise SystemExit(f"{target.name}: {committed} committed records, expected {expected}")
    return rate


def _committed_records(target: Target, topic: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": "bench-check",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    count, deadline = 0, time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    return count  # the end of the partition
                count += 1
    finally:
        consumer.close()
    return count


if __name__ == "__main__":
    sys.exit(main())

"""Kafka's transactional perf producer (kafka-producer-perf-test --transactional-id), a
read_committed Java console consumer, and kafka-transactions (list, describe, find-hanging,
abort) against our broker, each asserted on what it prints.

`kafka-transactions abort` sends WriteTxnMarkers (API 27) to the partition's leader: the
partition's transaction ends there, while its coordinator still holds it open. What follows is
what Kafka 4.3.1 does with the same steps (checked side by side)."""

from __future__ import annotations

import re

import confluent_kafka
import pytest

from ...broker_process import BrokerProcess
from ..committed_view import read_committed_view
from .peer import KafkaPeer

# a JVM start takes seconds on a loaded machine: more than the default 120 s a test
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

RECORDS = 2000


def test_the_transactional_perf_producer_commits_what_read_committed_reads(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    kafka_peer.ok("topics", *server, "--create", "--topic", "tx-perf", "--partitions", "2")
    sent = kafka_peer.ok(
        "producer-perf-test",
        "--topic",
        "tx-perf",
        "--num-records",
        str(RECORDS),
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--transactional-id",
        "perf-tx",
        "--transaction-duration-ms",
        "100",
        "--command-property",
        f"bootstrap.servers={rafka.bootstrap}",
    )
    assert re.search(rf"^{RECORDS} records sent, [\d.]+ records/sec", sent, re.M), sent
    read = kafka_peer.run(
        "console-consumer",
        *server,
        "--topic",
        "tx-perf",
        "--from-beginning",
        "--isolation-level",
        "read_committed",
        "--max-messages",
        str(RECORDS),
        "--timeout-ms",
        "30000",
        "--formatter",
        "org.apache.kafka.tools.consumer.NoOpMessageFormatter",
    )
    assert f"Processed a total of {RECORDS} messages" in read.stderr, read.explain()

    listed = kafka_peer.ok("transactions", *server, "list").splitlines()
    assert listed[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (row,) = [line.split() for line in listed[1:] if line.split()[:1] == ["perf-tx"]]
    assert row[1] == "0" and row[3] == "CompleteCommit"
    described = kafka_peer.ok(
        "transactions", *server, "describe", "--transactional-id", "perf-tx"
    ).splitlines()
    assert described[0].split()[:5] == [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
    ]
    fields = described[1].split()
    assert (fields[0], fields[1], fields[2], fields[4], fields[5]) == (
        "0",
        "perf-tx",
        row[2],
        "CompleteCommit",
        "60000",
    )
    hanging = kafka_peer.ok("transactions", *server, "find-hanging", "--broker-id", "0")
    assert hanging.splitlines() == [
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
        "LastTimestamp\tDuration(min)\t"
    ]


def open_transaction(bootstrap: str, transactional_id: str, topic: str) -> confluent_kafka.Producer:
    """A producer whose transaction holds two records (offsets 0 and 1 of partition 0)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=0)
    producer.produce(topic, b"y", partition=0)
    assert producer.flush(30) == 0
    return producer


def test_kafka_transactions_describes_an_open_transaction_and_its_producer(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    kafka_peer.ok("topics", *server, "--create", "--topic", "tx-open")
    producer = open_transaction(rafka.bootstrap, "open-tx", "tx-open")
    try:
        producers = kafka_peer.ok(
            "transactions", *server, "describe-producers", "--topic", "tx-open", "--partition", "0"
        ).splitlines()
        assert producers[0].split() == [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ]
        (producer_id, epoch, _, last_sequence, _, start) = producers[1].split()
        assert (epoch, last_sequence, start) == ("0", "1", "0")  # two records, from offset 0
        described = kafka_peer.ok(
            "transactions", *server, "describe", "--transactional-id", "open-tx"
        ).splitlines()
        fields = described[1].split()
        assert fields[:5] == ["0", "open-tx", producer_id, "0", "Ongoing"]
        assert fields[-1] == "tx-open-0"
    finally:
        producer.abort_transaction(30)


def test_kafka_transactions_abort_ends_an_open_transaction_in_its_partition(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    where = ("--topic", "tx-abort", "--partition", "0")
    kafka_peer.ok("topics", *server, "--create", "--topic", "tx-abort")
    producer = open_transaction(rafka.bootstrap, "abort-tx", "tx-abort")
    assert read_committed_view(rafka.bootstrap, "tx-abort") == ([0], [])  # held at its start

    kafka_peer.ok("transactions", *server, "abort", *where, "--start-offset", "0")

    # the partition wrote an ABORT marker (offset 2) and closed the transaction...
    assert read_committed_view(rafka.bootstrap, "tx-abort") == ([3], [])
    producers = kafka_peer.ok("transactions", *server, "describe-producers", *where)
    (_, epoch, coordinator_epoch, last_sequence, _, start) = producers.splitlines()[1].split()
    assert (epoch, coordinator_epoch, last_sequence, start) == ("0", "0", "1", "None")
    # ...while its coordinator still holds it open: the tool ends it in the partition only
    described = kafka_peer.ok("transactions", *server, "describe", "--transactional-id", "abort-tx")
    assert described.splitlines()[1].split()[4] == "Ongoing"
    # the producer carries on: its next record starts the partition's transaction again
    producer.produce("tx-abort", b"z")
    assert producer.flush(30) == 0
    producer.commit_transaction(30)
    assert read_committed_view(rafka.bootstrap, "tx-abort") == ([5], [b"z"])
    # the aborted start is not found again
    again = kafka_peer.run("transactions", *server, "abort", *where, "--start-offset", "0")
    assert again.returncode == 1, again.explain()
    assert "Could not find any open transactions starting at offset 0" in again.stderr

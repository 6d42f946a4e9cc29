"""Kafka's transactional perf producer (kafka-producer-perf-test --transactional-id), a
read_committed Java console consumer, and kafka-transactions (list, describe, find-hanging)
against our broker, each asserted on what it prints."""

from __future__ import annotations

import re

import confluent_kafka
import pytest

from ...broker_process import BrokerProcess
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


def test_kafka_transactions_describes_an_open_transaction_and_its_producer(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    kafka_peer.ok("topics", *server, "--create", "--topic", "tx-open")
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": rafka.bootstrap, "transactional.id": "open-tx"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("tx-open", b"x")
    producer.produce("tx-open", b"y")
    assert producer.flush(30) == 0
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

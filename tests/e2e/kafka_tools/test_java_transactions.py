"""Transactions v2 (KIP-890) and WriteTxnMarkers, checked with Kafka's own Java client and
tools (Apache Kafka 4.3.1, the Kafka peer: peer.py; skipped where Java is not present).

* The Java transactional producer (kafka-producer-perf-test with a transactional id) speaks
  the transaction version the broker finalizes: with `transaction.version=2` (the default)
  its debug log says so, it sends EndTxn v5 and Produce v12 and no AddPartitionsToTxn, and
  each EndTxn answer names an epoch one higher; with `transaction.version=1` it stays on v1
  (EndTxn v4, Produce v11, AddPartitionsToTxn, one epoch throughout). Either way a
  read_committed consumer reads every record.
* A v2 producer whose transaction timed out is not fenced (KIP-890): its late send and its
  commit fail with an abortable INVALID_PRODUCER_EPOCH, its abort is answered as the retry of
  the coordinator's, and its next transaction commits, as against Kafka 4.3.1
  (java/TimedOutTransaction.java prints the same four lines against both).
* `kafka-transactions find-hanging` finds a hanging transaction (one a partition holds open
  while no coordinator knows it, made here with verification off, as it is the only way to
  make one) and `kafka-transactions abort` ends it with WriteTxnMarkers: read_committed
  consumers, Java's and librdkafka's, then see what follows it and not what it held, and the
  tools print what they print against Kafka 4.3.1.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from pathlib import Path

import confluent_kafka
import pytest

from rafka_actors.admin.client import KafkaClient
from rafka_actors.admin.transactions import describe_transaction

from ...batch_builder import build_batch
from ...broker_process import BrokerProcess
from ...raw_client import RawClient
from ..clients import Confluent
from ..committed_view import read_committed_view
from .java_programs import debug_log4j, java_classes, kafka_tool, run_java
from .peer import KafkaPeer

pytestmark = [pytest.mark.e2e]

RECORDS = 300
SENT = re.compile(r"Sending (\w+) request with header RequestHeader\(apiKey=\w+, apiVersion=(\d+)")
END_TXN_ANSWER = re.compile(
    r"Received END_TXN response .*EndTxnResponseData\(.*producerEpoch=(-?\d+)"
)


def sent_versions(log: str) -> dict[str, set[int]]:
    """The versions of each request the Java client sent, from its debug log."""
    versions: dict[str, set[int]] = defaultdict(set)
    for api, version in SENT.findall(log):
        versions[api].add(int(version))
    return versions


def read_committed_java(
    peer: KafkaPeer, broker: BrokerProcess, topic: str, count: int
) -> list[str]:
    """What Kafka's console consumer reads with isolation.level=read_committed."""
    return peer.ok(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--from-beginning", "--isolation-level", "read_committed",
        "--max-messages", str(count), "--timeout-ms", "15000",
    ).splitlines()  # fmt: skip


@pytest.mark.parametrize("transaction_version", [2, 1])
def test_the_java_producer_speaks_the_transaction_version_the_broker_finalizes(
    kafka_peer: KafkaPeer,
    broker_factory: type[BrokerProcess],
    tmp_path: Path,
    transaction_version: int,
) -> None:
    broker = broker_factory(f"transaction.version={transaction_version}")
    Confluent(broker.bootstrap).create_topic("perf", 2)
    done = kafka_tool(
        kafka_peer.home, "producer-perf-test", "--topic", "perf", "--num-records", str(RECORDS),
        "--record-size", "50", "--throughput", "1000",
        "--command-property", f"bootstrap.servers={broker.bootstrap}",
        "--transactional-id", "perf-tx", "--transaction-duration-ms", "50",
        log4j=debug_log4j(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{RECORDS} records sent" in done.stdout
    log = done.stderr
    sent = sent_versions(log)
    epochs = [int(e) for e in END_TXN_ANSWER.findall(log)]
    assert epochs, "no EndTxn answered"
    with KafkaClient(broker.bootstrap, 30) as client:
        described = describe_transaction(client, "perf-tx")
    if transaction_version == 2:
        assert "Updating isTV2 enabled to true" in log
        assert (sent["END_TXN"], sent["PRODUCE"]) == ({5}, {12})
        assert "ADD_PARTITIONS_TO_TXN" not in sent  # the produce adds its partition
        # each EndTxn bumped the epoch and named it; the coordinator holds the last
        assert epochs == list(range(1, len(epochs) + 1))
        assert described.producer_epoch == len(epochs)
    else:
        assert "Updating isTV2 enabled to false" in log
        assert (sent["END_TXN"], sent["PRODUCE"]) == ({4}, {11})
        assert sent["ADD_PARTITIONS_TO_TXN"] == {3}
        assert epochs == [-1] * len(epochs)  # (v4 answers carry no epoch)
        assert described.producer_epoch == 0
    assert described.state == "CompleteCommit"
    ends, values = read_committed_view(broker.bootstrap, "perf", 2)
    assert len(values) == RECORDS and sum(ends) >= RECORDS + len(epochs)  # + their markers


def test_a_v2_producer_whose_transaction_timed_out_aborts_and_carries_on(
    kafka_peer: KafkaPeer, broker_factory: type[BrokerProcess], request: pytest.FixtureRequest
) -> None:
    broker = broker_factory()
    Confluent(broker.bootstrap).create_topic("late", 1)
    classes = java_classes(kafka_peer.home, request.config.cache)  # type: ignore[arg-type]
    # its transaction.timeout.ms is 1 s; it sends again 4 s after its first send
    done = run_java(
        kafka_peer.home, classes, "TimedOutTransaction", broker.bootstrap, "late-tx", "late", "4000"
    )
    assert done.stdout.splitlines() == [
        "late send: InvalidProducerEpochException",
        "commit: InvalidProducerEpochException",
        "abort: ok",
        "next transaction: committed",
    ], done.stderr[-3000:]
    assert read_committed_view(broker.bootstrap, "late")[1] == [b"next"]
    with KafkaClient(broker.bootstrap, 30) as client:
        described = describe_transaction(client, "late-tx")
    # epoch 1 from the timeout's abort (the producer's abort retried it), 2 from its commit
    assert (described.state, described.producer_epoch) == ("CompleteCommit", 2)


def make_hanging_transaction(broker: BrokerProcess, topic: str) -> None:
    """A transactional batch the coordinator never heard of (an hour old), then a plain
    record after it: the partition's last stable offset stays at the batch."""
    raw = RawClient(broker.host, broker.port)
    hour_ago = int(time.time() * 1000) - 3_600_000
    batch = build_batch(
        [(None, b"held")], base_timestamp=hour_ago, producer_id=4242, producer_epoch=0,
        base_sequence=0, attributes=0x10,
    )  # fmt: skip
    assert raw.produce(topic, 0, batch, "lost-coordinator") == (0, 0)
    raw.close()
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"after", partition=0)
    assert producer.flush(30) == 0


def test_kafka_transactions_abort_ends_a_hanging_transaction(
    kafka_peer: KafkaPeer, broker_factory: type[BrokerProcess]
) -> None:
    broker = broker_factory("transaction.partition.verification.enable=false")
    Confluent(broker.bootstrap).create_topic("hung", 1)
    make_hanging_transaction(broker, "hung")
    assert read_committed_view(broker.bootstrap, "hung") == ([0], [])  # held back at offset 0

    tool = ("transactions", "--bootstrap-server", broker.bootstrap)
    where = ("--topic", "hung", "--partition", "0")
    hanging = kafka_peer.run(*tool, "find-hanging", *where)
    assert hanging.returncode == 0, hanging.explain()
    header, *rows = hanging.stdout.splitlines()
    assert header.split() == [
        "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
        "StartOffset", "LastTimestamp", "Duration(min)",
    ]  # fmt: skip
    assert [row.split()[:6] for row in rows] == [["hung", "0", "4242", "0", "-1", "0"]]

    aborted = kafka_peer.run(*tool, "abort", *where, "--start-offset", "0")
    assert aborted.returncode == 0, aborted.explain()

    assert read_committed_java(kafka_peer, broker, "hung", 1) == ["after"]
    assert read_committed_view(broker.bootstrap, "hung") == ([3], [b"after"])  # held, marker, after
    raw = RawClient(broker.host, broker.port)
    (producer,) = raw.describe_producers("hung", 0).active_producers
    raw.close()
    assert (producer.producer_id, producer.coordinator_epoch) == (4242, 0)  # the marker's
    assert producer.current_txn_start_offset == -1  # nothing open: find-hanging finds none
    again = kafka_peer.run(*tool, "abort", *where, "--start-offset", "0")
    assert again.returncode == 1, again.explain()
    assert "Could not find any open transactions starting at offset 0" in again.stderr

"""Compacted topics end to end: cleanup.policy through the admin APIs, keyless records refused
per record (KIP-467), and consumers (librdkafka, kafka-python, Kafka's Java console consumer)
reading a cleaned topic: the latest value of each key exactly once, tombstoned keys gone."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import kafka
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AlterConfigOpType

from ..broker_process import BrokerProcess
from .compacted_io import WAIT, Read, alter_policy, create, policy, produce, read_confluent

pytestmark = pytest.mark.e2e

KEYS = 40
VERSIONS = 12
SEGMENT_BYTES = 4096
KAFKA_TOOL = Path(os.environ.get("KAFKA_REF", Path.home() / ".cache/kafka-ref")) / "kafka-tool"


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory("log.cleaner.backoff.ms=100")


def test_keyless_records_are_refused_per_record(broker: BrokerProcess) -> None:
    topic = "compacted-keys"
    create(broker, topic)  # cleanup.policy delete (the default), then compact appended
    alter_policy(broker, topic, AlterConfigOpType.APPEND, "compact")
    assert policy(broker, topic) == "delete,compact"
    records = [(None if i % 10 == 0 else b"k%d" % i, b"v%d" % i) for i in range(30)]
    # one batch: the keyless records get INVALID_RECORD, the others librdkafka's own error
    reports = produce(broker, topic, records, **{"batch.num.messages": "1000"})
    codes = [code for code, _ in reports]
    invalid = KafkaError.INVALID_RECORD
    assert [i for i, code in enumerate(codes) if code == invalid] == [0, 10, 20]
    other = KafkaError._INVALID_DIFFERENT_RECORD
    assert all(code == other for i, code in enumerate(codes) if i % 10), codes
    # one record a batch: only the keyless ones fail
    reports = produce(broker, topic, records, **{"batch.num.messages": "1"})
    assert [code for code, _ in reports] == [invalid if i % 10 == 0 else 0 for i in range(30)]
    alter_policy(broker, topic, AlterConfigOpType.SUBTRACT, "compact")
    assert policy(broker, topic) == "delete"
    assert [code for code, _ in produce(broker, topic, [(None, b"x")])] == [0]


def _fill_compacted_topic(broker: BrokerProcess, topic: str) -> tuple[dict[bytes, bytes], int]:
    """KEYS keys written VERSIONS times (the last version of every fifth key a tombstone),
    then enough other records to seal the segments they are in; the latest value of each key
    still there, and the offset after the last of them."""
    create(
        broker,
        topic,
        cleanup_policy="compact",
        internal_segment_bytes=str(SEGMENT_BYTES),  # (Kafka's, below its 1 MiB minimum)
        min_cleanable_dirty_ratio="0.01",
        delete_retention_ms="0",
        compression_type="producer",
    )
    records: list[tuple[bytes | None, bytes | None]] = []
    for version in range(VERSIONS):
        for k in range(KEYS):
            last = version == VERSIONS - 1
            value = None if last and k % 5 == 0 else b"value-%d-%d" % (k, version)
            records.append((b"key-%d" % k, value))
    reports = produce(broker, topic, records, **{"compression.type": "lz4"})
    assert all(code == 0 for code, _ in reports)
    end = max(offset for _, offset in reports) + 1
    _seal(broker, topic, "first")
    expected = {key: value for key, value in records if value is not None}
    for key, value in records:
        if value is None:
            expected.pop(key, None)  # type: ignore[arg-type]
    return expected, end  # type: ignore[return-value]


def _seal(broker: BrokerProcess, topic: str, label: str) -> None:
    """Write distinct keys worth three segments, so everything before them is sealed."""
    filler = [(b"%s-%d" % (label.encode(), i), b"f" * 200) for i in range(3 * SEGMENT_BYTES // 200)]
    assert all(code == 0 for code, _ in produce(broker, topic, filler))


def _wait_cleaned(broker: BrokerProcess, topic: str, past: int, rounds: int = 1) -> None:
    pattern = re.compile(rf"{re.escape(topic)}-0 cleaned up to offset (\d+)")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        ends = [int(m.group(1)) for m in map(pattern.search, broker.log_text().splitlines()) if m]
        if len([e for e in ends if e >= past]) >= rounds:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} not cleaned past {past}")


def _read_kafka_python(broker: BrokerProcess, topic: str) -> Read:
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    partition = kafka.TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    end = consumer.end_offsets([partition])[partition]
    found = []
    deadline = time.monotonic() + WAIT
    try:
        while consumer.position(partition) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                found += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    return found


def _check(read: Read, expected: dict[bytes, bytes]) -> None:
    offsets = [offset for offset, _, _ in read]
    assert offsets == sorted(set(offsets)), "offsets only grow, none read twice"
    keys = [key for _, key, _ in read if key.startswith(b"key-")]
    assert len(keys) == len(set(keys)), "each key once"
    assert {k: v for _, k, v in read if k.startswith(b"key-")} == expected


def test_consumers_read_the_latest_value_of_each_key(broker: BrokerProcess) -> None:
    topic = "compacted-read"
    expected, end = _fill_compacted_topic(broker, topic)
    _wait_cleaned(broker, topic, end)
    first = read_confluent(broker, topic)
    # a tombstone stays until a round after delete.retention.ms (0) from the round that first
    # cleaned it (which may have come already: the records sealing the topic are cleaned too)
    tombstones = {key for _, key, value in first if value is None}
    assert tombstones <= {b"key-%d" % k for k in range(0, KEYS, 5)}
    _check([r for r in first if r[2] is not None], expected)
    # another round: the tombstones go
    _seal(broker, topic, "second")
    _wait_cleaned(broker, topic, end, rounds=2)
    for read in (read_confluent(broker, topic), _read_kafka_python(broker, topic)):
        _check(read, expected)
        assert not [key for _, key, value in read if value is None]
    if KAFKA_TOOL.exists():
        _check(_read_java(broker, topic), expected)


def _read_java(broker: BrokerProcess, topic: str) -> Read:
    """Kafka's own console consumer (its Java client), from the beginning to the end."""
    done = subprocess.run(
        [str(KAFKA_TOOL), "console-consumer", "--bootstrap-server", broker.bootstrap,
         "--topic", topic, "--partition", "0", "--offset", "earliest", "--timeout-ms", "5000",
         "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
         "--formatter-property", "key.separator=|"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    found = []
    for line in done.stdout.splitlines():
        offset, key, value = line.split("|", 2)  # Offset:N|key|value
        found.append((int(offset.removeprefix("Offset:")), key.encode(), value.encode()))
    assert found, done.stderr[-2000:]
    return found

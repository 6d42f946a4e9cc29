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

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

WAIT = 30.0
KEYS = 40
VERSIONS = 12
SEGMENT_BYTES = 4096
KAFKA_TOOL = Path(os.environ.get("KAFKA_REF", Path.home() / ".cache/kafka-ref")) / "kafka-tool"


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory("log.cleaner.backoff.ms=100")


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(broker: BrokerProcess, topic: str, **configs: str) -> None:
    wanted = NewTopic(topic, 1, 1, config={k.replace("_", "."): v for k, v in configs.items()})
    admin = _admin(broker)
    for future in admin.create_topics([wanted]).values():
        future.result(WAIT)


def _policy(broker: BrokerProcess, topic: str) -> str:
    admin = _admin(broker)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return str(future.result(WAIT)["cleanup.policy"].value)


def _alter_policy(broker: BrokerProcess, topic: str, op: AlterConfigOpType, value: str) -> None:
    entry = ConfigEntry("cleanup.policy", value, incremental_operation=op)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin = _admin(broker)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT)


def _produce(
    broker: BrokerProcess, topic: str, records: list[tuple[bytes | None, bytes | None]], **conf: str
) -> list[tuple[int, int]]:
    """(error code or 0, offset) of each record, in order, from its delivery report."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 20, **conf}
    )
    reports: dict[int, tuple[int, int]] = {}

    def report(i: int) -> Callable[[object, object], None]:
        def on_delivery(err: object, msg: object) -> None:
            code = err.code() if err is not None else 0  # type: ignore[attr-defined]
            reports[i] = (code, msg.offset())  # type: ignore[attr-defined]

        return on_delivery

    for i, (key, value) in enumerate(records):
        producer.produce(topic, value, key, on_delivery=report(i))
    assert producer.flush(WAIT) == 0
    return [reports[i] for i in range(len(records))]


def test_keyless_records_are_refused_per_record(broker: BrokerProcess) -> None:
    topic = "compacted-keys"
    _create(broker, topic)  # cleanup.policy delete (the default), then compact appended
    _alter_policy(broker, topic, AlterConfigOpType.APPEND, "compact")
    assert _policy(broker, topic) == "delete,compact"
    records = [(None if i % 10 == 0 else b"k%d" % i, b"v%d" % i) for i in range(30)]
    # one batch: the keyless records get INVALID_RECORD, the others librdkafka's own error
    reports = _produce(broker, topic, records, **{"batch.num.messages": "1000"})
    codes = [code for code, _ in reports]
    invalid = confluent_kafka.KafkaError.INVALID_RECORD
    assert [i for i, code in enumerate(codes) if code == invalid] == [0, 10, 20]
    other = confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD
    assert all(code == other for i, code in enumerate(codes) if i % 10), codes
    # one record a batch: only the keyless ones fail
    reports = _produce(broker, topic, records, **{"batch.num.messages": "1"})
    assert [code for code, _ in reports] == [invalid if i % 10 == 0 else 0 for i in range(30)]
    _alter_policy(broker, topic, AlterConfigOpType.SUBTRACT, "compact")
    assert _policy(broker, topic) == "delete"
    assert [code for code, _ in _produce(broker, topic, [(None, b"x")])] == [0]


def _fill_compacted_topic(broker: BrokerProcess, topic: str) -> tuple[dict[bytes, bytes], int]:
    """KEYS keys written VERSIONS times (the last version of every fifth key a tombstone),
    then enough other records to seal the segments they are in; the latest value of each key
    still there, and the offset after the last of them."""
    _create(
        broker,
        topic,
        cleanup_policy="compact",
        segment_bytes=str(SEGMENT_BYTES),
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
    reports = _produce(broker, topic, records, **{"compression.type": "lz4"})
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
    assert all(code == 0 for code, _ in _produce(broker, topic, filler))


def _wait_cleaned(broker: BrokerProcess, topic: str, past: int, rounds: int = 1) -> None:
    pattern = re.compile(rf"{re.escape(topic)}-0 cleaned up to offset (\d+)")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        ends = [int(m.group(1)) for m in map(pattern.search, broker.log_text().splitlines()) if m]
        if len([e for e in ends if e >= past]) >= rounds:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} not cleaned past {past}")


def _read_confluent(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "compacted-reader",
         "enable.auto.commit": False, "enable.partition.eof": True}
    )  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    found = []
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                return found
            found.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError("the end of the partition was not reached")


def _read_kafka_python(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes, bytes | None]]:
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


def _check(read: list[tuple[int, bytes, bytes | None]], expected: dict[bytes, bytes]) -> None:
    offsets = [offset for offset, _, _ in read]
    assert offsets == sorted(set(offsets)), "offsets only grow, none read twice"
    keys = [key for _, key, _ in read if key.startswith(b"key-")]
    assert len(keys) == len(set(keys)), "each key once"
    assert {k: v for _, k, v in read if k.startswith(b"key-")} == expected


def test_consumers_read_the_latest_value_of_each_key(broker: BrokerProcess) -> None:
    topic = "compacted-read"
    expected, end = _fill_compacted_topic(broker, topic)
    _wait_cleaned(broker, topic, end)
    first = _read_confluent(broker, topic)
    # a tombstone stays until a round after delete.retention.ms (0) from the round that first
    # cleaned it (which may have come already: the records sealing the topic are cleaned too)
    tombstones = {key for _, key, value in first if value is None}
    assert tombstones <= {b"key-%d" % k for k in range(0, KEYS, 5)}
    _check([r for r in first if r[2] is not None], expected)
    # another round: the tombstones go
    _seal(broker, topic, "second")
    _wait_cleaned(broker, topic, end, rounds=2)
    for read in (_read_confluent(broker, topic), _read_kafka_python(broker, topic)):
        _check(read, expected)
        assert not [key for _, key, value in read if value is None]
    if KAFKA_TOOL.exists():
        _check(_read_java(broker, topic), expected)


def _read_java(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes, bytes | None]]:
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

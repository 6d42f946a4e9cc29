"""A SIGKILL while the log cleaner works loses nothing. Each round writes new versions of every
key while the topic is not compacted, turns compaction on, and kills the broker (SIGKILL) as
soon as the cleaning's output file appears (the last round: right after the change); the
broker starts again on the same data dir and a consumer still reads the latest acknowledged
value of every key, each offset once."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
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
TOPIC = "compacted-kill"
KEYS = 300
SEGMENT_BYTES = 32 * 1024


def _produce(broker: BrokerProcess, records: list[tuple[bytes, bytes]]) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5}
    )
    failed: list[object] = []
    for key, value in records:
        producer.produce(TOPIC, value, key, on_delivery=lambda e, _m: e and failed.append(e))
        producer.poll(0)
    assert producer.flush(WAIT) == 0 and not failed, failed[:3]


def _read(broker: BrokerProcess) -> list[tuple[int, bytes, bytes]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "kill-reader",
         "enable.auto.commit": False, "enable.partition.eof": True}
    )  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
    found: list[tuple[int, bytes, bytes]] = []
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


def _set_policy(broker: BrokerProcess, policy: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT)


def _kill_while_cleaning(broker: BrokerProcess, partition_dir: Path, at_once: bool) -> bool:
    """SIGKILL the broker once a round's output file exists (or now); whether one did."""
    # (the cleaner runs at a low priority: on a loaded machine it may start late)
    deadline = time.monotonic() + (0 if at_once else 4 * WAIT)
    seen = False
    while time.monotonic() <= deadline and not seen:
        seen = any(partition_dir.glob("*.log.cleaned"))
        if not seen:
            time.sleep(0.002)
    broker.stop(signal.SIGKILL)
    return seen


@pytest.mark.timeout(600)
def test_sigkill_during_cleaning_loses_nothing(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = broker_factory("log.cleaner.backoff.ms=50", data_dir=tmp_path / "data")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
               "min.cleanable.dirty.ratio": "0.01"}  # fmt: skip
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)]).values():
        future.result(WAIT)
    partition_dir = tmp_path / "data" / "topics" / TOPIC / "0"
    expected: dict[bytes, bytes] = {}
    caught = 0
    for round_ in range(3):
        records = [
            (b"key-%d" % k, b"round-%d-version-%d-" % (round_, v) + b"x" * 80)
            for v in range(3)
            for k in range(KEYS)
        ]
        _set_policy(broker, "delete")  # (retention.ms is a week: nothing goes)
        _produce(broker, records)
        expected.update(records)
        _set_policy(broker, "compact")
        caught += _kill_while_cleaning(broker, partition_dir, at_once=round_ == 2)
        broker.start()
        assert not list(partition_dir.glob("*.cleaned")) + list(partition_dir.glob("*.swap"))
        read = _read(broker)
        offsets = [offset for offset, _, _ in read]
        assert offsets == sorted(set(offsets)), "each offset once, in order"
        assert {key: value for _, key, value in read} == expected, "the latest value of each key"
    assert caught == 2, "the broker was killed while a round was writing its file"

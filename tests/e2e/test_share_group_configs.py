"""Per-group share configs (issue 54 §1) with real clients: confluent-kafka's AdminClient sets
them (IncrementalAlterConfigs on GROUP resources) and its ShareConsumer sees their effect.

The broker runs on Kafka's share defaults (`share.auto.offset.reset=latest`, a delivery limit
of 5), so each test shows a group's own config at work: `share.auto.offset.reset=earliest`
reading what was already there, `share.isolation.level=read_committed` never handing out an
aborted transaction's records, and a `share.delivery.count.limit` changed while the group's
consumer runs, which reaches the live group's actor. Kafka's own tools drive the same configs
in tests/e2e/kafka_tools/.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from rafka_actors.cli import main

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

SETTINGS = (
    "group.share.heartbeat.interval.ms=300",
    "group.share.session.timeout.ms=6000",
    "group.share.min.record.lock.duration.ms=1000",
    "transaction.max.timeout.ms=60000",
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("share-configs"), *SETTINGS).start()
    try:
        yield process
    finally:
        process.stop()


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _set(broker: BrokerProcess, group: str, **values: str) -> None:
    entries = [
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in values.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = _admin(broker)  # (kept while its futures are awaited)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _topic(broker: BrokerProcess, name: str) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def _consume(
    broker: BrokerProcess, group: str, topic: str, want: int, **extra: object
) -> list[confluent_kafka.Message]:
    consumer = confluent_kafka.ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, **extra}
    )
    consumer.subscribe([topic])
    got: list[confluent_kafka.Message] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < want:
            got += [m for m in consumer.poll(0.5) if m.error() is None]
        for _ in range(2):  # anything more would show up now
            got += [m for m in consumer.poll(0.5) if m.error() is None]
    finally:
        consumer.close()
    return got


def _start_offset(capsys: pytest.CaptureFixture[str], broker: BrokerProcess, group: str) -> int:
    """Where the share group starts on the topic's partition (-1: not initialised yet)."""
    capsys.readouterr()
    main(["groups", "offsets", group, "--output", "json", "--bootstrap", broker.bootstrap])
    out = capsys.readouterr().out
    rows = (
        [row for described in json.loads(out) for row in described["partitions"]]
        if out.strip()
        else []
    )
    return int(rows[0]["current_offset"]) if rows and rows[0]["current_offset"] is not None else -1


def test_a_group_set_to_earliest_reads_what_was_already_there(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's share-group quickstart, with confluent-kafka: without the config, a new group
    starts at the log's end (the broker's default) and sees nothing already written."""
    _topic(broker, "before")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for value in (b"one", b"two", b"three"):
        producer.produce("before", value)
    assert producer.flush(30) == 0
    latest = confluent_kafka.ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "latest-group"}
    )
    latest.subscribe(["before"])
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _start_offset(capsys, broker, "latest-group") != 3:
            seen += [m.value() for m in latest.poll(0.5) if m.error() is None]
        assert _start_offset(capsys, broker, "latest-group") == 3  # initialised at the end
        producer.produce("before", b"four")
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not seen:
            seen += [m.value() for m in latest.poll(0.5) if m.error() is None]
    finally:
        latest.close()
    assert seen == [b"four"]
    _set(broker, "earliest-group", share_auto_offset_reset="earliest")
    values = [m.value() for m in _consume(broker, "earliest-group", "before", 4)]
    assert values == [b"one", b"two", b"three", b"four"]


def test_read_committed_hands_out_no_aborted_or_open_transactions_records(
    broker: BrokerProcess,
) -> None:
    _topic(broker, "txns")
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "share-txns"}
    )
    producer.init_transactions(30)
    for values, commit in (([b"a1", b"a2", b"a3"], False), ([b"c1", b"c2"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce("txns", value)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    producer.begin_transaction()  # left open while the groups read
    producer.produce("txns", b"open")
    producer.flush(30)
    _set(broker, "rc-group", share_auto_offset_reset="earliest")
    _set(broker, "rc-group", share_isolation_level="read_committed")
    _set(broker, "ru-group", share_auto_offset_reset="earliest")
    committed = [m.value() for m in _consume(broker, "rc-group", "txns", 2)]
    assert committed == [b"c1", b"c2"]
    everything = sorted(m.value() for m in _consume(broker, "ru-group", "txns", 6))
    assert everything == [b"a1", b"a2", b"a3", b"c1", b"c2", b"open"]
    producer.commit_transaction(30)
    assert [m.value() for m in _consume(broker, "rc-group", "txns", 1)] == [b"open"]


def test_a_delivery_limit_changed_while_the_group_runs_applies_at_once(
    broker: BrokerProcess,
) -> None:
    """Offset 0 is released at every delivery. The broker's limit is 5; the group's config,
    set after the first delivery, makes it 2: the live group's actor takes it through its
    mailbox, and the record is archived after its second delivery."""
    _topic(broker, "limited")
    _set(broker, "limited-group", share_auto_offset_reset="earliest")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("limited", b"poison")
    producer.produce("limited", b"fine")
    assert producer.flush(30) == 0
    consumer = confluent_kafka.ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "limited-group",
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe(["limited"])
    deliveries: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(deliveries) < 6:
            for message in consumer.poll(0.5):
                if message.error() is not None:
                    continue
                deliveries.append((message.offset(), message.delivery_count()))
                if message.offset() == 0 and message.delivery_count() == 1:
                    _set(broker, "limited-group", share_delivery_count_limit="2")
                kind = AcknowledgeType.RELEASE if message.offset() == 0 else AcknowledgeType.ACCEPT
                consumer.acknowledge(message, kind)
            consumer.commit_sync()
            if (0, 2) in deliveries:
                deadline = min(deadline, time.monotonic() + 2)  # a third would come now
    finally:
        consumer.close()
    assert [d for d in deliveries if d[0] == 0] == [(0, 1), (0, 2)]
    assert [d for d in deliveries if d[0] == 1] == [(1, 1)]

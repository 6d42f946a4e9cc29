"""What the compacted-topic e2e tests do through librdkafka (confluent-kafka): create and
alter a topic, produce keyed records (with each one's delivery report), read a partition from
the beginning to its end."""

from __future__ import annotations

import time
from collections.abc import Callable

import confluent_kafka
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from ..broker_process import BrokerProcess

WAIT = 30.0
Read = list[tuple[int, bytes, bytes | None]]


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker: BrokerProcess, topic: str, **configs: str) -> None:
    wanted = NewTopic(topic, 1, 1, config={k.replace("_", "."): v for k, v in configs.items()})
    client = admin(broker)
    for future in client.create_topics([wanted]).values():
        future.result(WAIT)


def policy(broker: BrokerProcess, topic: str) -> str:
    client = admin(broker)
    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return str(future.result(WAIT)["cleanup.policy"].value)


def alter_policy(broker: BrokerProcess, topic: str, op: AlterConfigOpType, value: str) -> None:
    entry = ConfigEntry("cleanup.policy", value, incremental_operation=op)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    client = admin(broker)
    for future in client.incremental_alter_configs([resource]).values():
        future.result(WAIT)


def produce(
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


def read_confluent(broker: BrokerProcess, topic: str) -> Read:
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

"""Record timestamps as Kafka keeps them (issue 55 §2, §3), with real clients:

* a topic with `message.timestamp.type=LogAppendTime`, or a broker whose
  `log.message.timestamp.type` is, stamps each batch with the broker's clock: consumers see
  LOG_APPEND_TIME timestamps, aiokafka's produce answer carries the time, and the stored batch
  has Kafka's header fields (timestamp-type bit, max timestamp = append time, the producer's
  base timestamp, a valid CRC);
* a CreateTime timestamp further ahead than `message.timestamp.after.max.ms` is refused with
  INVALID_TIMESTAMP, as Kafka 4 refuses it by default;
* offsets_for_times finds the first *record* at or after a time, inside one batch of records
  with distinct timestamps, compressed or not (confluent-kafka and kafka-python).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import kafka
import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from rafka_actors.storage.record_batch import BatchHeader

from ..broker_process import BrokerProcess
from ..raw_client import RawClient

pytestmark = [pytest.mark.e2e]

WAIT = 20.0
OLD = 1_500_000_000_000  # a producer's timestamp from 2017
LOG_APPEND_TIME_BIT = 0x08


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("timestamps") / "data").start()
    yield process
    if process.alive():
        process.kill()


def _topic(broker: BrokerProcess, tag: str, **configs: str) -> str:
    name = f"{tag}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(name, 1, 1, config={k.replace("_", "."): v for k, v in configs.items()})
    admin.create_topics([new])[name].result(WAIT)
    return name


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _produce(broker: BrokerProcess, topic: str, stamps: list[int], **settings: object) -> None:
    """One record per timestamp, in one batch (linger) unless settings say otherwise."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 200, **settings}
    )
    failures: list[object] = []
    for i, stamp in enumerate(stamps):
        producer.produce(
            topic,
            b"value-%d" % i,
            timestamp=stamp,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
    assert producer.flush(WAIT) == 0
    assert not failures, failures


def _consume(broker: BrokerProcess, topic: str, count: int) -> list[confluent_kafka.Message]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "ts-" + topic}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + WAIT
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message)
    finally:
        consumer.close()
    assert len(got) == count
    return got


def _stored_batches(broker: BrokerProcess, topic: str) -> list[BatchHeader]:
    """The partition's batches as stored, their CRCs checked (split_batches)."""
    client = RawClient(broker.host, broker.port)
    try:
        return client.stored_batches(topic, 0)
    finally:
        client.close()


# -- LogAppendTime -------------------------------------------------------------------------------
def test_a_log_append_time_topic_stamps_batches_with_the_brokers_clock(
    broker: BrokerProcess,
) -> None:
    topic = _topic(broker, "lat", message_timestamp_type="LogAppendTime")
    before = _now_ms()
    _produce(broker, topic, [OLD, OLD + 5, OLD + 10])
    after = _now_ms()
    messages = _consume(broker, topic, 3)
    for message in messages:
        kind, stamp = message.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
        assert before <= stamp <= after
    (batch,) = _stored_batches(broker, topic)
    assert batch.attributes & LOG_APPEND_TIME_BIT
    assert batch.base_timestamp == OLD  # as Kafka leaves it
    assert before <= batch.max_timestamp <= after
    # kafka-python reads the same
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    consumer.assign([kafka.TopicPartition(topic, 0)])
    seen = [(m.timestamp_type, m.timestamp) for m in consumer]
    consumer.close()
    assert seen == [(1, batch.max_timestamp)] * 3


def test_the_produce_answer_carries_the_log_append_time(broker: BrokerProcess) -> None:
    topic = _topic(broker, "lat-answer", message_timestamp_type="LogAppendTime")
    plain = _topic(broker, "create-answer")

    async def send(name: str) -> tuple[int, int]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            meta = await producer.send_and_wait(name, b"v", timestamp_ms=OLD)
        finally:
            await producer.stop()
        return meta.timestamp_type, meta.timestamp

    before = _now_ms()
    kind, stamp = asyncio.run(send(topic))
    assert kind == 1 and before <= stamp <= _now_ms()  # the broker's log_append_time_ms
    assert asyncio.run(send(plain)) == (0, OLD)  # CreateTime: -1 in the answer, the client's own


def test_the_broker_default_applies_unless_the_topic_says_otherwise(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory("log.message.timestamp.type=LogAppendTime")
    stamped = _topic(broker, "default-lat")
    kept = _topic(broker, "create-time", message_timestamp_type="CreateTime")
    _produce(broker, stamped, [OLD])
    _produce(broker, kept, [OLD])
    (message,) = _consume(broker, stamped, 1)
    assert message.timestamp()[0] == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
    (message,) = _consume(broker, kept, 1)
    assert message.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, OLD)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, stamped)
    described = admin.describe_configs([resource])[resource].result(WAIT)
    entry = described["message.timestamp.type"]
    assert (entry.value, entry.source) == ("LogAppendTime", 4)  # STATIC_BROKER_CONFIG


def test_a_timestamp_far_ahead_is_refused_as_kafka_4_refuses_it(broker: BrokerProcess) -> None:
    topic = _topic(broker, "future")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    errors: list[confluent_kafka.KafkaError] = []
    producer.produce(
        topic, b"v", timestamp=_now_ms() + 2 * 3_600_000, on_delivery=lambda e, _m: errors.append(e)
    )
    producer.flush(WAIT)
    assert errors and errors[0].code() == confluent_kafka.KafkaError.INVALID_TIMESTAMP
    lenient = _topic(broker, "future-ok", message_timestamp_after_max_ms=str(3 * 3_600_000))
    _produce(broker, lenient, [_now_ms() + 2 * 3_600_000])


# -- offsets for times ---------------------------------------------------------------------------
T0 = 1_700_000_000_000
STAMPS = [T0, T0 + 40, T0 + 50, T0 + 10, T0 + 30, T0 + 50]  # distinct, out of order, max twice


def _expected(target: int) -> tuple[int, int] | None:
    """Kafka's answer: the first record whose timestamp reaches `target`."""
    for offset, stamp in enumerate(STAMPS):
        if stamp >= target:
            return offset, stamp
    return None


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_offsets_for_times_find_the_record_inside_one_batch(
    broker: BrokerProcess, codec: str
) -> None:
    topic = _topic(broker, f"times-{codec}")
    _produce(broker, topic, STAMPS, **{"compression.type": codec})
    (batch,) = _stored_batches(broker, topic)  # all of them in one batch
    assert batch.records_count == len(STAMPS)
    targets = [T0 - 1, T0, T0 + 1, T0 + 11, T0 + 31, T0 + 40, T0 + 41, T0 + 50, T0 + 51]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    try:
        for target in targets:
            (found,) = consumer.offsets_for_times(
                [confluent_kafka.TopicPartition(topic, 0, target)], timeout=WAIT
            )
            expected = _expected(target)
            assert found.offset == (-1 if expected is None else expected[0]), target
    finally:
        consumer.close()
    legacy = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        partition = kafka.TopicPartition(topic, 0)
        for target in targets:
            answer = legacy.offsets_for_times({partition: target})[partition]
            found = None if answer is None else (answer.offset, answer.timestamp)
            assert found == _expected(target), target
    finally:
        legacy.close()


def test_max_timestamp_is_the_first_record_carrying_it(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import OffsetSpec

    topic = _topic(broker, "max-ts")
    _produce(broker, topic, STAMPS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    partition = confluent_kafka.TopicPartition(topic, 0)
    result = admin.list_offsets({partition: OffsetSpec.max_timestamp()})[partition].result(WAIT)
    assert (result.offset, result.timestamp) == (2, T0 + 50)

"""The same small set of operations through each real Kafka client.

Each client class offers: create_topic, produce (acks=all, one compression codec; returns only
once every record is acknowledged), read_all (manual assignment from the beginning until the
expected count), and watermarks (ListOffsets earliest/latest per partition).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterable

import confluent_kafka
import confluent_kafka.admin
import kafka
import kafka.admin
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

Records = dict[int, list[bytes]]
DEADLINE = 60.0


class Confluent:
    name = "confluent"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [confluent_kafka.admin.NewTopic(topic, partitions, 1)], operation_timeout=10
        )
        futures[topic].result(timeout=30)

    def produce(self, topic: str, items: Iterable[tuple[bytes, bytes]], codec: str) -> int:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 5,
            }
        )
        errors: list[object] = []
        acked = 0

        def on_delivery(err: object, msg: object) -> None:
            nonlocal acked
            if err is not None:
                errors.append(err)
            else:
                acked += 1

        for key, value in items:
            while True:
                try:
                    producer.produce(topic, value, key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(DEADLINE) == 0
        assert not errors, errors[:3]
        return acked

    def read_all(self, topic: str, partitions: int, expected: int) -> Records:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "e2e-reader",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(partitions)
            ]
        )
        got: Records = defaultdict(list)
        count, deadline = 0, time.monotonic() + DEADLINE
        try:
            while count < expected and time.monotonic() < deadline:
                for msg in consumer.consume(1000, timeout=0.5):
                    if msg.error():
                        if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                            continue
                        raise AssertionError(msg.error())
                    got[msg.partition()].append(msg.value())
                    count += 1
        finally:
            consumer.close()
        return got

    def watermarks(self, topic: str, partitions: int) -> list[tuple[int, int]]:
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "e2e-offsets"}
        )
        try:
            return [
                consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
                for p in range(partitions)
            ]
        finally:
            consumer.close()


class KafkaPython:
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = kafka.admin.KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([kafka.admin.NewTopic(topic, partitions, 1)])
        finally:
            admin.close()

    def produce(self, topic: str, items: Iterable[tuple[bytes, bytes]], codec: str) -> int:
        producer = kafka.KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=5,
            compression_type=None if codec == "none" else codec,
        )
        futures = [producer.send(topic, key=k, value=v) for k, v in items]
        producer.flush(DEADLINE)
        for future in futures:
            future.get(timeout=DEADLINE)
        producer.close()
        return len(futures)

    def read_all(self, topic: str, partitions: int, expected: int) -> Records:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got: Records = defaultdict(list)
        count, deadline = 0, time.monotonic() + DEADLINE
        try:
            while count < expected and time.monotonic() < deadline:
                for tp, msgs in consumer.poll(timeout_ms=500).items():
                    got[tp.partition].extend(m.value for m in msgs)
                    count += len(msgs)
        finally:
            consumer.close()
        return got

    def watermarks(self, topic: str, partitions: int) -> list[tuple[int, int]]:
        consumer = kafka.KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        try:
            tps = [kafka.TopicPartition(topic, p) for p in range(partitions)]
            low, high = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
            return [(low[tp], high[tp]) for tp in tps]
        finally:
            consumer.close()


class AioKafka:
    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        async def run() -> None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, partitions, 1)])
            finally:
                await admin.close()

        asyncio.run(run())

    def produce(self, topic: str, items: Iterable[tuple[bytes, bytes]], codec: str) -> int:
        async def run() -> int:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                acks="all",
                linger_ms=5,
                compression_type=None if codec == "none" else codec,
            )
            await producer.start()
            try:
                futures = [await producer.send(topic, key=k, value=v) for k, v in items]
                await asyncio.gather(*futures)
                return len(futures)
            finally:
                await producer.stop()

        return asyncio.run(run())

    def read_all(self, topic: str, partitions: int, expected: int) -> Records:
        async def run() -> Records:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await consumer.start()
            got: Records = defaultdict(list)
            try:
                consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
                await consumer.seek_to_beginning()
                count, deadline = 0, time.monotonic() + DEADLINE
                while count < expected and time.monotonic() < deadline:
                    batches = await consumer.getmany(timeout_ms=500)
                    for tp, msgs in batches.items():
                        got[tp.partition].extend(m.value for m in msgs)
                        count += len(msgs)
            finally:
                await consumer.stop()
            return got

        return asyncio.run(run())

    def watermarks(self, topic: str, partitions: int) -> list[tuple[int, int]]:
        async def run() -> list[tuple[int, int]]:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
            await consumer.start()
            try:
                tps = [TopicPartition(topic, p) for p in range(partitions)]
                low = await consumer.beginning_offsets(tps)
                high = await consumer.end_offsets(tps)
                return [(low[tp], high[tp]) for tp in tps]
            finally:
                await consumer.stop()

        return asyncio.run(run())


CLIENTS = {c.name: c for c in (Confluent, KafkaPython, AioKafka)}

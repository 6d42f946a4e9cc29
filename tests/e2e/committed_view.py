"""librdkafka's read_committed view of a topic: the end of each partition it is told (the
last stable offset) and what it reads up to there, from the beginning, in a group of its own."""

from __future__ import annotations

import time
import uuid

import confluent_kafka


def read_committed_view(
    bootstrap: str, topic: str, partitions: int = 1, timeout: float = 30.0
) -> tuple[list[int], list[bytes]]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"checker-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    tps = [
        confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
        for p in range(partitions)
    ]
    try:
        ends = [consumer.get_watermark_offsets(tp, timeout, cached=False)[1] for tp in tps]
        consumer.assign(tps)
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.2):
                if msg.error():
                    assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                    at_end.add(msg.partition())
                else:
                    values.append(msg.value())
        assert len(at_end) == partitions, f"{topic}: no end within {timeout} s (read {values})"
        return ends, values
    finally:
        consumer.close()

"""Fetch responses within fetch.max.bytes, as KIP-74 says (issue 55 §4).

Only the first partition that returns data may break the response's and its partition's
limits, with one whole batch, so a consumer always makes progress; every other partition gets
whole batches within what is left. librdkafka enforces it: a response larger than its
receive.message.max.bytes is refused ("Invalid response size"), and the consumer of
librdkafka's test 0082 (three partitions of ~900 KB records, fetch.max.bytes 1000000) used to
spin on that until it timed out.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v11 import request as fetch_req
from kio.schema.fetch.v11 import response as fetch_resp

from rafka_actors.storage.record_batch import split_batches

from ..broker_process import BrokerProcess
from ..raw_client import RawClient

pytestmark = [pytest.mark.e2e]

WAIT = 30.0
BIG = 900_000  # a record (and its batch): ~0.9 of fetch.max.bytes
PER_PARTITION = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("fetch") / "data").start()
    yield process
    if process.alive():
        process.kill()


def _create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # (kept until it answers)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(WAIT)


@pytest.fixture(scope="module")
def big_topic(broker: BrokerProcess) -> str:
    """Three partitions of ~900 KB records, each its own batch, as in librdkafka's 0082."""
    topic = f"big-{uuid.uuid4().hex[:8]}"
    _create(broker, topic, 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(3):
        for _ in range(PER_PARTITION):
            producer.produce(topic, bytes([partition]) * BIG, partition=partition)
    assert producer.flush(WAIT) == 0
    return topic


def test_a_librdkafka_consumer_reads_records_near_fetch_max_bytes(
    broker: BrokerProcess, big_topic: str
) -> None:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "kip74",
            "auto.offset.reset": "earliest",
            # 0082's: a partition may take 20 MB, the response 1 MB, and librdkafka refuses a
            # response larger than receive.message.max.bytes
            "max.partition.fetch.bytes": 20_000_000,
            "fetch.max.bytes": 1_000_000,
            "receive.message.max.bytes": 1_000_512,
        }
    )
    consumer.subscribe([big_topic])
    got: dict[int, list[int]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + WAIT
    try:
        while sum(map(len, got.values())) < 3 * PER_PARTITION and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got[message.partition()].append(len(message.value()))
    finally:
        consumer.close()
    assert got == {p: [BIG] * PER_PARTITION for p in range(3)}


def _fetch(
    broker: BrokerProcess, topic: str, max_bytes: int, partition_max: list[int]
) -> list[int]:
    """The bytes of records each partition returned to one Fetch (v11) from offset 0."""
    request = fetch_req.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=(
            fetch_req.FetchTopic(
                topic=topic,
                partitions=tuple(
                    fetch_req.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=limit)
                    for p, limit in enumerate(partition_max)
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    client = RawClient(broker.host, broker.port)
    try:
        response = client._call(request, fetch_resp.FetchResponse, header_version=0)
    finally:
        client.close()
    sizes = []
    for answer in response.responses[0].partitions:
        records = answer.records or b""
        split_batches(records)  # whole batches only
        sizes.append(len(records))
    return sizes


def test_only_the_first_partition_with_data_breaks_the_limits(
    broker: BrokerProcess, big_topic: str
) -> None:
    (batch_size,) = set(_fetch(broker, big_topic, 1 << 30, [1 << 20] * 3))  # one batch each
    assert batch_size > BIG
    # the first partition's batch goes out whole; the others would break fetch.max.bytes
    assert _fetch(broker, big_topic, 1_000_000, [1 << 20] * 3) == [batch_size, 0, 0]
    assert _fetch(broker, big_topic, 2 * batch_size, [1 << 20] * 3) == [batch_size] * 2 + [0]
    # the same for the partition limit: the first may break it, the others not
    assert _fetch(broker, big_topic, 1 << 30, [1000, 1000, 1000]) == [batch_size, 0, 0]
    assert _fetch(broker, big_topic, 1 << 30, [1 << 20, 1000, 1 << 20]) == [
        batch_size,
        0,
        batch_size,
    ]


def test_later_partitions_get_the_whole_batches_that_fit(broker: BrokerProcess) -> None:
    topic = f"small-{uuid.uuid4().hex[:8]}"
    _create(broker, topic, 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for _ in range(10):
        for partition in range(2):
            producer.produce(topic, b"x" * 1000, partition=partition)
        producer.flush(WAIT)  # a batch each
    (one,) = {s // 10 for s in _fetch(broker, topic, 1 << 30, [1 << 20] * 2)}
    sizes = _fetch(broker, topic, int(4.5 * one), [int(2.5 * one), 1 << 20])
    assert sizes == [2 * one, 2 * one]  # the first: its limit; the second: what is left

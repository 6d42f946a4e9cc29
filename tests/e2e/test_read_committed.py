"""read_committed with real consumers, before any transaction coordinator: transactional
batches are produced over the raw wire and their transactions ended with the data plane's
`write_txn_markers`, called in-process on the broker's own trio thread (the call the
transaction coordinator makes). confluent-kafka, kafka-python and aiokafka consumers with
isolation.level=read_committed never see an aborted transaction's records, which
read_uncommitted consumers see; and an open transaction holds read_committed readers (and
ListOffsets) at its first offset until its marker is written. (The Produce requests name a
transactional id, as Kafka requires of transactional batches; no coordinator runs here to
verify them with, so none is asked, as Kafka's broker skips verification without one.)"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import aiokafka
import confluent_kafka
import kafka
import pytest
import trio

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.storage.data_plane import DataPlane

from ..batch_builder import build_batch
from ..raw_client import RawClient

pytestmark = pytest.mark.e2e

T = TypeVar("T")
TXN = 0x10
DEADLINE = 30.0


class InProcessBroker:
    """The real gateway on a loopback port, run by trio in a thread, over a DataPlane the
    test can reach (only through `call`, on the broker's trio thread)."""

    def __init__(self, data_dir: Path) -> None:
        self.data = DataPlane.open(data_dir, segment_bytes=1 << 20)
        self.config = BrokerConfig(data_dir=data_dir)
        self.port = 0
        self._ready = threading.Event()
        self._stop: trio.CancelScope | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    def start(self) -> InProcessBroker:
        self._thread.start()
        assert self._ready.wait(DEADLINE)
        return self

    async def _main(self) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        ctx = BrokerContext(self.config, self.data, "127.0.0.1", self.port, API_TABLE)

        async def serve(stream: trio.SocketStream) -> None:
            await serve_connection(stream, ctx, API_TABLE, ConnectionInfo("test", 1))

        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as self._stop:
            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, serve, listeners)
                self._ready.set()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def stop(self) -> None:
        assert self._stop is not None
        trio.from_thread.run_sync(self._stop.cancel, trio_token=self._token)
        self._thread.join(DEADLINE)
        self.data.close()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    process = InProcessBroker(tmp_path_factory.mktemp("read-committed")).start()
    yield process
    process.stop()


def txn_batch(pid: int, seq: int, values: list[str], *, txn: bool = True) -> bytes:
    return build_batch(
        [(None, v.encode()) for v in values],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        attributes=TXN if txn else 0,
    )


def end_txn(broker: InProcessBroker, topic: str, pid: int, committed: bool) -> None:
    codes = broker.call(partial(broker.data.write_txn_markers, 0, pid, 0, committed, [(topic, 0)]))
    assert codes == {(topic, 0): 0}


def confluent_read(broker: InProcessBroker, topic: str, isolation: str, count: int) -> list[str]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",  # required by the client; no group API is called
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got: list[str] = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        return got
    finally:
        consumer.close()


def kafka_python_read(broker: InProcessBroker, topic: str, isolation: str, count: int) -> list[str]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        group_id=None,
    )
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[str] = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value.decode() for r in records)
        return got
    finally:
        consumer.close()


def aiokafka_read(broker: InProcessBroker, topic: str, isolation: str, count: int) -> list[str]:
    async def run() -> list[str]:
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            isolation_level=isolation,
            enable_auto_commit=False,
            group_id=None,
        )
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got: list[str] = []
            deadline = time.monotonic() + DEADLINE
            while len(got) < count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(r.value.decode() for r in records if r.value is not None)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


READERS = {
    "confluent": confluent_read,
    "kafka-python": kafka_python_read,
    "aiokafka": aiokafka_read,
}


@pytest.fixture(scope="module")
def aborted_topic(broker: InProcessBroker) -> str:
    """a1 a2 (aborted, pid 1) interleaved with c1 c2 (committed, pid 2) and plain p1."""
    broker.data.create_topic("visibility", 1)  # before any client: no race with the trio thread
    raw = RawClient("127.0.0.1", broker.port)
    assert raw.produce("visibility", 0, txn_batch(1, 0, ["a1"]), "tx")[0] == 0
    assert raw.produce("visibility", 0, txn_batch(2, 0, ["c1"]), "tx")[0] == 0
    assert raw.produce("visibility", 0, txn_batch(3, 0, ["p1"], txn=False), "tx")[0] == 0
    assert raw.produce("visibility", 0, txn_batch(1, 1, ["a2"]), "tx")[0] == 0
    assert raw.produce("visibility", 0, txn_batch(2, 1, ["c2"]), "tx")[0] == 0
    raw.close()
    end_txn(broker, "visibility", 1, committed=False)
    end_txn(broker, "visibility", 2, committed=True)
    return "visibility"


@pytest.mark.parametrize("client", list(READERS))
def test_aborted_records_are_invisible_to_read_committed_only(
    broker: InProcessBroker, aborted_topic: str, client: str
) -> None:
    read = READERS[client]
    assert read(broker, aborted_topic, "read_committed", 3) == ["c1", "p1", "c2"]
    assert read(broker, aborted_topic, "read_uncommitted", 5) == ["a1", "c1", "p1", "a2", "c2"]


def test_an_open_transaction_holds_read_committed_readers_back(broker: InProcessBroker) -> None:
    broker.call(partial(_create, broker.data, "held"))
    raw = RawClient("127.0.0.1", broker.port)
    assert raw.produce("held", 0, txn_batch(5, 0, ["before"], txn=False), "tx") == (0, 0)
    assert raw.produce("held", 0, txn_batch(6, 0, ["open1"]), "tx") == (0, 1)
    assert raw.produce("held", 0, txn_batch(5, 1, ["after"], txn=False), "tx") == (0, 2)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    tp = confluent_kafka.TopicPartition("held", 0, 0)
    try:
        # ListOffsets with read_committed answers the LSO as the end.
        assert consumer.get_watermark_offsets(tp, timeout=DEADLINE, cached=False) == (0, 1)
        consumer.assign([tp])
        got: list[str] = []
        deadline = time.monotonic() + DEADLINE
        while not got and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        assert got == ["before"]
        for _ in range(5):  # a second of polling: nothing past the open transaction
            msg = consumer.poll(0.2)
            assert msg is None or msg.error() is not None, msg.value()
        (producer,) = [
            p for p in raw.describe_producers("held", 0).active_producers if p.producer_id == 6
        ]
        assert (producer.current_txn_start_offset, producer.last_sequence) == (1, 0)
        end_txn(broker, "held", 6, committed=True)
        deadline = time.monotonic() + DEADLINE
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        assert got == ["before", "open1", "after"]
        assert consumer.get_watermark_offsets(tp, timeout=DEADLINE, cached=False) == (0, 4)
        described = raw.describe_producers("held", 0).active_producers
        starts = [(p.producer_id, p.current_txn_start_offset) for p in described]
        assert starts == [(5, -1), (6, -1)]
    finally:
        consumer.close()
        raw.close()


async def _create(data: DataPlane, name: str) -> None:
    data.create_topic(name, 1)

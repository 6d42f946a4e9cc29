"""Producer state survives a SIGKILL of the broker: a batch retried after the restart gets
its original offset (no duplicate), a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an open
transaction still holds the last stable offset back; a real idempotent producer killed under
mid-stream loses and duplicates nothing; and confluent-kafka's transactional producer, through
the transaction coordinator's markers, hides what it aborted from read_committed consumers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from kio.schema.errors import ErrorCode

from ..batch_builder import build_batch, decode_batches
from ..broker_process import BrokerProcess
from ..raw_client import RawClient
from .clients import Confluent
from .test_read_committed import READERS

pytestmark = pytest.mark.e2e

TXN = 0x10


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # The raw transactional batches below belong to no transaction the coordinator knows
    # (the test leaves one open across the kill on purpose): Kafka's default verification
    # (KIP-890) would refuse them, so this broker runs without it, as Kafka would have to.
    process = BrokerProcess(
        Path(tmp_path_factory.mktemp("producer-state")) / "data",
        "transaction.partition.verification.enable=false",
    )
    process.start()
    yield process
    if process.alive():
        process.kill()


def idempotent(pid: int, seq: int, n: int, *, epoch: int = 0, txn: bool = False) -> bytes:
    records = [(None, f"{pid}:{seq + i}".encode()) for i in range(n)]
    return build_batch(
        records,
        base_timestamp=int(time.time() * 1000),  # not idle past producer.id.expiration.ms
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TXN if txn else 0,
    )


def restart(broker: BrokerProcess) -> RawClient:
    broker.kill()
    broker.start()
    return RawClient(broker.host, broker.port)


def test_retries_and_gaps_across_a_sigkill(broker: BrokerProcess) -> None:
    Confluent(broker.bootstrap).create_topic("raw-idem", 1)
    client = RawClient(broker.host, broker.port)
    assert client.produce("raw-idem", 0, idempotent(1, 0, 3)) == (0, 0)
    assert client.produce("raw-idem", 0, idempotent(1, 3, 3)) == (0, 3)
    assert client.produce("raw-idem", 0, idempotent(2, 0, 2, epoch=1, txn=True), "tx") == (0, 6)
    client.close()

    client = restart(broker)
    assert client.produce("raw-idem", 0, idempotent(1, 3, 3)) == (0, 3)  # a retry: same offset
    assert client.produce("raw-idem", 0, idempotent(1, 0, 3)) == (0, 0)
    gap = client.produce("raw-idem", 0, idempotent(1, 7, 1))
    assert gap == (ErrorCode.out_of_order_sequence_number.value, -1)
    old_epoch = client.produce("raw-idem", 0, idempotent(2, 2, 1, epoch=0, txn=True), "tx")
    assert old_epoch[0] == ErrorCode.invalid_producer_epoch.value
    assert client.produce("raw-idem", 0, idempotent(1, 6, 1)) == (0, 8)
    # pid 2's transaction, open before the kill, still holds read_committed readers back.
    committed = client.fetch("raw-idem", 0, 0, isolation_level=1)
    assert committed.last_stable_offset == 6 and committed.high_watermark == 9
    assert [r.offset for r in decode_batches(committed.records)] == list(range(6))
    assert committed.aborted_transactions == ()
    uncommitted = client.fetch("raw-idem", 0, 0, isolation_level=0)
    values = [r.value for r in decode_batches(uncommitted.records)]
    assert len(values) == len(set(values)) == 9  # nothing written twice
    client.close()


def test_idempotent_producer_killed_under_mid_stream(broker: BrokerProcess) -> None:
    """librdkafka keeps its producer id and sequences across the broker's SIGKILL and resends
    what was in flight: every record lands exactly once, in order."""
    total = 3000
    client = Confluent(broker.bootstrap)
    client.create_topic("idem-kill", 1)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 50,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
        }
    )
    acked = 0
    errors: list[object] = []
    halfway = threading.Event()

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal acked
        if err is not None:
            errors.append(err)
        else:
            acked += 1
            if acked >= total // 3:
                halfway.set()

    for i in range(total):
        producer.produce("idem-kill", f"v{i:05d}".encode(), partition=0, on_delivery=on_delivery)
        producer.poll(0)
        if i == total // 2:
            while not halfway.is_set():
                producer.poll(0.05)
            broker.kill()  # batches are in flight and in the queue
            broker.start()
    assert producer.flush(60) == 0
    assert errors == [] and acked == total
    got = client.read_all("idem-kill", 1, total)[0]
    assert got == [f"v{i:05d}".encode() for i in range(total)]


def test_confluent_transactional_producer_aborted_and_committed(broker: BrokerProcess) -> None:
    """confluent-kafka's transactional producer against the coordinator: what it aborted is
    invisible to read_committed consumers and visible to read_uncommitted ones."""
    Confluent(broker.bootstrap).create_topic("txn-e2e", 1)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "e2e-txn", "linger.ms": 5}
    )
    producer.init_transactions(30)
    for label, commit in (("c1", True), ("a1", False), ("c2", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txn-e2e", f"{label}-{i}".encode(), partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = [f"{label}-{i}" for label in ("c1", "c2") for i in range(3)]
    everything = [f"{label}-{i}" for label in ("c1", "a1", "c2") for i in range(3)]
    for read in READERS.values():
        assert read(broker, "txn-e2e", "read_committed", 6) == committed  # type: ignore[arg-type]
        assert read(broker, "txn-e2e", "read_uncommitted", 9) == everything  # type: ignore[arg-type]

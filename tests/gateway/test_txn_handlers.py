"""Produce, Fetch and ListOffsets over transactional data, called as plain functions: the
Produce answer carries the data plane's verdict, Fetch's last_stable_offset and aborted
transactions are filled for read_committed only, and ListOffsets ends at the LSO for
read_committed (latest, and offsets found by timestamp)."""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane

from ..batch_builder import build_batch, fix_crc

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
TXN = 0x10
T0 = int(time.time() * 1000) + 3_600_000  # after the markers' timestamps (now)


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("t", 1)
    yield BrokerContext(BrokerConfig(data_dir=tmp_path), data, "127.0.0.1", 9092, API_TABLE)
    data.close()


def nested(key: int, version: int, cls_name: str, **values: Any) -> Any:
    module = sys.modules[request_class(key, version).__module__]
    return make(getattr(module, cls_name), **values)


def produce(ctx: BrokerContext, batch: bytes, transactional_id: str | None = "tx") -> Any:
    part = nested(PRODUCE, 9, "PartitionProduceData", index=0, records=batch)
    topic = nested(PRODUCE, 9, "TopicProduceData", name="t", partition_data=(part,))
    request = make(
        request_class(PRODUCE, 9),
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(topic,),
    )
    response = API_TABLE[PRODUCE].handler(ctx, ConnectionInfo("h", 1), 9, request)
    return response.responses[0].partition_responses[0]


def fetch(ctx: BrokerContext, isolation: int) -> Any:
    part = nested(
        FETCH, 11, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    request = make(
        request_class(FETCH, 11),
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        isolation_level=isolation,
        topics=(nested(FETCH, 11, "FetchTopic", topic="t", partitions=(part,)),),
        forgotten_topics_data=(),
    )
    response = API_TABLE[FETCH].handler(ctx, ConnectionInfo("h", 1), 11, request)
    return response.responses[0].partitions[0]


def list_offset(ctx: BrokerContext, timestamp: int, isolation: int) -> int:
    part = nested(LIST_OFFSETS, 5, "ListOffsetsPartition", partition_index=0, timestamp=timestamp)
    request = make(
        request_class(LIST_OFFSETS, 5),
        replica_id=-1,
        isolation_level=isolation,
        topics=(nested(LIST_OFFSETS, 5, "ListOffsetsTopic", name="t", partitions=(part,)),),
    )
    response = API_TABLE[LIST_OFFSETS].handler(ctx, ConnectionInfo("h", 1), 5, request)
    answer = response.topics[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    return int(answer.offset)


def batch(pid: int, seq: int, ts: int, *, epoch: int = 0, txn: bool = True) -> bytes:
    return build_batch(
        [(None, b"v")],
        base_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TXN if txn else 0,
    )


def test_produce_answers_the_producer_state_verdict(ctx: BrokerContext) -> None:
    assert (
        produce(ctx, batch(1, 0, T0)).base_offset,
        produce(ctx, batch(1, 1, T0)).base_offset,
    ) == (0, 1)
    retry = produce(ctx, batch(1, 0, T0))
    assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 0)
    gap = produce(ctx, batch(1, 5, T0))
    # (no message: Kafka 4.3.1 sends one with a Produce error only beside record errors)
    assert gap.error_code == ErrorCode.out_of_order_sequence_number and gap.error_message is None
    control = bytearray(batch(1, 2, T0))
    control[22] |= 0x20  # the control bit (attributes' low byte)
    refused = produce(ctx, fix_crc(bytes(control)))
    assert refused.error_code == ErrorCode.invalid_record and refused.error_message


def test_a_transactional_batch_without_a_transactional_id_is_not_authorized(
    ctx: BrokerContext,
) -> None:
    """Kafka 4.3.1 refuses it before looking at the batch: no write, -1 offsets, no message."""
    refused = produce(ctx, batch(1, 0, T0), transactional_id=None)
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed
    assert (refused.base_offset, refused.log_start_offset, refused.error_message) == (-1, -1, None)
    idempotent = produce(ctx, batch(1, 0, T0, txn=False), transactional_id=None)
    assert (idempotent.error_code, idempotent.base_offset) == (ErrorCode.none, 0)


def test_fetch_and_list_offsets_honour_the_isolation_level(ctx: BrokerContext) -> None:
    produce(ctx, batch(1, 0, T0))  # 0: aborted at 2
    produce(ctx, batch(2, 0, T0 + 1, txn=False))  # 1
    trio.run(ctx.data.write_txn_markers, 0, 1, 0, False, [("t", 0)])
    produce(ctx, batch(3, 0, T0 + 3))  # 3: open
    produce(ctx, batch(2, 1, T0 + 4, txn=False))  # 4
    committed, uncommitted = fetch(ctx, 1), fetch(ctx, 0)
    assert committed.last_stable_offset == uncommitted.last_stable_offset == 3
    assert committed.high_watermark == uncommitted.high_watermark == 5
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(1, 0)]
    assert uncommitted.aborted_transactions is None
    assert len(committed.records) < len(uncommitted.records)
    assert list_offset(ctx, -1, 1) == 3 and list_offset(ctx, -1, 0) == 5
    assert list_offset(ctx, T0 + 1, 1) == 1
    assert list_offset(ctx, T0 + 4, 1) == -1 and list_offset(ctx, T0 + 4, 0) == 4

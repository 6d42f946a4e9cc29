"""A Fetch partition that fails says what Kafka 4.3.1 says beside the error (seen side by side
by the differential check, tests/kafka_diff): -1 for the high watermark, the last stable
offset and the log start offset; aborted transactions null beside OFFSET_OUT_OF_RANGE and an
empty list beside a partition not served."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane

from ..batch_builder import build_batch
from .test_handlers_sans_io import nested

FETCH = 1


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    topic = data.create_topic("t", 1, org_id=0)
    topic.partitions[0].append([build_batch([(None, b"a"), (None, b"b")])])
    yield BrokerContext(BrokerConfig(data_dir=tmp_path), data, "127.0.0.1", 9092, API_TABLE)
    data.close()


def fetch(ctx: BrokerContext, partition: int, offset: int, isolation_level: int) -> Any:
    wanted = nested(
        FETCH, 12, "FetchPartition", partition=partition, fetch_offset=offset,
        partition_max_bytes=1 << 20,
    )  # fmt: skip
    request = make(
        request_class(FETCH, 12),
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        isolation_level=isolation_level,
        topics=(nested(FETCH, 12, "FetchTopic", topic="t", partitions=(wanted,)),),
        forgotten_topics_data=(),
    )
    response = API_TABLE[FETCH].handler(ctx, ConnectionInfo("10.0.0.7", 4242), 12, request)
    return response.responses[0].partitions[0]


@pytest.mark.parametrize("isolation_level", [0, 1])
@pytest.mark.parametrize(
    ("partition", "offset", "error", "aborted"),
    [
        (0, 3, ErrorCode.offset_out_of_range, None),
        (0, -1, ErrorCode.offset_out_of_range, None),
        (4, 0, ErrorCode.unknown_topic_or_partition, ()),
    ],
)
def test_a_failed_partition_has_kafkas_fields(
    ctx: BrokerContext,
    partition: int,
    offset: int,
    error: ErrorCode,
    aborted: tuple[()] | None,
    isolation_level: int,
) -> None:
    failed = fetch(ctx, partition, offset, isolation_level)
    assert failed.error_code == error
    offsets = (failed.high_watermark, failed.last_stable_offset, failed.log_start_offset)
    assert offsets == (-1, -1, -1)
    assert failed.aborted_transactions == aborted
    assert failed.records in (b"", None)


def test_a_read_has_its_offsets_and_aborted_transactions_only_when_read_committed(
    ctx: BrokerContext,
) -> None:
    read = fetch(ctx, 0, 0, 0)
    assert (read.error_code, read.high_watermark, read.log_start_offset) == (0, 2, 0)
    assert read.aborted_transactions is None
    assert fetch(ctx, 0, 0, 1).aborted_transactions == ()

"""Fault: a partition log's disk refuses an append (ENOSPC, EIO, EDQUOT).

Guarantee: Produce answers KAFKA_STORAGE_ERROR (retriable) for the partitions whose write
failed and stores the others; nothing unstored gets an offset; the broker logs one line per
10 s with a count, not a traceback per request; the failure leaves no reference cycle behind
(one holding the request's buffers grew the RSS by 120 MB in 30 s of a full disk); and once
the disk takes writes again the partition carries on at the offset where it stopped.
"""

from __future__ import annotations

import datetime
import errno
import gc
import logging
import os
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
from rafka_actors.storage.failures import STORAGE_LOG

from ..batch_builder import build_batch
from ..disk_faults import failing_write

PRODUCE = 0


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("full", 1)
    data.create_topic("fine", 1)
    yield BrokerContext(BrokerConfig(data_dir=tmp_path), data, "127.0.0.1", 9092, API_TABLE)
    data.close()


def produce(*names: str) -> Any:
    module = __import__(request_class(PRODUCE, 9).__module__, fromlist=["_"])
    topics = tuple(
        make(
            module.TopicProduceData,
            name=name,
            partition_data=(
                make(
                    module.PartitionProduceData,
                    index=0,
                    records=build_batch([(None, b"v" * 1000)]),
                ),
            ),
        )
        for name in names
    )
    return make(
        request_class(PRODUCE, 9),
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=topics,
        transactional_id=None,
    )


def answers(response: Any) -> dict[str, tuple[int, int]]:
    return {
        t.name: (int(p.error_code), p.base_offset)
        for t in response.responses
        for p in t.partition_responses
    }


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EDQUOT])
def test_a_refused_append_gets_kafka_storage_error_and_other_partitions_are_stored(
    ctx: BrokerContext,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    code: int,
) -> None:
    STORAGE_LOG.reset()
    handle = API_TABLE[PRODUCE].handler
    conn = ConnectionInfo("10.0.0.7", 4242)
    assert answers(handle(ctx, conn, 9, produce("full", "fine"))) == {
        "full": (0, 0),
        "fine": (0, 0),
    }
    write = failing_write(code, under=str(tmp_path / "topics" / "full"))
    monkeypatch.setattr(os, "write", write)
    gc.collect()
    gc.disable()
    try:
        for i in range(1, 51):
            assert answers(handle(ctx, conn, 9, produce("full", "fine"))) == {
                "full": (ErrorCode.kafka_storage_error, -1),
                "fine": (0, i),
            }
        cycles = gc.collect()
    finally:
        gc.enable()
    assert cycles == 0  # nothing the failures made waits for the cycle collector
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1 and os.strerror(code) in failures[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)  # no traceback

    write.fail = False  # type: ignore[attr-defined]
    assert answers(handle(ctx, conn, 9, produce("full")))["full"] == (0, 1)
    assert ctx.data.topics.by_name("full").partitions[0].log_end_offset == 2  # type: ignore[union-attr]

"""Encode-time benchmark, kio's writer vs the generated encoders (deselected by default).

Run with: ``pytest tests/unit/test_protocol_encoder_bench.py -m slow -s -q``
"""

from __future__ import annotations

import datetime
import io
import timeit
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.offset_commit.v8 import response as commit
from kio.serial import entity_writer

from rafka_actors.protocol.codec import encode_response
from rafka_actors.protocol.fast_encoder import encoder
from rafka_actors.protocol.headers import RequestHeader

ZERO = datetime.timedelta(0)


def heartbeat() -> Any:
    return HeartbeatResponse(throttle_time=ZERO, error_code=ErrorCode.none)


def offset_commit_100() -> Any:
    partitions = tuple(
        commit.OffsetCommitResponsePartition(partition_index=i, error_code=ErrorCode.none)
        for i in range(100)
    )
    topic = commit.OffsetCommitResponseTopic(name="topic-a", partitions=partitions)
    return commit.OffsetCommitResponse(throttle_time=ZERO, topics=(topic,))


def fetch_6x64k() -> Any:
    blob = bytes(range(256)) * 256  # 64 KiB
    partitions = tuple(
        fetch.PartitionData(
            partition_index=i,
            error_code=ErrorCode.none,
            high_watermark=1000,
            aborted_transactions=None,
            records=blob,
        )
        for i in range(6)
    )
    topic = fetch.FetchableTopicResponse(topic="topic-a", partitions=partitions)
    return fetch.FetchResponse(throttle_time=ZERO, error_code=ErrorCode.none, responses=(topic,))


def best_per_call(fn: Callable[[], object]) -> float:
    number, _ = timeit.Timer(fn).autorange()
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


@pytest.mark.slow
@pytest.mark.parametrize("factory", [heartbeat, offset_commit_100, fetch_6x64k])
def test_encode_benchmark(factory: Callable[[], Any]) -> None:
    entity = factory()
    cls = type(entity)
    write, fast = entity_writer(cls), encoder(cls)
    header = RequestHeader(cls.__api_key__, cls.__version__, 1, "bench")

    def kio() -> bytes:
        buffer = io.BytesIO()
        write(buffer, entity)
        return buffer.getvalue()

    assert fast(entity) == kio()
    kio_s, fast_s = best_per_call(kio), best_per_call(lambda: fast(entity))
    frame_s = best_per_call(lambda: encode_response(header, entity))
    print(
        f"\n{cls.__name__} v{cls.__version__} ({factory.__name__}): "
        f"kio {kio_s * 1e6:.2f} us, generated {fast_s * 1e6:.2f} us "
        f"(x{kio_s / fast_s:.1f}), full frame via encode_response {frame_s * 1e6:.2f} us"
    )
    assert fast_s < kio_s

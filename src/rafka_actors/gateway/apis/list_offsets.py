"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3) or the first by timestamp.

Without transactions the last stable offset equals the high watermark, so read_committed and
read_uncommitted get the same answer. Timestamps resolve at batch granularity: the first batch
whose max timestamp reaches the asked one (clients then skip earlier records themselves).
Topics are the connection's org's; one outside the user's prefixes gets
TOPIC_AUTHORIZATION_FAILED per partition, whether or not it exists (Kafka: DESCRIBE denied).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...storage.partition_log import PartitionLog
from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    topics = []
    for wanted in request.topics:
        allowed = conn.may_use_topic(wanted.name)
        topic = store.by_name(wanted.name) if allowed else None
        results = []
        for p in wanted.partitions:
            if not allowed:
                code, timestamp, offset = ErrorCode.topic_authorization_failed, -1, -1
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                code, timestamp, offset = ErrorCode.unknown_topic_or_partition, -1, -1
            else:
                code = ErrorCode.none
                timestamp, offset = _resolve(topic.partitions[p.partition_index], p.timestamp)
            results.append(
                make(
                    mod.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=0 if code is ErrorCode.none else -1,
                )
            )
        topics.append(
            make(mod.ListOffsetsTopicResponse, name=wanted.name, partitions=tuple(results))
        )
    return make(mod.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _resolve(log: PartitionLog, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) as Kafka answers them."""
    if timestamp == LATEST:
        return -1, log.log_end_offset
    if timestamp == EARLIEST:
        return -1, log.log_start_offset
    found = (
        log.max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    )
    if found is None:
        return -1, -1
    offset, found_timestamp = found
    return found_timestamp, offset

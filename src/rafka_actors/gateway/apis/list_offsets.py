"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3) or the first by timestamp.

With isolation_level=1 (read_committed) the last fetchable offset is the partition's last
stable offset instead of the high watermark, as in Kafka: latest answers it, and a timestamp's
offset at or past it is not found (-1, with leader epoch -1). A timestamp resolves to the first
record whose timestamp reaches it, and max timestamp to the first record carrying the largest
(storage/partition_log.py), each with that record's timestamp.
Topics are the connection's org's; one outside the user's prefixes gets
TOPIC_AUTHORIZATION_FAILED per partition, whether or not it exists (Kafka: DESCRIBE denied).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...storage.partition_log import PartitionLog
from ..context import BrokerContext, ConnectionInfo, file_io
from ._build import NO_THROTTLE, make, schema

KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_COMMITTED = 1


@file_io
def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    committed = version >= 2 and request.isolation_level == READ_COMMITTED
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
                log = topic.partitions[p.partition_index]
                fetchable = (
                    ctx.data.last_stable_offset(topic, p.partition_index)
                    if committed
                    else log.log_end_offset
                )
                timestamp, offset = _resolve(log, p.timestamp, fetchable)
            results.append(
                make(
                    mod.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=0 if offset >= 0 else -1,
                )
            )
        topics.append(
            make(mod.ListOffsetsTopicResponse, name=wanted.name, partitions=tuple(results))
        )
    return make(mod.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _resolve(log: PartitionLog, timestamp: int, fetchable: int) -> tuple[int, int]:
    """(timestamp, offset) as Kafka answers them; `fetchable` is the last offset a reader of
    the request's isolation level may fetch up to (the high watermark or the LSO)."""
    if timestamp == LATEST:
        return -1, fetchable
    if timestamp == EARLIEST:
        return -1, log.log_start_offset
    found = (
        log.max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    )
    if found is None or found[0] >= fetchable:
        return -1, -1
    offset, found_timestamp = found
    return found_timestamp, offset

"""Fetch (1): whole record batches from the partition logs, with long polling.

Topics are named by name before v13 and by topic id from v13 (librdkafka switches at v13).
The read starts at the batch that contains the fetch offset (clients skip earlier records)
and returns whole batches within the partition's `partition_max_bytes` and what is left of the
response's `max_bytes` (fetch.max.bytes). As KIP-74 says, only the first partition that returns
data may break both limits, with its first batch whole, so a consumer always makes progress and
a response stays within fetch.max.bytes otherwise (librdkafka refuses a larger one). If fewer than
`min_bytes` are found the request parks until an append to one of its partitions or until
`max_wait_ms`, whichever is first: an event, not a polling loop (see data_plane.py).

Fetch sessions (KIP-227) are not kept: we answer session id 0, which tells the client to send
full fetch requests, as a broker whose session cache is full does.

With isolation_level=1 (read_committed) a partition is read only below its last stable
offset, and the aborted transactions overlapping what was read go with it (the data plane
keeps both; storage/producer_state.py). Every answer carries the last stable offset.

Names and ids resolve in the connection's org only (an id of another org's topic is unknown
here). A topic outside the user's prefixes gets TOPIC_AUTHORIZATION_FAILED per partition, after
an unknown id's UNKNOWN_TOPIC_ID and before any other check, in the order of Kafka's KafkaApis.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from ...storage.data_plane import DataPlane, PartitionKey
from ...storage.producer_state import AbortedTxn
from ...storage.topics import Topic, TopicStore
from ..context import BrokerContext, ConnectionInfo, file_io
from ..steps import AwaitAppend
from ._build import NO_THROTTLE, make, schema, to_ms

KEY = 1
READ_COMMITTED = 1


@file_io
def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    return _poll(ctx, conn, version, request, max(0, to_ms(request.max_wait)) / 1000)


def _poll(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any, wait_s: float
) -> Any:
    """The response if enough was found (or the wait is over), else a wait for an append to
    one of the partitions read, after which they are read again."""
    mod = schema(KEY, version)
    topics, found_bytes, errors, keys, reads = _read(ctx, conn, mod, version, request)
    if found_bytes >= request.min_bytes or errors or wait_s <= 0 or not keys:
        if reads and ctx.metrics is not None:  # (counted for the response that goes out)
            ctx.metrics.traffic.fetched(conn.org_id, reads)
        return make(
            mod.FetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            session_id=0,
            responses=tuple(topics),
        )
    return AwaitAppend(keys, wait_s, lambda left_s: _poll(ctx, conn, version, request, left_s))


def _read(
    ctx: BrokerContext, conn: ConnectionInfo, mod: Any, version: int, request: Any
) -> tuple[list[Any], int, bool, list[PartitionKey], list[tuple[str, int, int]]]:
    """The topics' responses, the bytes found, whether any partition failed, the partitions
    read, and (topic, bytes, offsets moved on) of each that found records (the metrics')."""
    budget = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    total, errors, keys, topics, reads = 0, False, [], [], []
    counting = ctx.metrics is not None
    store = ctx.data.topics_for(conn.org_id)
    committed = request.isolation_level == READ_COMMITTED
    for wanted in request.topics:
        topic = _find(store, wanted, version)
        refusal = _refusal(conn, topic, wanted, version)
        parts = []
        for p in wanted.partitions:
            if refusal is None:
                read = _read_partition(
                    ctx.data, topic, p, budget - total, first=total == 0, committed=committed
                )
            else:
                read = _Read(refusal)
            total += len(read.records)
            if counting and read.records and topic is not None:
                reads.append((topic.name, len(read.records), read.end - p.fetch_offset))
            errors = errors or read.code is not ErrorCode.none
            if read.code is ErrorCode.none and topic is not None:
                keys.append((topic.topic_id, p.partition))
            parts.append(_partition_data(mod, p.partition, read, committed))
        topics.append(
            make(
                mod.FetchableTopicResponse,
                topic=None if version >= 13 else wanted.topic,
                topic_id=wanted.topic_id if version >= 13 else None,
                partitions=tuple(parts),
            )
        )
    return topics, total, errors, keys, reads


def _find(store: TopicStore, wanted: Any, version: int) -> Topic | None:
    if version >= 13:
        return store.by_id(wanted.topic_id)
    return store.by_name(wanted.topic)


def _refusal(
    conn: ConnectionInfo, topic: Topic | None, wanted: Any, version: int
) -> ErrorCode | None:
    """Why none of this topic's partitions is read: an unknown id, or a topic not allowed."""
    if topic is None and version >= 13:
        return ErrorCode.unknown_topic_id
    name = wanted.topic if topic is None else topic.name
    return None if conn.may_use_topic(name) else ErrorCode.topic_authorization_failed


class _Read(NamedTuple):
    code: ErrorCode
    records: bytes = b""
    hw: int = -1
    lso: int = -1
    start: int = -1
    aborted: tuple[AbortedTxn, ...] = ()
    end: int = -1  # the offset after the last batch read


def _read_partition(
    data: DataPlane, topic: Topic | None, p: Any, budget: int, *, first: bool, committed: bool
) -> _Read:
    if topic is None:
        return _Read(ErrorCode.unknown_topic_or_partition)
    if not 0 <= p.partition < len(topic.partitions):
        return _Read(ErrorCode.unknown_topic_or_partition)
    log = topic.partitions[p.partition]
    hw, start = log.log_end_offset, log.log_start_offset
    if not start <= p.fetch_offset <= hw:  # with Kafka's -1s for the offsets (no read)
        return _Read(ErrorCode.offset_out_of_range)
    lso = data.last_stable_offset(topic, p.partition)
    limit = min(p.partition_max_bytes, budget)
    if limit <= 0 and not first:
        return _Read(ErrorCode.none, b"", hw, lso, start)
    if not committed:
        records, end = log.read_until(p.fetch_offset, max(limit, 1), hw, min_one=first)
        return _Read(ErrorCode.none, records, hw, lso, start, (), end)
    records, aborted, end = data.read_committed(
        topic, p.partition, p.fetch_offset, max(limit, 1), min_one=first
    )
    return _Read(ErrorCode.none, records, hw, lso, start, tuple(aborted), end)


@functools.lru_cache(maxsize=4096)
def _aborted_entry(cls: type, producer_id: int, first_offset: int) -> Any:
    """An aborted transaction's kio entry: immutable, and sent again to every read_committed
    reader of its range, so built once."""
    return make(cls, producer_id=producer_id, first_offset=first_offset)


_NOT_SERVED = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
        ErrorCode.topic_authorization_failed,
    }
)


def _partition_data(mod: Any, index: int, read: _Read, committed: bool) -> Any:
    """A partition's answer; its aborted transactions null unless read_committed, as Kafka
    4.3.1 answers: null beside OFFSET_OUT_OF_RANGE too (a failed read of the log), empty
    beside a partition not served (the field's default)."""
    aborted: tuple[Any, ...] | None = () if read.code in _NOT_SERVED else None
    if committed and read.code is ErrorCode.none:
        aborted = tuple(
            _aborted_entry(mod.AbortedTransaction, t.producer_id, t.first_offset)
            for t in read.aborted
        )
    return make(
        mod.PartitionData,
        partition_index=index,
        error_code=read.code,
        high_watermark=read.hw,
        last_stable_offset=read.lso,
        log_start_offset=read.start,
        aborted_transactions=aborted,
        preferred_read_replica=-1,
        records=read.records,
    )

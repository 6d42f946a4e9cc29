"""Produce (0): validate each partition's record batches and append them.

The broker checks the framing and CRC-32C and assigns offsets; the topic's configs may rewrite
a batch (storage/append_rules.py: LogAppendTime, compression.type) or refuse it
(INVALID_TIMESTAMP, with one record error per record at fault, KIP-467). A LogAppendTime
topic's answer carries the time stamped. acks=0 gets no response at all (the client expects none);
acks=1 and acks=-1 mean the same here (one replica) and are answered once the batches are in
the OS page cache, which survives a kill of the broker process.

Idempotent and transactional batches are checked against the partition's producer state by
the data plane (storage/producer_state.py), which answers Kafka's errors or, for a retried
batch, the offset it was first written at.

Topics are the connection's org's; a topic outside the user's prefixes gets
TOPIC_AUTHORIZATION_FAILED on each of its partitions, before anything else is checked (Kafka's
answer when WRITE is denied).

A partition whose disk refuses the write (full, or failing) gets KAFKA_STORAGE_ERROR, as Kafka
answers for a log dir that failed; it is retriable, and the other partitions are unaffected.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from ...storage.data_plane import AppendResult
from ...storage.failures import StorageError
from ...storage.record_batch import InvalidRecordError, parse_header, split_batches
from ...storage.topic_configs import effective_long
from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 0


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    acks_ok = request.acks in (-1, 0, 1)
    topics = []
    for topic_data in request.topic_data:
        partitions = tuple(
            _produce_partition(ctx, conn, mod, topic_data.name, p, acks_ok)
            for p in topic_data.partition_data
        )
        topics.append(
            make(mod.TopicProduceResponse, name=topic_data.name, partition_responses=partitions)
        )
    if request.acks == 0:
        return None
    return make(mod.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)


def _produce_partition(
    ctx: BrokerContext,
    conn: ConnectionInfo,
    mod: Any,
    name: str,
    data: Any,
    acks_ok: bool,
) -> Any:
    result, log_start = _append(ctx, conn, name, data, acks_ok)
    return make(
        mod.PartitionProduceResponse,
        index=data.index,
        error_code=result.error,
        base_offset=result.base_offset,
        log_append_time=_datetime(result.log_append_time),
        log_start_offset=log_start,
        record_errors=_record_errors(mod, result.record_errors),
        error_message=result.message or None,
    )


def _record_errors(mod: Any, errors: tuple[tuple[int, str], ...]) -> tuple[Any, ...]:
    entry = getattr(mod, "BatchIndexAndErrorMessage", None)  # v8+
    if entry is None or not errors:
        return ()
    return tuple(make(entry, batch_index=i, batch_index_error_message=why) for i, why in errors)


def _datetime(ms: int) -> datetime.datetime | None:
    """kio's datetime for a time in ms; None for -1 (no LogAppendTime)."""
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


def _append(
    ctx: BrokerContext, conn: ConnectionInfo, name: str, data: Any, acks_ok: bool
) -> tuple[AppendResult, int]:
    """What became of the partition's batches, and the partition's log start (-1: none)."""
    if not conn.may_use_topic(name):
        return AppendResult(ErrorCode.topic_authorization_failed, -1), -1
    if not acks_ok:
        return AppendResult(ErrorCode.invalid_required_acks, -1), -1
    topic = ctx.data.topics_for(conn.org_id).by_name(name)
    if topic is None or not 0 <= data.index < len(topic.partitions):
        return AppendResult(ErrorCode.unknown_topic_or_partition, -1), -1
    log_start = topic.partitions[data.index].log_start_offset
    if not data.records:
        return AppendResult(ErrorCode.invalid_record, -1), log_start
    try:
        batches = split_batches(data.records)
    except InvalidRecordError as exc:
        code = ErrorCode.corrupt_message if exc.corrupt else ErrorCode.invalid_record
        return AppendResult(code, -1), log_start
    max_bytes = effective_long(topic.configs, "max.message.bytes", ctx.config.message_max_bytes)
    for batch in batches:
        if len(batch) > max_bytes:
            return AppendResult(ErrorCode.message_too_large, -1), log_start
        if parse_header(batch).is_control:
            message = "clients may not write control batches"
            return AppendResult(ErrorCode.invalid_record, -1, message), log_start
    try:
        return ctx.data.append(topic, data.index, batches), log_start
    except StorageError:  # (not bound: see storage/failures.py)
        return AppendResult(ErrorCode.kafka_storage_error, -1), log_start

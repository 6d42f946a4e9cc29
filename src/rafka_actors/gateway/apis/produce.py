"""Produce (0): validate each partition's record batches and append them.

The broker checks the framing and CRC-32C and assigns offsets; the topic's configs may rewrite
a batch (storage/append_rules.py: LogAppendTime, compression.type) or refuse it
(INVALID_TIMESTAMP, with one record error per record at fault, KIP-467). A LogAppendTime
topic's answer carries the time stamped. acks=0 gets no response at all (the client expects none);
acks=1 and acks=-1 mean the same here (one replica) and are answered once the batches are in
the OS page cache, which survives a kill of the broker process.

Idempotent and transactional batches are checked against the partition's producer state by
the data plane (storage/producer_state.py), which answers Kafka's errors or, for a retried
batch, the offset it was first written at. Its explanation of a refusal is logged at DEBUG,
not sent: Kafka's Produce carries an error message only with record errors (KIP-467). A
transactional batch in a request without a transactional id (or with one the user may not
use) is TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, as Kafka answers before it
looks at the batches. Transactional batches are checked with the transaction coordinator
before they open a transaction in a partition (produce_txn.py, KIP-890): the request then
waits for it, and its partitions are appended after (looked up again: a topic deleted
meanwhile is UNKNOWN_TOPIC_OR_PARTITION).

Topics are the connection's org's; a topic outside the user's prefixes gets
TOPIC_AUTHORIZATION_FAILED on each of its partitions, before anything else is checked (Kafka's
answer when WRITE is denied).

A partition whose disk refuses the write (full, or failing) gets KAFKA_STORAGE_ERROR, as Kafka
answers for a log dir that failed; it is retriable, and the other partitions are unaffected.

A compacted topic (`cleanup.policy` with `compact`) refuses a batch holding records without a
key, as Kafka's LogValidator does: INVALID_RECORD for the whole partition, with one record
error (KIP-467) per keyless record and Kafka's error message; nothing of it is stored. A
client fails those records with INVALID_RECORD and the batch's others with a retriable error
of its own (librdkafka's _INVALID_DIFFERENT_RECORD).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from ...storage.failures import StorageError
from ...storage.keyed_records import keyless_records
from ...storage.record_batch import InvalidRecordError, parse_header, split_batches
from ...storage.topic_configs import cleanup_policies, effective_long
from ...storage.topics import Topic
from ..context import BrokerContext, ConnectionInfo, file_io
from ._build import NO_THROTTLE, make, schema
from .produce_txn import NOT_VERIFIED, Pending, Verdict, verify_then

KEY = 0
log = logging.getLogger(__name__)

RecordErrors = tuple[tuple[int, str], ...]


class _Answer(NamedTuple):
    """A partition's answer."""

    code: ErrorCode
    base_offset: int = -1
    log_start: int = -1
    message: str = ""
    record_errors: RecordErrors = ()
    log_append_time: int = -1  # the time stamped on the batch (LogAppendTime topics)


@file_io
def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    acks_ok = request.acks in (-1, 0, 1)
    if _has_transactional(request) and not (
        request.transactional_id and conn.may_use_transactional_id(request.transactional_id)
    ):
        denied = _Answer(ErrorCode.transactional_id_authorization_failed)
        return _response(
            mod, request, [denied] * sum(len(t.partition_data) for t in request.topic_data)
        )
    slots: list[_Answer | Pending] = [
        _prepare(ctx, conn, topic_data.name, p, acks_ok)
        for topic_data in request.topic_data
        for p in topic_data.partition_data
    ]
    at = [i for i, slot in enumerate(slots) if type(slot) is Pending]
    pending: list[Pending] = [slots[i] for i in at]  # type: ignore[misc]
    if not any(p.header.is_transactional for p in pending):  # (the usual case: no waiting)
        for i, p in zip(at, pending, strict=True):
            slots[i] = _append(ctx, conn, p, NOT_VERIFIED)
        return _response(mod, request, slots)

    def append(verdicts: list[Verdict]) -> Any:
        answers = slots
        for i, p, verdict in zip(at, pending, verdicts, strict=True):
            answers[i] = _append(ctx, conn, p, verdict)
        return _response(mod, request, answers)

    return verify_then(ctx, conn, version, request.transactional_id, pending, append)


def _response(mod: Any, request: Any, answers: list[_Answer | Pending]) -> Any:
    """The response, one answer per partition in request order (all _Answers by now)."""
    if request.acks == 0:
        return None
    each = iter(answers)
    topics = []
    for topic_data in request.topic_data:
        rows = []
        for data in topic_data.partition_data:
            answer: _Answer = next(each)  # type: ignore[assignment]
            rows.append(
                make(
                    mod.PartitionProduceResponse,
                    index=data.index,
                    error_code=answer.code,
                    base_offset=answer.base_offset,
                    log_append_time=_datetime(answer.log_append_time),
                    log_start_offset=answer.log_start,
                    record_errors=_record_errors(mod, answer.record_errors),
                    error_message=answer.message or None,
                )
            )
        topics.append(
            make(mod.TopicProduceResponse, name=topic_data.name, partition_responses=tuple(rows))
        )
    return make(mod.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)


def _has_transactional(request: Any) -> bool:
    """Whether a partition's first batch is transactional (its header only: the batches are
    checked whole where they are appended)."""
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            try:
                if data.records and parse_header(data.records).is_transactional:
                    return True
            except InvalidRecordError:
                continue  # (the partition's own check answers it)
    return False


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


def _prepare(
    ctx: BrokerContext, conn: ConnectionInfo, name: str, data: Any, acks_ok: bool
) -> _Answer | Pending:
    """The partition's batches validated (Pending), or its answer if they are refused."""
    if not conn.may_use_topic(name):
        return _Answer(ErrorCode.topic_authorization_failed)
    if not acks_ok:
        return _Answer(ErrorCode.invalid_required_acks)
    topic = ctx.data.topics_for(conn.org_id).by_name(name)
    if topic is None or not 0 <= data.index < len(topic.partitions):
        return _Answer(ErrorCode.unknown_topic_or_partition)
    log_start = topic.partitions[data.index].log_start_offset
    if not data.records:
        return _Answer(ErrorCode.invalid_record, -1, log_start)
    try:
        batches = split_batches(data.records)
    except InvalidRecordError as exc:
        code = ErrorCode.corrupt_message if exc.corrupt else ErrorCode.invalid_record
        return _Answer(code, -1, log_start)
    max_bytes = effective_long(topic.configs, "max.message.bytes", ctx.config.message_max_bytes)
    headers = [parse_header(batch) for batch in batches]
    for batch, header in zip(batches, headers, strict=True):
        if len(batch) > max_bytes:
            return _Answer(ErrorCode.message_too_large, -1, log_start)
        if header.is_control:
            why = "clients may not write control batches"
            return _Answer(ErrorCode.invalid_record, -1, log_start, why)
    if "compact" in cleanup_policies(topic.configs, ctx.config.log_cleanup_policy):
        try:
            refused = _keyless(topic, data.index, batches)
        except ValueError as exc:
            return _Answer(ErrorCode.corrupt_message, -1, log_start, str(exc))
        if refused:
            return _Answer(ErrorCode.invalid_record, -1, log_start, _summary(refused), refused)
    return Pending(name, data.index, topic, batches, headers, log_start, len(data.records))


def _append(ctx: BrokerContext, conn: ConnectionInfo, slot: Pending, verdict: Verdict) -> _Answer:
    if verdict.error != ErrorCode.none:  # (refused before the log: no log start, as Kafka)
        return _Answer(verdict.error, -1, -1, verdict.message)
    topic = ctx.data.topics_for(conn.org_id).by_name(slot.name)
    if topic is not slot.topic:  # deleted (and maybe created again) while it was verified
        return _Answer(ErrorCode.unknown_topic_or_partition)
    try:
        result = ctx.data.append(topic, slot.partition, slot.batches, verdict.guard, slot.headers)
    except StorageError:  # (not bound: see storage/failures.py)
        return _Answer(ErrorCode.kafka_storage_error, -1, slot.log_start)
    if ctx.metrics is not None and result.error is ErrorCode.none:
        records = sum(header.records_count for header in slot.headers)
        ctx.metrics.traffic.produced(conn.org_id, slot.name, slot.size, records)
    message = result.message if result.record_errors else ""  # (Kafka's rule: see above)
    if result.message and not message:
        log.debug("produce to %s-%d refused: %s", slot.name, slot.partition, result.message)
    return _Answer(
        result.error,
        result.base_offset,
        slot.log_start,
        message,
        result.record_errors,
        result.log_append_time,
    )


def _keyless(topic: Topic, index: int, batches: list[memoryview]) -> RecordErrors:
    """The record errors of the first batch with records that have no key (Kafka stops at
    the first batch it refuses)."""
    why = (
        f"Compacted topic cannot accept message without key in topic partition {topic.name}-{index}"
    )
    for batch in batches:
        found = keyless_records(batch)
        if found:
            return tuple((i, why) for i in found)
    return ()


def _summary(errors: RecordErrors) -> str:
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return (
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )

"""What a topic's configs do to a batch on append, as Kafka's LogValidator does it.

- `message.timestamp.type=LogAppendTime`: each batch gets the timestamp-type attribute bit and
  the broker's clock as its max timestamp (its base timestamp and records unchanged, the CRC
  recomputed); a producer's batch that already claims LogAppendTime is refused
  (INVALID_TIMESTAMP), as Kafka refuses it. With CreateTime such a claim is cleared.
- CreateTime timestamps outside ``[now - message.timestamp.before.max.ms, now +
  message.timestamp.after.max.ms]`` fail the batch with INVALID_TIMESTAMP and one record error
  per record out of range. The batch header says whether any can be (its base and max
  timestamps); only then are the records read.
- `compression.type` other than `producer`: a batch whose codec differs is recompressed (an
  uncompressed control batch stays as it is, as in Kafka); one whose codec matches is kept
  byte for byte. A batch that grows past `max.message.bytes` is MESSAGE_TOO_LARGE.

With the defaults (CreateTime, producer) a batch is only looked at, never copied: one unpack
of three header fields and three comparisons (`_untouched`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from .batch_records import CODEC_MASK, LOG_APPEND_TIME, recompressed, record_stamps, stamped
from .codecs import CODECS, GZIP, LZ4, ZSTD
from .record_batch import BatchHeader, InvalidRecordError, parse_header
from .topic_configs import effective_long

__all__ = ["AppendRules", "Prepared", "prepare"]

NO_TIMESTAMP = -1
# attributes (at byte 21), lastOffsetDelta skipped, baseTimestamp, maxTimestamp
_STAMPS = struct.Struct(">h4xqq")
_STAMPS_AT = 21
_LEVELS = {
    GZIP: "compression.gzip.level",
    LZ4: "compression.lz4.level",
    ZSTD: "compression.zstd.level",
}

RecordError = tuple[int, str]  # (index of the record in its batch, why it is refused)


@dataclass(frozen=True, slots=True)
class AppendRules:
    log_append_time: bool
    codec: int | None  # None: the producer's
    level: int | None  # Kafka's level of `codec`
    before_max_ms: int
    after_max_ms: int
    max_message_bytes: int
    rewrite: bool = False  # whether a batch may be rewritten (else it is only checked)

    @classmethod
    def of(cls, configs: Mapping[str, str], defaults: Mapping[str, str]) -> AppendRules:
        """A topic's rules from its configs over the broker's defaults (a value a topic was
        created with before configs were checked, and that Kafka would refuse, counts as
        unset)."""

        def value(name: str) -> str:
            return configs.get(name, defaults[name])

        def number(name: str) -> int:
            return effective_long(configs, name, int(defaults[name]))

        codec = CODECS.get(value("compression.type"))
        level = number(_LEVELS[codec]) if codec in _LEVELS else None
        log_append_time = value("message.timestamp.type") == "LogAppendTime"
        return cls(
            log_append_time=log_append_time,
            codec=codec,
            level=None if level == -1 else level,  # gzip's -1: the codec's default
            before_max_ms=number("message.timestamp.before.max.ms"),
            after_max_ms=number("message.timestamp.after.max.ms"),
            max_message_bytes=number("max.message.bytes"),
            rewrite=log_append_time or codec is not None,
        )


class Prepared(NamedTuple):
    batches: Sequence[bytes | memoryview]
    error: ErrorCode = ErrorCode.none
    message: str = ""
    record_errors: tuple[RecordError, ...] = ()
    log_append_time: int = -1  # the time stamped on the batches (LogAppendTime), else -1


def prepare(batches: Sequence[memoryview], rules: AppendRules, now: int) -> Prepared:
    """The batches to append under `rules` at time `now` (ms), or why they are refused."""
    if not rules.rewrite and _untouched(batches, rules, now):
        return Prepared(batches)  # (the hot path: the defaults, nothing to do)
    out: list[bytes | memoryview] = []
    for batch in batches:
        header = parse_header(batch)
        refused = _timestamp_refusal(batch, header, rules, now)
        if refused is not None:
            return refused
        rewritten: bytes | memoryview = batch
        codec = header.attributes & CODEC_MASK
        target = rules.codec
        kept = codec == 0 and header.is_control  # (Kafka never compresses a control batch)
        if target is not None and target != codec and not kept:
            try:
                rewritten = recompressed(rewritten, target, rules.level)
            except InvalidRecordError as exc:
                return Prepared((), ErrorCode.corrupt_message, str(exc))
            if len(rewritten) > rules.max_message_bytes:
                return Prepared((), ErrorCode.message_too_large)
        if rules.log_append_time:
            rewritten = stamped(rewritten, now)
        elif header.attributes & LOG_APPEND_TIME:
            rewritten = stamped(rewritten, None)
        out.append(rewritten)
    return Prepared(out, log_append_time=now if rules.log_append_time else -1)


def _untouched(batches: Sequence[memoryview], rules: AppendRules, now: int) -> bool:
    """No batch claims LogAppendTime, and every header's timestamps are within bounds."""
    low, high = now - rules.before_max_ms, now + rules.after_max_ms
    for batch in batches:
        attributes, first, last = _STAMPS.unpack_from(batch, _STAMPS_AT)
        if attributes & LOG_APPEND_TIME or last > high or (first < low and first != NO_TIMESTAMP):
            return False
    return True


def _timestamp_refusal(
    batch: memoryview, header: BatchHeader, rules: AppendRules, now: int
) -> Prepared | None:
    if rules.log_append_time:
        if not header.attributes & LOG_APPEND_TIME:
            return None
        why = "Producer should not set timestamp type to LogAppendTime."
        errors = tuple((i, why) for i in range(header.records_count))
        return _invalid_timestamps(errors)
    low, high = now - rules.before_max_ms, now + rules.after_max_ms
    first, last = header.base_timestamp, header.max_timestamp
    if (first == NO_TIMESTAMP or first >= low) and last <= high:
        return None  # the header rules every record in (the common case)
    try:
        stamps = list(record_stamps(batch))
    except InvalidRecordError as exc:
        return Prepared((), ErrorCode.corrupt_message, str(exc))
    errors = tuple(
        (i, f"Timestamp {ts} of message with offset {offset} is out of range. The timestamp "
         f"should be within [{low}, {high}]")
        for i, (offset, ts) in enumerate(stamps)
        if ts != NO_TIMESTAMP and not low <= ts <= high
    )  # fmt: skip
    return _invalid_timestamps(errors) if errors else None


def _invalid_timestamps(errors: tuple[RecordError, ...]) -> Prepared:
    message = "One or more records have been rejected due to invalid timestamp"
    return Prepared((), ErrorCode.invalid_timestamp, message, errors)

"""A batch's records opened: their offsets and timestamps, and the batch recompressed.

The hot paths never open a batch (record_batch.py reads and patches its header only). This is
for the few that must, as Kafka's broker does:

- ListOffsets by timestamp wants the first *record* at or after a time, inside the batch the
  index found (`record_stamps`);
- a topic's `compression.type` other than `producer` recompresses a batch whose codec differs
  (`recompressed`): the records are kept byte for byte, only their container changes;
- LogAppendTime stamps a batch (`stamped`).

A record is ``length varint, attributes int8, timestampDelta varlong, offsetDelta varint, ...``.
In a LogAppendTime batch every record's timestamp is the batch's max timestamp, as clients read
it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import crc32c

from .codecs import CodecError, compress, decompress
from .record_batch import BATCH_OVERHEAD, HEADER_SIZE, InvalidRecordError, parse_header, read_varint

__all__ = ["CODEC_MASK", "LOG_APPEND_TIME", "recompressed", "record_stamps", "stamped"]

CODEC_MASK = 0x07
LOG_APPEND_TIME = 0x08  # the attributes bit: timestamps are the broker's append time
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT, _MAX_TS_AT, _CRC_AT, _CRC_START = 21, 35, 17, 21
_LENGTH_AT = 8
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT32 = struct.Struct(">i")


def record_stamps(batch: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of a whole stored batch, in order; InvalidRecordError
    if its records cannot be read."""
    header = parse_header(batch)
    try:
        records = decompress(header.attributes & CODEC_MASK, memoryview(batch)[HEADER_SIZE:])
    except CodecError as exc:
        raise InvalidRecordError(str(exc), corrupt=True) from None
    log_append = header.attributes & LOG_APPEND_TIME
    pos = 0
    try:
        for _ in range(header.records_count):
            length, body = read_varint(records, pos)
            if length < 0:
                raise InvalidRecordError(f"record of length {length}", corrupt=True)
            delta, at = read_varint(records, body + 1)  # (after the record's attributes)
            offset_delta, _ = read_varint(records, at)
            timestamp = header.max_timestamp if log_append else header.base_timestamp + delta
            yield header.base_offset + offset_delta, timestamp
            pos = body + length
    except (IndexError, ValueError):
        raise InvalidRecordError("records end inside a record", corrupt=True) from None


def recompressed(batch: bytes | memoryview, codec: int, level: int | None) -> bytes:
    """The batch with its records in `codec` (Kafka's level `level`), header otherwise kept,
    its length and CRC made right; InvalidRecordError if its records cannot be read."""
    header = parse_header(batch)
    try:
        records = decompress(header.attributes & CODEC_MASK, memoryview(batch)[HEADER_SIZE:])
    except CodecError as exc:
        raise InvalidRecordError(str(exc), corrupt=True) from None
    out = bytearray(batch[:HEADER_SIZE])
    out += compress(codec, records, level)
    _INT32.pack_into(out, _LENGTH_AT, len(out) - BATCH_OVERHEAD)
    attributes = (header.attributes & ~CODEC_MASK) | codec
    _ATTRIBUTES.pack_into(out, _ATTRIBUTES_AT, attributes)
    _fix_crc(out)
    return bytes(out)


def stamped(batch: bytes | memoryview, log_append_time: int | None) -> bytes:
    """The batch with its timestamp type set as Kafka's LogValidator sets it: LogAppendTime
    with max timestamp `log_append_time`, or (None) CreateTime; the base timestamp and the
    records unchanged, the CRC recomputed."""
    out = bytearray(batch)
    (attributes,) = _ATTRIBUTES.unpack_from(out, _ATTRIBUTES_AT)
    if log_append_time is None:
        attributes &= ~LOG_APPEND_TIME
    else:
        attributes |= LOG_APPEND_TIME
        _INT64.pack_into(out, _MAX_TS_AT, log_append_time)
    _ATTRIBUTES.pack_into(out, _ATTRIBUTES_AT, attributes)
    _fix_crc(out)
    return bytes(out)


def _fix_crc(batch: bytearray) -> None:
    _UINT32.pack_into(batch, _CRC_AT, crc32c.crc32c(memoryview(batch)[_CRC_START:]))

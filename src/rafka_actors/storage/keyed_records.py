"""The records inside a v2 batch with their keys: read (decompressing), and written back.

The broker otherwise treats a batch as a header and an opaque blob (record_batch.py). Two
places need its records: a produce to a compacted topic (every record must have a key, as
Kafka's LogValidator demands) and the log cleaner, which keeps some records of a batch and
writes them back as Kafka's cleaner does: same base offset and last offset delta (so producer
sequences survive), the batch's own codec, a fresh CRC.

A record is::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value, headerCount varint, headers

(zig-zag varints; a length of -1 is null). A record read here keeps its bytes from
offsetDelta on (`tail`) untouched, so writing it back re-encodes only the timestamp delta,
which changes when the cleaner moves the batch's base timestamp to its delete horizon.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import crc32c

from .batch_records import CODEC_MASK, LOG_APPEND_TIME
from .codecs import compress, decompress
from .record_batch import (
    BATCH_OVERHEAD,
    HEADER_SIZE,
    BatchHeader,
    parse_header,
    read_varint,
    varint,
)

__all__ = [
    "Record",
    "build_batch",
    "empty_batch",
    "keyless_records",
    "read_varint",
    "records_of",
    "varint",
]

DELETE_HORIZON_BIT = 0x40  # baseTimestamp is the delete horizon (KIP-534)
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21


class Record(NamedTuple):
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool
    attributes: int
    tail: bytes  # offsetDelta to the end of the record, as stored


def records_of(batch: bytes | memoryview) -> tuple[BatchHeader, list[Record]]:
    """The header and records of one whole batch (ValueError if they do not parse)."""
    header = parse_header(batch)
    payload = decompress(header.attributes & CODEC_MASK, memoryview(batch)[HEADER_SIZE:])
    records: list[Record] = []
    pos = 0
    try:
        for _ in range(header.records_count):
            length, pos = read_varint(payload, pos)
            end = pos + length
            if length < 1 or end > len(payload):
                raise ValueError(f"record {len(records)} runs past its batch")
            attributes = payload[pos]
            ts_delta, at = read_varint(payload, pos + 1)
            offset_delta, at2 = read_varint(payload, at)
            key_length, at2 = read_varint(payload, at2)
            key = None if key_length < 0 else payload[at2 : at2 + key_length]
            value_length, _ = read_varint(payload, at2 + max(key_length, 0))
            records.append(
                Record(offset_delta, ts_delta, key, value_length >= 0, attributes, payload[at:end])
            )
            pos = end
    except IndexError:
        raise ValueError(f"record {len(records)} is cut short") from None
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} bytes follow the batch's {len(records)} records")
    return header, records


def keyless_records(batch: bytes | memoryview) -> list[int]:
    """Indexes of the batch's records that have no key (ValueError if they do not parse)."""
    return [i for i, record in enumerate(records_of(batch)[1]) if record.key is None]


def build_batch(
    header: BatchHeader,
    records: Sequence[Record],
    *,
    base_timestamp: int,
    attributes: int,
) -> bytes:
    """A batch holding `records` (at least one) with `header`'s offsets, producer fields and
    codec, the given base timestamp and attributes. Records keep their timestamps (their
    deltas follow the base); maxTimestamp is the latest of them, or the header's own under
    LogAppendTime (the append stamped it)."""
    stamps = [header.base_timestamp + r.timestamp_delta for r in records]
    shift = header.base_timestamp - base_timestamp
    if shift:
        records = [r._replace(timestamp_delta=r.timestamp_delta + shift) for r in records]
    payload = compress(attributes & CODEC_MASK, b"".join(map(_encode, records)))
    max_ts = header.max_timestamp if attributes & LOG_APPEND_TIME else max(stamps)
    return _pack(header, attributes, base_timestamp, max_ts, len(records), payload)


def empty_batch(header: BatchHeader) -> bytes:
    """The batch with no records that stands for `header`'s batch (Kafka's empty header):
    its offsets, producer fields and max timestamp, uncompressed, base timestamp -1."""
    attributes = header.attributes & ~(CODEC_MASK | DELETE_HORIZON_BIT)
    return _pack(header, attributes, -1, header.max_timestamp, 0, b"")


def _pack(
    header: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int, payload: bytes
) -> bytes:
    fields = (
        header.base_offset, HEADER_SIZE - BATCH_OVERHEAD + len(payload),
        header.partition_leader_epoch, 2, 0, attributes, header.last_offset_delta,
        base_ts, max_ts, header.producer_id, header.producer_epoch, header.base_sequence, count,
    )  # fmt: skip
    batch = bytearray(_HEADER.pack(*fields) + payload)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[_CRC_START:]))
    return bytes(batch)


def _encode(record: Record) -> bytes:
    body = bytes((record.attributes,)) + varint(record.timestamp_delta) + record.tail
    return varint(len(body)) + body

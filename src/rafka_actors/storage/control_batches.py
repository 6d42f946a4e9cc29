"""Transaction markers: Kafka's COMMIT/ABORT control batches, built and read back.

A marker is a v2 batch with the transactional and control attribute bits set, the producer's
id and epoch, base sequence -1 and exactly one record, as Kafka writes it:

    key   = version int16 (0), type int16 (0 ABORT, 1 COMMIT)
    value = version int16 (0), coordinatorEpoch int32

Consumers never see the record itself (clients skip control batches); read_committed readers
use it to end a producer's aborted transaction.
"""

from __future__ import annotations

import struct
from typing import Final

import crc32c

from .record_batch import BATCH_OVERHEAD, HEADER_SIZE, read_varint, varint

ABORT: Final = 0
COMMIT: Final = 1
CONTROL_ATTRIBUTES: Final = 0x30  # transactional | control; CreateTime, no compression

_HEADER = struct.Struct(">qiibIhiqqqhii")
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CRC_START = 21
# What `control_type` needs of a control batch's records: the record's length, attributes,
# timestamp and offset deltas and key length (all small varints) and the 4-byte key.
CONTROL_PREFIX: Final = 32


def marker_batch(
    producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int, now_ms: int
) -> bytes:
    """A whole control batch (offset 0: the log stamps the real one) with a valid CRC."""
    key = _KEY.pack(0, COMMIT if committed else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    # attributes, timestampDelta, offsetDelta, key, value, no headers
    body = b"\x00" + varint(0) + varint(0)
    body += varint(len(key)) + key + varint(len(value)) + value + varint(0)
    record = varint(len(body)) + body
    header = _HEADER.pack(
        0, HEADER_SIZE - BATCH_OVERHEAD + len(record), -1, 2, 0, CONTROL_ATTRIBUTES, 0,
        now_ms, now_ms, producer_id, producer_epoch, -1, 1,
    )  # fmt: skip
    batch = bytearray(header + record)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[_CRC_START:]))
    return bytes(batch)


def read_marker(records_prefix: bytes) -> tuple[int, int] | None:
    """(control type, coordinator epoch) from the first bytes of a control batch's records:
    ABORT, COMMIT or another Kafka control type (its epoch -1 if it carries none); None if
    they hold no control key."""
    try:
        _, pos = read_varint(records_prefix, 0)  # record length
        pos += 1  # attributes
        for _ in range(2):  # timestampDelta, offsetDelta
            _, pos = read_varint(records_prefix, pos)
        key_length, pos = read_varint(records_prefix, pos)
        if key_length < _KEY.size:
            return None
        _, kind = _KEY.unpack_from(records_prefix, pos)
        pos += key_length
        value_length, pos = read_varint(records_prefix, pos)
        epoch = -1
        if kind in (ABORT, COMMIT) and value_length >= _VALUE.size:
            epoch = _VALUE.unpack_from(records_prefix, pos)[1]
    except (IndexError, ValueError, struct.error):
        return None
    return int(kind), int(epoch)

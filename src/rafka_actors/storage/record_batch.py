"""Pure functions over Kafka v2 ("magic 2") record batches.

The broker never decodes individual records: it treats a batch as an opaque blob with a fixed
61-byte header, and only ever looks at (or rewrites) header fields. The layout is::

    offset  size  field
         0     8  baseOffset              \\ not covered by the CRC: the broker rewrites
         8     4  batchLength             |  baseOffset and partitionLeaderEpoch on append
        12     4  partitionLeaderEpoch    /  without recomputing it
        16     1  magic (= 2)
        17     4  crc (CRC-32C of bytes 21..end of batch)
        21     2  attributes              bits 0-2 compression, 3 timestamp type,
                                          4 transactional, 5 control
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     .  records

``batchLength`` counts the bytes after itself, so a batch occupies ``batchLength + 12`` bytes and
the smallest possible batch (no records) has ``batchLength == 49``.

Validation of a Produce request (:func:`split_batches`) is the hot path: per batch it does two
``struct`` unpacks and one CRC over the batch body, and never copies the payload (it slices a
``memoryview``). Offset assignment (:func:`stamp_offsets`) patches the two CRC-free fields in place
so a whole append can be assembled in a single buffer.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

__all__ = [
    "BATCH_OVERHEAD",
    "HEADER_SIZE",
    "MAGIC",
    "MIN_BATCH_LENGTH",
    "BatchHeader",
    "InvalidRecordError",
    "assign_offsets",
    "check_batch",
    "parse_header",
    "read_varint",
    "split_batches",
    "stamp_offsets",
    "varint",
]

MAGIC = 2
HEADER_SIZE = 61
# batchLength excludes baseOffset and batchLength themselves.
BATCH_OVERHEAD = 12
MIN_BATCH_LENGTH = HEADER_SIZE - BATCH_OVERHEAD  # 49

_CRC_START = 21  # first byte covered by the CRC (attributes)
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
# batchLength (at byte 8), 4 skipped bytes (partitionLeaderEpoch), magic (at byte 16).
_LENGTH_MAGIC = struct.Struct(">i4xb")
_PREFIX_SIZE = 17  # bytes needed to read baseOffset..magic
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
assert _HEADER.size == HEADER_SIZE

Buffer = bytes | bytearray | memoryview


class InvalidRecordError(ValueError):
    """A record batch failed validation.

    ``corrupt`` is True for damage (truncation, bad CRC, impossible lengths: the caller answers
    CORRUPT_MESSAGE) and False for well-formed data the broker will not accept (wrong magic,
    inconsistent offsets: INVALID_RECORD, or UNSUPPORTED_FOR_MESSAGE_FORMAT for the magic).
    """

    def __init__(self, message: str, *, corrupt: bool) -> None:
        super().__init__(message)
        self.corrupt = corrupt


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        """Total bytes the batch occupies, header included."""
        return self.batch_length + BATCH_OVERHEAD

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header of the batch starting at ``pos`` (no CRC or length checks)."""
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidRecordError(
            f"truncated batch header at {pos}: {len(buf) - pos} of {HEADER_SIZE} bytes",
            corrupt=True,
        )
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def check_batch(
    buf: Buffer, pos: int, end: int, *, verify_crc: bool = True, cleaned: bool = False
) -> tuple[int, ...]:
    """Validate the batch at ``buf[pos:]`` (which must not extend past ``end``).

    Returns the raw header tuple (field order as :class:`BatchHeader`). Checks, in order: enough
    bytes for the magic, magic == 2, a possible batchLength, the batch being whole, the CRC (if
    ``verify_crc``), then the counts: ``recordsCount >= 0`` and, as Kafka demands of client
    batches, ``lastOffsetDelta == recordsCount - 1`` (anything else would let a batch's records
    overlap offsets the log assigns to the next batch). A batch the log cleaner rewrote
    (``cleaned``: a stored one) keeps its offsets with fewer records, so there
    ``recordsCount <= lastOffsetDelta + 1`` is enough.
    """
    if end - pos < _PREFIX_SIZE:
        raise InvalidRecordError(f"truncated batch at {pos}: {end - pos} bytes", corrupt=True)
    length, magic = _LENGTH_MAGIC.unpack_from(buf, pos + 8)
    if magic != MAGIC:
        raise InvalidRecordError(f"batch at {pos} has magic {magic}, not 2", corrupt=False)
    if length < MIN_BATCH_LENGTH:
        raise InvalidRecordError(f"batch at {pos} has batchLength {length} < 49", corrupt=True)
    stop = pos + BATCH_OVERHEAD + length
    if stop > end:
        raise InvalidRecordError(
            f"truncated batch at {pos}: needs {stop - pos} bytes, has {end - pos}", corrupt=True
        )
    header = _HEADER.unpack_from(buf, pos)
    if verify_crc:
        crc = crc32c.crc32c(memoryview(buf)[pos + _CRC_START : stop])
        if crc != header[4]:
            raise InvalidRecordError(
                f"batch at {pos}: CRC {crc:#010x} != stored {header[4]:#010x}", corrupt=True
            )
    count, delta = header[12], header[6]
    if count < 0:
        raise InvalidRecordError(f"batch at {pos} has recordsCount {count}", corrupt=True)
    if delta != count - 1 and not (cleaned and count <= delta + 1):
        raise InvalidRecordError(
            f"batch at {pos}: lastOffsetDelta {delta} inconsistent with {count} records",
            corrupt=False,
        )
    return header


def split_batches(records: bytes | memoryview) -> list[memoryview]:
    """Split and validate a Produce request's records blob into zero-copy batch views.

    Raises :class:`InvalidRecordError` unless every batch is whole and valid (see
    :func:`check_batch`). An empty blob gives an empty list.
    """
    view = memoryview(records)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    end = len(view)
    out: list[memoryview] = []
    pos = 0
    while pos < end:
        header = check_batch(view, pos, end)
        stop = pos + BATCH_OVERHEAD + header[1]
        out.append(view[pos:stop])
        pos = stop
    return out


def varint(value: int) -> bytes:
    """A zig-zag varint (a record's varint and varlong)."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, position after it) of the zig-zag varint at `pos` (IndexError if cut,
    ValueError past 10 bytes)."""
    shift = n = 0
    while True:
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return (n >> 1) ^ -(n & 1), pos
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def stamp_offsets(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite, in place, baseOffset and (to 0) partitionLeaderEpoch of the batch at ``pos``.

    Neither field is covered by the CRC, so the batch stays valid.
    """
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + 12, 0)


def assign_offsets(batch: memoryview | bytes, base_offset: int) -> bytes:
    """Return a copy of ``batch`` with baseOffset = ``base_offset`` and leader epoch 0."""
    buf = bytearray(batch)
    stamp_offsets(buf, 0, base_offset)
    return bytes(buf)

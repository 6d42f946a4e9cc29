"""Build (and decode) real Kafka v2 record batches from scratch, for tests.

The encoding follows the Kafka protocol guide: a 61-byte batch header (see
``rafka_actors.storage.record_batch``) followed by uncompressed records, each::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value, headerCount varint,
    headers (keyLength varint, key, valueLength varint, value)*

where varints are zig-zag encoded and a length of -1 means null. The CRC-32C covers everything
from the attributes field (byte 21) to the end.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import crc32c

DEFAULT_TIMESTAMP = 1_700_000_000_000

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21

Header = tuple[str, bytes | None]


def zigzag_varint(value: int) -> bytes:
    """Encode a signed int as a zig-zag varint (Kafka varint / varlong)."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    return zigzag_varint(-1) if data is None else zigzag_varint(len(data)) + data


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> bytes:
    body = bytearray(b"\x00")  # attributes (unused)
    body += zigzag_varint(timestamp_delta) + zigzag_varint(offset_delta)
    body += _bytes_field(key) + _bytes_field(value) + zigzag_varint(len(headers))
    for name, hvalue in headers:
        body += _bytes_field(name.encode()) + _bytes_field(hvalue)
    return zigzag_varint(len(body)) + bytes(body)


def build_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    base_timestamp: int = DEFAULT_TIMESTAMP,
    timestamps: list[int] | None = None,
    headers: list[list[Header]] | None = None,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    magic: int = 2,
    last_offset_delta: int | None = None,
) -> bytes:
    """A valid (correct CRC) uncompressed v2 batch holding ``records`` as (key, value).

    ``timestamps`` gives each record's absolute timestamp (default: all ``base_timestamp``);
    the batch's baseTimestamp is ``base_timestamp`` and maxTimestamp the largest record one.
    ``last_offset_delta`` overrides the header field (to build inconsistent batches).
    """
    stamps = timestamps if timestamps is not None else [base_timestamp] * len(records)
    assert len(stamps) == len(records)
    payload = b"".join(
        encode_record(i, ts - base_timestamp, key, value, headers[i] if headers else [])
        for i, ((key, value), ts) in enumerate(zip(records, stamps, strict=True))
    )
    delta = len(records) - 1 if last_offset_delta is None else last_offset_delta
    max_ts = max(stamps, default=base_timestamp)
    fields = [
        base_offset, _HEADER.size - 12 + len(payload), partition_leader_epoch, magic, 0,
        attributes, delta, base_timestamp, max_ts, producer_id, producer_epoch,
        base_sequence, len(records),
    ]  # fmt: skip
    return fix_crc(_HEADER.pack(*fields) + payload)


def fix_crc(batch: bytes) -> bytes:
    """Recompute a single batch's CRC-32C (after tampering with CRC-covered fields)."""
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[_CRC_START:])))
    return bytes(out)


class DecodedRecord(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return (n >> 1) ^ -(n & 1), pos


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    return buf[pos : pos + length], pos + length


def decode_batches(blob: bytes) -> list[DecodedRecord]:
    """Decode every record of a blob of uncompressed v2 batches (e.g. a Fetch response)."""
    out: list[DecodedRecord] = []
    pos = 0
    while pos < len(blob):
        fields = _HEADER.unpack_from(blob, pos)
        base, length, base_ts, count = fields[0], fields[1], fields[7], fields[12]
        assert fields[5] & 0x07 == 0, "compressed batches are not supported here"
        rpos = pos + _HEADER.size
        for _ in range(count):
            _, rpos = _read_varint(blob, rpos)  # record length
            rpos += 1  # attributes
            ts_delta, rpos = _read_varint(blob, rpos)
            off_delta, rpos = _read_varint(blob, rpos)
            key, rpos = _read_bytes(blob, rpos)
            value, rpos = _read_bytes(blob, rpos)
            n_headers, rpos = _read_varint(blob, rpos)
            hdrs: list[Header] = []
            for _ in range(n_headers):
                hkey, rpos = _read_bytes(blob, rpos)
                hval, rpos = _read_bytes(blob, rpos)
                hdrs.append(((hkey or b"").decode(), hval))
            out.append(DecodedRecord(base + off_delta, base_ts + ts_delta, key, value, hdrs))
        pos += 12 + length
    return out

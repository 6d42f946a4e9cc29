"""A coordinator log entry's CBOR, written here: byte for byte what ``cbor2.dumps`` writes.

Every entry is a CBOR array: type tag, version, org id, group id, then the record's fields
(storage/coordinator_records.py). ``cbor2.dumps`` costs a call and a type check per item
(cbor2 asks every item whether it is a Mapping, through the ABC machinery): about 2 us for a
commit's entry inside the broker, a tenth of the broker's CPU per commit under 16
committers (docs/performance-history.md, session 25), and about 5 us for the group record a
new group's first commit writes, a sixth of the commit (session 33). The compiled build
writes the same bytes here in a fraction of that: `offset_commit_entry` for a commit's entry,
`plain_array` for any other entry. Only this shape is written here: ints that fit in 64
bits, text strings, byte strings, null, and arrays (tuples or lists) of those, each in CBOR's
shortest form (RFC 8949 section 4.2.1), which is what cbor2 writes too. Anything else (a
bool, an int subclass, a bignum, a string with a lone surrogate) gets None, and the caller
falls back to cbor2, so the log's bytes never depend on which path wrote them.
tests/storage/test_entry_cbor.py checks them against cbor2 itself.
"""

from __future__ import annotations

import struct
from typing import Final

from ..group.records import OffsetCommitRecord

# Final, so that the compiled build binds them once instead of looking the globals up.
_PACK_8: Final = struct.Struct(">BB").pack
_PACK_16: Final = struct.Struct(">BH").pack
_PACK_32: Final = struct.Struct(">BI").pack
_PACK_64: Final = struct.Struct(">BQ").pack
_BYTE: Final = [bytes((n,)) for n in range(256)]  # bytes((n,)) costs more than a lookup
_UNSIGNED: Final = 0x00
_NEGATIVE: Final = 0x20
_BYTES: Final = 0x40
_TEXT: Final = 0x60
_ARRAY: Final = 0x80
_NULL: Final = b"\xf6"
_ARRAY_OF_11: Final = b"\x8b"  # tag, version, org id, group id, and the record's 7 fields


def _head(major: int, n: int) -> bytes:
    """A CBOR item's head: major type and argument ``n`` (0 <= n < 2**64), shortest form."""
    if n < 24:
        return _BYTE[major | n]
    if n < 0x100:
        return _PACK_8(major | 24, n)
    if n < 0x10000:
        return _PACK_16(major | 25, n)
    if n < 0x100000000:
        return _PACK_32(major | 26, n)
    return _PACK_64(major | 27, n)


def _int(n: object) -> bytes | None:
    if type(n) is not int:
        return None  # a bool is an int to Python but true or false to cbor2
    if n >= 0:
        return None if n >> 64 else _head(_UNSIGNED, n)
    n = -1 - n
    return None if n >> 64 else _head(_NEGATIVE, n)


def _text(s: object) -> bytes | None:
    if type(s) is not str:
        return None
    try:
        data = s.encode()
    except UnicodeEncodeError:  # a lone surrogate: left to cbor2
        return None
    return _head(_TEXT, len(data)) + data


def offset_commit_entry(
    tag: int, version: int, org_id: int, group_id: str, record: OffsetCommitRecord
) -> bytes | None:
    """``cbor2.dumps((tag, version, org_id, group_id, *fields of record))`` for values that
    are plain ints and strings, else None."""
    group = _text(record.group_id)
    parts = [
        _ARRAY_OF_11,
        _int(tag),
        _int(version),
        _int(org_id),
        group if group_id is record.group_id else _text(group_id),
        group,
        _text(record.topic),
        _int(record.partition),
        _int(record.offset),
        _int(record.leader_epoch),
        _NULL if record.metadata is None else _text(record.metadata),
        _int(record.commit_timestamp_ms),
    ]
    for part in parts:
        if part is None:
            return None
    return b"".join(parts)  # type: ignore[arg-type]  # no None left


def plain_array(items: tuple[object, ...]) -> bytes | None:
    """``cbor2.dumps(items)`` for an array of 64-bit ints, text and byte strings, None, and
    arrays (tuples or lists) of those, else None."""
    parts: list[bytes] = []
    return b"".join(parts) if _add_array(parts, items) else None


def _add_array(parts: list[bytes], items: tuple[object, ...] | list[object]) -> bool:
    """Append the CBOR of array `items` to `parts`; False for an item of another kind."""
    parts.append(_head(_ARRAY, len(items)))
    for item in items:
        kind = type(item)
        part: bytes | None
        if kind is int:
            part = _int(item)
        elif kind is str:
            part = _text(item)
        elif item is None:
            part = _NULL
        elif kind is bytes:
            data: bytes = item  # type: ignore[assignment]  # (its type was checked)
            part = _head(_BYTES, len(data)) + data
        elif kind is tuple or kind is list:
            if not _add_array(parts, item):  # type: ignore[arg-type]
                return False
            continue
        else:
            return False
        if part is None:
            return False
        parts.append(part)
    return True

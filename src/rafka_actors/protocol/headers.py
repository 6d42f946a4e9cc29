"""Request header parsing.

A request frame (the bytes after the 4-byte size prefix) starts with::

    api_key i16 | api_version i16 | correlation_id i32 | client_id nullable legacy string
    [tagged fields]              -- header v2 only

Header v2 is used iff the request version is flexible; that depends on the
api key and version, so the fixed 8 bytes are read first and the decision is
taken afterwards. Unknown (key, version) pairs still parse (flexibility is
extrapolated, see :mod:`.messages`) so the caller always gets the correlation
id and can answer or close. ``client_id`` keeps the legacy i16-length format
even in header v2, exactly as Kafka does. All tagged header fields are skipped:
Kafka defines none that a broker must act on.

Invalid UTF-8 in ``client_id`` is replaced rather than rejected, mirroring the
Java broker (``new String(bytes, UTF_8)`` never throws).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .errors import MalformedRequest
from .messages import is_flexible_request

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_MAX_VARINT_BYTES = 5  # Kafka's unsigned varints are at most 32 bits


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def read_uvarint(buf: bytes, offset: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``offset``; returns (value, new offset)."""
    value = 0
    for i in range(_MAX_VARINT_BYTES):
        if offset >= len(buf):
            raise MalformedRequest("truncated varint")
        byte = buf[offset]
        offset += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, offset
    raise MalformedRequest("varint longer than 5 bytes")


def skip_tagged_fields(buf: bytes, offset: int) -> int:
    """Skip a whole tagged-field section; returns the offset after it."""
    count, offset = read_uvarint(buf, offset)
    for _ in range(count):
        _tag, offset = read_uvarint(buf, offset)
        size, offset = read_uvarint(buf, offset)
        offset += size
        if offset > len(buf):
            raise MalformedRequest("truncated tagged field")
    return offset


def parse_request_header(frame: bytes) -> tuple[RequestHeader, int]:
    """Parse the request header of ``frame``; returns it and the body offset."""
    if len(frame) < _FIXED.size:
        raise MalformedRequest(f"request header truncated ({len(frame)} bytes)")
    api_key, api_version, correlation_id, length = _FIXED.unpack_from(frame, 0)
    offset = _FIXED.size
    client_id: str | None = None
    if length >= 0:
        end = offset + length
        if end > len(frame):
            raise MalformedRequest("client_id truncated")
        client_id = bytes(frame[offset:end]).decode("utf-8", errors="replace")
        offset = end
    elif length != -1:
        raise MalformedRequest(f"negative client_id length {length}")
    if is_flexible_request(api_key, api_version):
        offset = skip_tagged_fields(frame, offset)
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset

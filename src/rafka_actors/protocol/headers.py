"""Request header parsing.

A request frame (the bytes after the 4-byte size prefix) starts with::

    api_key i16 | api_version i16 | correlation_id i32 | client_id nullable legacy string
    [tagged fields]              -- header v2 only

Header v2 is used iff the request version is flexible; that depends on the
api key and version, so the fixed 8 bytes are read first and the decision is
taken afterwards. Unknown (key, version) pairs still parse (flexibility is
extrapolated, see :mod:`.messages`) so the caller always gets the correlation
id and can answer or close. ``client_id`` keeps the legacy i16-length format
even in header v2, exactly as Kafka does. Tagged header fields are skipped (Kafka defines
none that a broker must act on), except that the header notes whether our own private tag
``GROUP_IDENTITY_TAG`` was there (see :mod:`.group_identity`). Nearly every request has no
tagged field at all, so a zero count byte is taken without the general loop.

Invalid UTF-8 in ``client_id`` is replaced rather than rejected, mirroring the
Java broker (``new String(bytes, UTF_8)`` never throws).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import NamedTuple

from ._codegen import uvarint as write_uvarint  # one varint writer for the codec and headers
from .errors import MalformedRequest
from .group_identity import GROUP_IDENTITY_TAG
from .messages import is_flexible_request

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_MAX_VARINT_BYTES = 5  # Kafka's unsigned varints are at most 32 bits

# A request frame: bytes from the gateway, any buffer from a test or a tool.
Frame = bytes | bytearray | memoryview


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    group_identities: bool = False  # the header carried GROUP_IDENTITY_TAG (our admin tool)


def read_uvarint(buf: Frame, offset: int) -> tuple[int, int]:
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


def skip_tagged_fields(buf: Frame, offset: int) -> int:
    """Skip a whole tagged-field section; returns the offset after it."""
    return _scan_tagged_fields(buf, offset)[0]


def _scan_tagged_fields(buf: Frame, offset: int) -> tuple[int, bool]:
    """(offset after the section, whether GROUP_IDENTITY_TAG is in it)."""
    count, offset = read_uvarint(buf, offset)
    found = False
    for _ in range(count):
        tag, offset = read_uvarint(buf, offset)
        size, offset = read_uvarint(buf, offset)
        offset += size
        if offset > len(buf):
            raise MalformedRequest("truncated tagged field")
        found = found or tag == GROUP_IDENTITY_TAG
    return offset, found


def read_tagged_fields(buf: bytes, offset: int) -> tuple[dict[int, bytes], int]:
    """A whole tagged-field section as {tag: raw value}, and the offset after it."""
    count, offset = read_uvarint(buf, offset)
    fields = {}
    for _ in range(count):
        tag, offset = read_uvarint(buf, offset)
        size, offset = read_uvarint(buf, offset)
        if offset + size > len(buf):
            raise MalformedRequest("truncated tagged field")
        fields[tag] = bytes(buf[offset : offset + size])
        offset += size
    return fields, offset


def encode_tagged_fields(fields: Mapping[int, bytes]) -> bytes:
    """A tagged-field section, tags in ascending order as KIP-482 requires."""
    parts = [write_uvarint(len(fields))]
    for tag in sorted(fields):
        value = fields[tag]
        parts += [write_uvarint(tag), write_uvarint(len(value)), value]
    return b"".join(parts)


def parse_request_header(frame: Frame) -> tuple[RequestHeader, int]:
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
        if offset < len(frame) and frame[offset] == 0:  # no tagged field: the usual case
            offset += 1
        else:
            offset, tagged = _scan_tagged_fields(frame, offset)
            return RequestHeader(api_key, api_version, correlation_id, client_id, tagged), offset
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset

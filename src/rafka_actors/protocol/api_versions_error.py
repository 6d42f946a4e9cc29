"""The ApiVersions answer to a version the broker does not support.

A client opening a connection sends ApiVersions at the highest version it
knows. If the broker does not support that version it cannot answer in it,
so Kafka (KIP-511) answers with response header v0 and an ApiVersionsResponse
**v0** body -- error_code 35 (UNSUPPORTED_VERSION) plus version ranges -- which
every client can parse; the client then retries at the highest ApiVersions
version listed. Apache Kafka itself lists only the ApiVersions range (key
18); this function encodes whatever ranges the caller passes, in key order.

Layout (all big-endian)::

    size i32 | correlation_id i32 | error_code i16 | count i32 | (key i16, min i16, max i16)*
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

_PREFIX = struct.Struct(">iihi")  # size, correlation_id, error_code, array length
_RANGE = struct.Struct(">hhh")


def encode_api_versions_fallback(
    correlation_id: int, supported: Mapping[int, tuple[int, int]]
) -> bytes:
    """Full frame (with size prefix) of an UNSUPPORTED_VERSION ApiVersions v0 response."""
    ranges = b"".join(_RANGE.pack(key, low, high) for key, (low, high) in sorted(supported.items()))
    size = _PREFIX.size - 4 + len(ranges)
    error = ErrorCode.unsupported_version.value
    return _PREFIX.pack(size, correlation_id, error, len(supported)) + ranges

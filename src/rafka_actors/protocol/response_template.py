"""A response that many requests get with one field different, encoded once.

When a rebalance completes, every follower gets the same JoinGroup response but for its own
member id, and every member the same SyncGroup response but for its assignment. With 1 000
members, building and encoding those kio responses one by one took more than a tenth of the
coordinator's share of the rebalance (docs/performance-history.md, session 30). A `FieldTemplate` is
kio's own encoding of the response with a placeholder in that field (a non-nullable string or
bytes), cut around the placeholder: `with_bytes(b)` gives the bytes kio gives for the
response with `b` in the field, and `codec.encode_response` frames them like any other body.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from ._codegen import uvarint

# Found in a real field of a response only by accident; `of` refuses the response then.
PLACEHOLDER: Final = "\x00rafka:template\x00"
_PLACEHOLDER_BYTES: Final = PLACEHOLDER.encode()
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")


class EncodedBody:
    """A response body already encoded, for `codec.encode_response` to frame."""

    __slots__ = ("api_key", "body", "header_v1", "version")

    def __init__(self, api_key: int, version: int, header_v1: bool, body: bytes) -> None:
        self.api_key = api_key
        self.version = version
        self.header_v1 = header_v1  # the response header has a tagged-field section
        self.body = body


class FieldTemplate:
    """kio's encoding of one response, but for one field, which `with_bytes` fills."""

    __slots__ = ("api_key", "header_v1", "length", "prefix", "suffix", "version")

    def __init__(
        self,
        cls: type[Any],
        prefix: bytes,
        suffix: bytes,
        length: Callable[[int], bytes],
        header_v1: bool,
    ) -> None:
        self.api_key: int = cls.__api_key__
        self.version: int = cls.__version__
        self.prefix = prefix  # the body up to the field's length
        self.suffix = suffix  # the body after the field's bytes
        self.length = length  # the field's length, encoded
        self.header_v1 = header_v1

    @classmethod
    def of(
        cls,
        response: Any,
        encode_body: Callable[[Any], tuple[bytes, bool]],
        *,
        bytes_field: bool = False,
    ) -> FieldTemplate | None:
        """The template of `response`, one of whose non-nullable string fields (with
        `bytes_field`, bytes fields) holds PLACEHOLDER (its UTF-8 bytes), from
        `encode_body(response)` (codec.encode_body: the body, whether the header is v1);
        None if the placeholder's bytes are not found exactly once, after their length."""
        kind = type(response)
        body, header_v1 = encode_body(response)
        at = body.find(_PLACEHOLDER_BYTES)
        if at < 0 or body.find(_PLACEHOLDER_BYTES, at + 1) >= 0:
            return None
        if kind.__flexible__:
            length = _compact_length
        else:
            length = _int32_length if bytes_field else _int16_length
        field = length(len(_PLACEHOLDER_BYTES))
        start = at - len(field)
        if start < 0 or body[start:at] != field:
            return None
        suffix = body[at + len(_PLACEHOLDER_BYTES) :]
        return cls(kind, body[:start], suffix, length, header_v1)

    def with_bytes(self, data: bytes) -> EncodedBody:
        """The body with `data` in the field (a string's UTF-8 bytes)."""
        body = b"".join((self.prefix, self.length(len(data)), data, self.suffix))
        return EncodedBody(self.api_key, self.version, self.header_v1, body)


def _compact_length(size: int) -> bytes:
    return uvarint(size + 1)


def _int16_length(size: int) -> bytes:
    return _INT16.pack(size)


def _int32_length(size: int) -> bytes:
    return _INT32.pack(size)

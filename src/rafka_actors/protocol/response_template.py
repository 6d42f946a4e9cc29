"""A response that many requests get with one string field different, encoded once.

When a rebalance completes, every follower gets the same JoinGroup response but for its own
member id. With 1 000 members, building and encoding 999 such kio responses took a tenth of
the coordinator's share of the rebalance (about 10 us each; docs/performance.md, session 30).
A `StringFieldTemplate` is kio's own encoding of the response with a placeholder in that
field, cut around the placeholder: `with_value(v)` gives the bytes kio gives for the response
with `v` in the field, and `encode_response` frames them like any other body.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from ._codegen import uvarint
from .headers import RequestHeader
from .messages import API_VERSIONS_KEY

# Found in a real field of a response only by accident; `of` refuses the response then.
PLACEHOLDER: Final = "\x00rafka:template\x00"
_PLACEHOLDER_BYTES: Final = PLACEHOLDER.encode()
_INT16: Final = struct.Struct(">h")


class EncodedBody:
    """A response body already encoded, for `codec.encode_response` to frame."""

    __slots__ = ("api_key", "body", "header_v1", "version")

    def __init__(self, api_key: int, version: int, header_v1: bool, body: bytes) -> None:
        self.api_key = api_key
        self.version = version
        self.header_v1 = header_v1  # the response header has a tagged-field section
        self.body = body


class StringFieldTemplate:
    """kio's encoding of one response, but for one string field, which `with_value` fills."""

    __slots__ = ("api_key", "compact", "header_v1", "prefix", "suffix", "version")

    def __init__(
        self, cls: type[Any], prefix: bytes, suffix: bytes, compact: bool, header_v1: bool
    ) -> None:
        self.api_key: int = cls.__api_key__
        self.version: int = cls.__version__
        self.prefix = prefix  # the body up to the field's length
        self.suffix = suffix  # the body after the field's bytes
        self.compact = compact  # a flexible version: the length is an unsigned varint + 1
        self.header_v1 = header_v1

    @classmethod
    def of(cls, response: Any, encode: Any) -> StringFieldTemplate | None:
        """The template of `response`, one of whose non-nullable string fields holds
        PLACEHOLDER, from `encode(header, response)` (codec.encode_response); None if the
        placeholder's bytes are not found exactly once, after their length."""
        kind = type(response)
        compact = bool(kind.__flexible__)
        header_v1 = compact and kind.__api_key__ != API_VERSIONS_KEY
        header = RequestHeader(kind.__api_key__, kind.__version__, 0, None)
        body = encode(header, response)[9 if header_v1 else 8 :]
        at = body.find(_PLACEHOLDER_BYTES)
        if at < 0 or body.find(_PLACEHOLDER_BYTES, at + 1) >= 0:
            return None
        length = _length(len(_PLACEHOLDER_BYTES), compact)
        start = at - len(length)
        if start < 0 or body[start:at] != length:
            return None
        suffix = body[at + len(_PLACEHOLDER_BYTES) :]
        return cls(kind, body[:start], suffix, compact, header_v1)

    def with_value(self, value: str) -> EncodedBody:
        """The body with `value` in the field."""
        data = value.encode()
        body = b"".join((self.prefix, _length(len(data), self.compact), data, self.suffix))
        return EncodedBody(self.api_key, self.version, self.header_v1, body)


def _length(size: int, compact: bool) -> bytes:
    return uvarint(size + 1) if compact else _INT16.pack(size)

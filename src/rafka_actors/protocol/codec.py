"""Frame-level encoding and decoding of Kafka requests and responses.

Decoding runs kio's native (Rust) entity reader, after :mod:`.frame_guard`
has checked that no forged array length can make it abort the process. The
reader's other defect -- raising ``KeyError`` on an unknown tagged field
instead of skipping it, as KIP-482 requires -- is handled by re-decoding the
frame with :mod:`.tolerant_decoder`. Every other decode failure becomes
:class:`MalformedRequest`; bytes after the body are ignored, like Kafka.
Frames may be ``bytes`` or any buffer; writable buffers are copied once,
because the native reader only accepts read-only ones.

Encoding uses the generated encoders of :mod:`.fast_encoder`. The body is
encoded into a list of parts behind a placeholder, the size prefix and
response header are packed once the size is known, and one ``join`` builds
the frame: record batches are copied exactly once.

Response header v0 is just the correlation id; v1 (flexible versions, except
ApiVersions whose responses are always v0) adds a tagged-field section, empty unless the
caller passes header tags (only our own group-identity tag, see :mod:`.group_identity`;
requests may carry header tags the same way, for our admin client).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from kio.serial import entity_reader
from kio.serial.errors import DecodeError, OutOfBoundValue

from ._codegen import PartsEncoder
from .errors import MalformedRequest
from .fast_encoder import parts_encoder
from .frame_guard import frame_guard
from .headers import Frame, RequestHeader, encode_tagged_fields, read_tagged_fields
from .messages import API_VERSIONS_KEY, request_class, response_class
from .response_template import EncodedBody
from .tolerant_decoder import Reader, tolerant_reader

_SIZE_HEADER_V0 = struct.Struct(">ii")  # size, correlation_id
_SIZE_HEADER_V1 = struct.Struct(">iiB")  # size, correlation_id, empty tagged fields
_SIZE_REQUEST_HEADER = struct.Struct(">ihhih")  # size, key, version, correlation, client len
_CORRELATION = struct.Struct(">i")
# What kio's native reader, the frame guard and the tolerant reader raise on bad bytes.
_DECODE_ERRORS = (
    DecodeError,
    ValueError,
    TypeError,
    IndexError,
    OverflowError,
    KeyError,
    struct.error,
)


_READERS: dict[type, tuple[Callable[[Any, int], None], Reader]] = {}


def _readers(cls: type) -> tuple[Callable[[Any, int], None], Reader]:
    """(frame guard, native reader) for ``cls``, memoised."""
    readers = _READERS.get(cls)
    if readers is None:
        readers = _READERS[cls] = (frame_guard(cls), entity_reader(cls))
    return readers


def _decode(cls: type, frame: Any, offset: int) -> Any:
    if frame.__class__ is not bytes and not memoryview(frame).readonly:
        frame = bytes(frame)  # kio's native reader only accepts read-only buffers
    guard, native = _READERS.get(cls) or _readers(cls)
    try:
        guard(frame, offset)  # could a forged array length make kio abort? (frame_guard)
        entity, _ = native(frame, offset)
    except (KeyError, ValueError, OutOfBoundValue):  # kio's "Unknown tagged field tag: N";
        # "timedelta milliseconds overflow" (an int64 duration kio reads natively only up to
        # 2**63 us); "Cannot parse negative timestamp" (Kafka's -1: no time, e.g. the start of
        # a transaction that is not open in DescribeTransactions)
        try:
            entity, _ = tolerant_reader(cls)(frame, offset)
        except _DECODE_ERRORS as exc:
            raise MalformedRequest(f"cannot decode {cls.__qualname__}: {exc}") from exc
    except _DECODE_ERRORS as exc:
        raise MalformedRequest(f"cannot decode {cls.__qualname__}: {exc}") from exc
    return entity


def decode_request(header: RequestHeader, frame: Frame, body_offset: int) -> object:
    """Decode the request body of ``frame`` (which starts with ``header``).

    Raises :class:`UnsupportedVersion` for unknown (key, version) pairs and
    :class:`MalformedRequest` for bodies that do not decode.
    """
    return _decode(request_class(header.api_key, header.api_version), frame, body_offset)


_PLANS: dict[type, tuple[PartsEncoder, bool]] = {}


def _response_plan(cls: type[Any]) -> tuple[PartsEncoder, bool]:
    """(parts encoder, whether the response header is v1) for a response class."""
    plan = _PLANS.get(cls)
    if plan is None:
        header_v1 = bool(cls.__flexible__) and cls.__api_key__ != API_VERSIONS_KEY
        plan = _PLANS[cls] = (parts_encoder(cls), header_v1)
    return plan


def encode_response(
    header: RequestHeader, response: object, tags: Mapping[int, bytes] | None = None
) -> bytes:
    """The complete response frame: size prefix, response header and body.

    The response must be of the request's API and version; the only exception
    is ApiVersions, which may answer with v0 (see :mod:`.api_versions_error`).
    `tags` go into the tagged fields of response header v1 (flexible versions only).
    An `EncodedBody` (response_template.py) is framed as it is, without header tags.
    """
    if type(response) is EncodedBody:
        if tags:
            raise ValueError("an encoded body is framed without header tags")
        return _framed(header, response)
    cls: type[Any] = type(response)
    key, version = cls.__api_key__, cls.__version__
    if key != header.api_key or (version != header.api_version and key != API_VERSIONS_KEY):
        raise ValueError(
            f"{cls.__qualname__} v{version} cannot answer "
            f"api_key={header.api_key} v{header.api_version}"
        )
    encode_into, header_v1 = _PLANS.get(cls) or _response_plan(cls)
    shared = _SHARED_BODIES.get(id(response))
    if shared is not None and shared[0] is response:
        parts = [b"", shared[1]]
    else:
        parts = [b""]
        encode_into(response, parts)
    size = sum(map(len, parts))
    if tags:
        if not header_v1:
            raise ValueError(f"{cls.__qualname__} has response header v0: no tagged fields")
        section = encode_tagged_fields(tags)
        parts[0] = _SIZE_HEADER_V0.pack(size + 4 + len(section), header.correlation_id) + section
    else:
        parts[0] = _size_and_header(size, header.correlation_id, header_v1)
    return b"".join(parts)


def _size_and_header(body_size: int, correlation_id: int, header_v1: bool) -> bytes:
    """A response frame's size prefix and its header without tagged fields."""
    if header_v1:
        return _SIZE_HEADER_V1.pack(body_size + 5, correlation_id, 0)
    return _SIZE_HEADER_V0.pack(body_size + 4, correlation_id)


# Responses that handlers hand out again and again, and their encoded bodies (see
# `shared_response`); both are emptied together when full.
_SHARED: dict[Any, Any] = {}
_SHARED_BODIES: dict[int, tuple[Any, bytes]] = {}
SHARED_MAX = 4096


def shared_response(key: Any, build: Callable[[], Any]) -> Any:
    """The response `build()` returns for `key`, built and encoded once and then handed out
    again: for an answer that many requests get (every partition of a client's usual commit
    stored). The response must be immutable (kio's entities are frozen) and `key` must say
    everything it depends on, its class and version included."""
    response = _SHARED.get(key)
    if response is None:
        response = build()
        if len(_SHARED) >= SHARED_MAX:
            _SHARED.clear()
            _SHARED_BODIES.clear()
        _SHARED[key] = response
        _SHARED_BODIES[id(response)] = (response, encode_body(response)[0])
    return response


def encode_body(response: object) -> tuple[bytes, bool]:
    """A response's body alone, and whether its response header is v1 (has tagged fields)."""
    encode_into, header_v1 = _PLANS.get(type(response)) or _response_plan(type(response))
    parts: list[bytes] = []
    encode_into(response, parts)
    return b"".join(parts), header_v1


def _framed(header: RequestHeader, encoded: EncodedBody) -> bytes:
    if encoded.api_key != header.api_key or encoded.version != header.api_version:
        raise ValueError(
            f"an encoded api_key={encoded.api_key} v{encoded.version} body cannot answer "
            f"api_key={header.api_key} v{header.api_version}"
        )
    body = encoded.body
    return _size_and_header(len(body), header.correlation_id, encoded.header_v1) + body


def encode_request(
    request: object,
    correlation_id: int,
    client_id: str | None,
    tags: Mapping[int, bytes] | None = None,
) -> bytes:
    """A complete request frame (size prefix, header v1/v2, body), for clients and tests;
    `tags` go into the tagged fields of request header v2 (flexible versions only)."""
    cls: type[Any] = type(request)
    client = None if client_id is None else client_id.encode()
    parts: list[bytes] = [b"", client or b""]
    if cls.__flexible__:
        parts.append(encode_tagged_fields(tags) if tags else b"\x00")
    elif tags:
        raise ValueError(f"{cls.__qualname__} has request header v1: no tagged fields")
    parts_encoder(cls)(request, parts)
    size = sum(map(len, parts)) + _SIZE_REQUEST_HEADER.size - 4
    key, version = cls.__api_key__, cls.__version__
    length = -1 if client is None else len(client)
    parts[0] = _SIZE_REQUEST_HEADER.pack(size, key, version, correlation_id, length)
    return b"".join(parts)


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, object]:
    """Decode a response frame (without size prefix) into (correlation_id, entity).

    For clients and tests; the response header version follows the same rules
    as :func:`encode_response`.
    """
    correlation_id, entity, _ = decode_tagged_response(api_key, api_version, frame)
    return correlation_id, entity


def decode_tagged_response(
    api_key: int, api_version: int, frame: bytes
) -> tuple[int, object, dict[int, bytes]]:
    """(correlation_id, entity, response header tags) of a response frame."""
    cls = response_class(api_key, api_version)
    if len(frame) < _CORRELATION.size:
        raise MalformedRequest("response header truncated")
    (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
    offset = _CORRELATION.size
    tags: dict[int, bytes] = {}
    if cls.__flexible__ and api_key != API_VERSIONS_KEY:
        tags, offset = read_tagged_fields(frame, offset)
    return correlation_id, _decode(cls, frame, offset), tags


__all__ = [
    "decode_request",
    "decode_response",
    "decode_tagged_response",
    "encode_request",
    "encode_response",
]

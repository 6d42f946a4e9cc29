"""Test-side Kafka wire helpers, built on kio's own (reference) encoder and decoder."""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import OutOfBoundValue

from rafka_actors.protocol.tolerant_decoder import tolerant_reader


def request_frame(request: Any, correlation_id: int = 1, client_id: str | None = "tests") -> bytes:
    """A whole request frame (length prefix, header v1 or v2, body) for a kio request entity."""
    header = struct.pack(">hhi", request.__api_key__, request.__version__, correlation_id)
    if client_id is None:
        header += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        header += struct.pack(">h", len(raw)) + raw
    flexible = request.__flexible__ or (request.__api_key__ == 18 and request.__version__ >= 3)
    if flexible:
        header += b"\x00"  # no tagged fields
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    payload = header + body.getvalue()
    return struct.pack(">i", len(payload)) + payload


def response_header_version(request: Any) -> int:
    """The response header's version: 1 for flexible versions, but always 0 for ApiVersions
    (a client must read it before it knows which versions are flexible)."""
    return 1 if request.__flexible__ and request.__api_key__ != 18 else 0


def parse_response(frame: bytes, response_cls: type, header_version: int) -> tuple[int, Any]:
    """(correlation id, entity) from a response frame without its length prefix."""
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    offset = 4 + (1 if header_version >= 1 else 0)
    try:
        entity, _ = entity_reader(response_cls)(frame, offset)
    except OutOfBoundValue:  # e.g. Kafka's -1 for "no time", which kio's reader refuses
        entity, _ = tolerant_reader(response_cls)(frame, offset)
    return correlation_id, entity

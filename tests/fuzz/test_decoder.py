"""Fuzzing the request decoder: whatever the bytes, `parse_request_header` and
`decode_request` return a request or raise `MalformedRequest` (`UnsupportedVersion` for a
(key, version) we don't serve, which the gateway checks first) -- nothing else, never a hang,
never a process abort (kio's native reader aborts on forged array counts unless the frame
guard stops them first: an abort here kills the whole pytest run).
"""

from __future__ import annotations

import faulthandler

from hypothesis import given

from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.protocol.codec import decode_request
from rafka_actors.protocol.errors import MalformedRequest, UnsupportedVersion
from rafka_actors.protocol.headers import parse_request_header

from .budget import COUNTS, fuzz_settings
from .frames import any_frame, valid_frame

HANG_SECONDS = 60  # one decode taking this long is a hang: dump every stack and exit


def _served(key: int, version: int) -> bool:
    api = API_TABLE.get(key)
    return api is not None and api.supports(version)


def decode(frame: bytes) -> object | None:
    """The decoded request, or None if the frame was rejected the allowed way."""
    COUNTS["decoder: frames"] += 1
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        try:
            header, offset = parse_request_header(frame)
        except MalformedRequest:
            COUNTS["decoder: rejected header"] += 1
            return None
        try:
            request = decode_request(header, frame, offset)
        except MalformedRequest:
            COUNTS["decoder: rejected body"] += 1
            return None
        except UnsupportedVersion:
            assert not _served(header.api_key, header.api_version)
            COUNTS["decoder: unsupported version"] += 1
            return None
        COUNTS["decoder: decoded"] += 1
        return request
    finally:
        faulthandler.cancel_dump_traceback_later()


@fuzz_settings(200, deadline_ms=None)
@given(valid_frame())
def test_valid_frames_decode_to_what_was_encoded(case: tuple[int, int, bytes]) -> None:
    key, version, frame = case
    request = decode(frame)
    assert request is not None
    assert (request.__api_key__, request.__version__) == (key, version)  # type: ignore[attr-defined]


@fuzz_settings(1000, deadline_ms=None)
@given(any_frame())
def test_hostile_frames_decode_or_raise_malformed_request(frame: bytes) -> None:
    decode(frame)

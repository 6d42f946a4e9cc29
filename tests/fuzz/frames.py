"""Hypothesis strategies for request frames: valid requests of every served api and version,
and structured mutations of them (bit flips, truncation, forged array and string lengths,
bad UTF-8, inserted garbage), plus plain noise behind a plausible header.

Valid requests come from kio's own hypothesis hooks (`st.from_type` on the request class of
the version), encoded with the project's `encode_request`. All frames here are *without*
the 4-byte size prefix, as `parse_request_header` and `decode_request` take them.
"""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st
from kio.static.primitive import Records

from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.protocol.codec import encode_request
from rafka_actors.protocol.messages import request_class

st.register_type_strategy(Records, st.binary(max_size=200).map(Records))

SERVED: list[tuple[int, int]] = [
    (api.key, version)
    for api in API_TABLE.values()
    for version in range(api.min_version, api.max_version + 1)
]

# Values that break length-prefixed encodings: negative, zero, off by one, huge.
FORGED_I32 = [-(2**31), -2, -1, 0, 1, 0x7FFF, 0x10000, 2**24, 2**31 - 1]
FORGED_I16 = [-(2**15), -2, -1, 0, 0x7FFF]
FORGED_UVARINT = [
    b"\x00",  # compact null / -1
    b"\x01",  # empty
    b"\x7f",
    b"\xff\xff\xff\xff\x0f",  # 2**32 - 1
    b"\xff\xff\xff\xff\x07",  # 2**31 - 1
    b"\x80\x80\x80\x80\x80\x01",  # too long
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
]
BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"]


def valid_request(key: int, version: int) -> st.SearchStrategy[Any]:
    return st.from_type(request_class(key, version))


@st.composite
def valid_frame(draw: st.DrawFn) -> tuple[int, int, bytes]:
    """(api key, version, frame without size prefix) of a well-formed request."""
    key, version = draw(st.sampled_from(SERVED))
    request = draw(valid_request(key, version))
    correlation = draw(st.integers(-(2**31), 2**31 - 1))
    client_id = draw(st.none() | st.text(max_size=20))
    return key, version, encode_request(request, correlation, client_id)[4:]


@st.composite
def _mutation(draw: st.DrawFn, frame: bytes) -> bytes:
    n = len(frame)
    # keep the fixed header (10 bytes) most of the time, so that the body decoder is reached
    low = 10 if n > 10 and draw(st.integers(0, 9)) else 0
    at = draw(st.integers(low, max(low, n)))
    kind = draw(st.integers(0, 7))
    if kind == 0:  # flip a byte
        if at >= n:
            return frame
        return frame[:at] + bytes([frame[at] ^ draw(st.integers(1, 255))]) + frame[at + 1 :]
    if kind == 1:  # truncate
        return frame[:at]
    if kind == 2:  # forged i32 array count / bytes length
        value = draw(st.sampled_from(FORGED_I32) | st.integers(-(2**31), 2**31 - 1))
        return frame[:at] + struct.pack(">i", value) + frame[at + 4 :]
    if kind == 3:  # forged i16 string length
        value = draw(st.sampled_from(FORGED_I16))
        return frame[:at] + struct.pack(">h", value) + frame[at + 2 :]
    if kind == 4:  # forged compact (uvarint) length
        value = draw(st.sampled_from(FORGED_UVARINT))
        return frame[:at] + value + frame[at + draw(st.integers(0, 2)) :]
    if kind == 5:  # bad UTF-8 over a string
        bad = draw(st.sampled_from(BAD_UTF8))
        return frame[:at] + bad + frame[at + len(bad) :]
    if kind == 6:  # insert garbage
        return frame[:at] + draw(st.binary(min_size=1, max_size=16)) + frame[at:]
    # delete a run of bytes
    return frame[:at] + frame[at + draw(st.integers(1, 8)) :]


@st.composite
def mutated_frame(draw: st.DrawFn) -> bytes:
    _, _, frame = draw(valid_frame())
    for _ in range(draw(st.integers(1, 4))):
        frame = draw(_mutation(frame))
    return frame


@st.composite
def noise_frame(draw: st.DrawFn) -> bytes:
    """A plausible header of a served api and version, then random bytes."""
    key, version = draw(st.sampled_from(SERVED))
    header = struct.pack(">hhi", key, version, draw(st.integers(0, 2**31 - 1)))
    header += struct.pack(">h", draw(st.sampled_from([-1, 0, 3])))
    header += b"abc"[: max(0, struct.unpack(">h", header[-2:])[0])]
    return header + draw(st.binary(max_size=300))


def any_frame() -> st.SearchStrategy[bytes]:
    return st.one_of(
        mutated_frame(),
        mutated_frame(),
        mutated_frame(),
        noise_frame(),
        st.binary(max_size=64),
    )

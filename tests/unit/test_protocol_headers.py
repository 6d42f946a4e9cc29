"""Request header parsing, schema lookup and header-version rules."""

from __future__ import annotations

import pickle
import struct

import cbor2
import pytest

from rafka_actors.protocol.errors import MalformedRequest, ProtocolError, UnsupportedVersion
from rafka_actors.protocol.group_identity import (
    GROUP_IDENTITY_TAG,
    decode_identities,
    encode_identities,
)
from rafka_actors.protocol.headers import (
    RequestHeader,
    encode_tagged_fields,
    parse_request_header,
    read_tagged_fields,
    read_uvarint,
    write_uvarint,
)
from rafka_actors.protocol.messages import (
    is_flexible_request,
    known_versions,
    request_class,
    response_class,
    response_header_version,
)

BODY = b"BODY"


def header_v1(key: int, version: int, correlation: int, client: bytes | None) -> bytes:
    length = -1 if client is None else len(client)
    return struct.pack(">hhih", key, version, correlation, length) + (client or b"")


def test_v1_header() -> None:
    frame = header_v1(3, 1, 42, b"client-1") + BODY  # Metadata v1: not flexible
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(3, 1, 42, "client-1")
    assert frame[offset:] == BODY


def test_v1_header_null_and_empty_client_id() -> None:
    header, offset = parse_request_header(header_v1(12, 0, -7, None) + BODY)
    assert header == RequestHeader(12, 0, -7, None)
    assert offset == 10
    header, offset = parse_request_header(header_v1(12, 0, 1, b"") + BODY)
    assert header.client_id == ""
    assert offset == 10


def test_v2_header_skips_tagged_fields() -> None:
    tags = b"\x02" + b"\x00\x03abc" + b"\x81\x01\x00"  # two tags, second is tag 129, empty
    frame = header_v1(11, 6, 5, b"c") + tags + BODY  # JoinGroup v6: flexible
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(11, 6, 5, "c")
    assert frame[offset:] == BODY


def test_v2_header_null_client_id_keeps_legacy_string() -> None:
    frame = header_v1(12, 4, 9, None) + b"\x00" + BODY
    header, offset = parse_request_header(frame)
    assert header.client_id is None
    assert frame[offset:] == BODY


def test_v2_header_long_tag_payload() -> None:
    payload = b"x" * 300
    tags = b"\x01\x05" + b"\xac\x02" + payload  # size 300 as a two-byte varint
    frame = header_v1(12, 4, 9, b"id") + tags + BODY
    assert frame[parse_request_header(frame)[1] :] == BODY


@pytest.mark.parametrize(
    ("version", "flexible"), [(0, False), (2, False), (3, True), (4, True), (99, True)]
)
def test_api_versions_request_header_version(version: int, flexible: bool) -> None:
    frame = header_v1(18, version, 1, b"c") + (b"\x00" if flexible else b"") + BODY
    header, offset = parse_request_header(frame)
    assert header.api_version == version
    assert frame[offset:] == BODY


def test_unknown_version_extrapolates_flexibility() -> None:
    # JoinGroup is flexible from v6 on; an unknown future version is too.
    frame = header_v1(11, 500, 1, b"c") + b"\x00" + BODY
    assert frame[parse_request_header(frame)[1] :] == BODY
    assert is_flexible_request(11, 500)
    assert not is_flexible_request(11, -3)


def test_unknown_api_key_parses_as_v1() -> None:
    frame = header_v1(999, 0, 77, b"c") + BODY
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(999, 0, 77, "c")
    assert frame[offset:] == BODY


def test_invalid_utf8_client_id_is_replaced_like_kafka() -> None:
    header, _ = parse_request_header(header_v1(12, 0, 1, b"a\xffb"))
    assert header.client_id == "a\ufffdb"


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x0c\x00\x00\x00\x00\x00",  # shorter than the fixed part
        header_v1(12, 0, 1, b"abc")[:-1],  # client id cut short
        struct.pack(">hhih", 12, 0, 1, -2),  # negative length other than -1
        header_v1(12, 4, 1, b"c"),  # flexible, tagged-field section missing
        header_v1(12, 4, 1, b"c") + b"\x01\x00\x05ab",  # tag payload cut short
        header_v1(12, 4, 1, b"c") + b"\x01\x80",  # varint cut short
        header_v1(12, 4, 1, b"c") + b"\xff\xff\xff\xff\xff\x01",  # varint too long
    ],
)
def test_malformed_headers(frame: bytes) -> None:
    with pytest.raises(MalformedRequest):
        parse_request_header(frame)


def test_read_uvarint() -> None:
    assert read_uvarint(b"\x00", 0) == (0, 1)
    assert read_uvarint(b"\x7f", 0) == (127, 1)
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (2**32 - 1, 5)
    assert read_uvarint(b"z\x96\x01", 1) == (150, 3)


def test_class_lookup() -> None:
    cls = request_class(11, 6)
    assert (cls.__name__, cls.__api_key__, cls.__version__) == ("JoinGroupRequest", 11, 6)
    assert response_class(12, 4).__name__ == "HeartbeatResponse"
    assert request_class(11, 6) is cls
    assert known_versions(18) == (0, 1, 2, 3, 4)
    assert known_versions(999) == ()


@pytest.mark.parametrize(("key", "version"), [(11, 99), (999, 0), (12, -1)])
def test_unknown_class_raises_unsupported_version(key: int, version: int) -> None:
    for lookup in (request_class, response_class):
        with pytest.raises(UnsupportedVersion) as info:
            lookup(key, version)
        assert (info.value.api_key, info.value.version) == (key, version)
        assert isinstance(info.value, ProtocolError)


def test_errors_pickle() -> None:
    error = pickle.loads(pickle.dumps(UnsupportedVersion(3, 99)))
    assert (error.api_key, error.version) == (3, 99)
    assert issubclass(MalformedRequest, ProtocolError)


@pytest.mark.parametrize(
    ("key", "version", "expected"),
    [(18, 0, 0), (18, 3, 0), (18, 4, 0), (18, 9, 0), (12, 0, 0), (12, 3, 0), (12, 4, 1)],
)
def test_response_header_version(key: int, version: int, expected: int) -> None:
    assert response_header_version(key, version) == expected


def test_response_header_version_unknown_key() -> None:
    with pytest.raises(UnsupportedVersion):
        response_header_version(999, 0)


# -- our private header tag (protocol/group_identity.py) ---------------------------------
def test_identity_tag_is_noticed_among_other_tags() -> None:
    assert GROUP_IDENTITY_TAG == 0x5241
    tags = encode_tagged_fields({3: b"abc", GROUP_IDENTITY_TAG: b"", 0x6000: b"z"})
    frame = header_v1(16, 5, 8, b"admin") + tags + BODY  # ListGroups v5: flexible
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(16, 5, 8, "admin", group_identities=True)
    assert frame[offset:] == BODY


@pytest.mark.parametrize(
    "tags", [b"\x00", encode_tagged_fields({3: b"abc"}), encode_tagged_fields({0x5240: b""})]
)
def test_no_identity_tag_means_no_identities(tags: bytes) -> None:
    frame = header_v1(15, 5, 8, b"c") + tags + BODY
    header, offset = parse_request_header(frame)
    assert not header.group_identities
    assert header == RequestHeader(15, 5, 8, "c")  # the default: equal to a 4-field header
    assert frame[offset:] == BODY


def test_identity_tag_in_a_non_flexible_header_is_body() -> None:
    # Header v1 has no tagged fields: the bytes are the body's, and nobody asked for anything.
    frame = header_v1(16, 2, 8, b"c") + encode_tagged_fields({GROUP_IDENTITY_TAG: b""})
    header, offset = parse_request_header(frame)
    assert not header.group_identities and offset == 8 + 2 + 1


def test_tagged_fields_roundtrip_in_ascending_order() -> None:
    fields = {GROUP_IDENTITY_TAG: b"x" * 200, 0: b"", 7: b"seven"}
    section = encode_tagged_fields(fields)
    assert section[:3] == b"\x03\x00\x00"  # count 3, then tag 0 (empty) comes first
    assert read_tagged_fields(section + BODY, 0) == (fields, len(section))
    with pytest.raises(MalformedRequest):
        read_tagged_fields(section[:-1], 0)


def test_write_uvarint() -> None:
    for value in (0, 1, 127, 128, 150, 0x5241, 2**32 - 1):
        encoded = write_uvarint(value)
        assert read_uvarint(encoded, 0) == (value, len(encoded))
    assert write_uvarint(0x5241) == b"\xc1\xa4\x01"


def test_identities_payload_roundtrip_and_validation() -> None:
    identities = {"g": ("cgp_01", "1/consumer-groups/g"), "Ä b": ("cgp_02", "1/consumer-groups/b")}
    assert decode_identities(encode_identities(identities)) == identities
    assert decode_identities(encode_identities({})) == {}
    for bad in (b"\xff", cbor2.dumps([1]), cbor2.dumps({"g": ["only one"]}), cbor2.dumps({1: []})):
        with pytest.raises(ValueError):
            decode_identities(bad)

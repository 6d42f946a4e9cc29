"""Request decoding (incl. unknown tagged fields), framing, ApiVersions fallback."""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import subprocess
import sys
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v15 import request as fetch15
from kio.schema.join_group.v4 import request as join4
from kio.schema.join_group.v6 import request as join6
from kio.schema.offset_commit.v2 import request as commit2
from kio.schema.offset_commit.v8 import request as commit8
from kio.serial import entity_reader, entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import get_field_tag

from rafka_actors.protocol import codec
from rafka_actors.protocol._codegen import uvarint
from rafka_actors.protocol.api_versions_error import encode_api_versions_fallback
from rafka_actors.protocol.codec import (
    decode_request,
    decode_response,
    decode_tagged_response,
    encode_request,
    encode_response,
)
from rafka_actors.protocol.errors import MalformedRequest, UnsupportedVersion
from rafka_actors.protocol.group_identity import GROUP_IDENTITY_TAG
from rafka_actors.protocol.headers import RequestHeader, parse_request_header, read_uvarint

SECONDS = datetime.timedelta(seconds=10)


def kio_encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def decode_body(request_type: type, body: bytes) -> Any:
    """Prefix ``body`` with a header for ``request_type`` and run the full decode path."""
    frame = encode_request_header(request_type, correlation_id=5) + body
    header, offset = parse_request_header(frame)
    return decode_request(header, frame, offset)


def encode_request_header(request_type: Any, correlation_id: int) -> bytes:
    key, version = request_type.__api_key__, request_type.__version__
    tags = b"\x00" if request_type.__flexible__ else b""
    return struct.pack(">hhih", key, version, correlation_id, 2) + b"id" + tags


def retag(entity: Any, extra: dict[int, bytes], override: dict[int, bytes] | None = None) -> bytes:
    """kio's encoding of ``entity`` with its tagged-field section rebuilt.

    Known tags are kept (payloads optionally overridden); ``extra`` tags are
    merged in, everything in tag order.
    """
    encoded = kio_encode(entity)
    defaults = {
        f.name: get_tagged_field_default(f)
        for f in dataclasses.fields(entity)
        if get_field_tag(f) is not None
    }
    start = len(kio_encode(dataclasses.replace(entity, **defaults))) - 1
    count, offset = read_uvarint(encoded, start)
    entries: dict[int, bytes] = {}
    for _ in range(count):
        tag, offset = read_uvarint(encoded, offset)
        size, offset = read_uvarint(encoded, offset)
        entries[tag], offset = encoded[offset : offset + size], offset + size
    assert offset == len(encoded)
    entries |= (override or {}) | extra
    section = b"".join(uvarint(t) + uvarint(len(entries[t])) + entries[t] for t in sorted(entries))
    return encoded[:start] + uvarint(len(entries)) + section


def splice(whole: bytes, part: bytes, replacement: bytes) -> bytes:
    assert whole.count(part) == 1
    return whole.replace(part, replacement)


def join_v6() -> Any:
    return join6.JoinGroupRequest(
        group_id="group",
        session_timeout=SECONDS,
        member_id="member",
        protocol_type="consumer",
        protocols=(
            join6.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01range-meta"),
            join6.JoinGroupRequestProtocol(name="roundrobin", metadata=b"\x00\x01rr-meta"),
        ),
    )


def commit_v8() -> Any:
    partitions = tuple(
        commit8.OffsetCommitRequestPartition(
            partition_index=i, committed_offset=1000 + i, committed_metadata=f"meta-{i}"
        )
        for i in range(3)
    )
    topic = commit8.OffsetCommitRequestTopic(name="orders", partitions=partitions)
    return commit8.OffsetCommitRequest(
        group_id="group", generation_id_or_member_epoch=4, member_id="m", topics=(topic,)
    )


def fetch_v15() -> Any:
    partition = fetch15.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20)
    return fetch15.FetchRequest(
        cluster_id="cluster-1",
        replica_state=fetch15.ReplicaState(replica_id=5, replica_epoch=6),
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        topics=(fetch15.FetchTopic(topic_id=uuid.uuid4(), partitions=(partition,)),),
        forgotten_topics_data=(),
    )


# --- unknown tagged fields --------------------------------------------------------


def test_unknown_tag_at_top_level() -> None:
    request = join_v6()
    body = retag(request, {99: b"future"})
    assert body != kio_encode(request)
    assert decode_body(type(request), body) == request


def test_unknown_tag_inside_array_entry() -> None:
    request = join_v6()
    entry = request.protocols[1]
    body = splice(kio_encode(request), kio_encode(entry), retag(entry, {7: b"x" * 200}))
    assert decode_body(type(request), body) == request


def test_unknown_tags_inside_topic_and_partition_entries() -> None:
    request = commit_v8()
    topic, partition = request.topics[0], request.topics[0].partitions[1]
    part_bytes, part_tagged = kio_encode(partition), retag(partition, {3: b"abc"})
    topic_bytes = kio_encode(topic)
    topic_tagged = splice(retag(topic, {0: b"", 2**20: b"\x01"}), part_bytes, part_tagged)
    body = splice(kio_encode(request), topic_bytes, topic_tagged)
    body = body[:-1] + b"\x01\x05\x00"  # and one at the top level
    assert decode_body(type(request), body) == request


def test_unknown_tags_next_to_known_ones() -> None:
    request = fetch_v15()
    # Unknown tags after the known tags 0 and 1, and one inside the tagged struct.
    replica = retag(request.replica_state, {9: b"zz"})
    body = retag(request, {2: b"\x00", 40: b"q" * 130}, override={1: replica})
    decoded = decode_body(type(request), body)
    assert decoded == request
    assert decoded.replica_state.replica_id == 5


def test_unknown_tag_in_response() -> None:
    from kio.schema.heartbeat.v4.response import HeartbeatResponse

    response = HeartbeatResponse(throttle_time=SECONDS, error_code=ErrorCode.rebalance_in_progress)
    frame = struct.pack(">i", 77) + b"\x00" + retag(response, {4: b"new"})
    assert decode_response(12, 4, frame) == (77, response)


def test_truncated_unknown_tag_is_malformed() -> None:
    body = retag(join_v6(), {99: b"future"})
    with pytest.raises(MalformedRequest):
        decode_body(join6.JoinGroupRequest, body[:-2])


# --- malformed bodies -------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_type", "body"),
    [
        (join6.JoinGroupRequest, kio_encode(join_v6())),
        (join6.JoinGroupRequest, retag(join_v6(), {99: b"future"})),
        (fetch15.FetchRequest, kio_encode(fetch_v15())),
        (fetch15.FetchRequest, retag(fetch_v15(), {3: b"abc"})),
    ],
)
def test_every_truncation_is_malformed(request_type: type, body: bytes) -> None:
    decode_body(request_type, body)  # the whole body is fine
    for end in range(len(body)):
        with pytest.raises(MalformedRequest):
            decode_body(request_type, body[:end])


def join_v4_body(group_id_length: int, member_id: bytes, protocol_count: int) -> bytes:
    return (
        struct.pack(">h", group_id_length)
        + b"group"
        + struct.pack(">ii", 10_000, 20_000)
        + struct.pack(">h", len(member_id))
        + member_id
        + struct.pack(">h", 8)
        + b"consumer"
        + struct.pack(">i", protocol_count)
    )


def test_valid_handmade_body_decodes() -> None:
    decoded = decode_body(join4.JoinGroupRequest, join_v4_body(5, b"m", 0))
    assert (decoded.group_id, decoded.member_id, decoded.protocols) == ("group", "m", ())


def commit_v2_body(retention_ms: int) -> bytes:
    """OffsetCommit v2: group "g", generation 3, member "m", `retention_ms`, one partition."""
    return (
        struct.pack(">h", 1)
        + b"g"
        + struct.pack(">i", 3)
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">q", retention_ms)
        + struct.pack(">ih", 1, 1)
        + b"t"
        + struct.pack(">iiqh", 1, 0, 42, 0)
    )


@pytest.mark.parametrize(
    ("retention_ms", "decoded"),
    [
        (-1, datetime.timedelta(milliseconds=-1)),  # what clients send: the broker's default
        (10**16, datetime.timedelta(milliseconds=10**16)),  # beyond kio's native reader
        (2**63 - 1, datetime.timedelta.max - datetime.timedelta(days=1, microseconds=999)),
        (-(2**63), datetime.timedelta.min),  # clamped to the duration's range
    ],
)
def test_any_int64_retention_time_decodes(retention_ms: int, decoded: datetime.timedelta) -> None:
    """Kafka takes any int64 there; kio's native reader refuses more than 2**63 us, which
    closed the connection of a well-formed commit (found by tests/fuzz/test_decoder.py)."""
    request = decode_body(commit2.OffsetCommitRequest, commit_v2_body(retention_ms))
    assert request.retention_time == decoded
    assert (request.group_id, request.generation_id_or_member_epoch, request.member_id) == (
        "g",
        3,
        "m",
    )
    [topic] = request.topics
    assert (topic.name, topic.partitions[0].committed_offset) == ("t", 42)


@pytest.mark.parametrize(
    "body",
    [
        join_v4_body(-5, b"m", 0),  # negative string length
        join_v4_body(5, b"\xff\xfe", 0),  # invalid UTF-8
        join_v4_body(5, b"m", 2**31 - 1),  # array count far beyond the frame
        join_v4_body(5, b"m", -7),  # negative array count
        b"",
    ],
)
def test_malformed_bodies(body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        decode_body(join4.JoinGroupRequest, body)


def test_decode_errors_are_chained() -> None:
    with pytest.raises(MalformedRequest) as info:
        decode_body(join4.JoinGroupRequest, join_v4_body(5, b"\xff\xfe", 0))
    assert info.value.__cause__ is not None


def test_writable_buffers_are_accepted() -> None:
    request = join_v6()
    frame = bytearray(encode_request_header(type(request), 1) + kio_encode(request))
    header, offset = parse_request_header(frame)
    assert decode_request(header, frame, offset) == request  # type: ignore[arg-type]


def test_trailing_bytes_are_ignored() -> None:
    request = join_v6()
    assert decode_body(type(request), kio_encode(request) + b"garbage") == request


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersion):
        decode_request(RequestHeader(11, 99, 1, None), b"", 0)


_FUZZ_TYPES = [join6.JoinGroupRequest, join4.JoinGroupRequest, commit8.OffsetCommitRequest]


@settings(max_examples=300, deadline=None, database=None)
@given(st.sampled_from(_FUZZ_TYPES), st.binary(max_size=80))
def test_random_bodies_decode_or_raise_malformed(request_type: type, body: bytes) -> None:
    try:
        decode_body(request_type, body)
    except MalformedRequest:
        pass


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.data())
def test_corrupted_tolerant_frames_decode_or_raise_malformed(data: st.DataObject) -> None:
    body = bytearray(retag(fetch_v15(), {7: b"seven"}))
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_body(fetch15.FetchRequest, bytes(body))
    except MalformedRequest:
        pass


# --- forged array lengths ---------------------------------------------------------
# kio's native reader pre-allocates arrays from the wire count and a failed
# allocation aborts the process, so these run in a child process: a regression
# must fail the test, not kill the test run.

HUGE_COMPACT = b"\xfe\xff\xff\xff\x7f"  # a compact array of ~2**35 elements
HUGE_LEGACY = b"\x7f\xff\xff\xff"


def _forged_frames() -> dict[str, tuple[type, bytes]]:
    empty6 = kio_encode(dataclasses.replace(join_v6(), protocols=()))
    empty4 = kio_encode(
        join4.JoinGroupRequest(
            group_id="g", session_timeout=SECONDS, member_id="", protocol_type="c", protocols=()
        )
    )
    forgotten_id = uuid.uuid4()
    fetch = dataclasses.replace(
        fetch_v15(),
        cluster_id=None,
        forgotten_topics_data=(fetch15.ForgottenTopic(topic_id=forgotten_id, partitions=()),),
    )
    fetch_body = kio_encode(fetch)
    partition = fetch.topics[0].partitions[0]
    # An unknown tag early on sends decoding down the tolerant path.
    tolerant = splice(fetch_body, kio_encode(partition), retag(partition, {9: b"?"}))
    int_array = forgotten_id.bytes + b"\x01"
    entity_array = b"\x02" + forgotten_id.bytes
    return {
        "compact entity array": (join6.JoinGroupRequest, empty6[:-2] + HUGE_COMPACT + bytes(20)),
        "legacy entity array": (join4.JoinGroupRequest, empty4[:-4] + HUGE_LEGACY + bytes(20)),
        "compact int array": (
            fetch15.FetchRequest,
            splice(fetch_body, int_array, forgotten_id.bytes + HUGE_COMPACT),
        ),
        "tolerant int array": (
            fetch15.FetchRequest,
            splice(tolerant, int_array, forgotten_id.bytes + HUGE_COMPACT),
        ),
        "tolerant entity array": (
            fetch15.FetchRequest,
            splice(tolerant, entity_array, HUGE_COMPACT + forgotten_id.bytes),
        ),
    }


_CHILD = """
import sys
from rafka_actors.protocol.codec import decode_request
from rafka_actors.protocol.headers import parse_request_header
for line in sys.stdin:
    frame = bytes.fromhex(line.strip())
    header, offset = parse_request_header(frame)
    try:
        decode_request(header, frame, offset)
        print("decoded")
    except Exception as exc:
        print(type(exc).__name__)
"""


def test_forged_array_lengths_are_rejected_without_allocating() -> None:
    forged = _forged_frames()
    lines = [
        (encode_request_header(request_type, 1) + body).hex()
        for request_type, body in forged.values()
    ]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input="\n".join(lines),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert dict(zip(forged, child.stdout.split(), strict=True)) == dict.fromkeys(
        forged, "MalformedRequest"
    )


def test_tolerant_path_is_taken_by_the_forged_tolerant_frames() -> None:
    # Sanity check of the fixture: without the forgery the frame decodes via the fallback.
    fetch = fetch_v15()
    partition = fetch.topics[0].partitions[0]
    body = splice(kio_encode(fetch), kio_encode(partition), retag(partition, {9: b"?"}))
    assert decode_body(fetch15.FetchRequest, body) == fetch


# --- framing ----------------------------------------------------------------------


def test_response_header_v0_framing() -> None:
    from kio.schema.heartbeat.v0.response import HeartbeatResponse

    frame = encode_response(
        RequestHeader(12, 0, 0x01020304, "c"),
        HeartbeatResponse(error_code=ErrorCode.rebalance_in_progress),
    )
    assert frame == b"\x00\x00\x00\x06" + b"\x01\x02\x03\x04" + b"\x00\x1b"


def test_response_header_v1_framing() -> None:
    from kio.schema.heartbeat.v4.response import HeartbeatResponse

    response = HeartbeatResponse(
        throttle_time=datetime.timedelta(milliseconds=258), error_code=ErrorCode.none
    )
    frame = encode_response(RequestHeader(12, 4, 7, "c"), response)
    body = b"\x00\x00\x01\x02" + b"\x00\x00" + b"\x00"
    assert frame == b"\x00\x00\x00\x0c" + b"\x00\x00\x00\x07" + b"\x00" + body


def test_a_shared_response_is_built_and_encoded_once_per_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kio.schema.heartbeat.v4.response import HeartbeatResponse

    monkeypatch.setattr(codec, "SHARED_MAX", 2)
    monkeypatch.setattr(codec, "_SHARED", {})
    monkeypatch.setattr(codec, "_SHARED_BODIES", {})
    built: list[Any] = []

    def build() -> Any:
        built.append(HeartbeatResponse(throttle_time=SECONDS, error_code=ErrorCode.none))
        return built[-1]

    first = codec.shared_response("k", build)
    assert codec.shared_response("k", build) is first and len(built) == 1
    # the body comes from the cache, and is what encoding an equal response gives
    monkeypatch.setitem(codec._SHARED_BODIES, id(first), (first, b"cached body"))
    assert encode_response(RequestHeader(12, 4, 7, "c"), first).endswith(b"cached body")
    fresh = HeartbeatResponse(throttle_time=SECONDS, error_code=ErrorCode.none)
    del codec._SHARED_BODIES[id(first)]
    codec._SHARED.clear()
    again = codec.shared_response("k", build)
    header = RequestHeader(12, 4, 7, "c")
    assert encode_response(header, again) == encode_response(header, fresh)
    codec.shared_response("other", build)
    codec.shared_response("third", build)  # full: both caches start afresh
    assert list(codec._SHARED) == ["third"] and len(codec._SHARED_BODIES) == 1


def test_api_versions_responses_always_use_header_v0() -> None:
    from kio.schema.api_versions.v3 import response as versions3

    response = versions3.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(versions3.ApiVersion(api_key=18, min_version=0, max_version=4),),
        throttle_time=datetime.timedelta(0),
    )
    assert type(response).__flexible__
    frame = encode_response(RequestHeader(18, 3, 9, None), response)
    body = kio_encode(response)
    assert frame == struct.pack(">ii", 4 + len(body), 9) + body


def test_api_versions_v0_may_answer_a_newer_request() -> None:
    response = ApiVersionsResponse(error_code=ErrorCode.unsupported_version, api_keys=())
    frame = encode_response(RequestHeader(18, 7, 3, "c"), response)
    assert frame == b"\x00\x00\x00\x0a\x00\x00\x00\x03\x00\x23\x00\x00\x00\x00"


def test_mismatched_response_is_rejected() -> None:
    from kio.schema.heartbeat.v4.response import HeartbeatResponse

    response = HeartbeatResponse(throttle_time=SECONDS, error_code=ErrorCode.none)
    for header in (RequestHeader(12, 3, 1, None), RequestHeader(11, 4, 1, None)):
        with pytest.raises(ValueError):
            encode_response(header, response)


def test_fetch_response_roundtrip_through_frame() -> None:
    from kio.schema.fetch.v12 import response as fetch

    partition = fetch.PartitionData(
        partition_index=1,
        error_code=ErrorCode.none,
        high_watermark=99,
        aborted_transactions=None,
        records=b"\x07" * 70_000,
        current_leader=fetch.LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
    )
    response = fetch.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(fetch.FetchableTopicResponse(topic="t", partitions=(partition,)),),
    )
    frame = encode_response(RequestHeader(1, 12, 11, "c"), response)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert frame[4:9] == b"\x00\x00\x00\x0b\x00"
    assert decode_response(1, 12, frame[4:]) == (11, response)


@pytest.mark.parametrize("client_id", ["client", "", None])
@pytest.mark.parametrize("request_factory", [join_v6, commit_v8, fetch_v15])
def test_encode_request_roundtrip(request_factory: Any, client_id: str | None) -> None:
    request = request_factory()
    frame = encode_request(request, correlation_id=1234, client_id=client_id)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    header, offset = parse_request_header(frame[4:])
    cls = type(request)
    assert header == RequestHeader(cls.__api_key__, cls.__version__, 1234, client_id)
    assert frame[4 + offset :] == kio_encode(request)
    assert decode_request(header, frame[4:], offset) == request


def test_encode_request_non_flexible_header() -> None:
    request = join4.JoinGroupRequest(
        group_id="g", session_timeout=SECONDS, member_id="", protocol_type="c", protocols=()
    )
    frame = encode_request(request, correlation_id=1, client_id=None)
    assert frame[4:14] == b"\x00\x0b\x00\x04\x00\x00\x00\x01\xff\xff"
    assert frame[14:] == kio_encode(request)


# --- ApiVersions fallback -----------------------------------------------------------


def test_api_versions_fallback_bytes() -> None:
    frame = encode_api_versions_fallback(0x0A0B0C0D, {18: (0, 4), 3: (0, 12)})
    assert frame == bytes.fromhex(
        "00000016"  # size: 22
        "0a0b0c0d"  # correlation id (response header v0)
        "0023"  # error_code 35 UNSUPPORTED_VERSION
        "00000002"  # two ranges, sorted by api key
        "0003" "0000" "000c"
        "0012" "0000" "0004"
    )  # fmt: skip
    decoded, _ = entity_reader(ApiVersionsResponse)(frame, 8)
    assert decoded == ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version,
        api_keys=(
            ApiVersion(api_key=3, min_version=0, max_version=12),
            ApiVersion(api_key=18, min_version=0, max_version=4),
        ),
    )


def test_api_versions_fallback_empty() -> None:
    frame = encode_api_versions_fallback(1, {})
    assert frame == b"\x00\x00\x00\x0a\x00\x00\x00\x01\x00\x23\x00\x00\x00\x00"


@pytest.mark.parametrize(
    ("key", "version", "body"),
    [
        # ListOffsets v1 (not flexible): replica id, then a topics array of count -1
        (2, 1, struct.pack(">ii", -1, -1)),
        # OffsetFetch v8 (flexible): groups as compact length 0 (null), require_stable, tags
        (9, 8, b"\x00" + b"\x00\x00"),
    ],
)
def test_a_null_non_nullable_array_is_malformed(key: int, version: int, body: bytes) -> None:
    """kio would decode it as None, which no handler expects; Kafka refuses to parse it."""
    with pytest.raises(MalformedRequest, match="non-nullable array is null"):
        decode_request(RequestHeader(key, version, 1, None), body, 0)


# --- header tags (our group-identity tag) -----------------------------------------


def test_response_header_tags_are_encoded_and_read_back() -> None:
    from kio.schema.list_groups.v5 import response as list5

    response = list5.ListGroupsResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, groups=()
    )
    header = RequestHeader(16, 5, 7, "admin", group_identities=True)
    plain = encode_response(header, response)
    tagged = encode_response(header, response, {GROUP_IDENTITY_TAG: b"payload"})
    section = b"\x01" + b"\xc1\xa4\x01" + b"\x07" + b"payload"
    assert tagged == struct.pack(">ii", len(plain) - 4 + len(section) - 1, 7) + section + plain[9:]
    assert decode_tagged_response(16, 5, tagged[4:]) == (
        7,
        response,
        {GROUP_IDENTITY_TAG: b"payload"},
    )
    assert decode_tagged_response(16, 5, plain[4:]) == (7, response, {})
    assert decode_response(16, 5, tagged[4:]) == (7, response)  # a reader that skips it


def test_header_tags_need_a_flexible_version() -> None:
    from kio.schema.list_groups.v2 import request as list_req2
    from kio.schema.list_groups.v2 import response as list2

    response = list2.ListGroupsResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, groups=()
    )
    with pytest.raises(ValueError):
        encode_response(RequestHeader(16, 2, 1, None), response, {GROUP_IDENTITY_TAG: b""})
    with pytest.raises(ValueError):
        encode_request(list_req2.ListGroupsRequest(), 1, "c", {GROUP_IDENTITY_TAG: b""})


def test_request_header_tags_are_parsed_as_asking_for_identities() -> None:
    from kio.schema.describe_groups.v5 import request as describe5

    request = describe5.DescribeGroupsRequest(groups=("g",), include_authorized_operations=False)
    frame = encode_request(request, 3, "admin", {GROUP_IDENTITY_TAG: b""})
    header, offset = parse_request_header(frame[4:])
    assert header == RequestHeader(15, 5, 3, "admin", group_identities=True)
    assert decode_request(header, frame[4:], offset) == request
    plain = encode_request(request, 3, "admin")
    assert len(frame) == len(plain) + 4  # one tag of 3 varint bytes and an empty value
    assert not parse_request_header(plain[4:])[0].group_identities

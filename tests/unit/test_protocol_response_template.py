"""JoinGroup and SyncGroup responses from their generation's template: kio's bytes exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rafka_actors.gateway.apis import groups
from rafka_actors.gateway.apis._build import schema
from rafka_actors.group_common.ops import (
    JoinGroupOpResp,
    SyncGroupOpResp,
)
from rafka_actors.protocol.codec import encode_body, encode_response
from rafka_actors.protocol.headers import RequestHeader
from rafka_actors.protocol.response_template import (
    PLACEHOLDER,
    EncodedBody,
    FieldTemplate,
)

JOIN_VERSIONS = range(0, 8)  # what the gateway serves (gateway/apis/__init__.py)
SYNC_VERSIONS = range(0, 6)  # likewise


def _both(version: int, response: JoinGroupOpResp) -> tuple[object, bytes, bytes]:
    """What `_join_response` gives, framed, and kio's frame of the same response."""
    header = RequestHeader(groups.JOIN_KEY, version, 12345, "client")
    mod = schema(groups.JOIN_KEY, version)
    answer = groups._join_response(mod, version, response)
    kio = encode_response(header, groups._join_response_of(mod, version, response))
    return answer, encode_response(header, answer), kio


def _follower(member_id: str, **fields: object) -> JoinGroupOpResp:
    values: dict[str, object] = {
        "generation_id": 7,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "leader_id": "rdkafka-3b0c7d5e-leader",
    }
    values.update(fields)
    return JoinGroupOpResp(0, member_id=member_id, **values)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(JOIN_VERSIONS),
    member_id=st.text(max_size=300),
    leader_id=st.text(max_size=40),
    protocol_name=st.none() | st.text(max_size=20),
    protocol_type=st.none() | st.text(max_size=20),
    generation=st.integers(-1, 2**31 - 1),
)
def test_a_followers_response_is_kios_bytes(
    version: int,
    member_id: str,
    leader_id: str,
    protocol_name: str | None,
    protocol_type: str | None,
    generation: int,
) -> None:
    response = _follower(
        member_id,
        generation_id=generation,
        leader_id=leader_id,
        protocol_name=protocol_name,
        protocol_type=protocol_type,
    )
    try:
        answer, ours, kio = _both(version, response)
    except (ValueError, TypeError):
        # refused (a null protocol type where the version has none): kio refuses it too
        header = RequestHeader(groups.JOIN_KEY, version, 12345, "client")
        mod = schema(groups.JOIN_KEY, version)
        with pytest.raises((ValueError, TypeError)):
            encode_response(header, groups._join_response_of(mod, version, response))
        return
    assert type(answer) is EncodedBody
    assert ours == kio


@pytest.mark.parametrize("version", JOIN_VERSIONS)
def test_one_template_serves_every_follower_of_a_generation(version: int) -> None:
    groups._TEMPLATES.clear()
    for n in range(50):
        answer, ours, kio = _both(version, _follower(f"rdkafka-{n}-" + "x" * n))
        assert type(answer) is EncodedBody and ours == kio
    assert len(groups._TEMPLATES) == 1


def test_the_leader_and_errors_go_through_kio() -> None:
    leader = _follower("m-1", members=(("m-1", None, b"meta"), ("m-2", "static", b"")))
    refused = JoinGroupOpResp(79, member_id="m-3")  # MEMBER_ID_REQUIRED
    for response in (leader, refused):
        answer, ours, kio = _both(7, response)
        assert type(answer) is not EncodedBody and ours == kio


def test_a_field_holding_the_placeholder_falls_back_to_kio() -> None:
    response = _follower("m-1", leader_id="x" + PLACEHOLDER)
    mod = schema(groups.JOIN_KEY, 7)
    placeholder_response = groups._join_response_of(
        mod, 7, _follower(PLACEHOLDER, leader_id="x" + PLACEHOLDER)
    )
    assert FieldTemplate.of(placeholder_response, encode_body) is None
    answer, ours, kio = _both(7, response)
    assert type(answer) is not EncodedBody and ours == kio


def test_a_very_long_member_id_goes_through_kio() -> None:
    answer, ours, kio = _both(5, _follower("m" * 5000))
    assert type(answer) is not EncodedBody and ours == kio


def test_an_encoded_body_answers_only_its_own_api_and_version() -> None:
    body = groups._join_response(schema(groups.JOIN_KEY, 6), 6, _follower("m-1"))
    assert type(body) is EncodedBody
    for api_key, version in ((groups.JOIN_KEY, 5), (groups.SYNC_KEY, 6)):
        with pytest.raises(ValueError, match="cannot answer"):
            encode_response(RequestHeader(api_key, version, 1, None), body)


def _sync_both(version: int, response: SyncGroupOpResp) -> tuple[object, bytes, bytes]:
    header = RequestHeader(groups.SYNC_KEY, version, 777, "client")
    mod = schema(groups.SYNC_KEY, version)
    answer = groups._sync_response(mod, response)
    kio = encode_response(header, groups._sync_response_of(mod, response))
    return answer, encode_response(header, answer), kio


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(SYNC_VERSIONS),
    assignment=st.binary(max_size=2000),
    protocol_type=st.none() | st.text(max_size=20),
    protocol_name=st.none() | st.text(max_size=20),
)
def test_a_members_sync_response_is_kios_bytes(
    version: int, assignment: bytes, protocol_type: str | None, protocol_name: str | None
) -> None:
    response = SyncGroupOpResp(
        0, assignment=assignment, protocol_type=protocol_type, protocol_name=protocol_name
    )
    answer, ours, kio = _sync_both(version, response)
    assert type(answer) is EncodedBody
    assert ours == kio


@pytest.mark.parametrize("version", SYNC_VERSIONS)
def test_a_sync_error_and_a_large_assignment(version: int) -> None:
    answer, ours, kio = _sync_both(version, SyncGroupOpResp(27))  # REBALANCE_IN_PROGRESS
    assert type(answer) is not EncodedBody and ours == kio
    big = SyncGroupOpResp(0, assignment=bytes(range(256)) * 400, protocol_type="consumer")
    answer, ours, kio = _sync_both(version, big)
    assert type(answer) is EncodedBody and ours == kio


def test_an_encoded_body_takes_no_header_tags() -> None:
    body = groups._join_response(schema(groups.JOIN_KEY, 6), 6, _follower("m-1"))
    with pytest.raises(ValueError, match="without header tags"):
        encode_response(RequestHeader(groups.JOIN_KEY, 6, 1, None), body, {1: b"x"})

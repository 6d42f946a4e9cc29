"""kio's schemas against the bytes librdkafka 2.16's ShareConsumer sends: one captured
request frame of each share API it uses (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, all
v1; captured through a TCP proxy in front of the broker), decoded by the broker's codec and
encoded again to the very same bytes."""

from __future__ import annotations

import pytest

from rafka_actors.protocol.codec import decode_request, encode_request
from rafka_actors.protocol.headers import parse_request_header

# (api key, version): the frame after its 4-byte size
FRAMES = {
    (76, 1): bytes.fromhex(
        "004c000100000003000763617074757265000a6361702d67726f7570176c37717170636a2f532b476739"
        "686a79705a2b6762510000000000020463617000"
    ),
    (78, 1): bytes.fromhex(
        "004e000100000005000763617074757265000a6361702d67726f7570176c37717170636a2f532b476739"
        "686a79705a2b67625100000000000001f40000000103200000000001f4000001f4021cef7755f4e44c2f"
        "8adc6cf63482419e02000000000100000100"
    ),
    (79, 1): bytes.fromhex(
        "004f000100000006000763617074757265000a6361702d67726f7570176c37717170636a2f532b476739"
        "686a79705a2b67625100000001021cef7755f4e44c2f8adc6cf63482419e020000000006000000000000"
        "000000000000000000000202000000000000000001000000000000000102010000000000000000020000"
        "000000000002020200000000000000000300000000000000030201000000000000000004000000000000"
        "0004020200000000"
    ),
}


@pytest.mark.parametrize("key", sorted(FRAMES), ids=lambda k: f"api{k[0]}v{k[1]}")
def test_a_captured_frame_decodes_and_encodes_to_the_same_bytes(key: tuple[int, int]) -> None:
    frame = FRAMES[key]
    header, offset = parse_request_header(frame)
    assert (header.api_key, header.api_version) == key
    request = decode_request(header, frame, offset)
    assert request.group_id == "cap-group"  # type: ignore[attr-defined]
    again = encode_request(request, header.correlation_id, header.client_id)
    assert again[4:] == frame


def test_what_the_client_said() -> None:
    heartbeat = _decoded((76, 1))
    assert heartbeat.member_epoch == 0 and heartbeat.subscribed_topic_names == ("cap",)
    fetch = _decoded((78, 1))
    assert fetch.max_records == 500 and fetch.topics[0].partitions[0].partition_index == 0
    ack = _decoded((79, 1))
    types = {
        int(t)
        for topic in ack.topics
        for p in topic.partitions
        for b in p.acknowledgement_batches
        for t in b.acknowledge_types
    }
    assert types == {1, 2}  # ACCEPT and RELEASE


def _decoded(key: tuple[int, int]) -> object:
    frame = FRAMES[key]
    header, offset = parse_request_header(frame)
    return decode_request(header, frame, offset)

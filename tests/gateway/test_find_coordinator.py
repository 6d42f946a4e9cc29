"""FindCoordinator as Kafka 4.3.1 answers it (seen side by side by the differential check,
tests/kafka_diff): an unknown key type and a malformed share key are INVALID_REQUEST with
no node, and the message fields are Kafka's ("NONE" before v4, "" from v4 on)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE, find_coordinator
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane

INVALID = ErrorCode.invalid_request
INVALID_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)
SHARE_KEY = "g:AAAAAAAAAAAAAAAAAAAAAQ:0"  # group, topic id (Kafka's base64), partition


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    yield BrokerContext(BrokerConfig(data_dir=tmp_path, node_id=1), data, "h", 9092, API_TABLE)
    data.close()


def find(ctx: BrokerContext, version: int, key_type: int, *keys: str) -> Any:
    values: dict[str, Any] = {"key_type": key_type}
    if version >= 4:
        values["coordinator_keys"] = keys
    else:
        values["key"] = keys[0]
    request = make(request_class(10, version), **values)
    return find_coordinator.handle(ctx, ConnectionInfo("10.0.0.7", 4242), version, request)


def answers(response: Any) -> list[tuple[Any, ...]]:
    return [
        (c.key, c.error_code, c.node_id, c.host, c.port, c.error_message)
        for c in response.coordinators
    ]


def test_found_is_none_before_v4_and_empty_after(ctx: BrokerContext) -> None:
    old = find(ctx, 3, 1, "txn")
    assert (old.error_code, old.node_id, old.port, old.error_message) == (0, 1, 9092, "NONE")
    assert answers(find(ctx, 6, 0, "g1", "g2")) == [
        ("g1", ErrorCode.none, 1, "h", 9092, ""),
        ("g2", ErrorCode.none, 1, "h", 9092, ""),
    ]


@pytest.mark.parametrize("version", [1, 3])
def test_an_unknown_key_type_is_an_invalid_request(ctx: BrokerContext, version: int) -> None:
    old = find(ctx, version, 7, "g")
    assert (old.error_code, old.node_id, old.host, old.port) == (INVALID, -1, "", -1)
    assert old.error_message == INVALID_MESSAGE


def test_an_unknown_key_type_refuses_every_key_with_the_message(ctx: BrokerContext) -> None:
    assert answers(find(ctx, 6, 3, "a", "b")) == [
        ("a", INVALID, -1, "", -1, INVALID_MESSAGE),
        ("b", INVALID, -1, "", -1, INVALID_MESSAGE),
    ]


def test_share_keys_need_v6_and_kafkas_form(ctx: BrokerContext) -> None:
    keys = (
        SHARE_KEY,
        "g",
        "g:not-a-topic-id:0",
        ":AAAAAAAAAAAAAAAAAAAAAQ:0",
        "a:b:AAAAAAAAAAAAAAAAAAAAAQ:x",
    )
    assert [c.error_code for c in find(ctx, 6, 2, *keys).coordinators] == [
        ErrorCode.none, INVALID, INVALID, INVALID, INVALID
    ]  # fmt: skip
    assert answers(find(ctx, 6, 2, "a:b:AAAAAAAAAAAAAAAAAAAAAQ:3"))[0][1] == ErrorCode.none
    assert answers(find(ctx, 5, 2, SHARE_KEY)) == [(SHARE_KEY, INVALID, -1, "", -1, "")]

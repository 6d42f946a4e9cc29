"""Group identities in a private header tag (issue #7 point 3, docs/tenancy.md "Group
identity"): ListGroups v3+, DescribeGroups v5 and ConsumerGroupDescribe answer with a CBOR
map {group id: [cgp_ id, RRL]} in the response header only when the request header carried
the tag; without it the response is exactly what it would be otherwise."""

from __future__ import annotations

import datetime
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from trio.testing import MockClock

from rafka_actors.auth.users import User
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.protocol.codec import decode_tagged_response, encode_request
from rafka_actors.protocol.group_identity import GROUP_IDENTITY_TAG, decode_identities

from .serving import serving_groups
from .test_group_apis import Client, commit_req, join_and_sync, req

DESCRIBE, LIST, CG_HEARTBEAT, CG_DESCRIBE = 15, 16, 68, 69
ASK = {GROUP_IDENTITY_TAG: b""}


@pytest.fixture
async def ctx(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> AsyncIterator[BrokerContext]:
    async with serving_groups(tmp_path, [(org, "t", 2) for org in (0, 1, 3)]) as ctx:
        yield ctx


class RawClient:
    """Our codec's frames, with or without header tags; answers with their header tags."""

    def __init__(self, stream: trio.testing.MemoryStapledStream[Any]) -> None:
        self.stream = stream
        self.buffer = b""
        self.correlation = 0

    async def frame(self, request: Any, tags: dict[int, bytes] | None = None) -> bytes:
        self.correlation += 1
        await self.stream.send_all(encode_request(request, self.correlation, "admin", tags))
        while (
            len(self.buffer) < 4 or len(self.buffer) < 4 + struct.unpack_from(">i", self.buffer)[0]
        ):
            chunk = await self.stream.receive_some()
            assert chunk, "the server closed the connection"
            self.buffer += chunk
        (length,) = struct.unpack_from(">i", self.buffer)
        frame, self.buffer = self.buffer[4 : 4 + length], self.buffer[4 + length :]
        return frame

    async def call(
        self, request: Any, tags: dict[int, bytes] | None = None
    ) -> tuple[Any, dict[int, bytes]]:
        frame = await self.frame(request, tags)
        _, response, header_tags = decode_tagged_response(
            request.__api_key__, request.__version__, frame
        )
        return response, header_tags


async def open_pair(
    ctx: BrokerContext, nursery: trio.Nursery, org: int = 0, user: User | None = None
) -> tuple[Client, RawClient]:
    """A kio-framed client (to make groups) and a raw one, on two connections of `org`."""
    clients = []
    for _ in range(2):
        client_end, server_end = trio.testing.memory_stream_pair()
        conn = ConnectionInfo("10.0.0.7", 4242, org_id=org, user=user)
        nursery.start_soon(serve_connection, server_end, ctx, API_TABLE, conn)
        clients.append(client_end)
    return Client(clients[0]), RawClient(clients[1])


def cg_join(group: str) -> Any:
    return req(
        CG_HEARTBEAT,
        1,
        group_id=group,
        member_id="m-1",
        member_epoch=0,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("t",),
        topic_partitions=(),
    )


async def test_list_groups_identities_only_when_asked(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    maker, raw = await open_pair(ctx, nursery, org=3)
    await join_and_sync(maker, group="Team A/Orders")
    await maker.call(commit_req(9, {"t": [(0, 1)]}, group="simple"))
    await maker.call(cg_join("kip848"))
    summaries = {s.group_id: s.cgp_id for s in ctx.registry().summaries(3)}
    for version in (3, 5):
        listed, tags = await raw.call(req(LIST, version), ASK)
        assert sorted(g.group_id for g in listed.groups) == ["Team A/Orders", "kip848", "simple"]
        assert decode_identities(tags[GROUP_IDENTITY_TAG]) == {
            "Team A/Orders": (summaries["Team A/Orders"], "3/consumer-groups/team-a-orders"),
            "simple": (summaries["simple"], "3/consumer-groups/simple"),
            "kip848": (summaries["kip848"], "3/consumer-groups/kip848"),
        }
        assert all(cgp_id.startswith("cgp_") for cgp_id in summaries.values())
        plain_listed, plain_tags = await raw.call(req(LIST, version))
        assert (plain_listed, plain_tags) == (listed, {})
    # A real client's bytes: the header's tag section is the single zero byte.
    frame = await raw.frame(req(LIST, 5))
    assert frame[4] == 0


async def test_a_non_flexible_version_never_carries_identities(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    maker, raw = await open_pair(ctx, nursery)
    await maker.call(commit_req(9, {"t": [(0, 1)]}, group="simple"))
    listed, tags = await raw.call(req(LIST, 2))
    assert [g.group_id for g in listed.groups] == ["simple"] and tags == {}


async def test_describe_groups_identities(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    maker, raw = await open_pair(ctx, nursery, org=1)
    await join_and_sync(maker, group="live")
    request = req(DESCRIBE, 5, groups=("live", "nobody"), include_authorized_operations=False)
    described, tags = await raw.call(request, ASK)
    assert [(g.group_id, g.group_state) for g in described.groups] == [
        ("live", "Stable"),
        ("nobody", "Dead"),
    ]
    (cgp_id,) = [s.cgp_id for s in ctx.registry().summaries(1)]
    # A group that does not exist has no identity: it is left out.
    assert decode_identities(tags[GROUP_IDENTITY_TAG]) == {
        "live": (cgp_id, "1/consumer-groups/live")
    }
    assert await raw.call(request) == (described, {})


async def test_consumer_group_describe_identities(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    maker, raw = await open_pair(ctx, nursery)
    assert (await maker.call(cg_join("cg"))).error_code == ErrorCode.none
    for version in (0, 1):
        request = req(
            CG_DESCRIBE, version, group_ids=("cg", "none"), include_authorized_operations=False
        )
        described, tags = await raw.call(request, ASK)
        assert [g.error_code for g in described.groups] == [0, ErrorCode.group_id_not_found]
        (cgp_id,) = [s.cgp_id for s in ctx.registry().summaries(0)]
        assert decode_identities(tags[GROUP_IDENTITY_TAG]) == {
            "cg": (cgp_id, "0/consumer-groups/cg")
        }
        assert await raw.call(request) == (described, {})


async def test_identities_of_denied_groups_are_never_sent(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    maker, _ = await open_pair(ctx, nursery, org=1)
    for group in ("a.g", "b.g"):
        await maker.call(commit_req(9, {"t": [(0, 1)]}, group=group))
    alice = User("alice", 1, group_prefixes=("a.",))
    _, raw = await open_pair(ctx, nursery, org=1, user=alice)
    listed, tags = await raw.call(req(LIST, 5), ASK)
    assert [g.group_id for g in listed.groups] == ["a.g"]
    assert decode_identities(tags[GROUP_IDENTITY_TAG]).keys() == {"a.g"}
    request = req(DESCRIBE, 5, groups=("a.g", "b.g"), include_authorized_operations=False)
    described, tags = await raw.call(request, ASK)
    assert [g.error_code for g in described.groups] == [ErrorCode.group_authorization_failed, 0]
    assert decode_identities(tags[GROUP_IDENTITY_TAG]).keys() == {"a.g"}

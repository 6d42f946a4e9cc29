"""The group APIs end to end inside one process: Kafka frames over trio memory streams, through
`serve_connection` and the api table, to a real GroupRegistry whose actors run the real state
machine on a MemoryCoordinatorLog, on trio's autojumping MockClock.

Each api is driven at its lowest and highest served version; requests are built from kio's
schema of that version, responses parsed with kio's reference decoder. Every test names
`autojump_clock` itself: pytest-trio runs a test on a clock only if the test function asks for
it (a fixture asking for it is not enough).
"""

from __future__ import annotations

import datetime
import struct
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from trio.testing import MockClock

from rafka_actors.classic_group.consumer_protocol import encode_assignment, encode_subscription
from rafka_actors.gateway.apis import API_TABLE, groups, offsets
from rafka_actors.gateway.apis._build import error_code, make
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import settle
from rafka_actors.protocol import codec
from rafka_actors.protocol.messages import request_class, response_class

from ..wire import parse_response, request_frame
from .serving import serving_groups

JOIN, HEARTBEAT, LEAVE, SYNC = 11, 12, 13, 14
COMMIT, FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 15, 16, 42, 47
SESSION = datetime.timedelta(seconds=10)
SUBSCRIPTION = encode_subscription(["t"])
ASSIGNMENT = encode_assignment({"t": [0, 1]})
NO_OPERATIONS = -(2**31)


@pytest.fixture
async def ctx(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> AsyncIterator[BrokerContext]:
    async with serving_groups(tmp_path, ((0, "t", 2),)) as ctx:
        yield ctx


# -- a tiny client ------------------------------------------------------------------------
def req(key: int, version: int, **values: Any) -> Any:
    """The kio request of this version; values the version lacks are dropped."""
    return make(request_class(key, version), **values)


def nested(key: int, version: int, cls_name: str, **values: Any) -> Any:
    return make(getattr(sys.modules[request_class(key, version).__module__], cls_name), **values)


class Client:
    def __init__(self, stream: trio.testing.MemoryStapledStream[Any]) -> None:
        self.stream = stream
        self.buffer = b""
        self.correlation = 0
        self.sent: list[Any] = []
        self.answered = 0  # responses come in request order: the n-th has correlation id n

    def frame(self, request: Any) -> bytes:
        """`request`'s frame, with the next correlation id: its response is expected next."""
        self.correlation += 1
        self.sent.append(request)
        return request_frame(request, self.correlation)

    async def send(self, request: Any) -> None:
        await self.stream.send_all(self.frame(request))

    async def receive(self) -> Any:
        request = self.sent.pop(0)
        while True:
            if len(self.buffer) >= 4:
                (length,) = struct.unpack_from(">i", self.buffer)
                if len(self.buffer) >= 4 + length:
                    frame = self.buffer[4 : 4 + length]
                    self.buffer = self.buffer[4 + length :]
                    break
            chunk = await self.stream.receive_some()
            assert chunk, "the server closed the connection"
            self.buffer += chunk
        cls = response_class(request.__api_key__, request.__version__)
        correlation_id, response = parse_response(frame, cls, 1 if request.__flexible__ else 0)
        self.answered += 1
        assert correlation_id == self.answered
        return response

    async def call(self, request: Any) -> Any:
        await self.send(request)
        return await self.receive()


@pytest.fixture
async def connect(ctx: BrokerContext, nursery: trio.Nursery) -> Any:
    async def open_client() -> Client:
        client_end, server_end = trio.testing.memory_stream_pair()
        conn = ConnectionInfo("10.0.0.7", 4242)
        nursery.start_soon(serve_connection, server_end, ctx, API_TABLE, conn)
        return Client(client_end)

    return open_client


@pytest.fixture
async def client(connect: Any) -> Client:
    result: Client = await connect()
    return result


def join_req(version: int, group: str = "g", member: str = "", **values: Any) -> Any:
    protocol = nested(
        JOIN, version, "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION
    )
    return req(
        JOIN,
        version,
        group_id=group,
        session_timeout=SESSION,
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id=member,
        protocol_type="consumer",
        protocols=(protocol,),
        **values,
    )


def sync_req(version: int, member: str, generation: int, group: str = "g", **values: Any) -> Any:
    assignment = nested(
        SYNC, version, "SyncGroupRequestAssignment", member_id=member, assignment=ASSIGNMENT
    )
    return req(
        SYNC,
        version,
        group_id=group,
        generation_id=generation,
        member_id=member,
        assignments=(assignment,),
        **{"protocol_type": "consumer", "protocol_name": "range", **values},
    )


async def join(client: Client, version: int = 5, group: str = "g", **values: Any) -> Any:
    """A new member's whole join (with MEMBER_ID_REQUIRED first from v4 on)."""
    joined = await client.call(join_req(version, group, **values))
    if joined.error_code == ErrorCode.member_id_required:
        joined = await client.call(join_req(version, group, joined.member_id, **values))
    assert joined.error_code == ErrorCode.none
    return joined


async def join_and_sync(client: Client, group: str = "g") -> Any:
    joined = await join(client, group=group)
    synced = await client.call(sync_req(3, joined.member_id, joined.generation_id, group))
    assert synced.error_code == ErrorCode.none
    return joined


# -- JoinGroup ----------------------------------------------------------------------------
async def test_join_group_v0_joins_at_once(client: Client, autojump_clock: MockClock) -> None:
    start = trio.current_time()
    joined = await client.call(join_req(0))
    assert joined.error_code == ErrorCode.none
    assert joined.generation_id == 1
    assert joined.protocol_name == "range"
    assert joined.member_id.startswith("tests-")  # the client id of the request header
    assert joined.leader == joined.member_id
    assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, SUBSCRIPTION)]
    assert trio.current_time() == start  # no initial delay configured: no waiting


@pytest.mark.parametrize("version", [4, 5, 7])
async def test_join_group_v4_plus_requires_a_member_id_first(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    first = await client.call(join_req(version))
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id.startswith("tests-")
    assert first.generation_id == -1
    joined = await client.call(join_req(version, member=first.member_id))
    assert joined.error_code == ErrorCode.none
    assert (joined.member_id, joined.leader, joined.generation_id) == (
        first.member_id,
        first.member_id,
        1,
    )
    assert joined.members[0].metadata == SUBSCRIPTION
    if version >= 7:
        assert joined.protocol_type == "consumer"


async def test_join_group_v5_static_member_gets_instance_id_prefix(
    client: Client, autojump_clock: MockClock
) -> None:
    joined = await client.call(join_req(5, group_instance_id="i-1"))
    assert joined.error_code == ErrorCode.none  # static members skip MEMBER_ID_REQUIRED
    assert joined.member_id.startswith("i-1-")
    assert [m.group_instance_id for m in joined.members] == ["i-1"]


def test_only_a_join_without_a_member_id_mints_one() -> None:
    # (membership.join uses new_member_id only for an unknown member: a rejoin needs none)
    conn = ConnectionInfo("h", 1)
    conn.client_id = "rdkafka"
    assert groups._join_op(conn, 5, join_req(5, member="rdkafka-1")).new_member_id == ""
    fresh = groups._join_op(conn, 5, join_req(5)).new_member_id
    static = groups._join_op(conn, 5, join_req(5, group_instance_id="i-1")).new_member_id
    assert fresh.startswith("rdkafka-") and static.startswith("i-1-")


@pytest.mark.parametrize("version", [0, 7])
async def test_join_group_empty_group_id_is_invalid(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    joined = await client.call(join_req(version, group="", member="m-1"))
    assert joined.error_code == ErrorCode.invalid_group_id
    assert joined.member_id == "m-1"
    assert joined.members == ()


async def test_join_group_null_group_id_is_invalid(
    ctx: BrokerContext, autojump_clock: MockClock
) -> None:
    # A null id can't get through kio's decoder (the field is not nullable); the handler
    # refuses it all the same.
    response = await settle(
        groups.join_group(
            ctx,
            ConnectionInfo("h", 1),
            7,
            join_req(7, group=None),  # type: ignore[arg-type]
        ),
        ctx,
    )
    assert response.error_code == ErrorCode.invalid_group_id
    assert len(ctx.registry()) == 0


async def test_second_member_triggers_a_rebalance(connect: Any, autojump_clock: MockClock) -> None:
    a, b = await connect(), await connect()
    first = await join_and_sync(a)
    await b.send(join_req(7))
    b_id = (await b.receive()).member_id
    await b.send(join_req(7, member=b_id))  # parks until the leader rejoins
    beat = await a.call(req(HEARTBEAT, 0, group_id="g", generation_id=1, member_id=first.member_id))
    assert beat.error_code == ErrorCode.rebalance_in_progress
    rejoined = await a.call(join_req(5, member=first.member_id))
    b_joined = await b.receive()
    assert rejoined.generation_id == b_joined.generation_id == 2
    assert rejoined.leader == first.member_id
    assert {m.member_id for m in rejoined.members} == {first.member_id, b_id}
    assert b_joined.members == ()  # only the leader gets the member list


# -- SyncGroup ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 5])
async def test_sync_group_hands_out_the_leaders_assignment(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    joined = await join(client)
    synced = await client.call(sync_req(version, joined.member_id, joined.generation_id))
    assert synced.error_code == ErrorCode.none
    assert synced.assignment == ASSIGNMENT
    if version >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    wrong = await client.call(sync_req(version, joined.member_id, 7))
    assert wrong.error_code == ErrorCode.illegal_generation


async def test_sync_group_v5_needs_protocol_type_and_name(
    client: Client, autojump_clock: MockClock
) -> None:
    joined = await join(client)
    bare = sync_req(5, joined.member_id, 1, protocol_type=None, protocol_name=None)
    assert (await client.call(bare)).error_code == ErrorCode.inconsistent_group_protocol


@pytest.mark.parametrize("version", [0, 5])
async def test_sync_group_errors(client: Client, version: int, autojump_clock: MockClock) -> None:
    assert (await client.call(sync_req(version, "m", 1, group=""))).error_code == (
        ErrorCode.invalid_group_id
    )
    assert (await client.call(sync_req(version, "m", 1, group="nope"))).error_code == (
        ErrorCode.unknown_member_id
    )


# -- Heartbeat ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 4])
async def test_heartbeat(client: Client, version: int, autojump_clock: MockClock) -> None:
    joined = await join_and_sync(client)

    async def beat(member: str, generation: int = 1, group: str = "g") -> int:
        response = await client.call(
            req(HEARTBEAT, version, group_id=group, generation_id=generation, member_id=member)
        )
        return int(response.error_code)

    assert await beat(joined.member_id) == ErrorCode.none
    assert await beat(joined.member_id, generation=2) == ErrorCode.illegal_generation
    assert await beat("stranger") == ErrorCode.unknown_member_id
    assert await beat(joined.member_id, group="") == ErrorCode.invalid_group_id
    assert await beat(joined.member_id, group="other") == ErrorCode.unknown_member_id


async def test_heartbeat_answers_are_shared_and_encoded_once(
    ctx: BrokerContext, autojump_clock: MockClock
) -> None:
    conn = ConnectionInfo("10.0.0.7", 4242)
    heartbeat = API_TABLE[HEARTBEAT].handler
    stranger = req(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="stranger")
    first = await settle(heartbeat(ctx, conn, 4, stranger), ctx)
    assert first.error_code == ErrorCode.unknown_member_id
    assert await settle(heartbeat(ctx, conn, 4, stranger), ctx) is first
    assert id(first) in codec._SHARED_BODIES  # its body is encoded once, not per reply


async def test_heartbeats_keep_a_member_alive_and_silence_expires_it(
    client: Client, autojump_clock: MockClock
) -> None:
    joined = await join_and_sync(client)
    for _ in range(5):
        await trio.sleep(6)
        beat = req(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=joined.member_id)
        assert (await client.call(beat)).error_code == ErrorCode.none
    await trio.sleep(11)
    late = req(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=joined.member_id)
    assert (await client.call(late)).error_code == ErrorCode.unknown_member_id


# -- LeaveGroup ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 2])
async def test_leave_group_v0_to_v2_one_member(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    joined = await join_and_sync(client)
    leave = req(LEAVE, version, group_id="g", member_id=joined.member_id)
    assert (await client.call(leave)).error_code == ErrorCode.none
    assert (await client.call(leave)).error_code == ErrorCode.unknown_member_id
    unknown_group = req(LEAVE, version, group_id="nope", member_id="m")
    assert (await client.call(unknown_group)).error_code == ErrorCode.unknown_member_id
    empty = req(LEAVE, version, group_id="", member_id="m")
    assert (await client.call(empty)).error_code == ErrorCode.invalid_group_id


@pytest.mark.parametrize("version", [3, 5])
async def test_leave_group_v3_plus_per_member_results(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    joined = await join_and_sync(client)
    members = tuple(
        nested(LEAVE, version, "MemberIdentity", member_id=m, group_instance_id=None, reason="bye")
        for m in (joined.member_id, "stranger")
    )
    left = await client.call(req(LEAVE, version, group_id="g", members=members))
    assert left.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in left.members] == [
        (joined.member_id, ErrorCode.none),
        ("stranger", ErrorCode.unknown_member_id),
    ]
    described = await client.call(req(DESCRIBE, 0, groups=("g",)))
    assert described.groups[0].group_state == "Empty"
    # An unknown group: every member is unknown, the request itself is fine (as in Kafka).
    nowhere = await client.call(req(LEAVE, version, group_id="nope", members=members[:1]))
    assert nowhere.error_code == ErrorCode.none
    assert [m.error_code for m in nowhere.members] == [ErrorCode.unknown_member_id]


async def test_leave_group_v3_static_member_by_instance_id(
    client: Client, autojump_clock: MockClock
) -> None:
    await join(client, version=5, group_instance_id="i-1")
    member = nested(LEAVE, 4, "MemberIdentity", member_id="", group_instance_id="i-1")
    left = await client.call(req(LEAVE, 4, group_id="g", members=(member,)))
    assert [(m.group_instance_id, m.error_code) for m in left.members] == [("i-1", 0)]


# -- OffsetCommit / OffsetFetch -----------------------------------------------------------
def commit_req(
    version: int,
    topics: dict[str, list[tuple[int, int]]],
    group: str = "g",
    member: str = "",
    generation: int = -1,
    metadata: Callable[[int], str | None] = lambda offset: f"m{offset}",
) -> Any:
    def partition(index: int, offset: int) -> Any:
        return nested(
            COMMIT,
            version,
            "OffsetCommitRequestPartition",
            partition_index=index,
            committed_offset=offset,
            committed_leader_epoch=3,
            committed_metadata=metadata(offset),
        )

    return req(
        COMMIT,
        version,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        retention_time=datetime.timedelta(hours=1),
        topics=tuple(
            nested(
                COMMIT,
                version,
                "OffsetCommitRequestTopic",
                name=name,
                partitions=tuple(partition(i, o) for i, o in parts),
            )
            for name, parts in topics.items()
        ),
    )


def fetch_req(version: int, topics: dict[str, list[int]] | None, group: str = "g") -> Any:
    topic_cls = "OffsetFetchRequestTopics" if version >= 8 else "OffsetFetchRequestTopic"
    wanted = (
        None
        if topics is None
        else tuple(
            nested(FETCH, version, topic_cls, name=n, partition_indexes=tuple(ps))
            for n, ps in topics.items()
        )
    )
    if version < 8:
        return req(FETCH, version, group_id=group, topics=wanted, require_stable=True)
    one = nested(FETCH, version, "OffsetFetchRequestGroup", group_id=group, topics=wanted)
    return req(FETCH, version, groups=(one,), require_stable=True)


def committed(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t.name, p.partition_index): (int(p.error_code), getattr(p, "committed_offset", -1))
        for t in response.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", [2, 9])
async def test_offset_commit_unknown_topic_or_partition(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    request = commit_req(version, {"t": [(1, 5), (7, 5), (0, 4)], "missing": [(0, 1)]})
    response = await client.call(request)
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics
    ] == [
        (
            "t",
            [(1, ErrorCode.none), (7, ErrorCode.unknown_topic_or_partition), (0, ErrorCode.none)],
        ),
        ("missing", [(0, ErrorCode.unknown_topic_or_partition)]),
    ]
    fetched = await client.call(fetch_req(1, {"t": [0, 1, 7]}))
    assert committed(fetched) == {("t", 0): (0, 4), ("t", 1): (0, 5), ("t", 7): (0, -1)}


async def test_a_fully_committed_request_gets_one_shared_response_per_shape(
    ctx: BrokerContext, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer commits the same partitions again and again, and each time every one is
    stored: one immutable response (and its encoding) serves them all. Anything else, a
    partition refused, is built afresh."""
    conn = ConnectionInfo("10.0.0.7", 4242)
    commit = API_TABLE[COMMIT].handler

    async def answer(topics: dict[str, list[tuple[int, int]]]) -> Any:
        return await settle(commit(ctx, conn, 9, commit_req(9, topics)), ctx)

    first = await answer({"t": [(0, 1), (1, 1)]})
    assert committed(first) == {("t", 0): (0, -1), ("t", 1): (0, -1)}
    assert await answer({"t": [(0, 2), (1, 2)]}) is first  # other offsets, same answer
    assert await answer({"t": [(1, 3), (0, 3)]}) is not first  # another order, another answer
    partly = await answer({"t": [(0, 4), (9, 4)]})
    assert committed(partly)[("t", 9)] == (ErrorCode.unknown_topic_or_partition, -1)
    assert await answer({"t": [(0, 5), (9, 5)]}) is not partly
    monkeypatch.setattr(offsets, "SHARED_PARTITIONS", 1)  # bigger commits: built each time
    assert await answer({"t": [(0, 6), (1, 6)]}) is not first
    single = await answer({"t": [(0, 7)]})
    assert await answer({"t": [(0, 8)]}) is single


@pytest.mark.parametrize("version", [1, 8])
async def test_an_unchanged_offset_fetch_gets_one_shared_response(
    ctx: BrokerContext, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """Asking again for offsets that have not moved (committed() in a loop, a lag exporter)
    gets the same immutable response; a moved offset, another question or a response of more
    than SHARED_PARTITIONS partitions is built afresh. Never a stale one."""
    conn = ConnectionInfo("10.0.0.7", 4242)
    commit, fetch = API_TABLE[COMMIT].handler, API_TABLE[FETCH].handler

    async def ask(topics: dict[str, list[int]] | None = None) -> Any:
        request = fetch_req(version, topics or {"t": [0, 1]})
        return await settle(fetch(ctx, conn, version, request), ctx)

    def fetched(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
        return committed(response if version < 8 else response.groups[0])

    await settle(commit(ctx, conn, 9, commit_req(9, {"t": [(0, 10), (1, 20)]})), ctx)
    first = await ask()
    assert fetched(first) == {("t", 0): (0, 10), ("t", 1): (0, 20)}
    assert await ask() is first
    await settle(commit(ctx, conn, 9, commit_req(9, {"t": [(1, 21)]})), ctx)
    moved = await ask()
    assert fetched(moved) == {("t", 0): (0, 10), ("t", 1): (0, 21)}
    assert moved is not first and await ask() is moved
    assert fetched(await ask({"t": [1, 0]})) == fetched(moved)  # another order: rebuilt
    monkeypatch.setattr(offsets, "SHARED_PARTITIONS", 1)
    assert await ask() is not await ask()
    assert fetched(await ask()) == fetched(moved)


async def test_offset_commit_of_only_unknown_topics_creates_no_group(
    client: Client, autojump_clock: MockClock
) -> None:
    response = await client.call(commit_req(9, {"missing": [(0, 1)]}, group="ghost"))
    assert committed(response) == {("missing", 0): (ErrorCode.unknown_topic_or_partition, -1)}
    listed = await client.call(req(LIST, 0))
    assert [g.group_id for g in listed.groups] == []


@pytest.mark.parametrize(("commit_version", "fetch_version"), [(2, 1), (7, 7), (8, 8), (9, 9)])
async def test_offset_commit_then_fetch(
    client: Client, commit_version: int, fetch_version: int, autojump_clock: MockClock
) -> None:
    response = await client.call(commit_req(commit_version, {"t": [(0, 10), (1, 20)]}))
    assert committed(response) == {("t", 0): (0, -1), ("t", 1): (0, -1)}
    fetched = await client.call(fetch_req(fetch_version, {"t": [1, 0], "other": [3]}))
    if fetch_version >= 8:
        assert [(g.group_id, g.error_code) for g in fetched.groups] == [("g", ErrorCode.none)]
        fetched = fetched.groups[0]
    elif fetch_version >= 2:
        assert fetched.error_code == ErrorCode.none
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in fetched.topics] == [
        ("t", [1, 0]),
        ("other", [3]),  # request order, unknown topics included
    ]
    assert committed(fetched) == {("t", 0): (0, 10), ("t", 1): (0, 20), ("other", 3): (0, -1)}
    epoch = fetched.topics[0].partitions[0]
    assert epoch.metadata == "m20"
    if fetch_version >= 5:
        assert epoch.committed_leader_epoch == (3 if commit_version >= 6 else -1)


@pytest.mark.parametrize("version", [2, 7, 8, 9])
async def test_offset_fetch_all_topics(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    await client.call(commit_req(9, {"t": [(1, 20), (0, 10)]}))
    fetched = await client.call(fetch_req(version, None))
    group = fetched.groups[0] if version >= 8 else fetched
    assert committed(group) == {("t", 0): (0, 10), ("t", 1): (0, 20)}
    nothing = await client.call(fetch_req(version, None, group="unknown"))
    assert (nothing.groups[0] if version >= 8 else nothing).topics == ()


async def test_offset_fetch_v8_several_groups(client: Client, autojump_clock: MockClock) -> None:
    await client.call(commit_req(9, {"t": [(0, 1)]}, group="a"))
    await client.call(commit_req(9, {"t": [(0, 2)]}, group="b"))
    wanted = nested(FETCH, 8, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,))
    batch = tuple(
        nested(FETCH, 8, "OffsetFetchRequestGroup", group_id=g, topics=(wanted,))
        for g in ("a", "b", "c", "")
    )
    fetched = await client.call(req(FETCH, 8, groups=batch, require_stable=False))
    assert [(g.group_id, committed(g)) for g in fetched.groups] == [
        ("a", {("t", 0): (0, 1)}),
        ("b", {("t", 0): (0, 2)}),
        ("c", {("t", 0): (0, -1)}),
        ("", {("t", 0): (0, -1)}),  # an empty id is accepted, as in Kafka
    ]


async def test_offset_commit_by_group_members(client: Client, autojump_clock: MockClock) -> None:
    joined = await join_and_sync(client)
    member = joined.member_id
    ok = await client.call(commit_req(9, {"t": [(0, 5)]}, member=member, generation=1))
    assert committed(ok) == {("t", 0): (0, -1)}
    stale = await client.call(commit_req(9, {"t": [(0, 6)]}, member=member, generation=0))
    assert committed(stale) == {("t", 0): (ErrorCode.illegal_generation, -1)}
    unknown = await client.call(commit_req(9, {"t": [(0, 6)]}, group="new", generation=3))
    assert committed(unknown) == {("t", 0): (ErrorCode.group_id_not_found, -1)}
    unknown_v8 = await client.call(commit_req(8, {"t": [(0, 6)]}, group="new", generation=3))
    assert committed(unknown_v8) == {("t", 0): (ErrorCode.illegal_generation, -1)}
    empty_id = await client.call(commit_req(9, {"t": [(0, 1)]}, group=""))
    assert committed(empty_id) == {("t", 0): (0, -1)}


# -- DescribeGroups -----------------------------------------------------------------------
async def test_a_lag_exporter_gives_no_group_a_running_actor(
    ctx: BrokerContext, client: Client, autojump_clock: MockClock
) -> None:
    """Describing and fetching a group (what a lag exporter does to every group every few
    seconds) leaves no actor running: an idle group's actor stops once it has answered, or
    every group would keep one."""
    assert committed(await client.call(commit_req(8, {"t": [(0, 5)]}, group="lag"))) == {
        ("t", 0): (0, -1)
    }
    described = await client.call(
        req(DESCRIBE, 5, groups=("lag",), include_authorized_operations=False)
    )
    cg = await client.call(req(69, 0, group_ids=("lag",), include_authorized_operations=False))
    fetched = await client.call(fetch_req(7, {"t": [0]}, group="lag"))
    assert ctx.registry().running() == 0
    assert described.groups[0].group_state == "Empty"
    assert cg.groups[0].error_code == ErrorCode.group_id_not_found  # not a consumer group
    assert committed(fetched) == {("t", 0): (0, 5)}


@pytest.mark.parametrize("version", [0, 5, 6])
async def test_describe_groups(client: Client, version: int, autojump_clock: MockClock) -> None:
    joined = await join_and_sync(client)
    described = await client.call(
        req(DESCRIBE, version, groups=("g", "unknown"), include_authorized_operations=False)
    )
    stable, dead = described.groups
    assert (stable.group_id, stable.error_code, stable.group_state) == ("g", 0, "Stable")
    assert (stable.protocol_type, stable.protocol_data) == ("consumer", "range")
    [member] = stable.members
    assert member.member_id == joined.member_id
    assert (member.client_id, member.client_host) == ("tests", "/10.0.0.7")  # as Kafka
    assert (member.member_metadata, member.member_assignment) == (SUBSCRIPTION, ASSIGNMENT)
    # KIP-1043: from v6 on an unknown group is an error (still "Dead"), with Kafka's message
    not_found = ErrorCode.group_id_not_found if version >= 6 else ErrorCode.none
    assert (dead.group_id, dead.error_code, dead.group_state) == ("unknown", not_found, "Dead")
    assert (dead.protocol_type, dead.protocol_data, dead.members) == ("", "", ())
    if version >= 6:
        assert (stable.error_message, dead.error_message) == (None, "Group unknown not found.")
    if version >= 5:
        assert member.group_instance_id is None
        assert stable.authorized_operations == NO_OPERATIONS
        asked = await client.call(
            req(DESCRIBE, version, groups=("g",), include_authorized_operations=True)
        )
        # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka 4.3.1 sends
        assert asked.groups[0].authorized_operations == 3400


async def test_describe_groups_v5_static_member(client: Client, autojump_clock: MockClock) -> None:
    joined = await join(client, version=5, group_instance_id="i-9")
    await client.call(sync_req(5, joined.member_id, 1, group_instance_id="i-9"))
    described = await client.call(
        req(DESCRIBE, 5, groups=("g",), include_authorized_operations=False)
    )
    assert [m.group_instance_id for m in described.groups[0].members] == ["i-9"]


# -- ListGroups ---------------------------------------------------------------------------
async def test_list_groups_v0(client: Client, autojump_clock: MockClock) -> None:
    await join_and_sync(client, group="live")
    await client.call(commit_req(9, {"t": [(0, 1)]}, group="simple"))
    listed = await client.call(req(LIST, 0))
    assert listed.error_code == ErrorCode.none
    assert sorted((g.group_id, g.protocol_type) for g in listed.groups) == [
        ("live", "consumer"),
        ("simple", ""),
    ]


@pytest.mark.parametrize(
    ("states", "types", "expected"),
    [
        ((), (), ["live", "simple"]),
        (("stable",), (), ["live"]),
        ((" EMPTY ",), (), ["simple"]),
        (("Stable", "Empty"), ("Classic",), ["live", "simple"]),
        (("PreparingRebalance",), (), []),
        (("nonsense",), (), []),
        ((), ("consumer",), []),
    ],
)
async def test_list_groups_v5_filters(
    client: Client,
    states: tuple[str, ...],
    types: tuple[str, ...],
    expected: list[str],
    autojump_clock: MockClock,
) -> None:
    await join_and_sync(client, group="live")
    await client.call(commit_req(9, {"t": [(0, 1)]}, group="simple"))
    listed = await client.call(req(LIST, 5, states_filter=states, types_filter=types))
    assert sorted(g.group_id for g in listed.groups) == expected
    for group in listed.groups:
        assert group.group_type == "classic"
        assert group.group_state == ("Stable" if group.group_id == "live" else "Empty")


# -- DeleteGroups -------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 2])
async def test_delete_groups(client: Client, version: int, autojump_clock: MockClock) -> None:
    await join_and_sync(client, group="live")
    await client.call(commit_req(9, {"t": [(0, 1)]}, group="simple"))
    deleted = await client.call(
        req(DELETE, version, groups_names=("simple", "live", "unknown", "simple"))
    )
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("simple", ErrorCode.none),
        ("live", ErrorCode.non_empty_group),
        ("unknown", ErrorCode.group_id_not_found),
        ("simple", ErrorCode.group_id_not_found),  # already gone
    ]
    fetched = await client.call(fetch_req(8, {"t": [0]}, group="simple"))
    assert committed(fetched.groups[0]) == {("t", 0): (0, -1)}


# -- OffsetDelete -------------------------------------------------------------------------
def offset_delete_req(group: str, topics: dict[str, list[int]]) -> Any:
    return req(
        OFFSET_DELETE,
        0,
        group_id=group,
        topics=tuple(
            nested(
                OFFSET_DELETE,
                0,
                "OffsetDeleteRequestTopic",
                name=name,
                partitions=tuple(
                    nested(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=p)
                    for p in parts
                ),
            )
            for name, parts in topics.items()
        ),
    )


def deleted(response: Any) -> list[tuple[str, int, int]]:
    return [
        (t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions
    ]


async def test_offset_delete(client: Client, autojump_clock: MockClock) -> None:
    await client.call(commit_req(9, {"t": [(0, 1), (1, 2)]}, group="simple"))
    response = await client.call(offset_delete_req("simple", {"t": [0, 9], "missing": [0]}))
    assert response.error_code == ErrorCode.none
    assert deleted(response) == [
        ("t", 0, ErrorCode.none),
        ("t", 9, ErrorCode.unknown_topic_or_partition),
        ("missing", 0, ErrorCode.unknown_topic_or_partition),
    ]
    fetched = await client.call(fetch_req(8, {"t": [0, 1]}, group="simple"))
    assert committed(fetched.groups[0]) == {("t", 0): (0, -1), ("t", 1): (0, 2)}


async def test_offset_delete_group_errors(client: Client, autojump_clock: MockClock) -> None:
    unknown = await client.call(offset_delete_req("unknown", {"t": [0]}))
    assert (unknown.error_code, unknown.topics) == (ErrorCode.group_id_not_found, ())
    empty = await client.call(offset_delete_req("", {"t": [0]}))
    assert empty.error_code == ErrorCode.invalid_group_id
    await join_and_sync(client, group="live")  # a consumer group subscribed to "t"
    busy = await client.call(offset_delete_req("live", {"t": [0]}))
    assert busy.error_code == ErrorCode.none
    assert deleted(busy) == [("t", 0, ErrorCode.group_subscribed_to_topic)]


def test_error_code_is_the_enum_member_and_refuses_an_unknown_code() -> None:
    for code in ErrorCode:
        assert error_code(int(code)) is code
    with pytest.raises(ValueError):
        error_code(32_000)

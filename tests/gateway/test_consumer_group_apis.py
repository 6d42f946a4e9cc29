"""KIP-848 consumer groups end to end inside one process: ConsumerGroupHeartbeat (68),
ConsumerGroupDescribe (69), and what they change in ListGroups, OffsetCommit and OffsetFetch.

As in test_group_apis: Kafka frames over trio memory streams, through `serve_connection` and
the api table, to a real GroupRegistry (this time with the data plane's topic image, so the
server-side assignor sees the topics) running the real state machine on a
MemoryCoordinatorLog, on trio's autojumping MockClock. Each api is driven at its lowest and
highest served version where the version matters.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from trio.testing import MockClock

from rafka_actors.gateway.apis import API_TABLE, consumer_groups
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import settle
from rafka_actors.protocol.messages import response_class

from ..wire import parse_response, request_frame
from .serving import serving_groups
from .test_group_apis import Client, commit_req, committed, join_and_sync, nested, req

CG_HEARTBEAT, CG_DESCRIBE = 68, 69
API_VERSIONS, LIST, FETCH = 18, 16, 9
REBALANCE = datetime.timedelta(seconds=30)
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka 4.3.1 sends
OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
NO_OPERATIONS = -(2**31)


@pytest.fixture
async def ctx(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> AsyncIterator[BrokerContext]:
    async with serving_groups(tmp_path, ((0, "t", 2), (0, "u", 3))) as ctx:
        yield ctx


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


def topic_id(ctx: BrokerContext, name: str) -> uuid.UUID:
    topic = ctx.data.topics.by_name(name)
    assert topic is not None
    return topic.topic_id


# -- a consumer's requests ----------------------------------------------------------------
def heartbeat_req(
    version: int,
    member: str,
    epoch: int,
    group: str | None = "cg",
    *,
    topics: tuple[str, ...] | None = None,
    owned: dict[uuid.UUID, tuple[int, ...]] | None = None,
    rebalance: datetime.timedelta = datetime.timedelta(milliseconds=-1),
    **values: Any,
) -> Any:
    partitions = (
        None
        if owned is None
        else tuple(
            nested(CG_HEARTBEAT, version, "TopicPartitions", topic_id=t, partitions=ps)
            for t, ps in owned.items()
        )
    )
    return req(
        CG_HEARTBEAT,
        version,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout=rebalance,
        subscribed_topic_names=topics,
        topic_partitions=partitions,
        **values,
    )


def join_req(
    version: int, member: str = "m-1", group: str = "cg", topics: tuple[str, ...] = ("t",), **v: Any
) -> Any:
    """A full first heartbeat: epoch 0, rebalance timeout, subscription, nothing owned."""
    return heartbeat_req(
        version, member, 0, group, topics=topics, owned={}, rebalance=REBALANCE, **v
    )


def assigned(response: Any) -> dict[uuid.UUID, list[int]] | None:
    if response.assignment is None:
        return None
    return {t.topic_id: list(t.partitions) for t in response.assignment.topic_partitions}


async def join(client: Client, version: int = 1, member: str = "m-1", **values: Any) -> Any:
    joined = await client.call(join_req(version, member, **values))
    assert joined.error_code == ErrorCode.none, joined.error_message
    return joined


def describe_req(version: int, *group_ids: str | None, operations: bool = False) -> Any:
    return req(CG_DESCRIBE, version, group_ids=group_ids, include_authorized_operations=operations)


def fetch_req(version: int, group: str, member: str | None, epoch: int) -> Any:
    topic = nested(FETCH, version, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,))
    wanted = nested(
        FETCH,
        version,
        "OffsetFetchRequestGroup",
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        topics=(topic,),
    )
    return req(FETCH, version, groups=(wanted,), require_stable=False)


# -- ApiVersions --------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 3])
async def test_api_versions_advertises_the_consumer_group_apis(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    # ApiVersions answers with response header v0 at every version: read the frame by hand.
    request = req(API_VERSIONS, version, client_software_name="t", client_software_version="1")
    await client.stream.send_all(request_frame(request, 1))
    while (
        len(client.buffer) < 4
        or len(client.buffer) < 4 + struct.unpack_from(">i", client.buffer)[0]
    ):
        client.buffer += await client.stream.receive_some()
    frame = client.buffer[4:]
    _, response = parse_response(frame, response_class(API_VERSIONS, version), 0)
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert served[CG_HEARTBEAT] == (0, 1)
    assert served[CG_DESCRIBE] == (0, 1)


# -- ConsumerGroupHeartbeat: joining ------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1])
async def test_join_gets_an_epoch_and_the_partitions_by_topic_id(
    ctx: BrokerContext, client: Client, version: int, autojump_clock: MockClock
) -> None:
    joined = await join(client, version, member="my-own-id")
    assert joined.member_id == "my-own-id"
    assert joined.member_epoch >= 1
    # A member that just joined is told the rebalance cadence (more members may follow)...
    assert joined.heartbeat_interval == datetime.timedelta(milliseconds=250)
    assert joined.error_message is None
    assert assigned(joined) == {topic_id(ctx, "t"): [0, 1]}
    # A plain heartbeat at the new epoch: nothing changed, so no assignment in the answer.
    beat = await client.call(heartbeat_req(version, "my-own-id", joined.member_epoch))
    assert (beat.error_code, beat.member_epoch) == (ErrorCode.none, joined.member_epoch)
    assert beat.assignment is None
    # ...and the steady group.consumer.heartbeat.interval.ms once settled for that long.
    await trio.sleep(5)
    settled = await client.call(heartbeat_req(version, "my-own-id", joined.member_epoch))
    assert settled.heartbeat_interval == datetime.timedelta(milliseconds=5000)


async def test_v0_join_without_a_member_id_gets_one(
    client: Client, autojump_clock: MockClock
) -> None:
    joined = await join(client, 0, member="")
    assert joined.member_id
    assert str(uuid.UUID(joined.member_id)) == joined.member_id  # a uuid4 string
    assert joined.member_epoch >= 1
    again = await client.call(heartbeat_req(0, joined.member_id, joined.member_epoch))
    assert again.error_code == ErrorCode.none
    other = await join(client, 0, member="")
    assert other.member_id != joined.member_id


async def test_v1_join_without_a_member_id_is_invalid(
    client: Client, autojump_clock: MockClock
) -> None:
    refused = await client.call(join_req(1, member=""))
    assert refused.error_code == ErrorCode.invalid_request
    assert refused.error_message == "MemberId can't be empty."


@pytest.mark.parametrize("version", [0, 1])
async def test_two_members_share_the_partitions(
    ctx: BrokerContext, connect: Any, version: int, autojump_clock: MockClock
) -> None:
    a, b = await connect(), await connect()
    first = await join(a, version, member="a")
    t = topic_id(ctx, "t")
    assert assigned(first) == {t: [0, 1]}
    second = await join(b, version, member="b")
    assert assigned(second) == {}  # nothing free yet: a holds both
    # The assignor runs at most once per group.consumer.assignment.interval.ms (1 s): b's
    # join moved the group epoch, the new target comes when the interval is over.
    described = await a.call(describe_req(1, "cg"))
    assert described.groups[0].group_state == "Assigning"
    await trio.sleep(1)
    described = await a.call(describe_req(1, "cg"))
    group = described.groups[0]
    assert (group.group_state, group.assignment_epoch) == ("Reconciling", group.group_epoch)
    # a is asked to give up one partition at its next heartbeat, and keeps its epoch until
    # it has.
    revoke = await a.call(heartbeat_req(version, "a", first.member_epoch, owned={t: (0, 1)}))
    assert (revoke.error_code, revoke.member_epoch) == (ErrorCode.none, first.member_epoch)
    [kept] = assigned(revoke).values()  # type: ignore[union-attr]
    assert len(kept) == 1
    done = await a.call(heartbeat_req(version, "a", revoke.member_epoch, owned={t: tuple(kept)}))
    assert done.member_epoch == group.group_epoch
    got = await b.call(heartbeat_req(version, "b", second.member_epoch, owned={}))
    assert got.member_epoch == group.group_epoch
    assert assigned(got) == {t: [p for p in (0, 1) if p not in kept]}
    described = await a.call(describe_req(1, "cg"))
    assert described.groups[0].group_state == "Stable"


async def test_v1_regex_subscription(
    ctx: BrokerContext, client: Client, autojump_clock: MockClock
) -> None:
    joined = await client.call(
        heartbeat_req(
            1, "m-1", 0, topics=None, owned={}, rebalance=REBALANCE, subscribed_topic_regex="u.*"
        )
    )
    assert joined.error_code == ErrorCode.none, joined.error_message
    assert assigned(joined) == {topic_id(ctx, "u"): [0, 1, 2]}
    described = await client.call(describe_req(1, "cg"))
    [member] = described.groups[0].members
    assert (member.subscribed_topic_names, member.subscribed_topic_regex) == ((), "u.*")


# -- ConsumerGroupHeartbeat: errors -------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1])
async def test_heartbeat_with_a_wrong_epoch_is_fenced(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    joined = await join(client, version)
    ahead = await client.call(heartbeat_req(version, "m-1", joined.member_epoch + 5))
    assert ahead.error_code == ErrorCode.fenced_member_epoch
    assert ahead.error_message
    assert ahead.assignment is None
    unknown = await client.call(heartbeat_req(version, "stranger", 1))
    assert unknown.error_code == ErrorCode.unknown_member_id
    nowhere = await client.call(heartbeat_req(version, "m-1", 1, group="other"))
    assert nowhere.error_code == ErrorCode.group_id_not_found  # as Kafka's testUnknownGroupId


@pytest.mark.parametrize("version", [0, 1])
async def test_unknown_server_assignor_is_unsupported(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    refused = await client.call(join_req(version, server_assignor="sticky"))
    assert refused.error_code == ErrorCode.unsupported_assignor
    assert "sticky" in refused.error_message
    fine = await join(client, version, server_assignor="range")
    assert fine.member_epoch >= 1


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize(
    ("member", "epoch", "rebalance", "message"),
    [
        ("m-1", 0, datetime.timedelta(milliseconds=-1), "RebalanceTimeoutMs must be provided"),
        ("m-1", -3, REBALANCE, "MemberEpoch is invalid."),
        ("", 4, REBALANCE, "MemberId can't be empty."),
    ],
)
async def test_malformed_heartbeats_are_invalid_requests(
    client: Client,
    version: int,
    member: str,
    epoch: int,
    rebalance: datetime.timedelta,
    message: str,
    autojump_clock: MockClock,
) -> None:
    bad = heartbeat_req(version, member, epoch, topics=("t",), owned={}, rebalance=rebalance)
    refused = await client.call(bad)
    assert refused.error_code == ErrorCode.invalid_request
    assert refused.error_message.startswith(message)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("group", ["", "  "])
async def test_empty_group_id_is_an_invalid_request(
    ctx: BrokerContext, client: Client, version: int, group: str, autojump_clock: MockClock
) -> None:
    refused = await client.call(join_req(version, group=group))
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.invalid_request,
        "GroupId can't be empty.",
    )
    assert (refused.member_id, refused.member_epoch) == (None, 0)
    assert len(ctx.registry()) == 0  # no actor was asked


@pytest.mark.parametrize(
    ("version", "epoch", "message"),
    [
        (0, 0, "GroupId can't be empty."),  # v0 lets the coordinator choose the member id
        (0, 1, "MemberId can't be empty."),
        (0, -1, "MemberId can't be empty."),
        (1, 0, "MemberId can't be empty."),
    ],
)
async def test_empty_group_and_member_id_kafka_checks_the_member_id_first(
    client: Client, version: int, epoch: int, message: str, autojump_clock: MockClock
) -> None:
    bad = heartbeat_req(version, "", epoch, "", topics=("t",), owned={}, rebalance=REBALANCE)
    refused = await client.call(bad)
    assert (refused.error_code, refused.error_message) == (ErrorCode.invalid_request, message)


async def test_null_group_id_is_invalid(ctx: BrokerContext, autojump_clock: MockClock) -> None:
    # Not possible on the wire (the field is not nullable); the handler refuses it anyway.
    response = await settle(
        consumer_groups.consumer_group_heartbeat(
            ctx,
            ConnectionInfo("h", 1),
            1,
            join_req(1, group=None),  # type: ignore[arg-type]
        ),
        ctx,
    )
    assert response.error_code == ErrorCode.invalid_group_id
    assert len(ctx.registry()) == 0


# -- ConsumerGroupHeartbeat: leaving ------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1])
async def test_leave_with_epoch_minus_one(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    await join(client, version)
    left = await client.call(heartbeat_req(version, "m-1", -1))
    assert (left.error_code, left.member_id, left.member_epoch) == (ErrorCode.none, "m-1", -1)
    described = await client.call(describe_req(version, "cg"))
    group = described.groups[0]
    assert (group.error_code, group.group_state, group.members) == (0, "Empty", ())
    again = await client.call(heartbeat_req(version, "m-1", 1))
    assert again.error_code == ErrorCode.unknown_member_id


@pytest.mark.parametrize("version", [5, 6])
async def test_describe_groups_of_a_consumer_group(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    """DescribeGroups describes classic groups only: a KIP-848 group is "Dead", from v6 on
    (KIP-1043) GROUP_ID_NOT_FOUND with Kafka's message."""
    await join(client, 1)
    request = req(15, version, groups=("cg",), include_authorized_operations=False)
    [group] = (await client.call(request)).groups
    assert (group.group_state, group.protocol_type, group.members) == ("Dead", "", ())
    if version >= 6:
        assert group.error_code == ErrorCode.group_id_not_found
        assert group.error_message == "Group cg is not a classic group."
    else:
        assert group.error_code == ErrorCode.none


# -- ConsumerGroupDescribe ----------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1])
async def test_describe_a_consumer_group(
    ctx: BrokerContext, client: Client, version: int, autojump_clock: MockClock
) -> None:
    joined = await join(client, version, topics=("t", "u"), rack_id="r1", instance_id="i-1")
    described = await client.call(describe_req(version, "cg", operations=True))
    [group] = described.groups
    assert (group.error_code, group.error_message, group.group_id) == (0, None, "cg")
    assert group.group_state == "Stable"
    assert group.group_epoch == group.assignment_epoch == joined.member_epoch
    assert group.assignor_name == "uniform"
    assert group.authorized_operations == OPERATIONS
    [member] = group.members
    assert (member.member_id, member.member_epoch) == ("m-1", joined.member_epoch)
    assert (member.instance_id, member.rack_id) == ("i-1", "r1")
    assert (member.client_id, member.client_host) == ("tests", "/10.0.0.7")  # as Kafka
    assert member.subscribed_topic_names == ("t", "u")
    assert member.subscribed_topic_regex == ""  # as Kafka describes a member without one
    expected = sorted(
        [(topic_id(ctx, "t"), "t", (0, 1)), (topic_id(ctx, "u"), "u", (0, 1, 2))],
        key=lambda row: row[0].bytes,
    )
    for assignment in (member.assignment, member.target_assignment):
        assert [
            (tp.topic_id, tp.topic_name, tuple(tp.partitions)) for tp in assignment.topic_partitions
        ] == expected
    if version >= 1:
        assert member.member_type == 1
    without = await client.call(describe_req(version, "cg"))
    assert without.groups[0].authorized_operations == NO_OPERATIONS


@pytest.mark.parametrize("version", [0, 1])
async def test_describe_errors_per_group(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    await join_and_sync(client, group="classic")
    await join(client, version)
    described = await client.call(
        describe_req(version, "classic", "unknown", "", "cg", operations=True)
    )
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("classic", ErrorCode.group_id_not_found),
        ("unknown", ErrorCode.group_id_not_found),
        ("", ErrorCode.invalid_group_id),
        ("cg", ErrorCode.none),
    ]
    for group in described.groups[:3]:
        assert (group.group_state, group.group_epoch, group.assignor_name, group.members) == (
            "",
            0,
            "",
            (),
        )
        assert group.authorized_operations == NO_OPERATIONS  # only for described groups


async def test_describe_leaves_out_deleted_topics(
    ctx: BrokerContext, client: Client, autojump_clock: MockClock
) -> None:
    await join(client, 1, topics=("t", "u"))
    ctx.data.delete_topic("u")
    described = await client.call(describe_req(1, "cg"))
    [member] = described.groups[0].members
    for assignment in (member.assignment, member.target_assignment):
        assert [tp.topic_name for tp in assignment.topic_partitions] == ["t"]


# -- ListGroups ---------------------------------------------------------------------------
async def test_list_groups_v0_shows_consumer_groups(
    client: Client, autojump_clock: MockClock
) -> None:
    await join_and_sync(client, group="classic")
    await join(client, 1)
    listed = await client.call(req(LIST, 0))
    assert sorted((g.group_id, g.protocol_type) for g in listed.groups) == [
        ("cg", "consumer"),
        ("classic", "consumer"),
    ]


@pytest.mark.parametrize(
    ("states", "types", "expected"),
    [
        ((), (), ["cg", "classic", "simple"]),
        ((), ("consumer",), ["cg"]),
        ((), ("CONSUMER", "Classic"), ["cg", "classic", "simple"]),
        ((), ("classic",), ["classic", "simple"]),
        ((), ("share",), []),
        ((), (" consumer",), []),  # types are not trimmed (Kafka's GroupType.parse)
        (("stable",), ("consumer",), ["cg"]),
        (("empty",), ("consumer",), []),
    ],
)
async def test_list_groups_v5_types(
    client: Client,
    states: tuple[str, ...],
    types: tuple[str, ...],
    expected: list[str],
    autojump_clock: MockClock,
) -> None:
    await join_and_sync(client, group="classic")
    await client.call(commit_req(9, {"t": [(0, 1)]}, group="simple"))
    await join(client, 1)
    listed = await client.call(req(LIST, 5, states_filter=states, types_filter=types))
    assert sorted(g.group_id for g in listed.groups) == expected
    kinds = {"cg": ("consumer", "consumer", "Stable"), "classic": ("classic", "consumer", "Stable")}
    for g in listed.groups:
        assert (g.group_type, g.protocol_type, g.group_state) == kinds.get(
            g.group_id, ("classic", "", "Empty")
        )


# -- OffsetCommit / OffsetFetch by members --------------------------------------------------
async def test_offset_commit_v9_checks_the_member_epoch(
    client: Client, autojump_clock: MockClock
) -> None:
    joined = await join(client, 1)
    epoch = joined.member_epoch
    ok = await client.call(commit_req(9, {"t": [(0, 5)]}, "cg", "m-1", epoch))
    assert committed(ok) == {("t", 0): (ErrorCode.none, -1)}
    stale = await client.call(commit_req(9, {"t": [(0, 6)]}, "cg", "m-1", epoch - 1))
    assert committed(stale) == {("t", 0): (ErrorCode.stale_member_epoch, -1)}
    unknown = await client.call(commit_req(9, {"t": [(0, 6)]}, "cg", "stranger", epoch))
    assert committed(unknown) == {("t", 0): (ErrorCode.unknown_member_id, -1)}
    # Versions before 9 cannot carry a member epoch: a member's commit is refused.
    old = await client.call(commit_req(8, {"t": [(0, 6)]}, "cg", "m-1", epoch))
    assert committed(old) == {("t", 0): (ErrorCode.unsupported_version, -1)}
    fetched = await client.call(fetch_req(9, "cg", "m-1", epoch))
    assert [(g.group_id, g.error_code) for g in fetched.groups] == [("cg", ErrorCode.none)]
    assert committed(fetched.groups[0]) == {("t", 0): (ErrorCode.none, 5)}


@pytest.mark.parametrize(
    ("member", "epoch_delta", "error"),
    [
        ("m-1", -1, ErrorCode.stale_member_epoch),
        ("m-1", 3, ErrorCode.stale_member_epoch),
        ("stranger", 0, ErrorCode.unknown_member_id),
    ],
)
async def test_offset_fetch_v9_by_a_member_is_checked(
    client: Client, member: str, epoch_delta: int, error: ErrorCode, autojump_clock: MockClock
) -> None:
    joined = await join(client, 1)
    await client.call(commit_req(9, {"t": [(0, 5)]}, "cg", "m-1", joined.member_epoch))
    fetched = await client.call(fetch_req(9, "cg", member, joined.member_epoch + epoch_delta))
    [group] = fetched.groups
    assert (group.group_id, group.error_code, group.topics) == ("cg", error, ())


@pytest.mark.parametrize("version", [8, 9])
async def test_offset_fetch_without_a_member_is_not_checked(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    # Admin clients (and every version before 9) send no member: null id, epoch -1.
    joined = await join(client, 1)
    await client.call(commit_req(9, {"t": [(0, 5)]}, "cg", "m-1", joined.member_epoch))
    fetched = await client.call(fetch_req(version, "cg", None, -1))
    [group] = fetched.groups
    assert group.error_code == ErrorCode.none
    assert committed(group) == {("t", 0): (ErrorCode.none, 5)}


# -- Kafka's finer points ---------------------------------------------------------------------
# Kafka's throwIfEmptyString trims (Java's trim()) before it checks: an id of blanks is empty.
@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"member": "  "}, "MemberId can't be empty."),
        ({"instance_id": " "}, "InstanceId can't be empty."),
        ({"rack_id": "\t"}, "RackId can't be empty."),
    ],
)
async def test_blank_ids_are_invalid_requests(
    client: Client, values: dict[str, str], message: str, autojump_clock: MockClock
) -> None:
    refused = await client.call(join_req(1, **values))
    assert (refused.error_code, refused.error_message) == (ErrorCode.invalid_request, message)


# Kafka's ConsumerGroup.validateOffsetFetch skips the check only when the member id is null
# AND the epoch is negative.
@pytest.mark.parametrize(
    ("member", "epoch", "error"),
    [
        ("m-1", -1, ErrorCode.stale_member_epoch),  # a member id with epoch -1
        (None, 1, ErrorCode.unknown_member_id),  # an epoch without a member id
    ],
)
async def test_offset_fetch_v9_member_check_as_kafka(
    client: Client, member: str | None, epoch: int, error: ErrorCode, autojump_clock: MockClock
) -> None:
    joined = await join(client, 1)
    assert joined.member_epoch == 1
    fetched = await client.call(fetch_req(9, "cg", member, epoch))
    assert fetched.groups[0].error_code == error

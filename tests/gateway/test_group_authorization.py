"""Group authorization (issue #7): what a user whose prefixes exclude a group or topic gets
from every group API, as KafkaApis answers a principal without the ACL; and organisations
that never see each other's groups.

The users are built directly, as SASL authentication would leave them on the connection:
`alice` of org 1 may use groups and topics starting "a." only; `root` of org 1 and `bob` of
org 2 may use everything of their organisation. A spy on the registry proves that a denied
group never reaches an actor. Frames go through `serve_connection` over memory streams, as
in test_group_apis, whose request builders these tests share.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from trio.testing import MockClock

from rafka_actors.auth.users import User
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.ids import GroupKey
from rafka_actors.protocol.messages import request_class

from .serving import serving_groups
from .test_group_apis import (
    Client,
    commit_req,
    committed,
    deleted,
    fetch_req,
    join,
    join_and_sync,
    join_req,
    nested,
    offset_delete_req,
    req,
    sync_req,
)

FIND, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
DESCRIBE, LIST, DELETE, CG_HEARTBEAT, CG_DESCRIBE = 15, 16, 42, 68, 69
GROUP_DENIED = ErrorCode.group_authorization_failed
TOPIC_DENIED = ErrorCode.topic_authorization_failed
UNKNOWN = ErrorCode.unknown_topic_or_partition
NO_OPERATIONS = -(2**31)

ALICE = User("alice", 1, group_prefixes=("a.",), topic_prefixes=("a.",))
ROOT = User("root", 1)
BOB = User("bob", 2)

Connect = Callable[[User | None], Awaitable[Client]]


@pytest.fixture
async def ctx(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> AsyncIterator[BrokerContext]:
    async with serving_groups(
        tmp_path, [(org, name, 2) for org in (0, 1, 2) for name in ("a.t", "b.t")]
    ) as ctx:
        yield ctx


@pytest.fixture
def asked(ctx: BrokerContext, monkeypatch: pytest.MonkeyPatch) -> list[GroupKey]:
    """Every group key an actor was asked about."""
    keys: list[GroupKey] = []
    registry = ctx.registry()
    real_ask = registry.ask

    async def ask(key: GroupKey, op: Any) -> Any:
        keys.append(key)
        return await real_ask(key, op)

    monkeypatch.setattr(registry, "ask", ask)
    return keys


@pytest.fixture
async def connect(ctx: BrokerContext, nursery: trio.Nursery) -> Connect:
    async def open_client(user: User | None) -> Client:
        client_end, server_end = trio.testing.memory_stream_pair()
        org = 0 if user is None else user.org_id
        conn = ConnectionInfo("10.0.0.7", 4242, org_id=org, user=user)
        nursery.start_soon(serve_connection, server_end, ctx, API_TABLE, conn)
        return Client(client_end)

    return open_client


def never_asked_about_b(asked: list[GroupKey]) -> bool:
    return not any(key.group_id.startswith("b.") for key in asked)


# -- FindCoordinator ----------------------------------------------------------------------
def find_req(version: int, **values: Any) -> Any:
    return make(request_class(FIND, version), **values)  # `key` is a field of this request


@pytest.mark.parametrize("version", [0, 1, 3])
async def test_find_coordinator_one_key(
    connect: Connect, version: int, autojump_clock: MockClock
) -> None:
    alice, root = await connect(ALICE), await connect(ROOT)
    denied = await alice.call(find_req(version, key="b.g", key_type=0))
    assert (denied.error_code, denied.node_id, denied.host, denied.port) == (
        GROUP_DENIED,
        -1,
        "",
        -1,
    )
    if version >= 1:  # Kafka's prepareOldResponse: the error's message
        assert denied.error_message == "Group authorization failed."
    allowed = await alice.call(find_req(version, key="a.g", key_type=0))
    assert (allowed.error_code, allowed.node_id, allowed.port) == (ErrorCode.none, 0, 9092)
    assert (await root.call(find_req(version, key="b.g", key_type=0))).error_code == 0
    if version >= 1:  # a transactional id is not a group: no group prefix applies
        txn = await alice.call(find_req(version, key="b.g", key_type=1))
        assert txn.error_code == ErrorCode.none


@pytest.mark.parametrize("version", [4, 6])
async def test_find_coordinator_per_key(
    connect: Connect, version: int, autojump_clock: MockClock
) -> None:
    alice, root = await connect(ALICE), await connect(ROOT)
    keys = ("a.g", "b.g", "")
    found = await alice.call(find_req(version, key_type=0, coordinator_keys=keys))
    assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in found.coordinators] == [
        ("a.g", ErrorCode.none, 0, "127.0.0.1", 9092),
        ("b.g", GROUP_DENIED, -1, "", -1),
        ("", GROUP_DENIED, -1, "", -1),
    ]
    assert all(c.error_message == "" for c in found.coordinators)  # the v4+ default
    everything = await root.call(find_req(version, key_type=0, coordinator_keys=keys))
    assert {c.error_code for c in everything.coordinators} == {ErrorCode.none}


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------------
@pytest.mark.parametrize("version", [0, 6, 7])
async def test_join_group_denied(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    alice = await connect(ALICE)
    joined = await alice.call(join_req(version, "b.g", member="m-1"))
    assert joined.error_code == GROUP_DENIED
    assert (joined.generation_id, joined.member_id, joined.leader, joined.members) == (
        -1,
        "",
        "",
        (),
    )
    assert joined.protocol_name == (None if version >= 7 else "")
    # KafkaApis authorizes before the coordinator validates the id: "" is denied too.
    assert (await alice.call(join_req(version, ""))).error_code == GROUP_DENIED
    assert asked == []
    assert (await join(alice, group="a.g")).generation_id == 1


async def test_join_group_unrestricted_users(connect: Connect, autojump_clock: MockClock) -> None:
    root, anonymous = await connect(ROOT), await connect(None)
    assert (await join(root, group="b.g")).generation_id == 1
    assert (await join(anonymous, group="b.g")).generation_id == 1
    assert (await root.call(join_req(7, ""))).error_code == ErrorCode.invalid_group_id


@pytest.mark.parametrize("version", [0, 5])
async def test_sync_heartbeat_and_leave_denied(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    member = (await join_and_sync(root, group="b.g")).member_id
    del asked[:]
    synced = await alice.call(sync_req(version, member, 1, group="b.g"))
    assert (synced.error_code, synced.assignment) == (GROUP_DENIED, b"")
    if version >= 5:  # Kafka checks the mandatory fields before authorizing
        bare = sync_req(5, member, 1, group="b.g", protocol_type=None, protocol_name=None)
        assert (await alice.call(bare)).error_code == ErrorCode.inconsistent_group_protocol
    beat_version = min(version, 4)
    beat = req(HEARTBEAT, beat_version, group_id="b.g", generation_id=1, member_id=member)
    assert (await alice.call(beat)).error_code == GROUP_DENIED
    if version < 3:
        leave = req(LEAVE, version, group_id="b.g", member_id=member)
    else:
        who = nested(LEAVE, version, "MemberIdentity", member_id=member, group_instance_id=None)
        leave = req(LEAVE, version, group_id="b.g", members=(who,))
    left = await alice.call(leave)
    assert left.error_code == GROUP_DENIED
    if version >= 3:
        assert left.members == ()
    assert asked == []
    # The member is untouched: root still heartbeats it at generation 1.
    ok = req(HEARTBEAT, beat_version, group_id="b.g", generation_id=1, member_id=member)
    assert (await root.call(ok)).error_code == ErrorCode.none


# -- OffsetCommit / OffsetFetch -----------------------------------------------------------
@pytest.mark.parametrize("version", [2, 9])
async def test_offset_commit_denied_group_fails_every_partition(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    alice = await connect(ALICE)
    request = commit_req(version, {"a.t": [(0, 1), (9, 1)], "b.t": [(0, 1)]}, group="b.g")
    response = await alice.call(request)
    assert committed(response) == {
        ("a.t", 0): (GROUP_DENIED, -1),
        ("a.t", 9): (GROUP_DENIED, -1),
        ("b.t", 0): (GROUP_DENIED, -1),
    }
    assert asked == []


@pytest.mark.parametrize("version", [2, 9])
async def test_offset_commit_denied_topics_are_29_and_the_rest_committed(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    alice, root = await connect(ALICE), await connect(ROOT)
    topics = {"b.t": [(0, 5)], "a.t": [(1, 6), (9, 6)], "a.missing": [(0, 1)], "zz": [(0, 1)]}
    response = await alice.call(commit_req(version, topics, group="a.g"))
    assert [(t.name, [p.error_code for p in t.partitions]) for t in response.topics] == [
        ("b.t", [TOPIC_DENIED]),
        ("a.t", [ErrorCode.none, UNKNOWN]),
        ("a.missing", [UNKNOWN]),  # allowed, but there is no such topic
        ("zz", [TOPIC_DENIED]),  # authorization comes before existence
    ]
    everything = await root.call(fetch_req(8, None, group="a.g"))
    assert committed(everything.groups[0]) == {("a.t", 1): (0, 6)}
    # Only refused topics: the actor is not even asked, and no group is made.
    only_refused = await alice.call(commit_req(version, {"b.t": [(0, 1)]}, group="a.new"))
    assert committed(only_refused) == {("b.t", 0): (TOPIC_DENIED, -1)}
    assert GroupKey(1, "a.new") not in asked
    # Without topic prefixes the same commit goes through.
    assert committed(await root.call(commit_req(version, {"b.t": [(0, 5)]}, group="a.g"))) == {
        ("b.t", 0): (0, -1)
    }


@pytest.mark.parametrize("version", [1, 2, 7, 8, 9])
async def test_offset_fetch_denied_group(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    await root.call(commit_req(9, {"a.t": [(0, 3)]}, group="b.g"))
    del asked[:]
    fetched = await alice.call(fetch_req(version, {"a.t": [0]}, group="b.g"))
    if version >= 8:
        (group,) = fetched.groups
        assert (group.group_id, group.error_code, group.topics) == ("b.g", GROUP_DENIED, ())
    elif version >= 2:
        assert (fetched.error_code, fetched.topics) == (GROUP_DENIED, ())
    else:  # v1 has no group-level error: the partition carries it
        assert committed(fetched) == {("a.t", 0): (GROUP_DENIED, -1)}
    assert asked == []
    all_of_it = await alice.call(fetch_req(max(version, 2), None, group="b.g"))
    assert (all_of_it.groups[0] if version >= 8 else all_of_it).error_code == GROUP_DENIED


@pytest.mark.parametrize("version", [1, 7, 8, 9])
async def test_offset_fetch_refused_topics(
    connect: Connect, version: int, autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    await root.call(commit_req(9, {"a.t": [(0, 3), (1, 4)], "b.t": [(0, 7)]}, group="a.g"))
    fetched = await alice.call(fetch_req(version, {"b.t": [0, 1], "a.t": [1, 0]}, group="a.g"))
    group = fetched.groups[0] if version >= 8 else fetched
    # Kafka answers the allowed topics first and appends the refused ones.
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in group.topics] == [
        ("a.t", [1, 0]),
        ("b.t", [0, 1]),
    ]
    assert committed(group) == {
        ("a.t", 0): (0, 3),
        ("a.t", 1): (0, 4),
        ("b.t", 0): (TOPIC_DENIED, -1),
        ("b.t", 1): (TOPIC_DENIED, -1),
    }
    if version >= 2:
        every = await alice.call(fetch_req(version, None, group="a.g"))
        every_group = every.groups[0] if version >= 8 else every
        assert committed(every_group) == {("a.t", 0): (0, 3), ("a.t", 1): (0, 4)}  # no b.t
        unfiltered = await root.call(fetch_req(version, None, group="a.g"))
        assert ("b.t", 0) in committed(unfiltered.groups[0] if version >= 8 else unfiltered)


# -- DescribeGroups, ListGroups, DeleteGroups, OffsetDelete -------------------------------
@pytest.mark.parametrize("version", [0, 5])
async def test_describe_groups_denied_entries_come_first(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    await join_and_sync(root, group="a.g")
    await join_and_sync(root, group="b.g")
    del asked[:]
    described = await alice.call(
        req(DESCRIBE, version, groups=("a.g", "b.g", "a.none"), include_authorized_operations=True)
    )
    assert [(g.group_id, g.error_code, g.group_state) for g in described.groups] == [
        ("b.g", GROUP_DENIED, ""),
        ("a.g", ErrorCode.none, "Stable"),
        ("a.none", ErrorCode.none, "Dead"),
    ]
    denied = described.groups[0]
    assert (denied.protocol_type, denied.protocol_data, denied.members) == ("", "", ())
    if version >= 3:
        assert denied.authorized_operations == NO_OPERATIONS
        assert described.groups[1].authorized_operations != NO_OPERATIONS
    assert never_asked_about_b(asked)
    by_root = req(DESCRIBE, version, groups=("b.g",), include_authorized_operations=False)
    seen_by_root = await root.call(by_root)
    assert seen_by_root.groups[0].group_state == "Stable"


@pytest.mark.parametrize("version", [0, 5])
async def test_list_groups_shows_only_usable_groups(
    connect: Connect, version: int, autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    for group in ("a.g", "b.g", "c"):
        await root.call(commit_req(9, {"a.t": [(0, 1)]}, group=group))
    listed = await alice.call(req(LIST, version))
    assert [g.group_id for g in listed.groups] == ["a.g"]
    assert sorted(g.group_id for g in (await root.call(req(LIST, version))).groups) == [
        "a.g",
        "b.g",
        "c",
    ]


@pytest.mark.parametrize("version", [0, 2])
async def test_delete_groups_denied_results_come_last(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    for group in ("a.g", "b.g"):
        await root.call(commit_req(9, {"a.t": [(0, 1)]}, group=group))
    del asked[:]
    result = await alice.call(req(DELETE, version, groups_names=("b.g", "a.g", "a.none")))
    assert [(r.group_id, r.error_code) for r in result.results] == [
        ("a.g", ErrorCode.none),
        ("a.none", ErrorCode.group_id_not_found),
        ("b.g", GROUP_DENIED),
    ]
    assert never_asked_about_b(asked)
    assert [g.group_id for g in (await root.call(req(LIST, 0))).groups] == ["b.g"]


async def test_offset_delete_denied_group_and_refused_topics(
    connect: Connect, asked: list[GroupKey], autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    await root.call(commit_req(9, {"a.t": [(0, 1), (1, 2)], "b.t": [(0, 3)]}, group="b.g"))
    await root.call(commit_req(9, {"a.t": [(0, 1), (1, 2)], "b.t": [(0, 3)]}, group="a.g"))
    del asked[:]
    refused = await alice.call(offset_delete_req("b.g", {"a.t": [0]}))
    assert (refused.error_code, refused.topics) == (GROUP_DENIED, ())
    assert never_asked_about_b(asked)
    response = await alice.call(offset_delete_req("a.g", {"b.t": [0], "a.t": [0, 9]}))
    assert response.error_code == ErrorCode.none
    assert deleted(response) == [
        ("b.t", 0, TOPIC_DENIED),
        ("a.t", 0, ErrorCode.none),
        ("a.t", 9, UNKNOWN),
    ]
    left = await root.call(fetch_req(8, None, group="a.g"))
    assert committed(left.groups[0]) == {("a.t", 1): (0, 2), ("b.t", 0): (0, 3)}
    assert (await root.call(offset_delete_req("b.g", {"b.t": [0]}))).error_code == 0


# -- KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe -------------------------------
REBALANCE = datetime.timedelta(seconds=30)


def cg_join(
    version: int, group: str, topics: tuple[str, ...] | None = ("a.t",), **values: Any
) -> Any:
    return req(
        CG_HEARTBEAT,
        version,
        group_id=group,
        member_id="m-1",
        member_epoch=0,
        rebalance_timeout=REBALANCE,
        subscribed_topic_names=topics,
        topic_partitions=(),
        **values,
    )


@pytest.mark.parametrize("version", [0, 1])
async def test_consumer_group_heartbeat_denied(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    alice, root = await connect(ALICE), await connect(ROOT)
    denied = await alice.call(cg_join(version, "b.cg"))
    assert (denied.error_code, denied.error_message, denied.member_id) == (GROUP_DENIED, None, None)
    assert (denied.member_epoch, denied.assignment) == (0, None)
    # A subscription naming a refused topic is refused as a whole (Kafka 4.0, KAFKA-18813).
    refused = await alice.call(cg_join(version, "a.cg", topics=("a.t", "b.t")))
    assert (refused.error_code, refused.error_message) == (TOPIC_DENIED, None)
    # Kafka authorizes the group before validating the request: a blank id is denied too.
    assert (await alice.call(cg_join(version, " "))).error_code == GROUP_DENIED
    assert asked == []
    assert (await alice.call(cg_join(version, "a.cg"))).member_epoch >= 1
    assert (await root.call(cg_join(version, "b.cg", topics=("b.t",)))).member_epoch >= 1


async def test_consumer_group_heartbeat_regex_is_not_narrowed_by_topic_prefixes(
    connect: Connect, autojump_clock: MockClock
) -> None:
    # Documented in gateway/apis/consumer_groups.py: a regex is resolved against the org's
    # topics, not the user's prefixes.
    alice = await connect(ALICE)
    joined = await alice.call(cg_join(1, "a.cg", topics=None, subscribed_topic_regex="b\\..*"))
    assert joined.error_code == ErrorCode.none


@pytest.mark.parametrize("version", [0, 1])
async def test_consumer_group_describe_denied_entries_come_first(
    connect: Connect, asked: list[GroupKey], version: int, autojump_clock: MockClock
) -> None:
    root, alice = await connect(ROOT), await connect(ALICE)
    await root.call(cg_join(version, "a.cg"))
    await root.call(cg_join(version, "b.cg"))
    del asked[:]
    described = await alice.call(
        req(
            CG_DESCRIBE, version, group_ids=("a.cg", "b.cg", ""), include_authorized_operations=True
        )
    )
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("b.cg", GROUP_DENIED),
        ("", GROUP_DENIED),
        ("a.cg", ErrorCode.none),
    ]
    denied = described.groups[0]
    assert (denied.group_state, denied.group_epoch, denied.members) == ("", 0, ())
    assert (denied.error_message, denied.authorized_operations) == (None, NO_OPERATIONS)
    assert len(described.groups[2].members) == 1
    assert never_asked_about_b(asked)
    by_root = await root.call(
        req(CG_DESCRIBE, version, group_ids=("b.cg", ""), include_authorized_operations=False)
    )
    assert [g.error_code for g in by_root.groups] == [ErrorCode.none, ErrorCode.invalid_group_id]


# -- organisations ------------------------------------------------------------------------
async def test_same_group_id_in_two_orgs_is_two_groups(
    ctx: BrokerContext, connect: Connect, autojump_clock: MockClock
) -> None:
    root, bob = await connect(ROOT), await connect(BOB)
    first = await join_and_sync(root, group="shared")
    second = await join_and_sync(bob, group="shared")
    assert first.generation_id == second.generation_id == 1  # each its own first generation
    assert first.member_id != second.member_id
    again = await join(root, group="shared", member=first.member_id)
    assert again.generation_id == 2  # org 1 rebalanced; org 2 did not
    beat = req(HEARTBEAT, 4, group_id="shared", generation_id=1, member_id=second.member_id)
    assert (await bob.call(beat)).error_code == ErrorCode.none

    await root.call(commit_req(9, {"a.t": [(0, 11)]}, group="simple"))
    await bob.call(commit_req(9, {"a.t": [(0, 22)]}, group="simple"))
    for client, offset in ((root, 11), (bob, 22)):
        fetched = await client.call(fetch_req(8, {"a.t": [0]}, group="simple"))
        assert committed(fetched.groups[0]) == {("a.t", 0): (0, offset)}

    org1 = {s.group_id: s.cgp_id for s in ctx.registry().summaries(1)}
    org2 = {s.group_id: s.cgp_id for s in ctx.registry().summaries(2)}
    assert org1.keys() == org2.keys() == {"shared", "simple"}
    assert all(v.startswith("cgp_") for v in (*org1.values(), *org2.values()))
    assert org1["shared"] != org2["shared"] and org1["simple"] != org2["simple"]


async def test_an_org_never_sees_another_orgs_group(
    connect: Connect, autojump_clock: MockClock
) -> None:
    root, bob = await connect(ROOT), await connect(BOB)
    await join_and_sync(bob, group="bobs")
    await bob.call(commit_req(9, {"a.t": [(0, 5)]}, group="bobs-offsets"))
    assert (await root.call(req(LIST, 5))).groups == ()
    described = await root.call(
        req(DESCRIBE, 5, groups=("bobs",), include_authorized_operations=False)
    )
    assert (described.groups[0].group_state, described.groups[0].members) == ("Dead", ())
    fetched = await root.call(fetch_req(8, {"a.t": [0]}, group="bobs-offsets"))
    assert committed(fetched.groups[0]) == {("a.t", 0): (0, -1)}
    every = await root.call(fetch_req(8, None, group="bobs-offsets"))
    assert every.groups[0].topics == ()
    gone = await root.call(req(DELETE, 2, groups_names=("bobs-offsets",)))
    assert gone.results[0].error_code == ErrorCode.group_id_not_found
    still = await bob.call(fetch_req(8, {"a.t": [0]}, group="bobs-offsets"))
    assert committed(still.groups[0]) == {("a.t", 0): (0, 5)}
    assert sorted(g.group_id for g in (await bob.call(req(LIST, 5))).groups) == [
        "bobs",
        "bobs-offsets",
    ]

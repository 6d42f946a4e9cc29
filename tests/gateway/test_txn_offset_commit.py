"""TxnOffsetCommit (28) over the wire, inside one process: Kafka frames of every served version
through `serve_connection` to the group's actor, and each of its errors (KIP-447's checks,
the gateway's own), and OffsetFetch's view of the pending offsets (hidden; with
require_stable, UNSTABLE_OFFSET_COMMIT)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from trio.testing import MockClock

from rafka_actors.auth.users import User
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.context import ConnectionInfo

from . import test_group_apis as group_apis
from .test_group_apis import (
    Client,
    committed,
    fetch_req,
    join_and_sync,
    join_req,
    nested,
    req,
    sync_req,
)

# the fixtures of the group APIs' tests: a broker context, and a client on a connection to it
ctx, connect, client = group_apis.ctx, group_apis.connect, group_apis.client
TXN = 28
UNSTABLE = ErrorCode.unstable_offset_commit


def txn_req(
    version: int,
    topics: dict[str, list[tuple[int, int]]],
    *,
    group: str | None = "g",
    member: str = "",
    generation: int = -1,
    instance: str | None = None,
    producer_id: int = 7,
) -> Any:
    topic_cls = nested(
        TXN, version, "TxnOffsetCommitRequestTopic", name="x", partitions=()
    ).__class__
    partition = "TxnOffsetCommitRequestPartition"
    return req(
        TXN,
        version,
        transactional_id="tx-1",
        group_id=group,
        producer_id=producer_id,
        producer_epoch=0,
        generation_id=generation,
        member_id=member,
        group_instance_id=instance,
        topics=tuple(
            topic_cls(
                name=name,
                partitions=tuple(
                    nested(
                        TXN,
                        version,
                        partition,
                        partition_index=i,
                        committed_offset=o,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    )
                    for i, o in parts
                ),
            )
            for name, parts in topics.items()
        ),
    )


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): int(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def test_served_versions() -> None:
    api = API_TABLE[TXN]
    # librdkafka, kafka-python: 3; aiokafka: 0; the Java client with transactions v2: 5
    assert (api.min_version, api.max_version) == (0, 5)


async def test_a_transactional_id_beyond_the_users_prefixes_is_refused_before_the_group(
    ctx: Any,
) -> None:
    """As Kafka's KafkaApis: WRITE on the transactional id is authorized first, so even a group
    the user may use gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition, unasked."""
    user = User("u", 7, group_prefixes=("g",), transactional_id_prefixes=("mine.",))
    conn = ConnectionInfo("10.0.0.7", 4242, org_id=7, user=user)
    request = txn_req(3, {"t": [(0, 5), (1, 6)]})  # transactional id "tx-1"
    response = API_TABLE[TXN].handler(ctx, conn, 3, request)
    denied = ErrorCode.transactional_id_authorization_failed
    assert errors(response) == {("t", 0): denied, ("t", 1): denied}


@pytest.mark.parametrize("version", [0, 3, 4])
async def test_pending_offsets_hidden_and_unstable_with_require_stable(
    client: Client, version: int, autojump_clock: MockClock
) -> None:
    response = await client.call(txn_req(version, {"t": [(0, 50), (9, 1)], "missing": [(0, 1)]}))
    assert errors(response) == {
        ("t", 0): ErrorCode.none,
        ("t", 9): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert committed(await client.call(fetch_req(1, {"t": [0, 1]}))) == {
        ("t", 0): (0, -1),  # v1 has no require_stable: the pending offset is simply not there
        ("t", 1): (0, -1),
    }
    for fetch_version in (7, 9):  # require_stable (librdkafka sends it, v9)
        stable = await client.call(fetch_req(fetch_version, {"t": [0, 1]}))
        if fetch_version >= 8:
            (stable,) = stable.groups
        assert committed(stable) == {("t", 0): (UNSTABLE, -1), ("t", 1): (0, -1)}


async def test_kip_447_member_checks(client: Client, autojump_clock: MockClock) -> None:
    joined = await join_and_sync(client)
    member, generation = joined.member_id, joined.generation_id
    cases = {
        "current member": (dict(member=member, generation=generation), ErrorCode.none),
        "stale generation": (
            dict(member=member, generation=generation - 1),
            ErrorCode.illegal_generation,
        ),
        "unknown member": (dict(member="gone", generation=generation), ErrorCode.unknown_member_id),
        "unknown group": (
            dict(group="nobody", member="m", generation=3),
            ErrorCode.illegal_generation,
        ),
        "empty group id": (dict(group=""), ErrorCode.invalid_group_id),
        "no member (v0-v2 producers)": ({}, ErrorCode.none),
    }
    for what, (kw, expected) in cases.items():
        response = await client.call(txn_req(3, {"t": [(0, 5)]}, **kw))
        assert errors(response) == {("t", 0): expected}, what


async def test_a_static_member_replaced_is_fenced(
    client: Client, autojump_clock: MockClock
) -> None:
    joined = await client.call(join_req(5, group_instance_id="i-1"))
    assert joined.error_code == ErrorCode.none
    synced = await client.call(sync_req(3, joined.member_id, joined.generation_id))
    assert synced.error_code == ErrorCode.none
    old = txn_req(3, {"t": [(1, 5)]}, member="i-1-old", generation=1, instance="i-1")
    assert errors(await client.call(old)) == {("t", 1): ErrorCode.fenced_instance_id}
    ok = txn_req(3, {"t": [(1, 5)]}, member=joined.member_id, generation=1, instance="i-1")
    assert errors(await client.call(ok)) == {("t", 1): ErrorCode.none}

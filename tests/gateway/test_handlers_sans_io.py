"""Handlers are plain functions: called without a socket, a registry or an event loop, they
give the response, or the step to take first (gateway/steps.py), whose `then` makes the
response of what the step brings back. The connection is the only place that takes steps."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.auth.users import User
from rafka_actors.config import BrokerConfig
from rafka_actors.consumer_group.ops import ConsumerGroupDescribeOpResp
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import Ask, AwaitAppend
from rafka_actors.group_common.ops import (
    DeleteGroupOpResp,
    DescribeGroupOpResp,
    HeartbeatOp,
    HeartbeatOpResp,
    OffsetCommitOp,
    OffsetCommitOpResp,
)
from rafka_actors.ids import GroupKey
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane

HEARTBEAT, COMMIT, FETCH = 12, 8, 1


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    """A context with topics and no group registry: a handler that reached for one would
    raise RuntimeError."""
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("t", 2, org_id=7)
    yield BrokerContext(BrokerConfig(data_dir=tmp_path), data, "127.0.0.1", 9092, API_TABLE)
    data.close()


def nested(key: int, version: int, cls_name: str, **values: Any) -> Any:
    module = sys.modules[request_class(key, version).__module__]
    return make(getattr(module, cls_name), **values)


def heartbeat(group: str = "g") -> Any:
    return make(
        request_class(HEARTBEAT, 4),
        group_id=group,
        generation_id=3,
        member_id="m-1",
        group_instance_id=None,
    )


def test_a_heartbeat_is_an_ask_of_its_groups_actor_and_its_answer_the_response(
    ctx: BrokerContext,
) -> None:
    conn = ConnectionInfo("10.0.0.7", 4242, org_id=7)
    step = API_TABLE[HEARTBEAT].handler(ctx, conn, 4, heartbeat())
    assert isinstance(step, Ask)
    assert step.asks == ((GroupKey(7, "g"), HeartbeatOp("g", "m-1", 3, None)),)
    response = step.then([HeartbeatOpResp(ErrorCode.rebalance_in_progress)])
    assert response.error_code == ErrorCode.rebalance_in_progress


def test_a_denied_group_is_answered_without_a_step(ctx: BrokerContext) -> None:
    user = User("u", 7, group_prefixes=("mine.",))
    conn = ConnectionInfo("10.0.0.7", 4242, org_id=7, user=user)
    response = API_TABLE[HEARTBEAT].handler(ctx, conn, 4, heartbeat("theirs"))
    assert not isinstance(response, Ask)
    assert response.error_code == ErrorCode.group_authorization_failed


def test_a_commit_asks_only_for_partitions_that_exist_and_puts_the_rest_back(
    ctx: BrokerContext,
) -> None:
    conn = ConnectionInfo("10.0.0.7", 4242, org_id=7)
    partitions = tuple(
        nested(
            COMMIT,
            9,
            "OffsetCommitRequestPartition",
            partition_index=p,
            committed_offset=10 + p,
            committed_leader_epoch=-1,
            committed_metadata=None,
        )
        for p in (0, 1, 5)  # t has partitions 0 and 1
    )
    topic = nested(COMMIT, 9, "OffsetCommitRequestTopic", name="t", partitions=partitions)
    request = make(
        request_class(COMMIT, 9),
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(topic,),
    )
    step = API_TABLE[COMMIT].handler(ctx, conn, 9, request)
    assert isinstance(step, Ask)
    [(key, op)] = step.asks
    assert key == GroupKey(7, "g") and isinstance(op, OffsetCommitOp)
    assert [(t, p, o) for t, p, o, *_ in op.offsets] == [("t", 0, 10), ("t", 1, 11)]
    response = step.then([OffsetCommitOpResp((("t", 0, 0), ("t", 1, 0)))])
    [answered] = response.topics
    assert [(p.partition_index, p.error_code) for p in answered.partitions] == [
        (0, ErrorCode.none),
        (1, ErrorCode.none),
        (5, ErrorCode.unknown_topic_or_partition),  # never reached the actor
    ]


def test_a_fetch_that_finds_too_little_waits_for_an_append_and_reads_again(
    ctx: BrokerContext,
) -> None:
    conn = ConnectionInfo("10.0.0.7", 4242, org_id=7)
    topic_id = ctx.data.topics_for(7).by_name("t").topic_id  # type: ignore[union-attr]
    partition = nested(
        FETCH,
        16,
        "FetchPartition",
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    request = make(
        request_class(FETCH, 16),
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(nested(FETCH, 16, "FetchTopic", topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    step = API_TABLE[FETCH].handler(ctx, conn, 16, request)
    assert isinstance(step, AwaitAppend)
    assert list(step.keys) == [(topic_id, 0)] and step.wait_s == pytest.approx(0.5)
    after_the_wait = step.then(0.0)  # no time left: the response, with what there is
    assert not isinstance(after_the_wait, AwaitAppend)
    [answered] = after_the_wait.responses
    assert answered.partitions[0].records in (b"", None)


def test_batch_apis_ask_each_named_group_and_answer_a_null_id_in_its_place(
    ctx: BrokerContext,
) -> None:
    """DescribeGroups, DeleteGroups and ConsumerGroupDescribe name several groups: each is
    asked of its actor in turn (DescribeGroups and DeleteGroups accept an empty id, Kafka's
    ConsumerGroupDescribe does not), and a null id is answered INVALID_GROUP_ID in its own
    place, without an actor (kio can't put a null on the wire, but the handlers hold)."""
    conn = ConnectionInfo("10.0.0.7", 4242, org_id=7)
    groups = ("a", None, "")
    describe = make(request_class(15, 5), groups=groups, include_authorized_operations=False)
    step = API_TABLE[15].handler(ctx, conn, 5, describe)
    assert isinstance(step, Ask)
    assert [key for key, _ in step.asks] == [GroupKey(7, "a"), GroupKey(7, "")]
    response = step.then(
        [DescribeGroupOpResp(ErrorCode.none, "Empty"), DescribeGroupOpResp(ErrorCode.none, "Dead")]
    ).response
    assert [(g.group_id, g.error_code, g.group_state) for g in response.groups] == [
        ("a", ErrorCode.none, "Empty"),
        ("", ErrorCode.invalid_group_id, ""),
        ("", ErrorCode.none, "Dead"),
    ]

    delete = make(request_class(42, 2), groups_names=groups)
    step = API_TABLE[42].handler(ctx, conn, 2, delete)
    assert isinstance(step, Ask)
    assert [key for key, _ in step.asks] == [GroupKey(7, "a"), GroupKey(7, "")]
    response = step.then(
        [DeleteGroupOpResp(ErrorCode.none), DeleteGroupOpResp(ErrorCode.group_id_not_found)]
    )
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("a", ErrorCode.none),
        ("", ErrorCode.invalid_group_id),
        ("", ErrorCode.group_id_not_found),
    ]

    consumer = make(request_class(69, 1), group_ids=groups, include_authorized_operations=False)
    step = API_TABLE[69].handler(ctx, conn, 1, consumer)
    assert isinstance(step, Ask)
    assert [key for key, _ in step.asks] == [GroupKey(7, "a")]
    response = step.then([ConsumerGroupDescribeOpResp(ErrorCode.group_id_not_found)]).response
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("a", ErrorCode.group_id_not_found),
        ("", ErrorCode.invalid_group_id),
        ("", ErrorCode.invalid_group_id),
    ]

"""The spans of design note 000 come out of a real rebalance (read via the OTel SDK), and
every span and log line naming a group carries its `cgp_` id and RRL (issue #7); each op's
span is a child of its own request's, and a batch's append is linked to every request it
serves (issue 51 §3)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from opentelemetry import trace

from rafka_actors import telemetry
from rafka_actors.actors.group_actor import GroupSettings, new_group_actor
from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.mailbox_actor import Envelope
from rafka_actors.actors.reply import ReplySlot
from rafka_actors.consumer_group.ops import ConsumerGroupHeartbeatOp
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import HeartbeatOp, OffsetCommitOp, SyncGroupOp
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

from ..tracing import parent_of, span_exporter, span_id, trace_id
from .test_group_actor import join_op


async def test_rebalance_complete_span_carries_generation_and_leader(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = span_exporter()
    caplog.set_level(logging.INFO, logger="rafka_actors.actors.group_actor")
    key = GroupKey(7, "Orders Team")
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=0), MemoryCoordinatorLog()
        )
        joined = await registry.ask(key, join_op(group="Orders Team"))
        await registry.ask(key, SyncGroupOp("Orders Team", joined.member_id, 1, ()))
        await registry.ask(key, HeartbeatOp("Orders Team", joined.member_id, 1))
        (cgp_id,) = {s.cgp_id for s in registry.summaries(7)}
        nursery.cancel_scope.cancel()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {
        "rafka.broker.group.join",
        "rafka.broker.group.sync",
        "rafka.broker.group.heartbeat",
    } <= set(spans)
    complete = spans["rafka.broker.coordinator.rebalance-complete"]
    assert complete.attributes is not None
    assert complete.attributes["generation_id"] == 1
    assert complete.attributes["leader_id"] == joined.member_id
    # The join that created the group, and every span after it, name its identity.
    assert cgp_id.startswith("cgp_")
    for span in spans.values():
        assert span.attributes is not None
        assert span.attributes["group_id"] == "Orders Team"
        assert span.attributes["rafka.group.cgp_id"] == cgp_id
        assert span.attributes["rafka.group.rrl"] == "7/consumer-groups/orders-team"
    (line,) = [r.getMessage() for r in caplog.records if "generation 1" in r.getMessage()]
    assert line.startswith(f"group Orders Team ({cgp_id} 7/consumer-groups/orders-team): ")


async def test_target_assignment_span_of_a_consumer_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    exporter = span_exporter()
    image = TopicImage.of(1, [TopicInfo("t", uuid.UUID(int=1), 2)])
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), topics=lambda _org: image
        )
        op = ConsumerGroupHeartbeatOp(
            "g", "m1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned=()
        )
        assert (await registry.ask(GroupKey(0, "g"), op)).member_epoch == 1
        (cgp_id,) = {s.cgp_id for s in registry.summaries(0)}
        nursery.cancel_scope.cancel()
    spans = [s for s in exporter.get_finished_spans() if s.name.endswith("target-assignment")]
    assert [dict(s.attributes or {}) for s in spans] == [
        {
            "group_id": "g",
            "assignment_epoch": 1,
            "assignor": "uniform",
            "members": 1,
            "rafka.group.cgp_id": cgp_id,
            "rafka.group.rrl": "0/consumer-groups/g",
        }
    ]


async def test_each_op_span_is_a_child_of_its_own_request_span(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The actor's task keeps the context of the request that started it; its spans must
    still hang off the request each op came with (issue 51 §3). Mutation: the actor's spans
    taking the current context again make the sync's and heartbeat's spans children of the
    join's request."""
    exporter = span_exporter()
    tracer = trace.get_tracer("test")
    key = GroupKey(0, "g")
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=0), MemoryCoordinatorLog()
        )

        async def request(name: str, op: Any) -> Any:
            with tracer.start_as_current_span(name):
                return await registry.ask(key, op)

        joined = await request("join request", join_op())
        await request("sync request", SyncGroupOp("g", joined.member_id, 1, ()))
        await request("heartbeat request", HeartbeatOp("g", joined.member_id, 1))
        nursery.cancel_scope.cancel()
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    names = {span_id(s): s.name for s in spans}
    parents = {s.name: names.get(parent_of(s)) for s in spans}  # (one of each here)
    assert parents["rafka.broker.group.join"] == "join request"
    assert parents["rafka.broker.group.sync"] == "sync request"
    assert parents["rafka.broker.group.heartbeat"] == "heartbeat request"
    # nested in the op it happened in (design note 000): here the initial delay's timer,
    # whose own trace has no request
    assert parents["rafka.broker.coordinator.rebalance-complete"] == "rafka.broker.group.timer"
    assert parents["rafka.broker.group.timer"] is None
    appends = [s for s in spans if s.name == "rafka.broker.coordinator.append"]
    assert sorted(names[parent_of(s)] for s in appends) == ["join request", "sync request"]
    for request_name in ("join request", "sync request", "heartbeat request"):
        tree = {s.name for s in spans if trace_id(s) == trace_id(by_name[request_name])}
        assert tree & {"join request", "sync request", "heartbeat request"} == {request_name}


async def test_a_batch_serving_several_requests_is_one_append_span_linked_to_each(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Three commits queued before the actor wakes are stepped together and stored with one
    append: its span starts a trace of its own with a link to each request (OpenTelemetry's
    advice for batches), while each commit's own span stays under its request. Mutation:
    parenting the append on the batch's first request leaves the other two unlinked."""
    exporter = span_exporter()
    tracer = trace.get_tracer("test")
    actor = new_group_actor(GroupKey(0, "g"), GroupSettings(GroupConfig(), MemoryCoordinatorLog()))
    requests, replies = [], []
    for i in range(3):
        with tracer.start_as_current_span(f"commit request {i}") as request:
            reply = ReplySlot()
            op = OffsetCommitOp("g", (("t", i, 10 + i, -1, None),))
            actor.mailbox.send_nowait(Envelope(op, reply, telemetry.current_context()))
        requests.append(request.get_span_context())
        replies.append(reply)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        answers = [await reply.receive() for reply in replies]
        nursery.cancel_scope.cancel()
    assert all(a.results[0][2] == ErrorCode.none for a in answers)
    spans = exporter.get_finished_spans()
    (append,) = [s for s in spans if s.name == "rafka.broker.coordinator.append"]
    assert append.parent is None
    assert [link.context for link in append.links] == requests
    assert append.attributes is not None
    assert append.attributes["records"] == 4  # (the group's record, then 3 offsets)
    commits = [s for s in spans if s.name == "rafka.broker.group.offset-commit"]
    assert [s.parent for s in commits] == requests

"""The spans of design note 000 come out of a real rebalance (read via the OTel SDK)."""

from __future__ import annotations

import uuid

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rafka_actors.actors.coordinator_log import MemoryCoordinatorLog
from rafka_actors.actors.registry import GroupRegistry
from rafka_actors.consumer_group.topic_image import TopicImage, TopicInfo
from rafka_actors.group.effects import GroupConfig
from rafka_actors.group.ops import ConsumerGroupHeartbeatOp, HeartbeatOp, SyncGroupOp
from rafka_actors.ids import GroupKey

from .test_group_actor import join_op

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)


async def test_rebalance_complete_span_carries_generation_and_leader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    EXPORTER.clear()
    key = GroupKey(0, "g")
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=0), MemoryCoordinatorLog()
        )
        joined = await registry.ask(key, join_op())
        await registry.ask(key, SyncGroupOp("g", joined.member_id, 1, ()))
        await registry.ask(key, HeartbeatOp("g", joined.member_id, 1))
        nursery.cancel_scope.cancel()
    spans = {s.name: s for s in EXPORTER.get_finished_spans()}
    assert {
        "rafka.broker.group.join",
        "rafka.broker.group.sync",
        "rafka.broker.group.heartbeat",
    } <= set(spans)
    complete = spans["rafka.broker.coordinator.rebalance-complete"]
    assert complete.attributes is not None
    assert complete.attributes["generation_id"] == 1
    assert complete.attributes["leader_id"] == joined.member_id


async def test_target_assignment_span_of_a_consumer_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    EXPORTER.clear()
    image = TopicImage.of(1, [TopicInfo("t", uuid.UUID(int=1), 2)])
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), topics=lambda: image
        )
        op = ConsumerGroupHeartbeatOp(
            "g", "m1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned=()
        )
        assert (await registry.ask(GroupKey(0, "g"), op)).member_epoch == 1
        nursery.cancel_scope.cancel()
    spans = [s for s in EXPORTER.get_finished_spans() if s.name.endswith("target-assignment")]
    assert [dict(s.attributes or {}) for s in spans] == [
        {"group_id": "g", "assignment_epoch": 1, "assignor": "uniform", "members": 1}
    ]

"""The spans of design note 000 come out of a real rebalance (read via the OTel SDK), and
every span and log line naming a group carries its `cgp_` id and RRL (issue #7)."""

from __future__ import annotations

import logging
import uuid

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.consumer_group.ops import ConsumerGroupHeartbeatOp
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    HeartbeatOp,
    SyncGroupOp,
)
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

from .test_group_actor import join_op

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)


async def test_rebalance_complete_span_carries_generation_and_leader(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    EXPORTER.clear()
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
    EXPORTER.clear()
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
    spans = [s for s in EXPORTER.get_finished_spans() if s.name.endswith("target-assignment")]
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

"""KIP-848 consumer groups in the actor model, on trio's MockClock: session and rebalance
timeouts and the throttled assignment are deadlines the actor wakes up for, a restart from the
log resumes the group, and an idle empty consumer group is passivated."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.stored_groups import stored_group
from rafka_actors.consumer_group.ops import (
    ConsumerGroupHeartbeatOp,
    ConsumerGroupHeartbeatOpResp,
)
from rafka_actors.consumer_group.state import ConsumerGroup
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

K = GroupKey(0, "g")
FOO = uuid.UUID(int=7)
IMAGE = TopicImage.of(1, [TopicInfo("foo", FOO, 4)])
CONFIG = GroupConfig(consumer_session_timeout_ms=45_000, consumer_assignment_interval_ms=1000)


def hb(member: str, epoch: int, **kw: Any) -> ConsumerGroupHeartbeatOp:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("subscribed_topic_names", ("foo",))
        kw.setdefault("owned", ())
    return ConsumerGroupHeartbeatOp(group_id="g", member_id=member, member_epoch=epoch, **kw)


@pytest.fixture
async def log() -> MemoryCoordinatorLog:
    return MemoryCoordinatorLog()


@pytest.fixture
async def registry(log: MemoryCoordinatorLog) -> AsyncIterator[GroupRegistry]:
    async with trio.open_nursery() as nursery:
        yield GroupRegistry(nursery, CONFIG, log, topics=lambda _org: IMAGE)
        nursery.cancel_scope.cancel()


class Client:
    """A member that heartbeats with what its last answers told it (epoch, partitions)."""

    def __init__(self, registry: GroupRegistry, member_id: str) -> None:
        self.registry, self.member_id = registry, member_id
        self.epoch, self.owned = 0, ()

    async def heartbeat(self, **kw: Any) -> ConsumerGroupHeartbeatOpResp:
        if self.epoch:
            kw.setdefault("owned", self.owned)
        resp: ConsumerGroupHeartbeatOpResp = await self.registry.ask(
            K, hb(self.member_id, self.epoch, **kw)
        )
        if resp.error_code == ErrorCode.none:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = resp.assignment
        return resp


async def test_session_timeout_fences_a_silent_member(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    m1, m2 = Client(registry, "m1"), Client(registry, "m2")
    first = await m1.heartbeat()
    assert first.member_epoch == 1 and first.assignment == ((FOO, (0, 1, 2, 3)),)
    await m2.heartbeat()
    for _ in range(10):  # m2 heartbeats every 5 s; m1 never again
        await trio.sleep(5)
        assert (await m2.heartbeat()).error_code == ErrorCode.none
    # m1's 45 s session ran out: the actor fenced it on its own deadline and m2 took over.
    assert m2.owned == ((FOO, (0, 1, 2, 3)),)
    assert (await m1.heartbeat()).error_code == ErrorCode.unknown_member_id


async def test_throttled_assignment_is_computed_at_its_deadline(
    registry: GroupRegistry, log: MemoryCoordinatorLog, autojump_clock: trio.testing.MockClock
) -> None:
    await registry.ask(K, hb("m1", 0))
    await trio.sleep(0.1)
    second = await registry.ask(K, hb("m2", 0))
    assert second.member_epoch == 1  # the target for epoch 2 waits out the interval
    await trio.sleep(1.0)
    group = stored_group(log, K, 0, CONFIG)
    assert isinstance(group, ConsumerGroup) and group.assignment_epoch == 2
    assert group.target["m2"]


async def test_rebalance_timeout_fences_a_member_that_does_not_revoke(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    m1, m2 = Client(registry, "m1"), Client(registry, "m2")
    await m1.heartbeat()
    await m2.heartbeat()
    await trio.sleep(1.0)  # the new target: m1 must give up two partitions
    everything = m1.owned
    asked = await m1.heartbeat()
    assert asked.member_epoch == 1 and len(asked.assignment[0][1]) == 2
    for _ in range(7):  # m1 keeps heartbeating but never lets go; m2 is patient
        await trio.sleep(5)
        await m1.heartbeat(owned=everything)
        await m2.heartbeat()
    assert (await m1.heartbeat()).error_code == ErrorCode.unknown_member_id  # fenced at 30 s
    assert m2.owned == everything


async def test_restart_from_the_log_resumes_the_group(
    log: MemoryCoordinatorLog, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, CONFIG, log, topics=lambda _org: IMAGE)
        await registry.ask(K, hb("m1", 0, instance_id="i1"))
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, CONFIG, log, topics=lambda _org: IMAGE)
        assert registry.resume() == 1
        resp = await registry.ask(K, hb("m1", 1, owned=((FOO, (0, 1, 2, 3)),)))
        assert (resp.error_code, resp.member_epoch) == (0, 1)
        await trio.sleep(46)  # nobody heartbeats: fenced after a fresh session
        group = stored_group(log, K, 0, CONFIG)
        assert isinstance(group, ConsumerGroup) and not group.members
        nursery.cancel_scope.cancel()


async def test_empty_consumer_group_actor_is_passivated(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    await registry.ask(K, hb("m1", 0))
    await registry.ask(K, hb("m1", -1))
    await trio.sleep(0.1)
    assert len(registry) == 0
    summaries = list(registry.summaries(0))
    assert [(s.group_id, s.state, s.group_type) for s in summaries] == [("g", "Empty", "consumer")]

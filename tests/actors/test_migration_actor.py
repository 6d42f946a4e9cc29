"""Online migration in the actor model, on trio's MockClock: a classic group upgraded by a
consumer-protocol member is stored as a consumer group with a classic member, a restart from
the log brings that back (the classic member's session and rebalance state included), and
the downgrade when the consumer-protocol member leaves is stored too; offsets and the `cgp_`
id survive every step."""

from __future__ import annotations

import uuid
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.stored_groups import stored_group
from rafka_actors.classic_group.state import ClassicGroup, GroupState
from rafka_actors.consumer_group.ops import ConsumerGroupHeartbeatOp
from rafka_actors.consumer_group.state import ConsumerGroup
from rafka_actors.group_common.consumer_embedded import (
    Subscription,
    encode_assignment,
    encode_subscription,
)
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    HeartbeatOp,
    JoinGroupOp,
    OffsetCommitOp,
    OffsetFetchOp,
    SyncGroupOp,
)
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

K = GroupKey(0, "g")
IMAGE = TopicImage.of(1, [TopicInfo("foo", uuid.UUID(int=7), 4)])
CONFIG = GroupConfig(initial_rebalance_delay_ms=100, consumer_assignment_interval_ms=0)
META = encode_subscription(Subscription(1, ("foo",)))


def join(member_id: str = "") -> JoinGroupOp:
    return JoinGroupOp(
        "g", member_id, "consumer", 10_000, (("range", META),), rebalance_timeout_ms=20_000,
        require_known_member_id=False, new_member_id="c0",
    )  # fmt: skip


def kip848(epoch: int, **kw: Any) -> ConsumerGroupHeartbeatOp:
    if epoch == 0:
        kw.update(rebalance_timeout_ms=20_000, subscribed_topic_names=("foo",), owned=())
    return ConsumerGroupHeartbeatOp(group_id="g", member_id="k1", member_epoch=epoch, **kw)


async def test_upgrade_restart_and_downgrade_are_durable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemoryCoordinatorLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, CONFIG, log, topics=lambda _org: IMAGE)
        joined = await registry.ask(K, join())
        everything = encode_assignment((("foo", (0, 1, 2, 3)),))
        sync = SyncGroupOp("g", "c0", joined.generation_id, (("c0", everything),))
        assert (await registry.ask(K, sync)).error_code == ErrorCode.none
        commit = OffsetCommitOp("g", (("foo", 2, 99, -1, None),), "c0", joined.generation_id)
        await registry.ask(K, commit)
        cgp_id = stored_group(log, K, 0, CONFIG).cgp_id  # type: ignore[union-attr]
        assert (await registry.ask(K, kip848(0))).error_code == ErrorCode.none
        nursery.cancel_scope.cancel()
    upgraded = stored_group(log, K, 0, CONFIG)
    assert isinstance(upgraded, ConsumerGroup) and upgraded.cgp_id == cgp_id
    assert upgraded.members["c0"].classic is not None

    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, CONFIG, log, topics=lambda _org: IMAGE)
        assert registry.resume() == 1
        # the classic member is back, and told to rejoin: the group moved on
        beat = await registry.ask(K, HeartbeatOp("g", "c0", joined.generation_id))
        assert beat.error_code == ErrorCode.rebalance_in_progress
        await registry.ask(K, kip848(-1))  # the last consumer-protocol member leaves
        downgraded = stored_group(log, K, 0, CONFIG)
        assert isinstance(downgraded, ClassicGroup) and downgraded.cgp_id == cgp_id
        assert set(downgraded.members) == {"c0"}
        rejoined = await registry.ask(K, join("c0"))
        assert rejoined.error_code == ErrorCode.none and rejoined.leader_id == "c0"
        sync = SyncGroupOp("g", "c0", rejoined.generation_id, (("c0", everything),))
        assert (await registry.ask(K, sync)).error_code == ErrorCode.none
        fetched = await registry.ask(K, OffsetFetchOp("g", (("foo", 2),)))
        assert fetched.error_code == ErrorCode.none and fetched.offsets[0][2] == 99
        nursery.cancel_scope.cancel()
    settled = stored_group(log, K, 0, CONFIG)
    assert isinstance(settled, ClassicGroup) and settled.is_in(GroupState.STABLE)

"""A member's going is logged once, in words an operator reads right (issue 51): a KIP-848
member that leaves "left", not "fenced (member X left)"; one whose session ran out "fenced
(session timeout)"; and a classic member that leaves or times out is logged at all."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.classic_group.consumer_protocol import encode_subscription
from rafka_actors.consumer_group.ops import ConsumerGroupHeartbeatOp
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import JoinGroupOp, LeaveGroupOp, SyncGroupOp
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

ACTOR_LOG = "rafka_actors.actors.group_actor"
IMAGE = TopicImage.of(1, [TopicInfo("foo", uuid.UUID(int=7), 4)])
SESSION_MS = 10_000


@pytest.fixture
async def registry() -> AsyncIterator[GroupRegistry]:
    config = GroupConfig(initial_rebalance_delay_ms=0, consumer_session_timeout_ms=45_000)
    async with trio.open_nursery() as nursery:
        yield GroupRegistry(nursery, config, MemoryCoordinatorLog(), topics=lambda _org: IMAGE)
        nursery.cancel_scope.cancel()


DEPARTURE = re.compile(r"member \S+ (left|fenced|removed)")


def departures(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The log lines of members going, without the group's name."""
    return [
        r.getMessage().split(": ", 1)[1]
        for r in caplog.records
        if r.name == ACTOR_LOG and DEPARTURE.search(r.getMessage())
    ]


async def classic_member(registry: GroupRegistry, key: GroupKey, new_id: str) -> str:
    joined = await registry.ask(
        key,
        JoinGroupOp(
            group_id=key.group_id,
            member_id="",
            protocol_type="consumer",
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=30_000,
            protocols=(("range", encode_subscription(["foo"])),),
            require_known_member_id=False,
            new_member_id=new_id,
        ),
    )
    assert joined.error_code == ErrorCode.none
    synced = await registry.ask(
        key,
        SyncGroupOp(key.group_id, joined.member_id, joined.generation_id, ((new_id, b"a"),)),
    )
    assert synced.error_code == ErrorCode.none
    return str(joined.member_id)


async def test_classic_members_that_leave_or_time_out_are_logged(
    registry: GroupRegistry,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACTOR_LOG)
    key = GroupKey(0, "classic")
    leaver = await classic_member(registry, key, "leaver")
    left = await registry.ask(key, LeaveGroupOp("classic", ((leaver, None, None),)))
    assert left.error_code == ErrorCode.none
    await classic_member(registry, key, "silent")
    await trio.sleep(SESSION_MS / 1000 + 1)
    assert departures(caplog) == ["member leaver left", "member silent removed (session timeout)"]


async def test_a_kip848_member_that_leaves_left_and_one_that_times_out_was_fenced(
    registry: GroupRegistry,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACTOR_LOG)
    key = GroupKey(0, "kip848")

    async def heartbeat(member: str, epoch: int) -> int:
        extra = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ("foo",), "owned": ()}
        op = ConsumerGroupHeartbeatOp(
            group_id="kip848", member_id=member, member_epoch=epoch, **(extra if not epoch else {})
        )
        answer = await registry.ask(key, op)
        assert answer.error_code == ErrorCode.none
        return int(answer.member_epoch)

    epoch = await heartbeat("leaver", 0)
    await heartbeat("silent", 0)
    await heartbeat("leaver", -1)  # leaves
    await trio.sleep(46)  # "silent" never heartbeats again
    lines = departures(caplog)
    assert [line.split(";")[0] for line in lines] == [
        "member leaver left",
        "member silent fenced (session timeout)",
    ]
    assert epoch == 1 and lines[0].endswith("; group epoch 3")

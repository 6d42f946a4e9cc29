"""Offset retention (Kafka's cleanupGroupMetadata for classic and simple groups)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.classic_group.state import GroupState
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    ExpireOffsetsOp,
    OffsetCommitOp,
    OffsetFetchOp,
)
from rafka_actors.group_common.records import GroupTombstone, OffsetTombstone
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

from .harness import GroupHarness

RETENTION = 60_000


@pytest.fixture
def h() -> GroupHarness:
    return GroupHarness()


def test_simple_group_offsets_expire_by_their_own_commit_time(h: GroupHarness) -> None:
    h.commit({("t", 0): 1})
    h.sleep(RETENTION // 2)
    h.commit({("t", 1): 2})
    h.sleep(RETENTION // 2)
    response = h.call(ExpireOffsetsOp(RETENTION))
    assert (response.expired, response.group_deleted) == (1, False)
    assert set(h.g.offsets) == {("t", 1)}
    assert h.records[-1] == OffsetTombstone(h.group_id, "t", 0)


def test_expired_empty_group_is_deleted_with_tombstones(h: GroupHarness) -> None:
    h.commit({("t", 0): 1, ("t", 1): 2})
    h.sleep(RETENTION)
    response = h.call(ExpireOffsetsOp(RETENTION))
    assert (response.expired, response.group_deleted) == (2, True)
    assert h.group is None
    assert h.records[-1] == GroupTombstone(h.group_id)


def test_empty_consumer_group_expires_all_offsets_after_being_empty_for_the_retention(
    h: GroupHarness,
) -> None:
    [joined] = h.join_and_sync_group_of(1)
    h.commit({("t", 0): 5}, member_id=joined.member_id, generation=h.generation)
    assert h.call(ExpireOffsetsOp(0)).expired == 0  # not Empty: even a zero retention spares it
    h.leave(joined.member_id)
    assert h.state is GroupState.EMPTY
    h.sleep(RETENTION - 1)
    assert h.call(ExpireOffsetsOp(RETENTION)).expired == 0  # empty for less than the retention
    h.sleep(1)
    response = h.call(ExpireOffsetsOp(RETENTION))
    assert (response.expired, response.group_deleted) == (1, True)


def test_group_with_members_is_never_swept(h: GroupHarness) -> None:
    h.join_and_sync_group_of(2)
    assert h.call(ExpireOffsetsOp(0)).group_deleted is False
    assert h.state is GroupState.STABLE


async def test_registry_sweeps_every_interval(autojump_clock: trio.testing.MockClock) -> None:
    log = MemoryCoordinatorLog()
    key = GroupKey(0, "g")
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log)
        await registry.ask(key, OffsetCommitOp("g", (("t", 0, 7, -1, None),)))
        nursery.start_soon(registry.expire_offsets_periodically, 600_000, 3_600_000)
        await trio.sleep(3_000)  # less than the retention plus one sweep interval
        assert (await registry.ask(key, OffsetFetchOp("g", None))).offsets[0][2] == 7
        await trio.sleep(1_200)
        assert (await registry.ask(key, OffsetFetchOp("g", None))).offsets == ()
        assert log.keys() == []  # group and offsets tombstoned, nothing left stored
        nursery.cancel_scope.cancel()


class WaitingLog(MemoryCoordinatorLog):
    """Every append waits a moment (as under fsync `always`)."""

    async def append(self, key: GroupKey, records: Any) -> None:
        await trio.sleep(0.001)
        await super().append(key, records)


@pytest.mark.parametrize("log_class", [MemoryCoordinatorLog, WaitingLog], ids=["now", "wait"])
async def test_a_sweep_keeps_nothing_of_groups_nobody_uses(
    autojump_clock: trio.testing.MockClock, log_class: type[MemoryCoordinatorLog]
) -> None:
    """With 100 000 stored groups the sweep must not keep what it read of them in memory: a
    group nobody uses is visited and dropped again; a group in use keeps resting."""
    log = log_class()
    keys = [GroupKey(0, f"g{i}") for i in range(3)]
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        for i, key in enumerate(keys):
            await registry.ask(key, OffsetCommitOp(key.group_id, (("t", 0, i, -1, None),)))
        await trio.sleep(16)  # every group dropped
        await registry.ask(keys[0], OffsetFetchOp("g0", None))  # in use again
        assert await registry.expire_offsets(RETENTION) == 0  # nothing due yet
        assert list(registry._resting) == [keys[0]] and registry.running() == 0
        await trio.sleep(RETENTION / 1000)
        await registry.ask(keys[0], OffsetFetchOp("g0", None))  # in use again
        assert await registry.expire_offsets(RETENTION) == 3  # every group deleted
        assert len(registry) == 0 and log.keys() == []
        assert (await registry.ask(keys[0], OffsetFetchOp("g0", None))).offsets == ()
        nursery.cancel_scope.cancel()

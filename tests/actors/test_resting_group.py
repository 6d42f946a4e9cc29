"""A resting group's compact form (resting_group.py), the shared partition keys
(partition_keys.py) and the log view's shared empty containers (coordinator/latest.py): what
they share never lets one group change another's state, and a group woken from rest is the
group that went to rest."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest
import trio
import trio.testing

from rafka_actors.actors import resting_group
from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.snapshot import snapshot_of
from rafka_actors.classic_group.state import ClassicGroup
from rafka_actors.consumer_group.state import ConsumerGroup
from rafka_actors.coordinator.latest import GroupRecords
from rafka_actors.group_common import partition_keys
from rafka_actors.group_common.committed import CommittedOffset
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import OffsetCommitOp, OffsetDeleteOp, OffsetFetchOp
from rafka_actors.group_common.txn_offsets import TxnOffsetCommitRecord
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

K = GroupKey(0, "g")


def _group(cls: type) -> Any:
    group = cls("g", "cgp_x")
    group.offsets[("t", 0)] = CommittedOffset(5, -1, "", 1)
    group.offsets[("t", 1)] = CommittedOffset(7, 3, "m", 2)
    return group


@pytest.mark.parametrize("cls", [ClassicGroup, ConsumerGroup])
def test_a_group_woken_from_rest_equals_the_group_that_went_to_rest(cls: type) -> None:
    group = _group(cls)
    before = copy.deepcopy(group)
    published = snapshot_of("g", group)
    resting = resting_group.rest(group, published)
    assert resting.offsets is published.offsets  # one copy of the offsets while at rest
    with pytest.raises(TypeError):
        resting.members["m"] = None  # a write to a resting group fails, loudly
    woken = resting_group.wake(resting)
    assert woken == before
    assert type(woken.members) is dict and type(woken.offsets) is dict
    woken.offsets[("t", 0)] = CommittedOffset(6, -1, "", 3)  # the actor's, not the readers'
    woken.members["m"] = None
    assert published.offsets[("t", 0)].offset == 5
    assert not resting_group.wake(resting_group.rest(cls("h", "cgp_y"), None)).members


def test_offsets_unlike_the_published_ones_are_kept_as_they_are() -> None:
    group = _group(ClassicGroup)
    stale = snapshot_of("g", ClassicGroup("g", "cgp_x"))
    assert resting_group.rest(group, stale).offsets is not stale.offsets
    assert type(resting_group.wake(group).offsets) is dict and len(group.offsets) == 2


async def test_a_resting_group_keeps_its_offsets_through_commits_deletes_and_passivation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemoryCoordinatorLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        commit = (("t", 0, 5, -1, ""), ("t", 1, 8, -1, "meta"), ("u", 0, 2, -1, ""))
        await registry.ask(K, OffsetCommitOp("g", commit))
        assert registry.resting() == 1
        resting = registry._resting[K].state
        assert resting is not None and resting.offsets is registry._published[K].offsets
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 6, -1, ""),)))  # woken, rests again
        await registry.ask(K, OffsetDeleteOp("g", (("u", 0),)))
        expected = (("t", 0, 6, -1, ""), ("t", 1, 8, -1, "meta"))
        fetched = await registry.ask(K, OffsetFetchOp("g", None))  # from the snapshot
        assert [row[:5] for row in fetched.offsets] == list(expected)
        await trio.sleep(16)  # passivated: the next request rebuilds the group from the log
        assert len(registry) == 0
        await registry.ask(K, OffsetCommitOp("g", (("t", 1, 9, -1, "meta"),)))
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert [row[:3] for row in fetched.offsets] == [("t", 0, 6), ("t", 1, 9)]
        nursery.cancel_scope.cancel()


def test_partitions_share_one_key_and_the_table_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = "".join(["top", "ic"])  # not the literal's object
    key = partition_keys.partition_key(topic, 0)
    assert key == ("topic", 0) and partition_keys.partition_key("topic", 0) is key
    monkeypatch.setattr(partition_keys, "LIMIT", 4)
    for partition in range(10):
        assert partition_keys.partition_key("other", partition) == ("other", partition)
    assert len(partition_keys._KEYS) <= 4


def test_the_log_views_shared_empty_containers_are_never_changed() -> None:
    one: GroupRecords[Any] = GroupRecords()
    other: GroupRecords[Any] = GroupRecords()
    one.apply([TxnOffsetCommitRecord("g", 7, 0, "t", 0, 5, -1, "", 1)])
    assert len(one.pending) == 1 and not other.pending
    assert type(other.pending) is MappingProxyType and type(one.pending) is dict

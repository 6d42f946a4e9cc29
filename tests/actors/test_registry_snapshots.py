"""`GroupRegistry.snapshots` (the metrics endpoint's read): a group without an actor is read
from the log once, and what was read gives way to the next published snapshot."""

from __future__ import annotations

import trio

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import OffsetCommitOp
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

K = GroupKey(0, "g")


def _committed(registry: GroupRegistry) -> dict[GroupKey, int]:
    return {key: snap.offsets[("t", 0)].offset for key, snap in registry.snapshots()}


async def test_snapshots_read_the_log_once_and_follow_later_commits() -> None:
    log = MemoryCoordinatorLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log)  # passivation 0: dropped at once
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 5, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()
        assert registry.running() == 0 and len(registry) == 0  # nothing held for it
        reads = 0
        real_records_of = log.records_of

        def counted(key: GroupKey) -> list:  # type: ignore[type-arg]
            nonlocal reads
            reads += 1
            return real_records_of(key)

        log.records_of = counted  # type: ignore[method-assign]
        assert _committed(registry) == {K: 5}
        assert _committed(registry) == {K: 5}
        assert reads == 1  # the second scrape reused what the first read
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 9, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()
        assert _committed(registry) == {K: 9}  # the actor published: the old read is gone
        assert not [key for key, _ in registry.snapshots(lambda key: key.group_id != "g")]
        nursery.cancel_scope.cancel()

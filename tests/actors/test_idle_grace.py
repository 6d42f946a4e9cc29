"""An idle group's actor waits `idle_grace_s` for more mail before it stops (issue 53, lever
4), once its group is asked again within the grace of coming to rest: a burst of commits to
an Empty group is served by one actor, not one started per commit; a group asked once does
not linger; a sweep's visit of a group nobody uses still keeps nothing of it."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.mailbox_actor import MailboxActor
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import OffsetCommitOp, OffsetFetchOp
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

K = GroupKey(0, "g")


class CountingLog(MemoryCoordinatorLog):
    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    async def append(self, key: GroupKey, records: Any) -> None:
        self.appends += 1
        await super().append(key, records)


def commit(offset: int, group: str = "g") -> OffsetCommitOp:
    return OffsetCommitOp(group, (("t", 0, offset, -1, ""),))


async def test_a_burst_of_commits_to_an_empty_group_is_served_by_one_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = CountingLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10, idle_grace_s=1)
        await registry.ask(K, commit(0))
        assert registry.running() == 0  # asked once: no grace, it stopped at once
        await registry.ask(K, commit(1))  # asked again soon after: a burst, it lingers
        actor = registry._running[K]
        for offset in range(2, 20):
            await trio.sleep(0.5)  # within the grace: the same actor answers
            await registry.ask(K, commit(offset))
            assert registry._running.get(K) is actor
        await trio.sleep(1.1)  # the grace ran out: it stopped, its group rests
        assert registry.running() == 0 and registry.resting() == 1
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets[0][2] == 19
        assert log.appends == 20  # every commit stored
        nursery.cancel_scope.cancel()


async def test_an_actor_in_its_grace_stops_when_a_sender_comes_too_late(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request that arrives after the grace ran out finds the mailbox closed and gets a
    fresh actor: nobody waits on a stopped one."""
    starts: list[Any] = []
    original = MailboxActor.run

    async def counted(self: MailboxActor[Any, Any]) -> None:
        starts.append(self)
        await original(self)

    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10, idle_grace_s=1
        )
        MailboxActor.run = counted  # type: ignore[method-assign]
        try:
            await registry.ask(K, commit(1))
            await registry.ask(K, commit(2))  # lingers
            await trio.sleep(1.5)
            await registry.ask(K, commit(3))
        finally:
            MailboxActor.run = original  # type: ignore[method-assign]
        assert len(starts) == 3
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets[0][2] == 3
        nursery.cancel_scope.cancel()


async def test_a_sweep_visit_does_not_keep_a_lingering_actor_or_its_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Expiring offsets visits every stored group: a group nobody uses must not stay in
    memory for the grace, nor rest afterwards."""
    keys = [GroupKey(0, f"g{i}") for i in range(3)]
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10, idle_grace_s=5
        )
        for i, key in enumerate(keys):
            await registry.ask(key, commit(i, key.group_id))
            await registry.ask(key, commit(i, key.group_id))  # lingers
        await trio.sleep(16)  # every group stopped and dropped
        assert len(registry) == 0
        await registry.ask(keys[0], OffsetFetchOp("g0", None))  # in use again (an actor)
        assert await registry.expire_offsets(60_000) == 0
        await trio.testing.wait_all_tasks_blocked()  # (no clock time passes)
        assert list(registry._running) == [keys[0]] and len(registry) == 1
        nursery.cancel_scope.cancel()

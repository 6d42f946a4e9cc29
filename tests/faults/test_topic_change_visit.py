"""A topic change visits every group of its organisation (issue 45), as the registry's own
task: a caller that goes away mid-visit (a client timing out on a DeleteTopics) does not leave
it half done, and the groups of other organisations are never touched."""

from __future__ import annotations

import trio

from rafka_actors.group_common.ops import (
    OffsetCommitOp,
    OffsetFetchOp,
    TopicsChangedOp,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

from .helpers import running_registry

GROUPS = [f"g{i}" for i in range(20)]


def _commit(group: str) -> OffsetCommitOp:
    return OffsetCommitOp(group, (("gone", 0, 5, -1, None), ("kept", 0, 7, -1, None)))


async def _topics(registry: object, org: int, group: str) -> set[str]:
    answer = await registry.ask(GroupKey(org, group), OffsetFetchOp(group, None))  # type: ignore[attr-defined]
    return {row[0] for row in answer.offsets}


async def _all_clean(registry: object) -> bool:
    return all(["gone" not in await _topics(registry, 1, group) for group in GROUPS])


async def test_a_deleted_topic_is_tombstoned_in_every_group_even_if_the_caller_leaves() -> None:
    log = MemoryCoordinatorLog()
    async with running_registry(log) as registry:
        for org in (1, 2):
            for group in GROUPS:
                await registry.ask(GroupKey(org, group), _commit(group))
        with trio.move_on_after(0) as scope:  # the caller leaves at once
            await registry.ask_groups_of(1, TopicsChangedOp(("gone",)), stored_too=True)
        assert scope.cancelled_caught
        for _ in range(1000):  # the visit goes on without its caller
            if await _all_clean(registry):
                break
            await trio.sleep(0.01)
        for group in GROUPS:
            assert await _topics(registry, 1, group) == {"kept"}
            assert await _topics(registry, 2, group) == {"gone", "kept"}  # another org's
        answers = await registry.ask_groups_of(1, TopicsChangedOp(("gone",)), stored_too=True)
        assert [a.offsets_deleted for a in answers] == [0] * len(GROUPS)

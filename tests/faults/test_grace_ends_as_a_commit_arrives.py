"""Fault: a commit arrives just as an idle group's actor's grace runs out (issue 53, lever 4).

Guarantee: the commit is acknowledged and stored, whichever of the two runs first at that
instant; a commit that comes later starts a fresh actor; and the registry's nursery cancelled
while an actor waits out its grace ends it cleanly, its group intact in the log.

Seen to fail (the mutation applied to src, the module run, src restored):
- test_a_commit_at_the_end_of_the_grace_is_acknowledged_and_stored
  mutation: MailboxActor._linger no longer looks at its mailbox once more after the grace ran
  out (`return bool(envelopes)`) -> fails (TooSlowError: a commit posted in the same instant is
  left in the closed mailbox, never answered)
"""

from __future__ import annotations

import trio
import trio.testing

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import OffsetFetchOp
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

from .helpers import OK, commit_error, commit_op

K = GroupKey(0, "g")
GRACE_S = 1.0


async def test_a_commit_at_the_end_of_the_grace_is_acknowledged_and_stored(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemoryCoordinatorLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), log, passivate_after_s=10, idle_grace_s=GRACE_S
        )
        offset = 0
        for pause in [GRACE_S] * 40 + [GRACE_S - 1e-6, GRACE_S + 1e-6] * 10:
            with trio.fail_after(5):  # a commit lost in a stopping actor's mailbox: never answered
                assert commit_error(await registry.ask(K, commit_op("g", 0, offset))) == OK
                offset += 1  # asked again at once: this actor lingers
                assert commit_error(await registry.ask(K, commit_op("g", 0, offset))) == OK
            await trio.sleep(pause)  # the actor's grace ends at (about) the same instant
            offset += 1
        assert commit_error(await registry.ask(K, commit_op("g", 0, offset))) == OK
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets[0][2] == offset
        nursery.cancel_scope.cancel()


async def test_cancelling_the_registry_during_a_grace_ends_the_actor_cleanly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemoryCoordinatorLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), log, passivate_after_s=10, idle_grace_s=GRACE_S
        )
        assert commit_error(await registry.ask(K, commit_op("g", 0, 6))) == OK
        assert commit_error(await registry.ask(K, commit_op("g", 0, 7))) == OK
        assert registry.running() == 1  # waiting out its grace
        nursery.cancel_scope.cancel()
    assert registry.running() == 0
    async with trio.open_nursery() as nursery:  # a fresh registry finds the commit stored
        registry = GroupRegistry(nursery, GroupConfig(), log)
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets[0][2] == 7
        nursery.cancel_scope.cancel()

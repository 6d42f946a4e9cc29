"""Fault: a share consumer's connection drops while it holds records (it acquired them in a
ShareFetch and will never acknowledge them, heartbeat or fetch again).

Guarantee: nothing it held is lost and nothing is delivered twice at once: what it
acknowledged before the drop is never delivered again; what it still held goes back to
Available when its locks expire (`group.share.record.lock.duration.ms`, stepped by the
actor's own deadline: no request needs to wake it), not before, and another member then
acquires it with its delivery count raised; the silent member is evicted at its session
timeout; the group never hangs, and its actor holds no request.
"""

from __future__ import annotations

import trio
import trio.testing

from rafka_actors.share_group.ops import ShareGroupDescribeOp
from rafka_actors.share_group.partition import ACQUIRED, AVAILABLE
from rafka_actors.share_group.records import SharePartitionRecord
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

from .helpers import (
    ACCEPT,
    LOCK_MS,
    OK,
    SHARE_CONFIG,
    SHARE_HEARTBEAT_MS,
    SHARE_SESSION_MS,
    SHARE_TOPICS,
    acquired,
    held_by_actor,
    key,
    running_registry,
    session_ok,
    share_acquire,
    share_heartbeat,
    share_join,
    share_session,
)


async def test_what_a_dropped_consumer_held_goes_to_another_when_its_locks_expire(
    autojump_clock: trio.testing.MockClock,
) -> None:
    s, log = key("s"), MemoryCoordinatorLog()

    def stored_runs() -> tuple[tuple[int, int, int, int], ...]:
        """t-0's stored state: (first, last, state, delivery count) of each run."""
        (partition,) = [r for r in log.records_of(s) if isinstance(r, SharePartitionRecord)]
        return partition.batches

    async with running_registry(log, SHARE_CONFIG, topics=lambda _org: SHARE_TOPICS) as registry:
        a = await registry.ask(s, share_join("s", "a"))
        b = await registry.ask(s, share_join("s", "b"))
        assert a.error_code == b.error_code == OK

        async def b_heartbeats() -> None:  # b is alive throughout, as its client is
            nonlocal b
            while True:  # (a little early each time: none comes as the locks expire)
                await trio.sleep(SHARE_HEARTBEAT_MS / 1000 - 1)
                b = await registry.ask(s, share_heartbeat("s", b))
                assert b.error_code == OK

        # a fetches 0-9 and acknowledges 0-3
        session_ok(await registry.ask(s, share_session("s", "a", 0)))
        assert acquired(await registry.ask(s, share_acquire("s", "a", 0, -1))) == []  # (init)
        assert acquired(await registry.ask(s, share_acquire("s", "a", 0))) == [(0, 9, 1)]
        taken = trio.current_time()
        acks = (("t", 0, 0, 3, (ACCEPT,)),)
        session_ok(await registry.ask(s, share_session("s", "a", 1, acks)))
        # a's connection drops: a says nothing more. b fetches: all of it is a's.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(b_heartbeats)
            session_ok(await registry.ask(s, share_session("s", "b", 0)))
            nothing = await registry.ask(s, share_acquire("s", "b", 4))
            assert acquired(nothing) == [] and nothing.next_release_in_ms == LOCK_MS
            await trio.sleep(LOCK_MS / 1000 - 1)
            assert acquired(await registry.ask(s, share_acquire("s", "b", 4))) == []
            assert stored_runs() == ((4, 9, ACQUIRED, 1),)  # (0-3: acknowledged, done with)
            await trio.sleep(1)  # the locks expire: the actor wakes for it by itself
            await trio.testing.wait_all_tasks_blocked()
            assert trio.current_time() - taken == LOCK_MS / 1000
            assert stored_runs() == ((4, 9, AVAILABLE, 1),)
            again = await registry.ask(s, share_acquire("s", "b", 0))
            assert acquired(again) == [(4, 9, 2)]  # a's, delivered a second time; not 0-3
            assert held_by_actor(registry, "s") == 0
            await trio.sleep(SHARE_SESSION_MS / 1000)  # a's session runs out meanwhile
            described = await registry.ask(s, ShareGroupDescribeOp("s"))
            assert [m[0] for m in described.members] == [b.member_id]
            nursery.cancel_scope.cancel()
        assert held_by_actor(registry, "s") == 0

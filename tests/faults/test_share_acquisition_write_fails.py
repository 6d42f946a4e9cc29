"""Fault: the coordinator log refuses the write of a share acquisition (a full disk): the
acquisition, with its raised delivery counts, must be stored before its records go out.

Guarantee: the records of the failed acquisition are not handed out (the ShareFetch's ask is
answered NOT_COORDINATOR, retriable) and their delivery counts are not raised; the group is
rebuilt from the log, as after a restart (members, sessions and locks are not stored: the
consumer's next heartbeat is UNKNOWN_MEMBER_ID and it joins again), so what it acknowledged
before is never delivered again and what it held comes back with the count it was stored
with; other groups carry on; and a restart reads the same.
"""

from __future__ import annotations

import trio
import trio.testing
from kio.schema.errors import ErrorCode

from .helpers import (
    ACCEPT,
    NOT_COORDINATOR,
    OK,
    SHARE_CONFIG,
    SHARE_TOPICS,
    FailingLog,
    acquired,
    commit_error,
    commit_op,
    held_by_actor,
    key,
    reread,
    running_registry,
    session_ok,
    share_acquire,
    share_heartbeat,
    share_join,
    share_session,
)


async def test_a_refused_acquisition_hands_nothing_out_and_raises_no_count(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = FailingLog()
    s, other = key("s"), key("other")
    async with running_registry(log, SHARE_CONFIG, topics=lambda _org: SHARE_TOPICS) as registry:
        a = await registry.ask(s, share_join("s", "a"))
        session_ok(await registry.ask(s, share_session("s", "a", 0)))
        assert acquired(await registry.ask(s, share_acquire("s", "a", 0, -1))) == []  # (init)
        assert acquired(await registry.ask(s, share_acquire("s", "a", 0, 4))) == [(0, 4, 1)]
        acks = (("t", 0, 0, 1, (ACCEPT,)),)
        session_ok(await registry.ask(s, share_session("s", "a", 1, acks)))  # 2-4 still held

        log.failing = {"s"}
        refused = await registry.ask(s, share_acquire("s", "a", 5))
        assert (refused.error_code, refused.acquired) == (NOT_COORDINATOR, ())
        assert commit_error(await registry.ask(other, commit_op("other", 0, 3))) == OK
        log.failing = set()

        # rebuilt from the log, as after a restart: a joins again, with a new session
        assert (await registry.ask(s, share_heartbeat("s", a))).error_code == (
            ErrorCode.unknown_member_id
        )
        assert (await registry.ask(s, share_join("s", "a"))).error_code == OK
        session_ok(await registry.ask(s, share_session("s", "a", 0)))
        again = await registry.ask(s, share_acquire("s", "a", 2))
        # 2-4 delivered once before, 5-9 never (the refused acquisition did not count); 0-1
        # were acknowledged
        assert acquired(again) == [(2, 4, 2), (5, 9, 1)]
        assert held_by_actor(registry, "s") == 0
    assert await reread(log, "other") == {0: 3}
    async with running_registry(log, SHARE_CONFIG, topics=lambda _org: SHARE_TOPICS) as restarted:
        assert (await restarted.ask(s, share_join("s", "b"))).error_code == OK
        session_ok(await restarted.ask(s, share_session("s", "b", 0)))
        after = await restarted.ask(s, share_acquire("s", "b", 2))
        assert acquired(after) == [(2, 4, 3), (5, 9, 2)]  # as stored, locks gone

"""Fault: a group's mailbox fills (a mailbox of 1 or 2, many concurrent callers of one group, and a
slow log that keeps the actor busy, so the mailbox really is full).

Guarantee: backpressure, nobody dropped: a caller waits for room, and every caller is
answered; one caller's requests take effect in the order it made them, even while they wait
for room; other groups are unaffected (their actors and mailboxes are their own); nothing
acknowledged is lost. When the actor stops with its mailbox full (the registry's nursery is
cancelled), everyone queued in it or waiting for room in it is answered too.

It holds for a mailbox of 0 too (an unbuffered channel, which GroupRegistry accepts): an
idle actor takes a waiting sender's request before it stops.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rafka_actors.actors.group_registry import GroupRegistry

from .helpers import (
    NO_DELAY,
    NOT_AVAILABLE,
    OK,
    SlowLog,
    commit_error,
    commit_op,
    fetch_op,
    heartbeat_op,
    join_and_sync,
    key,
    offsets_of,
    reread,
    running_registry,
)

G, OTHER = key("g"), key("other")
APPEND_S = 0.1  # every append of the slow log
CONSUMERS, COMMITS_EACH = 20, 5
PIPELINED = 99  # the partition of the caller that posts without waiting for answers


def mailbox_of(registry: GroupRegistry, group: str) -> Any:
    return registry._running[key(group)].mailbox.statistics()


@pytest.mark.parametrize(
    "mailbox_size",
    [
        0,
        1,
        2,
    ],
)
async def test_a_full_mailbox_makes_callers_wait_and_answers_every_one_in_order(
    mailbox_size: int, autojump_clock: trio.testing.MockClock
) -> None:
    log = SlowLog(APPEND_S)
    async with running_registry(log, passivate_after_s=10, mailbox_size=mailbox_size) as registry:
        o = await join_and_sync(registry, "other", "o")
        assert commit_error(await registry.ask(OTHER, commit_op("other", 0, 1, o))) == OK
        committed: dict[int, list[tuple[int, int]]] = {p: [] for p in range(CONSUMERS)}
        posted: list[tuple[int, int]] = []

        async def consumer(partition: int) -> None:
            """Commits its partition's offsets one after another, each once answered."""
            for offset in range(1, COMMITS_EACH + 1):
                answer = await registry.ask(G, commit_op("g", partition, offset))
                committed[partition].append((offset, commit_error(answer)))

        async def post(offset: int) -> None:
            answer = await registry.ask(G, commit_op("g", PIPELINED, offset))
            posted.append((offset, commit_error(answer)))

        with trio.fail_after(60):
            async with trio.open_nursery() as callers:
                callers.start_soon(post, 0)  # the actor takes it and waits for the slow log
                await trio.testing.wait_all_tasks_blocked()
                for partition in range(CONSUMERS):
                    callers.start_soon(consumer, partition)
                await trio.testing.wait_all_tasks_blocked()
                full = mailbox_of(registry, "g")
                assert (full.current_buffer_used, full.tasks_waiting_send) == (
                    mailbox_size,
                    CONSUMERS - mailbox_size,
                )
                for offset in range(1, 11):  # one caller's requests, each waiting for room
                    callers.start_soon(post, offset)
                    await trio.testing.wait_all_tasks_blocked()
                waiting = mailbox_of(registry, "g").tasks_waiting_send
                assert waiting == CONSUMERS - mailbox_size + 10

                # the other group meanwhile: no write waits behind g's mailbox
                start = trio.current_time()
                assert (await registry.ask(OTHER, heartbeat_op("other", o))).error_code == OK
                assert offsets_of(await registry.ask(OTHER, fetch_op("other"))) == {0: 1}
                assert offsets_of(await registry.ask(G, fetch_op("g"))) == {}  # its snapshot
                assert trio.current_time() == start
                assert commit_error(await registry.ask(OTHER, commit_op("other", 0, 2, o))) == OK
                assert trio.current_time() - start <= APPEND_S * 1.01  # its own append only
        # every caller answered, and acknowledged
        assert committed == {
            p: [(offset, OK) for offset in range(1, COMMITS_EACH + 1)] for p in range(CONSUMERS)
        }
        assert sorted(posted) == [(offset, OK) for offset in range(11)]
        # the posted commits took effect in the order they were made: the last one holds
        expected = {p: COMMITS_EACH for p in range(CONSUMERS)} | {PIPELINED: 10}
        assert offsets_of(await registry.ask(G, fetch_op("g"))) == expected
        # batches of the queued requests, not one append per request
        assert len(log.appends) < CONSUMERS * COMMITS_EACH // 2
    assert await reread(log, "g") == expected
    assert await reread(log, "other") == {0: 2}


async def test_an_actor_stopping_with_a_full_mailbox_answers_everyone_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = SlowLog(APPEND_S)
    answers: list[Any] = []

    async def commit(registry: GroupRegistry, partition: int) -> None:
        answers.append(await registry.ask(G, commit_op("g", partition, 2)))

    with trio.fail_after(60):
        # the callers outside the registry's nursery
        async with trio.open_nursery() as callers, trio.open_nursery() as actors:
            registry = GroupRegistry(actors, NO_DELAY, log, mailbox_size=2)
            assert commit_error(await registry.ask(G, commit_op("g", 0, 1))) == OK
            callers.start_soon(commit, registry, 0)  # taken; waits for the slow log
            await trio.testing.wait_all_tasks_blocked()
            for partition in range(1, 11):
                callers.start_soon(commit, registry, partition)
            await trio.testing.wait_all_tasks_blocked()
            full = mailbox_of(registry, "g")
            assert (full.current_buffer_used, full.tasks_waiting_send) == (2, 8)
            actors.cancel_scope.cancel()
    # the one in the actor's hands, the two queued, the eight waiting for room
    assert [commit_error(answer) for answer in answers] == [NOT_AVAILABLE] * 11
    assert await reread(log, "g") == {0: 1}

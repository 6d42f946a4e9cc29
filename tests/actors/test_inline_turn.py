"""An idle actor's turn run on the asking task (issue 53, lever 1: actors/inline_turn.py),
under every interleaving Hypothesis finds on trio's MockClock: callers asking at chosen
times, appends of chosen latencies, a member whose session may expire meanwhile.

Exclusivity: no two turns of a group ever overlap, whichever task runs them. Order: ops are
stepped in the order their callers asked (the order they entered the actor: its mailbox or
its turn token). Timers stay with the actor's task. And what the caller was told is what is
stored: the group's offsets, read live and re-read from the log, are the last acknowledged
commit's of each partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio
import trio.testing
from hypothesis import example, given
from hypothesis import strategies as st

from rafka_actors.actors.mailbox_actor import Envelope, MailboxActor
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog

from ..faults.helpers import (
    OK,
    SESSION_MS,
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
from ..fuzz.budget import examples, fuzz_settings

G = key("g")
EXPIRE = -1  # a pause past the member's session: its timer fires on the actor's task


class LatentLog(MemoryCoordinatorLog):
    """Each append takes the next of `latencies_ms` (0: a checkpoint), round and round."""

    def __init__(self, latencies_ms: Sequence[int]) -> None:
        super().__init__()
        self.latencies_ms = latencies_ms
        self.appends = 0

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        latency = self.latencies_ms[self.appends % len(self.latencies_ms)]
        self.appends += 1
        await trio.sleep(latency / 1000)
        await super().append(key, records)


class Watched:
    """Wraps `MailboxActor.turn`: checks that turns never overlap and that a due timer is
    stepped on the actor's task; records the order ops are stepped in."""

    def __init__(self) -> None:
        self.in_turn: set[GroupKey] = set()
        self.stepped: list[Any] = []
        self.callers: set[trio.lowlevel.Task] = set()
        self.timers = 0

    def wrap(self, real: Any) -> Any:
        async def turn(actor: MailboxActor[Any, Any], due: bool, envelopes: list[Envelope]) -> None:
            assert actor.key not in self.in_turn, "two turns of one group at once"
            if due:
                assert trio.lowlevel.current_task() not in self.callers
                self.timers += 1
            self.in_turn.add(actor.key)
            self.stepped.extend(envelope.op for envelope in envelopes)
            try:
                await real(actor, due, envelopes)
            finally:
                self.in_turn.discard(actor.key)

        return turn


async def interleave(
    plan: list[tuple[int, str]], latencies_ms: list[int], member: bool, grace_s: float
) -> Watched:
    watched = Watched()
    real_turn = MailboxActor.turn
    MailboxActor.turn = watched.wrap(real_turn)  # type: ignore[method-assign]
    log = LatentLog(latencies_ms)
    try:
        async with running_registry(log, passivate_after_s=10, idle_grace_s=grace_s) as registry:
            joined = await join_and_sync(registry, "g", "a") if member else None
            issued: list[Any] = []
            answers: dict[int, Any] = {}

            async def ask(index: int, op: Any) -> None:
                watched.callers.add(trio.lowlevel.current_task())
                issued.append(op)  # no checkpoint before the op enters the actor
                answers[index] = await registry.ask(G, op)

            with trio.fail_after(3600):
                async with trio.open_nursery() as callers:
                    for index, (delay_ms, kind) in enumerate(plan):
                        pause = SESSION_MS / 1000 + 1 if delay_ms == EXPIRE else delay_ms / 1000
                        await trio.sleep(pause)
                        if kind == "heartbeat" and joined is not None:
                            op: Any = heartbeat_op("g", joined)
                        else:
                            op = commit_op("g", index % 2, index, joined)
                        callers.start_soon(ask, index, op)
            asked = [id(op) for op in issued]
            assert [id(op) for op in watched.stepped if id(op) in set(asked)] == asked
            committed: dict[int, int] = {}
            for index, op in enumerate(issued):
                if hasattr(op, "offsets") and commit_error(answers[index]) == OK:
                    committed[index % 2] = index
            assert offsets_of(await registry.ask(G, fetch_op("g"))) == committed
        assert await reread(log, "g") == committed
    finally:
        MailboxActor.turn = real_turn  # type: ignore[method-assign]
    return watched


@fuzz_settings(examples(60), deadline_ms=None)
@given(
    plan=st.lists(
        st.tuples(
            st.one_of(st.integers(0, 3), st.just(EXPIRE)), st.sampled_from(["commit", "heartbeat"])
        ),
        min_size=1,
        max_size=16,
    ),
    latencies_ms=st.lists(st.integers(0, 4), min_size=1, max_size=6),
    member=st.booleans(),
    grace_s=st.sampled_from([0.0, 1.0]),
)
@example(  # requests queued behind a turn on the asking task, whose append takes 3 ms
    plan=[(0, "commit"), (1, "commit"), (0, "commit"), (2, "heartbeat"), (0, "commit")],
    latencies_ms=[3],
    member=True,
    grace_s=1.0,
)
def test_turns_are_exclusive_and_in_the_order_asked(
    plan: list[tuple[int, str]], latencies_ms: list[int], member: bool, grace_s: float
) -> None:
    trio.run(
        interleave,
        plan,
        latencies_ms,
        member,
        grace_s,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )

"""Group actors on trio's MockClock: every timeout is a deadline the actor computes, and faults
(an actor that raises, a caller cancelled mid-join, a full mailbox) stay contained."""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.actors import coordinator_log, group_actor
from rafka_actors.actors import registry as registry_module
from rafka_actors.actors.coordinator_log import MemoryCoordinatorLog
from rafka_actors.actors.durable_log import CoordinatorLogError
from rafka_actors.actors.group_actor import Envelope, GroupActor
from rafka_actors.actors.registry import GroupRegistry
from rafka_actors.coordinator import machine
from rafka_actors.group.consumer_protocol import encode_subscription
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    ConsumerGroupDescribeOp,
    DeleteGroupOp,
    DescribeGroupOp,
    HeartbeatOp,
    JoinGroupOp,
    JoinGroupOpResp,
    LeaveGroupOp,
    OffsetCommitOp,
    OffsetFetchOp,
    SyncGroupOp,
)
from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey

from ..task_counter import counting_tasks

PROTOCOLS = (("range", encode_subscription(["t"])),)
SESSION, REBALANCE = 10_000, 30_000


def join_op(member: str = "", new_id: str = "m", group: str = "g", **kw: Any) -> JoinGroupOp:
    return JoinGroupOp(
        group_id=group,
        member_id=member,
        protocol_type="consumer",
        session_timeout_ms=SESSION,
        rebalance_timeout_ms=REBALANCE,
        protocols=PROTOCOLS,
        require_known_member_id=False,
        new_member_id=new_id,
        **kw,
    )


@pytest.fixture
async def registry() -> AsyncIterator[GroupRegistry]:
    """Tests using it also request `autojump_clock` themselves: pytest-trio only installs the
    mock clock for a test that names the fixture directly."""
    async with trio.open_nursery() as nursery:
        yield GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=3000), MemoryCoordinatorLog()
        )
        nursery.cancel_scope.cancel()


K = GroupKey(0, "g")


async def join_and_sync(registry: GroupRegistry, member: str = "m") -> JoinGroupOpResp:
    joined = await registry.ask(K, join_op(new_id=member))
    assert joined.error_code == ErrorCode.none
    synced = await registry.ask(
        K, SyncGroupOp("g", joined.member_id, joined.generation_id, ((joined.member_id, b"a"),))
    )
    assert synced.error_code == ErrorCode.none
    return joined


async def test_initial_rebalance_delay_is_a_deadline(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    joined = await registry.ask(K, join_op())
    assert joined.error_code == ErrorCode.none and joined.generation_id == 1
    assert trio.current_time() - start == pytest.approx(3.0)


async def test_join_completes_on_the_last_rejoin_not_on_a_timer(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    first = await join_and_sync(registry, "a")
    results: dict[str, Any] = {}

    async def second_joins() -> None:
        results["b"] = await registry.ask(K, join_op(new_id="b"))

    async def first_rejoins() -> None:
        await trio.sleep(1)
        results["a"] = await registry.ask(K, join_op(member=first.member_id))

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(second_joins)
        nursery.start_soon(first_rejoins)
    # completed when "a" rejoined at t+1s, long before the 30 s rebalance timeout
    assert trio.current_time() - start == pytest.approx(1.0)
    assert results["a"].generation_id == results["b"].generation_id == 2


async def test_silent_member_is_evicted_after_its_session_timeout(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    joined = await join_and_sync(registry)
    await trio.sleep(SESSION / 1000 - 1)
    ok = await registry.ask(K, HeartbeatOp("g", joined.member_id, joined.generation_id))
    assert ok.error_code == ErrorCode.none  # the heartbeat reset the timer
    await trio.sleep(SESSION / 1000 + 1)
    described = await registry.ask(K, DescribeGroupOp("g"))
    assert described.state == "Empty" and described.members == ()
    late = await registry.ask(K, HeartbeatOp("g", joined.member_id, joined.generation_id))
    assert late.error_code == ErrorCode.unknown_member_id


async def test_member_not_rejoining_is_dropped_at_rebalance_timeout(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    a = await join_and_sync(registry, "a")
    start = trio.current_time()
    heartbeat_errors: list[int] = []

    async def a_heartbeats_but_never_rejoins() -> None:
        while True:
            await trio.sleep(3)
            hb = await registry.ask(K, HeartbeatOp("g", a.member_id, a.generation_id))
            heartbeat_errors.append(hb.error_code)
            if hb.error_code == ErrorCode.unknown_member_id:
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(a_heartbeats_but_never_rejoins)
        b = await registry.ask(K, join_op(new_id="b"))
    assert trio.current_time() - start == pytest.approx(REBALANCE / 1000)
    assert b.error_code == ErrorCode.none and b.leader_id == b.member_id
    # 27 while the rebalance was prepared (and the session kept alive), then gone
    assert set(heartbeat_errors[:-1]) == {ErrorCode.rebalance_in_progress}
    assert heartbeat_errors[-1] == ErrorCode.unknown_member_id


async def test_members_that_never_sync_are_removed(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    joined = await registry.ask(K, join_op())
    assert joined.error_code == ErrorCode.none
    await trio.sleep(REBALANCE / 1000 + 1)  # no SyncGroup within the rebalance timeout
    described = await registry.ask(K, DescribeGroupOp("g"))
    assert described.members == ()


async def test_caller_cancelled_mid_join_leaves_no_stuck_waiter(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.move_on_after(1):
        await registry.ask(K, join_op())  # gives up while parked (initial delay is 3 s)
    await trio.sleep(5)
    actor = registry._actors[K]
    assert actor._waiters == {}  # answered (to nobody) when the join completed
    described = await registry.ask(K, DescribeGroupOp("g"))
    assert described.state == "CompletingRebalance"


async def test_a_failing_actor_answers_retriably_and_restarts_from_its_log(
    registry: GroupRegistry,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    await join_and_sync(registry)
    commit = OffsetCommitOp("g", (("t", 0, 42, -1, None),))
    other = GroupKey(0, "other")
    assert (await registry.ask(other, commit)).results == (("t", 0, 0),)
    real_handle = machine.handle

    def exploding(group: Any, op: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(op, OffsetFetchOp) and op.group_id == "g":
            raise RuntimeError("injected fault")
        return real_handle(group, op, *args, **kw)

    monkeypatch.setattr(machine, "handle", exploding)
    failed = await registry.ask(K, OffsetFetchOp("g", None))
    assert failed.error_code == ErrorCode.coordinator_not_available
    # the other group never noticed
    fetched = await registry.ask(other, OffsetFetchOp("other", None))
    assert fetched.offsets == (("t", 0, 42, -1, "", 0),)  # null metadata reads as ""
    monkeypatch.setattr(machine, "handle", real_handle)
    described = await registry.ask(K, DescribeGroupOp("g"))
    assert described.state == "Stable" and len(described.members) == 1  # rebuilt from the log


async def test_full_mailbox_applies_backpressure_and_loses_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemoryCoordinatorLog()
    answers: list[Any] = []
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=0), log, mailbox_size=1
        )

        async def commit(i: int) -> None:
            answers.append(await registry.ask(K, OffsetCommitOp("g", (("t", i, i, -1, None),))))

        async with trio.open_nursery() as clients:
            for i in range(50):
                clients.start_soon(commit, i)
        nursery.cancel_scope.cancel()  # the group's actor lives on (the group exists)
    assert len(answers) == 50
    assert all(a.results[0][2] == ErrorCode.none for a in answers)
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log)
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        nursery.cancel_scope.cancel()
    assert sorted(p for _, p, *_ in fetched.offsets) == list(range(50))


async def test_stopping_actor_answers_everything_it_holds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = GroupActor(K, GroupConfig(initial_rebalance_delay_ms=3000), MemoryCoordinatorLog())
    parked_send, parked_receive = trio.open_memory_channel[Any](1)
    queued_send, _queued_receive = trio.open_memory_channel[Any](1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        await actor.post(Envelope(join_op(), parked_send))  # parks for 3 s
        await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    # the queued one arrives after the stop and finds the mailbox closed
    with pytest.raises(trio.BrokenResourceError):
        await actor.post(Envelope(join_op(new_id="x"), queued_send))
    parked = parked_receive.receive_nowait()
    assert parked.error_code == ErrorCode.coordinator_not_available


async def test_empty_groups_are_passivated_and_rebuilt_from_the_log(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    await registry.ask(K, OffsetCommitOp("g", (("t", 0, 42, -1, "m"),)))
    await trio.sleep(0.1)
    assert K not in registry._actors  # an Empty group with no deadline holds no actor
    fetched = await registry.ask(K, OffsetFetchOp("g", None))
    assert fetched.offsets == (("t", 0, 42, -1, "m", 0),)
    joined = await join_and_sync(registry)  # a live group keeps its actor
    assert K in registry._actors
    assert (await registry.ask(K, DescribeGroupOp("g"))).members[0][0] == joined.member_id


async def test_an_idle_actor_lives_for_the_passivation_delay_then_stops(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A simple consumer committing now and then keeps its group's actor (no rebuild from the
    log per request); a group left alone for the delay gives its actor up."""
    spawned: list[GroupKey] = []
    spawn = GroupRegistry._spawn

    def counting_spawn(self: GroupRegistry, key: GroupKey) -> GroupActor:
        spawned.append(key)
        return spawn(self, key)

    monkeypatch.setattr(GroupRegistry, "_spawn", counting_spawn)
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        for offset in range(5):
            await registry.ask(K, OffsetCommitOp("g", (("t", 0, offset, -1, ""),)))
            await trio.sleep(9)  # each request restarts the idle clock
        assert spawned == [K] and K in registry._actors
        await trio.sleep(6)  # the sweeper passivates between 1 and 1.5 delays after the last
        assert K not in registry._actors
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 4, -1, "", fetched.offsets[0][5]),)
        assert spawned == [K, K]  # rebuilt from the log
        nursery.cancel_scope.cancel()


async def test_a_parked_actor_holds_no_request_it_has_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every live actor waits on its mailbox most of the time; the last request, its reply
    slot and Event would otherwise stay in memory once per active group."""

    class Reply:
        def send_nowait(self, value: Any) -> None:
            self.value = value

    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, ""),)))
        actor = registry._actors[K]
        reply = Reply()
        actor.post_nowait(Envelope(OffsetCommitOp("g", (("t", 0, 2, -1, ""),)), reply))
        await trio.sleep(1)  # answered, and the actor parked on its mailbox again
        assert reply.value.results == (("t", 0, 0),)
        answered = weakref.ref(reply)
        del reply
        gc.collect()
        assert answered() is None
        nursery.cancel_scope.cancel()


async def test_a_group_that_only_commits_and_fetches_never_starts_a_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A simple consumer's group is answered inline by a dormant actor: no trio task and no
    mailbox (about half a live group's memory). Its first request that must wait (a
    JoinGroup) wakes the same actor, offsets and all."""
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        sweeper_only = len(nursery.child_tasks)
        for offset in range(3):
            await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, offset, -1, ""),)))
            fetched = await registry.ask_light(K, OffsetFetchOp("g", None))
            assert fetched.offsets == (("t", 0, offset, -1, "", 0),)
        actor = registry._actors[K]
        assert actor.dormant and len(nursery.child_tasks) == sweeper_only
        joined = await join_and_sync(registry)
        assert registry._actors[K] is actor and not actor.dormant
        assert len(nursery.child_tasks) == sweeper_only + 1
        described = await registry.ask(K, DescribeGroupOp("g"))
        assert described.members[0][0] == joined.member_id
        fetched = await registry.ask_light(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 2, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_a_dormant_actor_is_dropped_after_the_passivation_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, 5, -1, ""),)))
        await trio.sleep(9)
        assert registry._actors[K].dormant
        await trio.sleep(7)  # the sweeper drops it between 1 and 1.5 delays after the commit
        assert K not in registry._actors
        fetched = await registry.ask_light(K, OffsetFetchOp("g", None))  # from the log
        assert fetched.offsets == (("t", 0, 5, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_a_dropped_dormant_actor_is_freed_before_the_next_sweep(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The sweep's list of actors must not outlive its pass: held while the sweeper sleeps,
    it kept every actor it dropped (100 000 groups' objects) alive for another half delay."""
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, 5, -1, ""),)))
        dropped = weakref.ref(registry._actors[K])
        await trio.sleep(16)  # dropped by the sweep at 15; the next one comes at 20
        assert K not in registry._actors
        gc.collect()
        assert dropped() is None
        nursery.cancel_scope.cancel()


async def test_the_passivation_sweep_lets_requests_in_between_its_chunks(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dropping 100 000 dormant actors in one pass stalled every request for a quarter of a
    second; the sweep checkpoints after each chunk, and judges each actor when it gets to it."""
    monkeypatch.setattr(registry_module, "SWEEP_CHUNK", 2)
    keys = [GroupKey(0, f"g{i}") for i in range(5)]
    seen_between: list[int] = []
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await trio.sleep(1)
        for key in keys:
            await registry.ask_light(key, OffsetCommitOp(key.group_id, (("t", 0, 1, -1, ""),)))
        last = registry._actors[keys[4]]  # in the sweep's last chunk
        assert all(registry._actors[key].dormant for key in keys)

        async def probe() -> None:
            await trio.sleep_until(15)  # with the sweep, the first to find them idle for 10 s
            while len(registry._actors) == 5:
                await trio.lowlevel.checkpoint()
            seen_between.append(len(registry._actors))
            await registry.ask_light(keys[4], OffsetFetchOp("g4", None))

        nursery.start_soon(probe)
        await trio.sleep(15)
        assert seen_between in ([3], [1])  # a request came in while the sweep was under way
        assert list(registry._actors) == [keys[4]]
        assert registry._actors[keys[4]] is last  # used during the sweep: kept, not rebuilt
        nursery.cancel_scope.cancel()


async def test_with_immediate_passivation_a_dormant_actor_leaves_nothing_behind(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    """Reads of unknown groups and a simple consumer's commits hold no actor afterwards,
    and never started a task to stop."""
    with counting_tasks() as tasks:
        for i in range(3):
            key = GroupKey(0, f"unknown-{i}")
            fetched = await registry.ask_light(key, OffsetFetchOp(key.group_id, None))
            assert fetched.offsets == () and key not in registry._actors
        await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, 7, -1, ""),)))
        assert K not in registry._actors
        assert (await registry.ask_light(K, OffsetFetchOp("g", None))).offsets[0][2] == 7
    assert tasks.spawned == 0


async def test_describing_groups_nobody_uses_starts_no_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A lag exporter describes and fetches every group every few seconds: that must not
    give every group a running actor for good (7 KB each instead of 2.5)."""
    nobody = GroupKey(0, "nobody")
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, 1, -1, ""),)))
        with counting_tasks() as tasks:
            classic = await registry.ask_light(K, DescribeGroupOp("g"))
            consumer = await registry.ask_light(K, ConsumerGroupDescribeOp("g"))
            unknown = await registry.ask_light(nobody, DescribeGroupOp("nobody"))
        assert tasks.spawned == 0
        assert (classic.error_code, classic.state, classic.members) == (0, "Empty", ())
        assert consumer.error_code == ErrorCode.group_id_not_found  # not a consumer group
        assert (unknown.error_code, unknown.state) == (0, "Dead")
        assert registry._actors[K].dormant and registry._actors[nobody].dormant
        nursery.cancel_scope.cancel()


async def test_a_describe_is_not_answered_inline_past_a_due_deadline(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    """The timer goes first: a member whose session ran out is not described as alive."""
    await join_and_sync(registry)
    await trio.testing.wait_all_tasks_blocked()
    actor = registry._actors[K]
    autojump_clock.jump(SESSION / 1000 + 1)  # the session deadline passed; the actor sleeps on
    assert actor.answer_inline(DescribeGroupOp("g")) is None
    await trio.testing.wait_all_tasks_blocked()  # the actor wakes and expires the member
    described = await registry.ask_light(K, DescribeGroupOp("g"))
    assert (described.state, described.members) == ("Empty", ())


async def test_a_dormant_actor_holding_a_commit_for_the_log_is_kept_and_woken_by_mail(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A first commit under fsync `always` (a held log) holds a dormant actor: the sweeper
    must not drop it meanwhile (a fresh actor would read the log without the commit), and a
    JoinGroup arriving meanwhile wakes it and is stepped after the commit is stored."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any, light: bool) -> None:
            answers[name] = await (registry.ask_light if light else registry.ask)(K, op)

        nursery.start_soon(ask, "commit", OffsetCommitOp("g", (("t", 0, 3, -1, ""),)), True)
        await trio.testing.wait_all_tasks_blocked()
        actor = registry._actors[K]
        assert actor.dormant and actor._held is not None
        await trio.sleep(30)  # three sweeps
        assert registry._actors[K] is actor
        nursery.start_soon(ask, "join", join_op(), False)
        await trio.testing.wait_all_tasks_blocked()
        assert not actor.dormant and answers == {}
        log.release.set()
        await trio.sleep(4)  # the initial rebalance delay
        assert answers["commit"].results == (("t", 0, ErrorCode.none),)
        assert answers["join"].error_code == ErrorCode.none
        assert registry._actors[K] is actor
        fetched = await registry.ask_light(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 3, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_listing_groups_without_actors_reads_the_log_once_and_never_a_stale_summary(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A lag exporter lists every group every few seconds: a group without an actor is read
    from the log once (without its offsets), and its summary is renewed from the group of
    every actor that goes, so it is never stale and a sweep does not make it read again."""

    class CountingLog(MemoryCoordinatorLog):
        reads = 0

        def records_of(self, key: GroupKey) -> list[Any]:
            self.reads += 1
            return super().records_of(key)

        def membership_of(self, key: GroupKey) -> list[Any]:
            self.reads += 1
            return super().membership_of(key)

    def listed() -> dict[str, tuple[str, str]]:
        return {s.group_id: (s.state, s.protocol_type) for s in registry.summaries(0)}

    log = CountingLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=0), log, passivate_after_s=10
        )
        for group in ("g", "s"):
            await registry.ask_light(
                GroupKey(0, group), OffsetCommitOp(group, (("t", 0, 1, -1, ""),))
            )
        await trio.sleep(16)  # both actors dropped
        log.reads = 0
        assert listed() == {"g": ("Empty", ""), "s": ("Empty", "")}
        assert log.reads == 2
        assert listed() == {"g": ("Empty", ""), "s": ("Empty", "")}
        assert log.reads == 2  # the second listing read nothing
        await registry.expire_offsets(3_600_000)  # visits both groups and changes neither
        swept = log.reads
        assert listed() == {"g": ("Empty", ""), "s": ("Empty", "")}
        assert log.reads == swept  # the summaries were renewed as the sweep's actors went
        joined = await join_and_sync(registry)
        assert listed()["g"] == ("Stable", "consumer")
        await registry.ask(K, LeaveGroupOp("g", ((joined.member_id, None, None),)))
        await trio.sleep(16)
        assert K not in registry._actors
        assert listed() == {"g": ("Empty", "consumer"), "s": ("Empty", "")}
        deleted = await registry.ask(K, DeleteGroupOp("g"))
        assert deleted.error_code == ErrorCode.none
        await trio.sleep(16)
        assert K not in registry._actors and K not in registry._summaries  # nothing kept
        assert listed() == {"s": ("Empty", "")}
        nursery.cancel_scope.cancel()


async def test_resume_starts_groups_with_members_without_reading_offsets(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At start-up only who the members are matters: offsets (most of a big log) are left
    in the view, and simple groups get no actor."""

    class CountingLog(MemoryCoordinatorLog):
        full_reads = 0

        def records_of(self, key: GroupKey) -> list[Any]:
            self.full_reads += 1
            return super().records_of(key)

    log = CountingLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(initial_rebalance_delay_ms=0), log)
        await join_and_sync(registry)
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 7, -1, ""),)))
        for i in range(3):  # simple groups: offsets and no members
            await registry.ask(
                GroupKey(0, f"s{i}"), OffsetCommitOp(f"s{i}", (("t", 0, i, -1, ""),))
            )
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log)
        log.full_reads = 0
        assert registry.resume() == 1
        assert log.full_reads == 1  # the resumed group's actor reads its own, nobody else's
        assert list(registry._actors) == [K]
        nursery.cancel_scope.cancel()


async def test_cgp_id_is_minted_once_and_survives_passivation_and_rejoin(
    registry: GroupRegistry,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A `cgp_` id is minted only when a step starts without a group and may create one,
    not per request (not for a read of an unknown group)."""
    minted: list[str] = []

    def mint() -> str:
        minted.append(f"cgp_{len(minted):026d}")
        return minted[-1]

    monkeypatch.setattr(group_actor, "mint_group_uuid", mint)
    await registry.ask(K, DescribeGroupOp("g"))  # no group, and a describe creates none
    await registry.ask_light(K, OffsetFetchOp("g", None))
    joined = await join_and_sync(registry)
    for _ in range(5):
        await registry.ask(K, HeartbeatOp("g", joined.member_id, joined.generation_id))
    await registry.ask(K, LeaveGroupOp("g", ((joined.member_id, None, None),)))
    await trio.sleep(0.1)
    assert K not in registry._actors  # passivated: the next ask rebuilds it from the log
    rejoined = await join_and_sync(registry)
    described = await registry.ask(K, DescribeGroupOp("g"))
    assert rejoined.generation_id > joined.generation_id
    assert minted == ["cgp_" + "0" * 26]  # the join that created the group
    assert described.cgp_id == minted[0]


class HeldLog(MemoryCoordinatorLog):
    """A log whose appends wait for `release`: an fsync that takes its time."""

    def __init__(self) -> None:
        super().__init__()
        self.release = trio.Event()

    async def append(self, key: GroupKey, records: Any, *, shielded: bool = False) -> None:
        with trio.CancelScope(shield=shielded):
            await self.release.wait()
        await super().append(key, records, shielded=shielded)

    def writable_now(self) -> bool:
        return False  # every append waits for `release`


async def test_an_idle_actor_answers_reads_without_a_task_switch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 42, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()  # the actor is back at its mailbox
        with trio.testing.assert_no_checkpoints():
            fetched = await registry.ask_light(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 42, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_a_read_never_sees_an_offset_before_the_log_has_it() -> None:
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log)
        committed: list[Any] = []

        async def commit() -> None:
            committed.append(await registry.ask(K, OffsetCommitOp("g", (("t", 0, 42, -1, None),))))

        nursery.start_soon(commit)
        await trio.testing.wait_all_tasks_blocked()  # the actor is inside append()
        reads: list[Any] = []

        async def read() -> None:
            reads.append(await registry.ask_light(K, OffsetFetchOp("g", None)))

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert not committed and not reads  # the read waits its turn in the mailbox
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert committed[0].results == (("t", 0, 0),)
        assert reads[0].offsets == (("t", 0, 42, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_a_deadline_that_fell_due_goes_before_the_queued_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The actor takes a queued envelope without waiting, but never ahead of a due timer: a
    session that expired while the actor was busy is expired before a late heartbeat."""
    log = HeldLog()
    log.release.set()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(initial_rebalance_delay_ms=0), log)
        joined = await join_and_sync(registry)
        log.release = trio.Event()
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any) -> None:
            answers[name] = await registry.ask(K, op)

        commit = OffsetCommitOp(
            "g", (("t", 0, 7, -1, None),), joined.member_id, joined.generation_id
        )
        nursery.start_soon(ask, "commit", commit)
        await trio.testing.wait_all_tasks_blocked()  # the actor is inside append()
        await trio.sleep(SESSION / 1000 + 1)  # the member's session runs out meanwhile
        nursery.start_soon(ask, "heartbeat", HeartbeatOp("g", joined.member_id, 1))
        await trio.testing.wait_all_tasks_blocked()  # queued behind the commit
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert answers["commit"].results == (("t", 0, ErrorCode.none),)
        assert answers["heartbeat"].error_code == ErrorCode.unknown_member_id
        nursery.cancel_scope.cancel()


async def test_an_idle_actor_answers_heartbeats_inline_and_sessions_still_expire(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    joined = await join_and_sync(registry)
    beat = HeartbeatOp("g", joined.member_id, joined.generation_id)
    start = trio.current_time()
    await trio.sleep(5)
    await trio.testing.wait_all_tasks_blocked()  # the actor waits for its deadline
    with trio.testing.assert_no_checkpoints():
        assert (await registry.ask_light(K, beat)).error_code == ErrorCode.none
    # the inline heartbeat moved the session to start + 15 s: still a member at 14 s ...
    await trio.sleep_until(start + SESSION / 1000 + 4)
    assert len((await registry.ask(K, DescribeGroupOp("g"))).members) == 1
    # ... and gone once it passed, with no request to wake the actor
    await trio.sleep_until(start + SESSION / 1000 + 5.5)
    assert (await registry.ask(K, DescribeGroupOp("g"))).members == ()


async def test_a_heartbeat_after_a_due_deadline_is_not_answered_inline(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    """The clock passed the session while the actor has not run yet: the heartbeat goes
    through the mailbox (a checkpoint), so it can't move the session ahead of the timer."""
    joined = await join_and_sync(registry)
    beat = HeartbeatOp("g", joined.member_id, joined.generation_id)
    await trio.testing.wait_all_tasks_blocked()
    autojump_clock.jump(SESSION / 1000 - 1)
    with trio.testing.assert_no_checkpoints():  # not due yet: inline
        await registry.ask_light(K, beat)
    await trio.testing.wait_all_tasks_blocked()
    autojump_clock.jump(SESSION / 1000 + 1)  # no checkpoint since: the actor is still parked
    with trio.testing.assert_checkpoints():
        await registry.ask_light(K, beat)


async def test_a_parked_actor_with_mail_coming_answers_nothing_inline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Envelopes posted and not yet taken (handed to the parked receive, or queued behind
    it) go first: a fetch is answered inline only once the actor has taken them."""
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await _no_inline_answer_while_mail_is_coming(registry)
        nursery.cancel_scope.cancel()


async def _no_inline_answer_while_mail_is_coming(registry: GroupRegistry) -> None:
    await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, ""),)))
    await trio.testing.wait_all_tasks_blocked()
    actor = registry._actors[K]
    fetch, group = OffsetFetchOp("g", None), actor.group
    assert actor.answer_inline(fetch) is not None  # parked, nothing posted
    assert actor.answers_fetch_again(group, trio.current_time())  # (gateway/fetch_repeat.py)
    replies, answered = trio.open_memory_channel[Any](2)
    actor.post_nowait(Envelope(OffsetCommitOp("g", (("t", 0, 2, -1, ""),)), replies))
    assert actor.answer_inline(fetch) is None  # handed to the parked receive, not yet taken
    assert not actor.answers_fetch_again(group, trio.current_time())
    actor.post_nowait(Envelope(OffsetCommitOp("g", (("t", 0, 3, -1, ""),)), replies))
    assert actor.answer_inline(fetch) is None
    assert not actor.answers_fetch_again(group, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    assert [answered.receive_nowait().results for _ in range(2)] == [(("t", 0, 0),)] * 2
    answer = actor.answer_inline(fetch)
    assert answer is not None and answer.offsets[0][2] == 3
    assert actor.answers_fetch_again(actor.group, trio.current_time())
    assert not actor.answers_fetch_again(None, trio.current_time())  # not the group it holds


class FailingLog(MemoryCoordinatorLog):
    """A log whose writes fail once `broken` is set (a full disk)."""

    broken = False

    def append_now(self, key: GroupKey, records: Any) -> None:
        if self.broken:
            raise CoordinatorLogError("injected: no space left on device")
        super().append_now(key, records)


async def test_an_idle_actor_stores_a_commit_inline_and_the_log_has_it_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemoryCoordinatorLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        joined = await join_and_sync(registry)
        await trio.testing.wait_all_tasks_blocked()  # the actor waits for the session deadline
        commit = OffsetCommitOp(
            "g", (("t", 0, 7, -1, None),), joined.member_id, joined.generation_id
        )
        with trio.testing.assert_no_checkpoints():
            answer = await registry.ask_light(K, commit)
        assert answer.results == (("t", 0, ErrorCode.none),)
        assert [r.offset for r in log.records_of(K) if isinstance(r, OffsetCommitRecord)] == [7]
        fetched = await registry.ask_light(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 7, -1, "", 0),)
        # a member's commit counts as a heartbeat (Kafka's doCommitOffsets), inline too
        await trio.sleep(SESSION / 1000 - 1)
        await registry.ask_light(K, commit)
        await trio.sleep(SESSION / 1000 - 1)
        assert len((await registry.ask(K, DescribeGroupOp("g"))).members) == 1
        await trio.sleep(2)
        assert (await registry.ask(K, DescribeGroupOp("g"))).members == ()
        nursery.cancel_scope.cancel()


async def test_a_commit_waits_its_turn_when_the_log_cannot_write_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under fsync `always` (here: a held log) the write waits: the commit is not answered
    without a checkpoint (answer_durably waits for the log in the caller's task)."""
    log = HeldLog()
    log.release.set()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        commit = OffsetCommitOp("g", (("t", 0, 1, -1, None),))
        await registry.ask(K, commit)
        await trio.testing.wait_all_tasks_blocked()
        with trio.testing.assert_checkpoints():
            await registry.ask_light(K, commit)
        nursery.cancel_scope.cancel()


async def _parked_actor_with_a_commit(registry: GroupRegistry, log: HeldLog) -> GroupActor:
    """The group's actor, parked on its empty mailbox after a first stored commit (offset 1);
    `log.release` is cleared again, so the next append waits."""
    log.release.set()
    await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, None),)))
    await trio.testing.wait_all_tasks_blocked()
    log.release = trio.Event()
    actor = registry._actors[K]
    assert actor._parked
    return actor


async def test_a_commit_that_waits_for_the_log_is_stepped_in_the_callers_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under fsync `always` a commit to a parked actor skips the mailbox round trip: the
    caller's task holds the group while the log stores the records, then answers."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        actor = await _parked_actor_with_a_commit(registry, log)
        posted = actor._posted
        answers: list[Any] = []

        async def commit() -> None:
            answers.append(
                await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, 2, -1, None),)))
            )

        nursery.start_soon(commit)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [] and actor._posted == posted  # waiting for the log, not the actor
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert answers[0].results == (("t", 0, ErrorCode.none),)
        assert actor._posted == posted
        assert [r.offset for r in log.records_of(K) if isinstance(r, OffsetCommitRecord)] == [2]
        fetched = await registry.ask_light(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 2, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_while_a_commit_holds_the_group_everything_else_waits_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Nothing is answered inline while the group is held, and what reaches the mailbox
    meanwhile is stepped after the held commit: no read sees its offset before the log has
    it, and a later commit is not overtaken."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        await _parked_actor_with_a_commit(registry, log)
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any) -> None:
            answers[name] = await registry.ask_light(K, op)

        nursery.start_soon(ask, "held", OffsetCommitOp("g", (("t", 0, 2, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "read", OffsetFetchOp("g", None))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "later", OffsetCommitOp("g", (("t", 0, 3, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()
        assert answers == {}  # the read did not get offset 1 inline, nor 2 early
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert answers["held"].results == answers["later"].results == (("t", 0, 0),)
        assert answers["read"].offsets == (("t", 0, 2, -1, "", 0),)
        latest = [r.offset for r in log.records_of(K) if isinstance(r, OffsetCommitRecord)]
        assert latest == [3]  # the later commit was stepped after the held one
        nursery.cancel_scope.cancel()


class QueuedThenHeldLog(HeldLog):
    """As the durable log does: the records are queued for the log at once, and the append
    then waits for `release` (their fsync)."""

    async def append(self, key: GroupKey, records: Any, *, shielded: bool = False) -> None:
        await MemoryCoordinatorLog.append(self, key, records, shielded=shielded)
        with trio.CancelScope(shield=shielded):
            await self.release.wait()


async def test_a_holding_caller_cancelled_mid_wait_holds_the_group_until_the_log_has_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The client may hang up while its commit waits for the fsync. The records are queued
    for the log by then and the group already holds the offset, so the wait is shielded:
    the group stays held, and nobody reads the offset, until the log has it."""
    log = QueuedThenHeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        actor = await _parked_actor_with_a_commit(registry, log)
        reads: list[Any] = []

        async def read() -> None:
            reads.append(await registry.ask_light(K, OffsetFetchOp("g", None)))

        before_release: list[tuple[int, bool]] = []
        with trio.CancelScope() as scope:

            async def cancel_read_release() -> None:
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()  # while the caller waits for the log
                nursery.start_soon(read)
                await trio.testing.wait_all_tasks_blocked()
                before_release.append((len(reads), actor._held is not None))
                log.release.set()

            nursery.start_soon(cancel_read_release)
            await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, 2, -1, None),)))
            await trio.lowlevel.checkpoint()
        assert scope.cancelled_caught
        assert before_release == [(0, True)]  # still held, nothing read, until the log is done
        await trio.testing.wait_all_tasks_blocked()
        assert actor._held is None
        assert reads[0].offsets == (("t", 0, 2, -1, "", 0),)
        nursery.cancel_scope.cancel()


class BreakableHeldLog(HeldLog):
    """A held log whose appends fail after their wait once `broken` is set (a failed fsync)."""

    broken = False

    async def append(self, key: GroupKey, records: Any, *, shielded: bool = False) -> None:
        with trio.CancelScope(shield=shielded):
            await self.release.wait()
        if self.broken:
            raise CoordinatorLogError("injected: fsync failed")
        await super().append(key, records, shielded=shielded)


@pytest.mark.parametrize("log_class", [FailingLog, BreakableHeldLog], ids=["inline", "held"])
async def test_a_commit_stepped_by_its_caller_that_cannot_be_stored_is_not_acknowledged(
    autojump_clock: trio.testing.MockClock, log_class: type[FailingLog | BreakableHeldLog]
) -> None:
    """Answered inline (the write fails) or held for the log (the fsync fails)."""
    log = log_class()
    if isinstance(log, HeldLog):
        log.release.set()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()
        log.broken = True
        failed = await registry.ask_light(K, OffsetCommitOp("g", (("t", 0, 2, -1, None),)))
        assert failed.results == (("t", 0, ErrorCode.coordinator_not_available),)
        assert registry._actors[K]._held is None
        log.broken = False
        # the actor rebuilt the group from the log: the unstored offset is gone
        fetched = await registry.ask_light(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 1, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_an_inline_step_that_sets_a_deadline_wakes_an_actor_waiting_without_one(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No commit sets a deadline on a group without one today; the actor must still learn of
    any deadline an inline step sets, or it would sleep through it."""
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        commit = OffsetCommitOp("g", (("t", 0, 1, -1, None),))
        await registry.ask(K, commit)
        await trio.testing.wait_all_tasks_blocked()
        actor = registry._actors[K]
        assert actor._parked and actor._wait is None  # no deadline: waiting without a scope
        woken = coordinator_log.now_ms() + 5_000
        monkeypatch.setattr(machine, "deadline_after", lambda *_: woken)
        await registry.ask_light(K, commit)
        await trio.testing.wait_all_tasks_blocked()
        assert actor._wait is not None and actor._wait.deadline == coordinator_log.trio_time(woken)
        nursery.cancel_scope.cancel()


async def test_an_actor_left_idle_by_an_inline_step_stops_when_passivation_is_immediate(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), MemoryCoordinatorLog())
        monkeypatch.setattr(machine, "passivable", lambda _group: False)
        commit = OffsetCommitOp("g", (("t", 0, 1, -1, None),))
        await registry.ask(K, commit)
        await trio.testing.wait_all_tasks_blocked()
        assert K in registry._actors  # not idle (so the patch says): it waits for mail
        monkeypatch.setattr(machine, "passivable", lambda _group: True)
        await registry.ask_light(K, commit)
        await trio.testing.wait_all_tasks_blocked()
        assert K not in registry._actors
        nursery.cancel_scope.cancel()

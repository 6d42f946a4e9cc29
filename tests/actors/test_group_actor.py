"""Group actors on trio's MockClock: every timeout is a deadline the actor computes, and faults
(an actor that raises, a caller cancelled mid-join, a full mailbox) stay contained."""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.actors import actor_registry as registry_module
from rafka_actors.actors import group_actor
from rafka_actors.actors.group_actor import GroupSettings, new_group_actor
from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.mailbox_actor import Envelope, MailboxActor
from rafka_actors.classic_group.consumer_protocol import encode_subscription
from rafka_actors.consumer_group.ops import ConsumerGroupDescribeOp
from rafka_actors.coordinator import machine
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
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
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.durable_log import CoordinatorLogError

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
    actor = registry._running[K]
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
        if isinstance(op, DescribeGroupOp) and op.group_id == "g":
            raise RuntimeError("injected fault")
        return real_handle(group, op, *args, **kw)

    monkeypatch.setattr(machine, "handle", exploding)
    failed = await registry.ask(K, DescribeGroupOp("g"))
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
        nursery.cancel_scope.cancel()
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
    settings = GroupSettings(GroupConfig(initial_rebalance_delay_ms=3000), MemoryCoordinatorLog())
    actor = new_group_actor(K, settings)
    parked_send, parked_receive = trio.open_memory_channel[Any](1)
    queued_send, _queued_receive = trio.open_memory_channel[Any](1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        await actor.mailbox.send(Envelope(join_op(), parked_send))  # parks for 3 s
        await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    # the queued one arrives after the stop and finds the mailbox closed
    with pytest.raises(trio.BrokenResourceError):
        await actor.mailbox.send(Envelope(join_op(new_id="x"), queued_send))
    parked = parked_receive.receive_nowait()
    assert parked.error_code == ErrorCode.coordinator_not_available


class CountingLog(MemoryCoordinatorLog):
    """Counts appends and full reads (a group rebuilt from its records)."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[int] = []  # records per append
        self.reads = 0

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        self.appends.append(len(records))
        await super().append(key, records)

    def records_of(self, key: GroupKey) -> list[Any]:
        self.reads += 1
        return super().records_of(key)


async def test_what_is_queued_is_stepped_together_with_one_append(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An actor that wakes takes everything queued and stores the records of all of it with
    one append (one fsync), and only then answers any of it."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        log.release.set()
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 0, -1, None),)))
        log.release = trio.Event()
        answers: list[Any] = []

        async def commit(partition: int) -> None:
            op = OffsetCommitOp("g", (("t", partition, 1, -1, None),))
            answers.append(await registry.ask(K, op))

        nursery.start_soon(commit, 0)  # taken alone, then waits for the log
        await trio.testing.wait_all_tasks_blocked()
        for partition in range(1, 6):  # queued meanwhile
            nursery.start_soon(commit, partition)
        await trio.testing.wait_all_tasks_blocked()
        appends_before = len(log.appended)
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert len(answers) == 6
        # the first alone, then the five queued meanwhile: one append
        assert log.appended[appends_before:] == [1, 5]
        nursery.cancel_scope.cancel()


async def test_an_idle_group_rests_then_is_passivated_and_rebuilt_from_the_log(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A simple consumer committing now and then: its actor stops once idle, but its group
    rests for the passivation delay, so the next request is not rebuilt from the log; a
    group left alone for the delay is dropped and rebuilt when asked again."""
    log = CountingLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        for offset in range(5):
            await registry.ask(K, OffsetCommitOp("g", (("t", 0, offset, -1, ""),)))
            assert registry.running() == 0 and registry.resting() == 1
            await trio.sleep(9)  # each request restarts the idle clock
        assert log.reads == 1  # read from the log once, at the first request
        await trio.sleep(6)  # the sweeper passivates between 1 and 1.5 delays after the last
        assert registry.resting() == 0 and len(registry) == 0
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 4, -1, "", fetched.offsets[0][5]),)
        assert log.reads == 2  # rebuilt from the log
        nursery.cancel_scope.cancel()


async def test_a_live_group_keeps_its_actor_and_an_empty_one_needs_none(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    await registry.ask(K, OffsetCommitOp("g", (("t", 0, 42, -1, "m"),)))
    assert registry.running() == 0  # an Empty group with no deadline holds no actor
    fetched = await registry.ask(K, OffsetFetchOp("g", None))
    assert fetched.offsets == (("t", 0, 42, -1, "m", 0),)
    joined = await join_and_sync(registry)  # a live group keeps its actor
    assert registry.running() == 1
    assert (await registry.ask(K, DescribeGroupOp("g"))).members[0][0] == joined.member_id


async def test_a_running_actor_holds_no_request_it_has_answered(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    """Every live actor waits on its mailbox most of the time; the last request, its reply
    slot and Event would otherwise stay in memory once per active group."""

    class Reply:
        def send_nowait(self, value: Any) -> None:
            self.value = value

    joined = await join_and_sync(registry)  # a member: the actor keeps running
    actor = registry._running[K]
    reply = Reply()
    op = OffsetCommitOp("g", (("t", 0, 2, -1, ""),), joined.member_id, joined.generation_id)
    actor.mailbox.send_nowait(Envelope(op, reply))
    await trio.sleep(1)  # answered, and the actor waits on its mailbox again
    assert reply.value.results == (("t", 0, 0),)
    answered = weakref.ref(reply)
    del reply
    gc.collect()
    assert answered() is None


async def test_the_passivation_sweep_lets_requests_in_between_its_chunks(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dropping 100 000 resting groups in one pass stalled every request for a quarter of a
    second; the sweep checkpoints after each chunk, and judges each group when it gets to it."""
    monkeypatch.setattr(registry_module, "SWEEP_CHUNK", 2)
    keys = [GroupKey(0, f"g{i}") for i in range(5)]
    seen_between: list[int] = []
    log = CountingLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        await trio.sleep(1)
        for key in keys:
            await registry.ask(key, OffsetCommitOp(key.group_id, (("t", 0, 1, -1, ""),)))
        assert registry.resting() == 5 and log.reads == 5

        async def probe() -> None:
            await trio.sleep_until(15)  # with the sweep, the first to find them idle for 10 s
            while registry.resting() == 5:
                await trio.lowlevel.checkpoint()
            seen_between.append(registry.resting())
            await registry.ask(keys[4], OffsetCommitOp("g4", (("t", 0, 2, -1, ""),)))

        nursery.start_soon(probe)
        await trio.sleep(15)
        assert seen_between in ([3], [1])  # a request came in while the sweep was under way
        assert list(registry._resting) == [keys[4]]
        assert log.reads == 5  # used during the sweep: kept, not rebuilt
        nursery.cancel_scope.cancel()


async def test_with_immediate_passivation_nothing_is_left_behind(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    """Reads of unknown groups and a simple consumer's commits hold nothing afterwards."""
    for i in range(3):
        key = GroupKey(0, f"unknown-{i}")
        fetched = await registry.ask(key, OffsetFetchOp(key.group_id, None))
        assert fetched.offsets == () and len(registry) == 0
    await registry.ask(K, OffsetCommitOp("g", (("t", 0, 7, -1, ""),)))
    assert len(registry) == 0
    assert (await registry.ask(K, OffsetFetchOp("g", None))).offsets[0][2] == 7


async def test_describing_groups_nobody_uses_keeps_no_actor_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A lag exporter describes and fetches every group every few seconds: that must not
    give every group a running actor for good."""
    nobody = GroupKey(0, "nobody")
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), MemoryCoordinatorLog(), passivate_after_s=10
        )
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, ""),)))
        classic = await registry.ask(K, DescribeGroupOp("g"))
        consumer = await registry.ask(K, ConsumerGroupDescribeOp("g"))
        unknown = await registry.ask(nobody, DescribeGroupOp("nobody"))
        assert (classic.error_code, classic.state, classic.members) == (0, "Empty", ())
        assert consumer.error_code == ErrorCode.group_id_not_found  # not a consumer group
        assert (unknown.error_code, unknown.state) == (0, "Dead")
        assert registry.running() == 0
        assert list(registry._resting) == [K]  # nothing kept of a group that does not exist
        nursery.cancel_scope.cancel()


async def test_a_describe_after_a_due_deadline_sees_the_timer_first(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    """The timer goes first: a member whose session ran out is not described as alive."""
    await join_and_sync(registry)
    await trio.testing.wait_all_tasks_blocked()
    autojump_clock.jump(SESSION / 1000 + 1)  # the session deadline passed; the actor sleeps on
    described = await registry.ask(K, DescribeGroupOp("g"))
    assert (described.state, described.members) == ("Empty", ())


async def test_a_group_whose_commit_waits_for_the_log_keeps_its_actor_through_sweeps(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A first commit waiting for a slow fsync keeps its actor running: the sweeper has no
    resting group to drop (a fresh actor would read the log without the commit), and a
    JoinGroup arriving meanwhile is stepped after the commit is stored."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(), log, passivate_after_s=10, commit_timeout_s=60
        )
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any) -> None:
            answers[name] = await registry.ask(K, op)

        nursery.start_soon(ask, "commit", OffsetCommitOp("g", (("t", 0, 3, -1, ""),)))
        await trio.testing.wait_all_tasks_blocked()
        actor = registry._running[K]
        await trio.sleep(30)  # three sweeps
        assert registry._running[K] is actor
        nursery.start_soon(ask, "join", join_op())
        await trio.testing.wait_all_tasks_blocked()
        assert answers == {}
        log.release.set()
        await trio.sleep(4)  # the initial rebalance delay
        assert answers["commit"].results == (("t", 0, ErrorCode.none),)
        assert answers["join"].error_code == ErrorCode.none
        assert registry._running[K] is actor
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 3, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_listing_groups_without_actors_reads_the_log_once_and_never_a_stale_summary(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A lag exporter lists every group every few seconds: a group without an actor is read
    from the log once (without its offsets), and its summary is renewed from the group of
    every actor that goes, so it is never stale and a sweep does not make it read again."""

    class ReadCountingLog(MemoryCoordinatorLog):
        reads = 0

        def records_of(self, key: GroupKey) -> list[Any]:
            self.reads += 1
            return super().records_of(key)

        def membership_of(self, key: GroupKey) -> list[Any]:
            self.reads += 1
            return super().membership_of(key)

    def listed() -> dict[str, tuple[str, str]]:
        return {s.group_id: (s.state, s.protocol_type) for s in registry.summaries(0)}

    log = ReadCountingLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=0), log, passivate_after_s=10
        )
        for group in ("g", "s"):
            await registry.ask(GroupKey(0, group), OffsetCommitOp(group, (("t", 0, 1, -1, ""),)))
        await trio.sleep(16)  # both groups dropped
        log.reads = 0
        assert listed() == {"g": ("Empty", ""), "s": ("Empty", "")}
        assert log.reads == 2
        assert listed() == {"g": ("Empty", ""), "s": ("Empty", "")}
        assert log.reads == 2  # the second listing read nothing
        await registry.expire_offsets(3_600_000)  # visits both groups and changes neither
        swept = log.reads
        assert listed() == {"g": ("Empty", ""), "s": ("Empty", "")}
        assert log.reads == swept  # the summaries were renewed as the sweep's groups went
        joined = await join_and_sync(registry)
        assert listed()["g"] == ("Stable", "consumer")
        await registry.ask(K, LeaveGroupOp("g", ((joined.member_id, None, None),)))
        await trio.sleep(16)
        assert K not in registry._running and K not in registry._resting
        assert listed() == {"g": ("Empty", "consumer"), "s": ("Empty", "")}
        deleted = await registry.ask(K, DeleteGroupOp("g"))
        assert deleted.error_code == ErrorCode.none
        await trio.sleep(16)
        assert len(registry) == 0 and K not in registry._summaries  # nothing kept
        assert listed() == {"s": ("Empty", "")}
        nursery.cancel_scope.cancel()


async def test_resume_starts_groups_with_members_without_reading_offsets(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At start-up only who the members are matters: offsets (most of a big log) are left
    in the view, and simple groups get no actor."""

    class FullReadCountingLog(MemoryCoordinatorLog):
        full_reads = 0

        def records_of(self, key: GroupKey) -> list[Any]:
            self.full_reads += 1
            return super().records_of(key)

    log = FullReadCountingLog()
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
        assert list(registry._running) == [K]
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
    await registry.ask(K, OffsetFetchOp("g", None))
    joined = await join_and_sync(registry)
    for _ in range(5):
        await registry.ask(K, HeartbeatOp("g", joined.member_id, joined.generation_id))
    await registry.ask(K, LeaveGroupOp("g", ((joined.member_id, None, None),)))
    await trio.sleep(0.1)
    assert len(registry) == 0  # passivated: the next ask rebuilds it from the log
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
        self.appended: list[int] = []  # records per append, once stored

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        await self.release.wait()
        self.appended.append(len(records))
        await super().append(key, records)


async def test_a_read_never_sees_an_offset_before_the_log_has_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A fetch is answered from the snapshot published after the last stored batch: while a
    commit waits for its fsync, a read sees the offset before it, and never the new one."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        log.release.set()
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 41, -1, None),)))
        log.release = trio.Event()
        committed: list[Any] = []

        async def commit() -> None:
            committed.append(await registry.ask(K, OffsetCommitOp("g", (("t", 0, 42, -1, None),))))

        nursery.start_soon(commit)
        await trio.testing.wait_all_tasks_blocked()  # the actor is inside append()
        before = await registry.ask(K, OffsetFetchOp("g", None))
        assert not committed and before.offsets == (("t", 0, 41, -1, "", 0),)
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert committed[0].results == (("t", 0, 0),)
        after = await registry.ask(K, OffsetFetchOp("g", None))
        assert after.offsets == (("t", 0, 42, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_a_deadline_that_fell_due_goes_before_the_queued_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The actor takes what is queued without waiting, but never ahead of a due timer: a
    session that expired while the actor was busy is expired before a late heartbeat."""
    log = HeldLog()
    log.release.set()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(
            nursery, GroupConfig(initial_rebalance_delay_ms=0), log, commit_timeout_s=60
        )
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


async def test_heartbeats_move_the_session_and_it_expires_with_no_request_to_wake_the_actor(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    joined = await join_and_sync(registry)
    beat = HeartbeatOp("g", joined.member_id, joined.generation_id)
    start = trio.current_time()
    await trio.sleep(5)
    assert (await registry.ask(K, beat)).error_code == ErrorCode.none
    # the heartbeat moved the session to start + 15 s: still a member at 14 s ...
    await trio.sleep_until(start + SESSION / 1000 + 4)
    assert len((await registry.ask(K, DescribeGroupOp("g"))).members) == 1
    # ... and gone once it passed, with no request to wake the actor
    await trio.sleep_until(start + SESSION / 1000 + 5.5)
    assert (await registry.ask(K, DescribeGroupOp("g"))).members == ()


async def test_a_commit_is_in_the_log_when_answered_and_a_members_commit_is_a_heartbeat(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemoryCoordinatorLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        joined = await join_and_sync(registry)
        commit = OffsetCommitOp(
            "g", (("t", 0, 7, -1, None),), joined.member_id, joined.generation_id
        )
        answer = await registry.ask(K, commit)
        assert answer.results == (("t", 0, ErrorCode.none),)
        assert [r.offset for r in log.records_of(K) if isinstance(r, OffsetCommitRecord)] == [7]
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 7, -1, "", 0),)
        # a member's commit counts as a heartbeat (Kafka's doCommitOffsets)
        await trio.sleep(SESSION / 1000 - 1)
        await registry.ask(K, commit)
        await trio.sleep(SESSION / 1000 - 1)
        assert len((await registry.ask(K, DescribeGroupOp("g"))).members) == 1
        await trio.sleep(2)
        assert (await registry.ask(K, DescribeGroupOp("g"))).members == ()
        nursery.cancel_scope.cancel()


async def test_while_a_commit_waits_for_the_log_later_requests_wait_their_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What reaches the mailbox while a commit waits for its fsync is stepped after it: a
    later commit is not overtaken, and no read sees the waiting offset early."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        log.release.set()
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, None),)))
        log.release = trio.Event()
        answers: dict[str, Any] = {}

        async def ask(name: str, op: Any) -> None:
            answers[name] = await registry.ask(K, op)

        nursery.start_soon(ask, "held", OffsetCommitOp("g", (("t", 0, 2, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "read", OffsetFetchOp("g", None))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "later", OffsetCommitOp("g", (("t", 0, 3, -1, None),)))
        await trio.testing.wait_all_tasks_blocked()
        assert answers.keys() == {"read"}
        assert answers["read"].offsets == (("t", 0, 1, -1, "", 0),)  # not 2 before it's stored
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert answers["held"].results == answers["later"].results == (("t", 0, 0),)
        latest = [r.offset for r in log.records_of(K) if isinstance(r, OffsetCommitRecord)]
        assert latest == [3]  # the later commit was stepped after the waiting one
        nursery.cancel_scope.cancel()


async def test_a_caller_that_gives_up_while_its_commit_waits_for_the_log_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The client may hang up while its commit waits for the fsync: the actor stores it all
    the same (its reply goes to nobody), and no read sees it before the log has it."""
    log = HeldLog()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        log.release.set()
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, None),)))
        log.release = trio.Event()
        with trio.move_on_after(1):
            await registry.ask(K, OffsetCommitOp("g", (("t", 0, 2, -1, None),)))
        before = await registry.ask(K, OffsetFetchOp("g", None))
        assert before.offsets == (("t", 0, 1, -1, "", 0),)
        log.release.set()
        await trio.testing.wait_all_tasks_blocked()
        after = await registry.ask(K, OffsetFetchOp("g", None))
        assert after.offsets == (("t", 0, 2, -1, "", 0),)
        nursery.cancel_scope.cancel()


class FailingLog(MemoryCoordinatorLog):
    """A log whose writes fail once `broken` is set (a full disk)."""

    broken = False

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        if self.broken:
            raise CoordinatorLogError("injected: no space left on device")
        await super().append(key, records)


class BreakableHeldLog(HeldLog):
    """A held log whose appends fail after their wait once `broken` is set (a failed fsync)."""

    broken = False

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        await self.release.wait()
        if self.broken:
            raise CoordinatorLogError("injected: fsync failed")
        await super().append(key, records)


@pytest.mark.parametrize("log_class", [FailingLog, BreakableHeldLog], ids=["write", "fsync"])
async def test_a_commit_that_cannot_be_stored_is_not_acknowledged(
    autojump_clock: trio.testing.MockClock, log_class: type[FailingLog | BreakableHeldLog]
) -> None:
    """The write fails, or the fsync after a wait: the caller gets a retriable error (Kafka's
    NOT_COORDINATOR, for a disk that refused its coordinator's write) and the group is rebuilt
    from what the log has."""
    log = log_class()
    if isinstance(log, HeldLog):
        log.release.set()
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), log, passivate_after_s=10)
        await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, None),)))
        log.broken = True
        failed = await registry.ask(K, OffsetCommitOp("g", (("t", 0, 2, -1, None),)))
        assert failed.results == (("t", 0, ErrorCode.not_coordinator),)
        log.broken = False
        # the actor rebuilt the group from the log: the unstored offset is gone
        fetched = await registry.ask(K, OffsetFetchOp("g", None))
        assert fetched.offsets == (("t", 0, 1, -1, "", 0),)
        nursery.cancel_scope.cancel()


async def test_an_actor_stops_once_idle(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trio.open_nursery() as nursery:
        registry = GroupRegistry(nursery, GroupConfig(), MemoryCoordinatorLog())
        monkeypatch.setattr(machine, "passivable", lambda _group: False)
        commit = OffsetCommitOp("g", (("t", 0, 1, -1, None),))
        await registry.ask(K, commit)
        await trio.testing.wait_all_tasks_blocked()
        assert K in registry._running  # not idle (so the patch says): it waits for mail
        monkeypatch.setattr(machine, "passivable", lambda _group: True)
        await registry.ask(K, commit)
        await trio.testing.wait_all_tasks_blocked()
        assert K not in registry._running
        nursery.cancel_scope.cancel()


async def test_a_read_of_a_group_never_stored_starts_no_actor(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer's committed() before its group's first commit, or a lag exporter asking
    about groups that do not exist: nothing is stored and no actor runs, so there is nothing
    to read and nobody changing it. A describe still goes to the actor (a step of the
    machine), and a group that exists is read from its snapshot."""
    started: list[GroupKey] = []
    start = GroupRegistry._start

    def counting_start(self: GroupRegistry, key: GroupKey) -> Any:
        started.append(key)
        return start(self, key)

    monkeypatch.setattr(GroupRegistry, "_start", counting_start)
    for i in range(3):
        key = GroupKey(0, f"nobody-{i}")
        fetched = await registry.ask(key, OffsetFetchOp(key.group_id, (("t", 0),)))
        assert fetched.offsets == (("t", 0, -1, -1, "", 0),)
    assert started == []
    await registry.ask(K, DescribeGroupOp("g"))
    assert started == [K]


async def test_a_group_whose_actor_died_is_listed_as_the_log_has_it(
    registry: GroupRegistry, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ListGroups keeps a summary of a group read from the log while it had no actor; an
    actor that dies (a bug outside its steps) must not leave that old summary to be listed."""
    await registry.ask(K, OffsetCommitOp("g", (("t", 0, 1, -1, ""),)))
    assert [(s.group_id, s.state, s.protocol_type) for s in registry.summaries(0)] == [
        ("g", "Empty", "")
    ]
    await join_and_sync(registry)

    def dying(self: MailboxActor[Any, Any]) -> None:
        raise RuntimeError("injected: the actor's loop itself fails")

    monkeypatch.setattr(MailboxActor, "_drain", dying)  # runs as the actor stops, for any reason
    monkeypatch.setattr(machine, "passivable", lambda _group: True)  # so it stops now
    await registry.ask(K, DescribeGroupOp("g"))
    await trio.testing.wait_all_tasks_blocked()
    assert registry.running() == 0
    assert [(s.group_id, s.state, s.protocol_type) for s in registry.summaries(0)] == [
        ("g", "Stable", "consumer")
    ]

"""Consumer groups end to end: the real broker, driven by the three real clients.

* Three members of one group share a 6-partition topic with every assignor each client has:
  every record is consumed exactly once and the final assignments partition the topic.
* A member SIGKILLed without LeaveGroup is evicted once its session times out, and the
  survivors take over its partitions (and consume what is produced afterwards).
* A new consumer resumes exactly at the offsets its group committed.
* A static member (group.instance.id) restarts and gets its partitions back without a
  rebalance of the other member.
* confluent-kafka's AdminClient lists, describes, reads and alters offsets of, and deletes
  groups.

Brokers run with a 200 ms initial rebalance delay and a 1 s minimum session timeout so that
members can use short session timeouts and every case stays within a few seconds.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions

from ..broker_process import BrokerProcess
from .clients import Confluent
from .group_clients import (
    HEARTBEAT_MS,
    SYNC_MEMBERS,
    WAIT,
    AioMember,
    ConfluentMember,
    MemberProcess,
    MemberThread,
    Pace,
    SyncMember,
    async_wait_until,
    close_members,
    duplicates,
    partitions_cover,
    produce_spread,
    start_members,
    wait_until,
)

pytestmark = pytest.mark.e2e

GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=200", "group.min.session.timeout.ms=1000")
PARTITIONS = 6
PER_PARTITION = 500  # 3 000 records in all
SETTLE = 0.5  # after everything arrived, keep polling this long so late duplicates show up


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    """conftest's `broker` (whose log is attached to failures), with the group settings."""
    return broker_factory(*GROUP_SETTINGS)


def _names(tag: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"topic-{tag}-{suffix}", f"group-{tag}-{suffix}"


def _topic(broker: BrokerProcess, tag: str, partitions: int = PARTITIONS) -> tuple[str, str]:
    topic, group = _names(tag)
    Confluent(broker.bootstrap).create_topic(topic, partitions)
    return topic, group


# -- 1. three members, every assignor -----------------------------------------------------
SHARE_CASES = [
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "sticky"),
    ("kafka-python", "cooperative-sticky"),
    ("aiokafka", "range"),
    ("aiokafka", "roundrobin"),
    ("aiokafka", "sticky"),
]


JOINS = ["together", "staggered"]
PACE = (20, 0.02)  # staggered members read slowly, so rebalances happen mid-stream
STEP = 300  # a staggered member joins once this many more records were consumed


def _check_share(values: list[bytes], expected: list[bytes], finals: list[frozenset[int]]) -> None:
    assert not duplicates(values), f"consumed twice: {duplicates(values)[:5]}"
    assert len(values) == len(expected)
    assert set(values) == set(expected)
    assert partitions_cover(finals, PARTITIONS), f"final assignments {finals}"
    assert sorted(len(f) for f in finals) == [2, 2, 2], f"unbalanced: {finals}"


@pytest.mark.parametrize("join", JOINS)
@pytest.mark.parametrize(("client", "assignor"), SHARE_CASES)
def test_three_members_share_the_topic(
    broker: BrokerProcess, client: str, assignor: str, join: str
) -> None:
    """`together`: all three join within the initial rebalance delay (one generation).
    `staggered`: each joins while the others are consuming, so every join is a rebalance in
    which the owners commit what they read (on revoke) before their partitions move."""
    topic, group = _topic(broker, f"share-{assignor}")
    expected = produce_spread(broker.bootstrap, topic, PARTITIONS, PER_PARTITION, "r")
    if client == "aiokafka":
        run = _share_aiokafka(broker.bootstrap, group, topic, assignor, join)
        values, finals = asyncio.run(run)
    else:
        member = SYNC_MEMBERS[client]

        def make() -> SyncMember:
            return member(broker.bootstrap, group, topic, assignor=assignor)

        threads: list[MemberThread] = []
        consumed = lambda: sum(len(t.records) for t in threads)  # noqa: E731
        try:
            if join == "together":
                threads += start_members([make, make, make])
            else:
                for i in range(3):
                    threads += start_members([make], PACE)
                    wait_until(lambda n=STEP * (i + 1): consumed() >= n, "a member to take part")
            wait_until(
                lambda: (
                    consumed() >= len(expected)
                    and partitions_cover([t.current for t in threads], PARTITIONS)
                ),
                "all records and a complete assignment",
            )
            time.sleep(SETTLE)
            finals = [t.current for t in threads]
        finally:
            close_members(threads)
        values = [v for t in threads for v in t.values()]
    _check_share(values, expected, finals)
    # Commits are on (auto-commit, and on revoke and close): the group is at the end.
    assert _offsets(_admin(broker), group) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)


async def _share_aiokafka(
    bootstrap: str, group: str, topic: str, assignor: str, join: str
) -> tuple[list[bytes], list[frozenset[int]]]:
    members: list[AioMember] = []
    tasks: list[asyncio.Task[None]] = []
    consumed = lambda: sum(len(m.records) for m in members)  # noqa: E731

    async def add(pace: Pace | None) -> None:
        member = AioMember(bootstrap, group, topic, assignor=assignor)
        members.append(member)
        await member.start()
        tasks.append(asyncio.create_task(member.run(pace)))

    try:
        if join == "together":
            await asyncio.gather(add(None), add(None), add(None))
        else:
            for i in range(3):
                await add(PACE)
                await async_wait_until(
                    lambda n=STEP * (i + 1): consumed() >= n, "a member to take part"
                )
        await async_wait_until(
            lambda: (
                consumed() >= PARTITIONS * PER_PARTITION
                and partitions_cover([m.current for m in members], PARTITIONS)
            ),
            "all records and a complete assignment",
        )
        await asyncio.sleep(SETTLE)
        finals = [m.current for m in members]
    finally:
        for m in members:
            m.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), WAIT)
        await asyncio.gather(*(m.close() for m in members))
    return [v for m in members for _, _, v in m.records], finals


# -- 2. a member killed without LeaveGroup ------------------------------------------------
KILL_SESSION_MS = 3000


KILL_CASES = [(client, "leader") for client in SYNC_MEMBERS] + [("confluent", "follower")]


@pytest.mark.parametrize(("client", "role"), KILL_CASES)
def test_killed_member_is_evicted_after_its_session_timeout(
    broker: BrokerProcess, client: str, role: str
) -> None:
    """The victim joins first and so leads the group (`leader`: the survivors must elect a
    new leader when it is gone), or joins last (`follower`)."""
    topic, group = _topic(broker, "kill")
    produce_spread(broker.bootstrap, topic, PARTITIONS, 100, "before")
    opts = {"session_ms": KILL_SESSION_MS}
    member = SYNC_MEMBERS[client]
    everything = frozenset(range(PARTITIONS))

    def make() -> SyncMember:
        return member(broker.bootstrap, group, topic, **opts)

    victim: MemberProcess | None = None
    survivors: list[MemberThread] = []
    try:
        if role == "leader":
            victim = MemberProcess(client, broker.bootstrap, group, topic, **opts)
            wait_until(lambda: victim.holds() == everything, "the victim to lead alone")
            survivors += start_members([make, make])
        else:
            survivors += start_members([make, make])
            wait_until(
                lambda: partitions_cover([t.current for t in survivors], PARTITIONS),
                "the survivors to share the topic",
            )
            victim = MemberProcess(client, broker.bootstrap, group, topic, **opts)
        wait_until(
            lambda: (
                bool(victim.holds())
                and partitions_cover([victim.current, *(t.current for t in survivors)], PARTITIONS)
            ),
            "the victim and two survivors to share the topic",
        )
        lost = victim.current
        victim.kill()
        killed = time.monotonic()
        after = produce_spread(broker.bootstrap, topic, PARTITIONS, 50, "after")
        wait_until(
            lambda: partitions_cover([t.current for t in survivors], PARTITIONS),
            "the survivors to take over every partition",
            timeout=KILL_SESSION_MS / 1000 + 15,
        )
        took_over = time.monotonic() - killed
        consumed = lambda: {v for t in survivors for v in t.values()}  # noqa: E731
        wait_until(lambda: set(after) <= consumed(), "the records produced after the kill")
        finals = [t.current for t in survivors]
    finally:
        if victim is not None:
            victim.kill()
        close_members(survivors)
    assert lost <= finals[0] | finals[1]
    # The victim's last heartbeat was at most one interval before the kill; nothing but its
    # session timeout may end its membership (a closed connection doesn't, as in Kafka).
    session = KILL_SESSION_MS / 1000
    assert took_over >= session - HEARTBEAT_MS / 1000 - 0.3, f"evicted after {took_over:.2f}s"
    assert took_over <= session + 4, f"evicted only after {took_over:.2f}s"


# -- 3. resume from committed offsets -----------------------------------------------------
RESUME_PARTITIONS = 3
HALF = 150  # per partition: offsets 0..149 are read and committed, 150..299 are left


def _expect_second_half(records: list[tuple[int, int, bytes]]) -> None:
    by_partition: dict[int, list[int]] = {}
    for p, offset, _ in records:
        by_partition.setdefault(p, []).append(offset)
    for p in range(RESUME_PARTITIONS):
        got = sorted(by_partition.get(p, []))
        assert got[:1] == [HALF], f"partition {p} did not start at the committed offset"
        assert got == list(range(HALF, 2 * HALF)), f"partition {p}: not exactly the 2nd half"


def _read_first_half(poll: Callable[[], list[tuple[int, int, bytes]]]) -> None:
    seen: dict[int, set[int]] = {p: set() for p in range(RESUME_PARTITIONS)}

    def progress() -> bool:
        for p, offset, _ in poll():
            if offset < HALF:
                seen[p].add(offset)
        return all(len(s) == HALF for s in seen.values())

    wait_until(progress, "the first half")


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_new_consumer_resumes_from_committed_offsets(broker: BrokerProcess, client: str) -> None:
    topic, group = _topic(broker, "resume", RESUME_PARTITIONS)
    produce_spread(broker.bootstrap, topic, RESUME_PARTITIONS, 2 * HALF, "r")
    half = dict.fromkeys(range(RESUME_PARTITIONS), HALF)
    member = SYNC_MEMBERS[client]
    first = member(broker.bootstrap, group, topic, auto_commit=False)
    try:
        _read_first_half(lambda: first.poll(0.2))
        first.commit(half)
        assert first.committed(range(RESUME_PARTITIONS)) == half
    finally:
        first.close()
    second = member(broker.bootstrap, group, topic, auto_commit=False)
    records: list[tuple[int, int, bytes]] = []
    try:
        assert second.committed(range(RESUME_PARTITIONS)) == half

        def second_half() -> bool:
            records.extend(second.poll(0.2))
            return len(records) >= RESUME_PARTITIONS * HALF

        wait_until(second_half, "the second half")
        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline:  # anything more would be a duplicate
            records.extend(second.poll(0.1))
    finally:
        second.close()
    _expect_second_half(records)


def test_new_aiokafka_consumer_resumes_from_committed_offsets(broker: BrokerProcess) -> None:
    topic, group = _topic(broker, "resume-aio", RESUME_PARTITIONS)
    produce_spread(broker.bootstrap, topic, RESUME_PARTITIONS, 2 * HALF, "r")
    half = dict.fromkeys(range(RESUME_PARTITIONS), HALF)

    async def run() -> list[tuple[int, int, bytes]]:
        first = AioMember(broker.bootstrap, group, topic, auto_commit=False)
        await first.start()
        try:
            seen: dict[int, set[int]] = {p: set() for p in range(RESUME_PARTITIONS)}
            deadline = time.monotonic() + WAIT
            while any(len(s) < HALF for s in seen.values()):
                assert time.monotonic() < deadline, "timed out reading the first half"
                for p, offset, _ in await first.poll(0.2):
                    if offset < HALF:
                        seen[p].add(offset)
            await first.commit(half)
            assert await first.committed(range(RESUME_PARTITIONS)) == half
        finally:
            await first.close()
        second = AioMember(broker.bootstrap, group, topic, auto_commit=False)
        await second.start()
        records: list[tuple[int, int, bytes]] = []
        try:
            assert await second.committed(range(RESUME_PARTITIONS)) == half
            deadline = time.monotonic() + WAIT
            while len(records) < RESUME_PARTITIONS * HALF:
                assert time.monotonic() < deadline, "timed out reading the second half"
                records += await second.poll(0.2)
            deadline = time.monotonic() + SETTLE
            while time.monotonic() < deadline:
                records += await second.poll(0.1)
        finally:
            await second.close()
        return records

    _expect_second_half(asyncio.run(run()))


def test_committed_follows_every_commit_of_another_client(broker: BrokerProcess) -> None:
    """A watcher's repeated committed() calls (the same OffsetFetch again and again, answered
    from the group's published snapshot: actors/snapshot.py) see each commit of another
    client at once, an admin's change, and the group's deletion."""
    topic, group = _topic(broker, "watch", 2)
    settings = {"bootstrap.servers": broker.bootstrap, "group.id": group}
    committer = confluent_kafka.Consumer({**settings, "enable.auto.commit": False})
    watcher = confluent_kafka.Consumer(settings)
    partitions = [confluent_kafka.TopicPartition(topic, p) for p in (0, 1)]

    def watched() -> list[int]:
        return [tp.offset for tp in watcher.committed(partitions, timeout=10)]

    try:
        assert watched() == [confluent_kafka.OFFSET_INVALID] * 2
        for offset in range(1, 30):
            offsets = [confluent_kafka.TopicPartition(topic, p, offset * (p + 1)) for p in (0, 1)]
            committer.commit(offsets=offsets, asynchronous=False)
            for _ in range(3):
                assert watched() == [offset, 2 * offset]
        admin = _admin(broker)
        altered = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [confluent_kafka.TopicPartition(topic, 1, 5)])]
        )
        altered[group].result(timeout=10)
        for _ in range(3):
            assert watched() == [29, 5]
        admin.delete_consumer_groups([group])[group].result(timeout=10)
        for _ in range(3):
            assert watched() == [confluent_kafka.OFFSET_INVALID] * 2
    finally:
        committer.close()
        watcher.close()


# -- 4. static membership -----------------------------------------------------------------
def _admin(broker: BrokerProcess) -> confluent_kafka.admin.AdminClient:
    return confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})


def _describe(admin: confluent_kafka.admin.AdminClient, group: str) -> object:
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(WAIT)


def _members(description: object) -> dict[str, tuple[str | None, frozenset[tuple[str, int]]]]:
    """member id -> (instance id, assigned partitions), as the AdminClient decoded them."""
    return {
        m.member_id: (
            m.group_instance_id,
            frozenset((tp.topic, tp.partition) for tp in m.assignment.topic_partitions),
        )
        for m in description.members  # type: ignore[attr-defined]
    }


STATIC_CASES = [
    ("confluent", "close"),
    ("kafka-python", "close"),
    ("aiokafka", "close"),
    ("confluent", "kill"),
    ("kafka-python", "kill"),
]


@pytest.mark.parametrize(("client", "stop"), STATIC_CASES)
def test_static_member_rejoins_without_a_rebalance(
    broker: BrokerProcess, client: str, stop: str
) -> None:
    """A static member (30 s session) goes away and comes back with the same instance id:
    closed (all three clients skip LeaveGroup for static members, KIP-345) or SIGKILLed (in
    a child process). Nothing rebalances: the other member keeps its partitions without a
    callback, and the returning one gets its old partitions under a new member id."""
    topic, group = _topic(broker, "static")
    produce_spread(broker.bootstrap, topic, PARTITIONS, 20, "r")
    admin = _admin(broker)
    member = SYNC_MEMBERS[client]
    opts: dict[str, Any] = {"session_ms": 30000, "instance_id": "static-1"}
    started: list[MemberThread | MemberProcess] = []

    def start_static() -> MemberThread | MemberProcess:
        if stop == "kill":
            started.append(MemberProcess(client, broker.bootstrap, group, topic, **opts))
        else:
            make = lambda: member(broker.bootstrap, group, topic, **opts)  # noqa: E731
            started.extend(start_members([make]))
        return started[-1]

    try:
        first = start_static()
        other = start_members([lambda: member(broker.bootstrap, group, topic)])[0]
        started.append(other)
        holds = lambda m: m.holds() if isinstance(m, MemberProcess) else m.current  # noqa: E731
        wait_until(
            lambda: (
                partitions_cover([holds(first), other.current], PARTITIONS)
                and len(first.current) == len(other.current) == PARTITIONS // 2
            ),
            "two members sharing the topic",
        )
        before = _describe(admin, group)
        assert before.state == ConsumerGroupState.STABLE
        members_before = _members(before)
        static_before = {k: v for k, v in members_before.items() if v[0] == "static-1"}
        assert len(members_before) == 2 and len(static_before) == 1, members_before
        ((static_id, (_, static_partitions)),) = static_before.items()
        assert {p for _, p in static_partitions} == first.current
        other_partitions, other_events = other.current, other.events()

        if isinstance(first, MemberProcess):
            first.kill()
        else:
            first.close()
        time.sleep(1.0)
        while_away = _describe(admin, group)
        assert while_away.state == ConsumerGroupState.STABLE
        assert _members(while_away) == members_before, "the group changed while it was away"

        restarted = start_static()
        wait_until(lambda: holds(restarted) == first.current, "the same partitions back")
        time.sleep(1.0)  # room for a rebalance that must not happen
        after = _describe(admin, group)
        # Read before closing: closing revokes everything.
        restarted_events, other_after = restarted.events(), (other.current, other.events())
    finally:
        for running in started:
            if isinstance(running, MemberProcess):
                running.kill()
        close_members([t for t in started if isinstance(t, MemberThread)])
    assert after.state == ConsumerGroupState.STABLE
    members_after = _members(after)
    assert len(members_after) == 2, members_after
    static_after = {k: v for k, v in members_after.items() if v[0] == "static-1"}
    assert list(static_after.values()) == [("static-1", static_partitions)]
    assert static_id not in static_after, "a restarted static member gets a new member id"
    others = {k: v for k, v in members_before.items() if v[0] is None}
    assert {k: v for k, v in members_after.items() if v[0] is None} == others
    assert restarted_events == ([first.current], []), "one assignment, nothing revoked"
    assert other_after == (other_partitions, other_events), "the other member was rebalanced"


# -- 5. confluent-kafka's AdminClient -----------------------------------------------------
def _listed(admin: confluent_kafka.admin.AdminClient, **filters: object) -> dict[str, object]:
    result = admin.list_consumer_groups(request_timeout=10, **filters).result(WAIT)
    assert not result.errors, result.errors
    return {g.group_id: g for g in result.valid}


def _offsets(
    admin: confluent_kafka.admin.AdminClient,
    group: str,
    partitions: list[confluent_kafka.TopicPartition] | None = None,
) -> dict[int, int]:
    """The group's committed offsets (of every partition it has one for, or of `partitions`)."""
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    result = admin.list_consumer_group_offsets(request, request_timeout=10)[group].result(WAIT)
    assert result.group_id == group
    for tp in result.topic_partitions:
        assert tp.error is None, tp
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def _error_code(future: object) -> int:
    with pytest.raises(confluent_kafka.KafkaException) as failure:
        future.result(WAIT)  # type: ignore[attr-defined]
    return failure.value.args[0].code()


def test_admin_client_manages_groups(broker: BrokerProcess) -> None:
    partitions = 3
    topic, group = _topic(broker, "admin", partitions)
    produce_spread(broker.bootstrap, topic, partitions, 10, "r")
    admin = _admin(broker)
    everything = {p: 10 for p in range(partitions)}

    thread = start_members([lambda: ConfluentMember(broker.bootstrap, group, topic)])[0]
    try:
        wait_until(
            lambda: len(thread.records) == 10 * partitions and len(thread.current) == partitions,
            "the member to read everything",
        )
        # Auto-commit (every 500 ms) stores the end of every partition.
        wait_until(lambda: _offsets(admin, group) == everything, "the auto-commits")

        listing = _listed(admin)[group]
        assert listing.state == ConsumerGroupState.STABLE  # type: ignore[attr-defined]
        assert not listing.is_simple_consumer_group  # type: ignore[attr-defined]
        assert group in _listed(admin, states={ConsumerGroupState.STABLE})
        assert group not in _listed(admin, states={ConsumerGroupState.EMPTY})

        described = _describe(admin, group)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        assert not described.is_simple_consumer_group
        members = _members(described)
        assert len(members) == 1, members
        ((member_id, (instance_id, assigned)),) = members.items()
        assert member_id == thread.member.member_id  # type: ignore[union-attr]
        assert instance_id is None
        assert assigned == {(topic, p) for p in range(partitions)}

        deleting = admin.delete_consumer_groups([group], request_timeout=10)[group]
        assert _error_code(deleting) == confluent_kafka.KafkaError.NON_EMPTY_GROUP
        # Kafka refuses a tool's commit (generation -1, no member id) to a live group.
        refused = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [confluent_kafka.TopicPartition(topic, 0, 1)])],
            request_timeout=10,
        )[group].result(WAIT)
        assert [tp.error.code() for tp in refused.topic_partitions] == [
            confluent_kafka.KafkaError.UNKNOWN_MEMBER_ID
        ]
        assert _offsets(admin, group) == everything
    finally:
        close_members([thread])

    wait_until(lambda: _describe(admin, group).state == ConsumerGroupState.EMPTY, "Empty")
    described = _describe(admin, group)
    assert described.members == []
    assert _listed(admin)[group].state == ConsumerGroupState.EMPTY  # type: ignore[attr-defined]
    assert _offsets(admin, group) == everything, "leaving keeps the committed offsets"

    new_offsets = {p: 3 + p for p in range(partitions)}
    request = ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(topic, p, o) for p, o in new_offsets.items()]
    )
    altered = admin.alter_consumer_group_offsets([request], request_timeout=10)[group].result(WAIT)
    assert all(tp.error is None for tp in altered.topic_partitions), altered.topic_partitions
    assert _offsets(admin, group) == new_offsets

    admin.delete_consumer_groups([group], request_timeout=10)[group].result(WAIT)
    assert group not in _listed(admin)
    again = admin.delete_consumer_groups([group], request_timeout=10)[group]
    assert _error_code(again) == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND
    # Its offsets went with it: nothing is committed any more.
    assert _offsets(admin, group) == {}
    tps = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
    invalid = confluent_kafka.OFFSET_INVALID
    assert _offsets(admin, group, tps) == dict.fromkeys(range(partitions), invalid)
    gone = _describe(admin, group)  # Kafka describes an unknown group as Dead, no error
    assert (gone.state, gone.members) == (ConsumerGroupState.DEAD, [])

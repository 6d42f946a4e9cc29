"""The KIP-848 consumer protocol end to end: confluent-kafka with `group.protocol=consumer`.

* Three members split a 6-partition topic and consume every record.
* A fourth joins: partitions move incrementally, and members keep consuming the partitions
  they keep (never revoked from them, still read by them while the group reconciles).
* A SIGKILLed member is fenced when its session times out and its partitions move.
* A member commits (fenced by member epoch) and a new member resumes at those offsets.
* A regex subscription picks up a topic created after the member joined.
* A SIGKILLed broker replays the group: members carry on at their epochs, offsets are kept.
* confluent's AdminClient lists and describes consumer and classic groups alike.

The broker runs with a 500 ms heartbeat interval, a 6 s session timeout and a 200 ms
assignment interval, so that every case stays within a few seconds.
"""

from __future__ import annotations

import threading
import time
import uuid

import confluent_kafka
import confluent_kafka.admin
import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType

from ..broker_process import BrokerProcess
from .clients import Confluent
from .group_clients import (
    WAIT,
    ConfluentMember,
    MemberProcess,
    MemberThread,
    close_members,
    partitions_cover,
    produce_spread,
    start_members,
    wait_until,
)

pytestmark = pytest.mark.e2e

HEARTBEAT_MS = 500
SESSION_MS = 6000
SETTINGS = (
    f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
    f"group.consumer.session.timeout.ms={SESSION_MS}",
    "group.consumer.assignment.interval.ms=200",
    "group.initial.rebalance.delay.ms=200",
    "group.min.session.timeout.ms=1000",
)
PARTITIONS = 6
KIP848 = {"protocol": "consumer"}


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return broker_factory(*SETTINGS)


def _topic(broker: BrokerProcess, tag: str, partitions: int = PARTITIONS) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"topic-{tag}-{suffix}", f"group-{tag}-{suffix}"
    Confluent(broker.bootstrap).create_topic(topic, partitions)
    return topic, group


def _member(broker: BrokerProcess, group: str, topic: str, **kw: object) -> ConfluentMember:
    return ConfluentMember(broker.bootstrap, group, topic, protocol="consumer", **kw)  # type: ignore[arg-type]


def _makers(broker: BrokerProcess, group: str, topic: str, n: int) -> list:  # type: ignore[type-arg]
    return [lambda: _member(broker, group, topic) for _ in range(n)]


def _disjoint_cover(threads: list[MemberThread], partitions: int = PARTITIONS) -> bool:
    held = [t.current for t in threads]
    return all(held) and partitions_cover(held, partitions) and sum(map(len, held)) == partitions


def test_three_members_split_six_partitions_and_consume_everything(
    broker: BrokerProcess,
) -> None:
    topic, group = _topic(broker, "split")
    sent = produce_spread(broker.bootstrap, topic, PARTITIONS, 200, "s")
    threads = start_members(_makers(broker, group, topic, 3))
    try:
        wait_until(lambda: _disjoint_cover(threads), "three members to split the topic")
        consumed = lambda: [v for t in threads for v in t.values()]  # noqa: E731
        wait_until(lambda: set(sent) <= set(consumed()), "every record")
        assert sorted(len(t.current) for t in threads) == [2, 2, 2]
    finally:
        close_members(threads)
    # Auto-commit is at-least-once: a partition that moved while the first member read it may
    # be read twice, but nothing is missing.
    assert set(sent) <= {v for t in threads for v in t.values()}


def test_members_starting_together_settle_well_within_one_steady_interval(
    broker_factory,  # type: ignore[no-untyped-def]
) -> None:
    """librdkafka takes the heartbeat interval from every response: members told the
    rebalance cadence settle long before the steady interval (here 20 s) passes even once.
    With Kafka's single cadence this takes two steady intervals (consumer_group/cadence.py)."""
    steady_ms = 20_000
    broker = broker_factory(
        f"group.consumer.heartbeat.interval.ms={steady_ms}",
        "group.consumer.rebalance.heartbeat.interval.ms=250",
        "group.consumer.assignment.interval.ms=200",
    )
    topic, group = _topic(broker, "cadence")
    threads = start_members(_makers(broker, group, topic, 3))
    try:
        wait_until(
            lambda: _disjoint_cover(threads), "three members to settle", timeout=steady_ms / 2000
        )
        assert sorted(len(t.current) for t in threads) == [2, 2, 2]
    finally:
        close_members(threads)


def test_fourth_member_joins_and_kept_partitions_keep_flowing(broker: BrokerProcess) -> None:
    topic, group = _topic(broker, "join")
    threads = start_members(_makers(broker, group, topic, 3))
    stop = threading.Event()
    produced: list[bytes] = []

    def produce() -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        seq = 0
        while not stop.is_set():
            for p in range(PARTITIONS):
                value = f"j-{seq}-{p}".encode()
                producer.produce(topic, value, partition=p)
                produced.append(value)
            seq += 1
            producer.poll(0)
            time.sleep(0.02)
        producer.flush(10)

    producer = threading.Thread(target=produce, daemon=True)
    try:
        wait_until(lambda: _disjoint_cover(threads), "three members to split the topic")
        before = [t.current for t in threads]
        producer.start()
        time.sleep(0.5)
        joined_at = len(produced)
        fourth = start_members(_makers(broker, group, topic, 1))[0]
        threads.append(fourth)
        wait_until(lambda: _disjoint_cover(threads), "four members to split the topic")
        time.sleep(1.0)
        stop.set()
        producer.join(WAIT)
        wait_until(
            lambda: set(produced) <= {v for t in threads for v in t.values()},
            "every record produced meanwhile",
        )
        window = set(produced[joined_at:])
        for old, was in zip(threads[:3], before, strict=True):
            kept = was & old.current
            assert kept, "with 6 partitions over 4 members everyone keeps one"
            _, revoked = old.events()
            assert not any(kept & r for r in revoked), f"kept {kept} was revoked: {revoked}"
            # Records produced to the kept partitions while the group reconciled were read by
            # their owner, which never stopped holding them.
            mine = {v for v in old.values() if v in window}
            for p in kept:
                suffix = f"-{p}".encode()
                assert {v for v in window if v.endswith(suffix)} <= mine
    finally:
        stop.set()
        close_members(threads)


def test_killed_member_is_fenced_and_its_partitions_move(broker: BrokerProcess) -> None:
    topic, group = _topic(broker, "kill")
    survivors = start_members(_makers(broker, group, topic, 2))
    victim = MemberProcess("confluent", broker.bootstrap, group, topic, **KIP848)
    try:
        wait_until(
            lambda: (
                bool(victim.current)
                and partitions_cover([victim.current, *(t.current for t in survivors)], PARTITIONS)
            ),
            "the victim and two survivors to share the topic",
        )
        lost = victim.current
        victim.kill()
        killed = time.monotonic()
        after = produce_spread(broker.bootstrap, topic, PARTITIONS, 30, "after")
        wait_until(
            lambda: _disjoint_cover(survivors),
            "the survivors to take over every partition",
            timeout=SESSION_MS / 1000 + 15,
        )
        took_over = time.monotonic() - killed
        wait_until(
            lambda: set(after) <= {v for t in survivors for v in t.values()},
            "the records produced after the kill",
        )
    finally:
        victim.kill()
        close_members(survivors)
    assert lost <= survivors[0].current | survivors[1].current
    # Only the session timeout ends a silent member (a closed connection does not).
    assert took_over >= SESSION_MS / 1000 - HEARTBEAT_MS / 1000 - 0.3, f"{took_over:.2f}s"


def test_commit_and_resume(broker: BrokerProcess) -> None:
    topic, group = _topic(broker, "resume", 3)
    produce_spread(broker.bootstrap, topic, 3, 100, "r")
    half = dict.fromkeys(range(3), 50)
    first = _member(broker, group, topic, auto_commit=False)
    try:
        seen: dict[int, set[int]] = {p: set() for p in range(3)}

        def first_half() -> bool:
            for p, offset, _ in first.poll(0.2):
                if offset < 50:
                    seen[p].add(offset)
            return all(len(s) == 50 for s in seen.values())

        wait_until(first_half, "the first half")
        first.commit(half)  # OffsetCommit v9 with the member's epoch
        assert first.committed(range(3)) == half
    finally:
        first.close()
    second = _member(broker, group, topic, auto_commit=False)
    records: list[tuple[int, int, bytes]] = []
    try:

        def second_half() -> bool:
            records.extend(second.poll(0.2))
            return len(records) >= 150

        wait_until(second_half, "the second half")
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            records.extend(second.poll(0.1))
    finally:
        second.close()
    for p in range(3):
        assert sorted(o for q, o, _ in records if q == p) == list(range(50, 100))


def test_regex_subscription_picks_up_a_new_topic(broker: BrokerProcess) -> None:
    suffix = uuid.uuid4().hex[:8]
    group = f"group-regex-{suffix}"
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    try:
        consumer.subscribe([f"^rx-{suffix}-.*"])
        Confluent(broker.bootstrap).create_topic(f"rx-{suffix}-a", 2)
        Confluent(broker.bootstrap).create_topic(f"other-{suffix}", 2)
        sent = produce_spread(broker.bootstrap, f"rx-{suffix}-a", 2, 10, "x")
        got: set[bytes] = set()

        def everything() -> bool:
            for msg in consumer.consume(100, timeout=0.2):
                if msg.error() is None:
                    got.add(msg.value())
            return set(sent) <= got

        wait_until(everything, "the records of the topic created after subscribing")
        held = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        assert held == {(f"rx-{suffix}-a", 0), (f"rx-{suffix}-a", 1)}
    finally:
        consumer.close()


def test_admin_client_describes_both_group_types(broker: BrokerProcess) -> None:
    topic, group = _topic(broker, "admin")
    classic_group = f"{group}-classic"
    threads = start_members(_makers(broker, group, topic, 2))
    classic = start_members([lambda: ConfluentMember(broker.bootstrap, classic_group, topic)])
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        wait_until(lambda: _disjoint_cover(threads), "two members to split the topic")
        wait_until(lambda: len(classic[0].current) == PARTITIONS, "the classic member")
        listed = admin.list_consumer_groups().result(WAIT)
        types = {g.group_id: g.type for g in listed.valid}
        assert types[group] == ConsumerGroupType.CONSUMER
        assert types[classic_group] == ConsumerGroupType.CLASSIC

        def described() -> dict[str, confluent_kafka.admin.ConsumerGroupDescription]:
            futures = admin.describe_consumer_groups([group, classic_group])
            return {g: f.result(WAIT) for g, f in futures.items()}

        wait_until(lambda: described()[group].state == ConsumerGroupState.STABLE, "a Stable group")
        both = described()
        consumer_view = both[group]
        assert consumer_view.type == ConsumerGroupType.CONSUMER
        assert len(consumer_view.members) == 2
        assigned = {
            tp.partition
            for m in consumer_view.members
            for tp in m.assignment.topic_partitions
            if tp.topic == topic
        }
        assert assigned == set(range(PARTITIONS))
        classic_view = both[classic_group]
        assert classic_view.type == ConsumerGroupType.CLASSIC
        assert classic_view.state == ConsumerGroupState.STABLE
        assert len(classic_view.members) == 1
    finally:
        close_members(threads + classic)


def test_group_carries_on_after_a_coordinator_restart(broker: BrokerProcess) -> None:
    """SIGKILL the broker under a settled KIP-848 group: replayed from the coordinator log,
    the group accepts its members' next heartbeats at their epochs (no one is fenced, no
    partition moves) and their committed offsets are there."""
    topic, group = _topic(broker, "restart", 4)
    produce_spread(broker.bootstrap, topic, 4, 20, "before")
    threads = start_members([lambda: _member(broker, group, topic) for _ in range(2)])

    def committed() -> dict[int, int]:
        # A fresh admin client each time: librdkafka's admin client may sit on its dead
        # connection for a long while after the broker restarts (a fresh one answers at once).
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        request = [ConsumerGroupTopicPartitions(group)]
        result = admin.list_consumer_group_offsets(request)[group].result(WAIT)
        return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic}

    try:
        wait_until(lambda: _disjoint_cover(threads, 4), "two members to split the topic")
        # auto-commit (every 500 ms, with the member epoch) gets everything read so far
        wait_until(lambda: committed() == dict.fromkeys(range(4), 20), "the commits")
        held = [t.current for t in threads]
        events_before = [t.events() for t in threads]
        broker.kill()
        broker.start()
        assert committed() == dict.fromkeys(range(4), 20)  # nothing lost
        after = produce_spread(broker.bootstrap, topic, 4, 20, "after")
        wait_until(
            lambda: set(after) <= {v for t in threads for v in t.values()},
            "the records produced after the restart",
        )
        wait_until(lambda: committed() == dict.fromkeys(range(4), 40), "commits after it")
        assert [t.current for t in threads] == held
        assert [t.events() for t in threads] == events_before, "nobody was fenced or moved"
    finally:
        close_members(threads)

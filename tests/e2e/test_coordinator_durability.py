"""Acknowledged means durable: the broker is SIGKILLed while 50 groups commit, and after the
restart every acknowledged commit is there (and nothing that was never sent); a stable member
carries on with its generation, as after a Kafka coordinator failover."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import confluent_kafka
import pytest
import trio
from confluent_kafka.admin import AdminClient

from harness import scale_workloads

from ..broker_process import BrokerProcess
from .clients import Confluent

pytestmark = pytest.mark.e2e
GROUPS = 50


def _committer(
    bootstrap: str,
    group: str,
    stop: threading.Event,
    sent: dict[str, int],
    acked: dict[str, int],
    errors: list[object],
) -> None:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    offset = 0
    try:
        while not stop.is_set():
            offset += 1
            sent[group] = offset
            try:
                consumer.commit(
                    offsets=[confluent_kafka.TopicPartition("durable", 0, offset)],
                    asynchronous=False,
                )
            except confluent_kafka.KafkaException as exc:
                errors.append((group, offset, exc))
                return  # e.g. the broker died under us: this one was never acknowledged
            acked[group] = offset
    finally:
        consumer.close()


def test_sigkill_during_commits_from_50_groups_loses_no_acknowledged_commit(
    broker: BrokerProcess,
) -> None:
    _commit_through_a_sigkill(broker)


def test_sigkill_during_page_cache_commits_loses_no_acknowledged_commit(
    broker_factory: type[BrokerProcess],
) -> None:
    """Under `never` a batch is acknowledged once written to the page cache, not fsynced;
    the page cache still outlives a SIGKILL."""
    _commit_through_a_sigkill(broker_factory("coordinator.log.fsync=never"))


def test_sigkill_while_the_log_compacts_loses_no_acknowledged_commit(
    broker_factory: type[BrokerProcess],
) -> None:
    """Small segments: the log rolls every few dozen commits and a child process compacts it
    after each roll (storage/compaction_child.py), so the kill may land in one. The child dies
    with the broker, and what it left replays to every acknowledged commit."""
    broker = broker_factory("coordinator.log.segment.bytes=4096")
    _commit_through_a_sigkill(broker, lambda: _compactions(broker) >= 3)


def _compactions(broker: BrokerProcess) -> int:
    return sum("coordinator log compacted" in line for line in broker.lines)


def _commit_through_a_sigkill(
    broker: BrokerProcess, ready: Callable[[], bool] = lambda: True
) -> None:
    """Kill the broker once every group has 5 commits acknowledged and `ready()`."""
    Confluent(broker.bootstrap).create_topic("durable", 1)
    sent: dict[str, int] = {}
    acked: dict[str, int] = {}
    errors: list[object] = []
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_committer, args=(broker.bootstrap, f"g{i}", stop, sent, acked, errors)
        )
        for i in range(GROUPS)
    ]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < GROUPS or min(acked.values()) < 5 or not ready():
            assert not errors and time.monotonic() < deadline, ("commits stalled", errors[:3])
            time.sleep(0.05)
        broker.kill()  # mid-stream
        acked_before_kill = dict(acked)
    finally:
        stop.set()  # each committer ends after its in-flight commit
    broker.start()  # in-flight commits now complete (or fail) against the restarted broker
    for thread in threads:
        thread.join(60)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for group, acked_offset in acked.items():
        request = confluent_kafka.ConsumerGroupTopicPartitions(group)
        result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
        committed = result.topic_partitions[0].offset
        # every acknowledged commit is there, and nothing that was never sent
        assert acked_before_kill[group] <= acked_offset <= committed <= sent[group], (
            group,
            acked_before_kill[group],
            acked_offset,
            committed,
            sent[group],
        )


def test_stable_member_carries_on_after_a_coordinator_restart(
    broker_factory: type[BrokerProcess],
) -> None:
    broker = broker_factory("group.initial.rebalance.delay.ms=0")
    client = Confluent(broker.bootstrap)
    client.create_topic("carry-on", 2)
    assignments: list[list[int]] = []
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "carry",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(
        ["carry-on"], on_assign=lambda c, ps: assignments.append(sorted(p.partition for p in ps))
    )
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment():
            assert time.monotonic() < deadline
            consumer.poll(0.1)
        memberid = consumer.memberid()
        broker.kill()
        broker.start()
        client.produce("carry-on", [(b"k%d" % i, b"after-%d" % i) for i in range(20)], "none")
        seen = 0
        deadline = time.monotonic() + 20
        while seen < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen += 1
        assert seen == 20
        time.sleep(2)  # several heartbeats after the restart
        consumer.poll(0.1)
        assert assignments == [[0, 1]], "no rebalance: the replayed group accepted its member"
        assert consumer.memberid() == memberid
    finally:
        consumer.close()


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(20))
def test_sigkill_during_commits_repeated(broker: BrokerProcess, round_: int) -> None:
    """`pytest -m slow -k repeated`: the same crash, twenty times over."""
    _commit_through_a_sigkill(broker)


def _frozen(broker: BrokerProcess) -> int:
    """The count the broker logs just after `listening on`."""
    deadline = time.monotonic() + 10
    while not (lines := [line for line in broker.lines if "cycle collector:" in line]):
        assert time.monotonic() < deadline, broker.log_text()
        time.sleep(0.05)
    match = re.search(r"(\d+) objects from start-up frozen", lines[-1])
    assert match is not None, lines
    return int(match.group(1))


def test_a_restart_freezes_the_replayed_groups_out_of_the_collector(broker: BrokerProcess) -> None:
    """Full collections would walk every replayed group on and on (gc_policy.py)."""
    empty = _frozen(broker)
    trio.run(scale_workloads.commit_all, broker.bootstrap, "frozen", 3_000)
    broker.stop()
    broker.lines.clear()
    broker.start()
    assert _frozen(broker) > empty + 3_000  # at least one object per replayed group

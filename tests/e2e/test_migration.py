"""Online migration between the classic and consumer protocols, with real clients (issue 45).

* Rolling upgrade and back: three confluent-kafka consumers of a 6-partition topic commit
  what they read; they are restarted one at a time with `group.protocol=consumer`, then one
  at a time back; as dynamic members, and as static ones (`group.instance.id`). The group
  ends as a consumer group, then as a classic group; no record is skipped, and a record read
  twice was never committed before its second read.
* A kafka-python member (classic protocol only) joins a consumer group and gets its share of
  the partitions from the server-side assignor; its commits are accepted, and
  `groups describe` shows the group's type and each member's protocol.
* With `group.consumer.migration.policy=disabled`, a consumer-protocol member joining a
  classic group with members gets Kafka's refusal: GROUP_ID_NOT_FOUND, "Group g is not a
  consumer group.".

One broker for the module (short heartbeat, session and assignment intervals), few records.
"""

from __future__ import annotations

import datetime
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from confluent_kafka import ConsumerGroupType
from kio.schema.errors import ErrorCode

from rafka_actors.cli import main
from rafka_actors.gateway.apis._build import make
from rafka_actors.protocol.messages import request_class, response_class

from ..broker_process import BrokerProcess
from ..wire import parse_response, request_frame
from .clients import Confluent
from .group_clients import (
    HEARTBEAT_MS,
    REBALANCE_MS,
    SESSION_MS,
    WAIT,
    KafkaPythonMember,
    MemberThread,
    partitions_cover,
    produce_spread,
    wait_until,
)

# one worker (pytest-xdist) runs the module, so its tests share the module's broker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("migration-e2e")]

SETTINGS = (
    f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
    f"group.consumer.session.timeout.ms={SESSION_MS}",
    "group.consumer.assignment.interval.ms=100",
    "group.initial.rebalance.delay.ms=100",
    "group.min.session.timeout.ms=1000",
)
PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("migration") / "data", *SETTINGS).start()
    yield process
    if process.alive():
        process.kill()


def _topic(broker: BrokerProcess, tag: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"topic-{tag}-{suffix}", f"group-{tag}-{suffix}"
    Confluent(broker.bootstrap).create_topic(topic, PARTITIONS)
    return topic, group


class Ledger:
    """What every member read and, once its commit succeeded, committed: (partition,
    offset) -> when. Shared by the members' threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reads: list[tuple[int, int, bytes, float]] = []
        self.committed: dict[tuple[int, int], float] = {}
        self.story: list[str] = []  # who read and committed what, when: shown on a failure

    def read(self, rows: list[tuple[int, int, bytes]]) -> None:
        now = time.monotonic()
        with self.lock:
            self.reads += [(p, o, v, now) for p, o, v in rows]
            who = threading.current_thread().name
            self.story.append(f"{now:.3f} {who} read {sorted({(p, o) for p, o, _ in rows})}")

    def commit(self, rows: list[tuple[int, int]]) -> None:
        now = time.monotonic()
        with self.lock:
            for key in rows:
                self.committed.setdefault(key, now)
            who = threading.current_thread().name
            self.story.append(f"{now:.3f} {who} committed {sorted(rows)}")

    def values(self) -> set[bytes]:
        with self.lock:
            return {v for _, _, v, _ in self.reads}

    def reread_after_commit(self) -> list[tuple[int, int]]:
        """Records read again after a commit past them had succeeded (must be none)."""
        with self.lock:
            return [
                (p, o)
                for p, o, _, at in self.reads
                if (p, o) in self.committed and self.committed[(p, o)] < at
            ]


class CommittingMember:
    """A confluent-kafka consumer that commits synchronously after each poll what it read."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        protocol: str,
        ledger: Ledger,
        instance_id: str | None = None,
    ) -> None:
        self.topic = topic
        self.ledger = ledger
        self.assigned: list[frozenset[int]] = []
        self.revoked: list[frozenset[int]] = []
        self.mine: dict[int, list[int]] = {}  # partition -> offsets read, not yet committed
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "max.poll.interval.ms": REBALANCE_MS,
        }
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config.update(
                {
                    "partition.assignment.strategy": "range",
                    "session.timeout.ms": SESSION_MS,
                    "heartbeat.interval.ms": HEARTBEAT_MS,
                }
            )
        self.consumer = confluent_kafka.Consumer(config)
        # With rebalance callbacks librdkafka gives partitions up inside consume(), so never
        # between a poll and the commit that follows it (the usual commit-then-revoke order).
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _consumer: object, tps: list[confluent_kafka.TopicPartition]) -> None:
        self.assigned.append(frozenset(tp.partition for tp in tps))

    def _on_revoke(self, _consumer: object, tps: list[confluent_kafka.TopicPartition]) -> None:
        self.revoked.append(frozenset(tp.partition for tp in tps))

    def poll(self, timeout: float, limit: int = 500) -> list[tuple[int, int, bytes]]:
        rows = []
        msgs = self.consumer.consume(limit, timeout=timeout)
        # A consume() that served a revocation may still return records of the partitions it
        # gave up: an application must not process those (their new owner will).
        held = self.assignment()
        for msg in msgs:
            if msg.error() is None and msg.partition() in held:
                rows.append((msg.partition(), msg.offset(), msg.value()))
        if not rows:
            return rows
        self.ledger.read(rows)
        for p, o, _ in rows:
            self.mine.setdefault(p, []).append(o)
        # what it read of partitions it gave up since stays uncommitted (its new owner reads
        # it again): committing it now could overwrite the new owner's progress
        self.mine = {p: offsets for p, offsets in self.mine.items() if p in held}
        ends = {p: max(offsets) + 1 for p, offsets in self.mine.items()}
        tps = [confluent_kafka.TopicPartition(self.topic, p, o) for p, o in ends.items()]
        try:
            done = self.consumer.commit(offsets=tps, asynchronous=False) or []
        except confluent_kafka.KafkaException:
            return rows  # not committed (e.g. the partition moved): it may be read again
        ok = {tp.partition for tp in done if tp.error is None}
        self.ledger.commit([(p, o) for p in ok for o in self.mine.pop(p)])
        return rows

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def close(self) -> None:
        self.consumer.close()


def _group_type(admin: confluent_kafka.admin.AdminClient, group: str) -> Any:
    listed = admin.list_consumer_groups().result(WAIT)
    return {g.group_id: g.type for g in listed.valid}.get(group)


def _settled(members: list[MemberThread], ledger: Ledger, sent: list[bytes]) -> bool:
    held = [m.current for m in members]
    return all(held) and partitions_cover(held, PARTITIONS) and set(sent) <= ledger.values()


@pytest.mark.parametrize(
    "static",
    # static members (group.instance.id): a restarted instance takes its predecessor's place
    # (a classic one never leaves first), and the last one's return downgrades the group
    [False, True],
    ids=["dynamic", "static"],
)
def test_rolling_upgrade_and_back(broker: BrokerProcess, static: bool) -> None:
    topic, group = _topic(broker, "roll")
    ledger = Ledger()
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})

    names: list[str] = []

    def member(protocol: str) -> MemberThread:
        # a restarted member keeps its predecessor's instance id (members are replaced in turn)
        instance = f"instance-{len(names) % 3}" if static else None
        names.append(protocol)
        thread = MemberThread(
            lambda: CommittingMember(broker.bootstrap, group, topic, protocol, ledger, instance),
            f"{protocol}-member-{len(names)}",
        )
        thread.start()
        return thread

    sent = produce_spread(broker.bootstrap, topic, PARTITIONS, 4, "start")
    members = [member("classic") for _ in range(3)]
    try:
        wait_until(lambda: _settled(members, ledger, sent), "three classic members to settle")
        assert _group_type(admin, group) == ConsumerGroupType.CLASSIC
        # three restarts with the consumer protocol, then three back to the classic one
        for step, protocol in enumerate(["consumer"] * 3 + ["classic"] * 3):
            members.pop(0).close()
            members.append(member(protocol))
            sent.extend(produce_spread(broker.bootstrap, topic, PARTITIONS, 2, f"step{step}"))
            wait_until(lambda: _settled(members, ledger, sent), f"the group after step {step}")
            if step in (0, 2):  # one consumer-protocol member on: the group was upgraded
                assert _group_type(admin, group) == ConsumerGroupType.CONSUMER
        assert _group_type(admin, group) == ConsumerGroupType.CLASSIC
    finally:
        for thread in members:
            thread.stop()
        for thread in members:
            thread.close()
    assert set(sent) <= ledger.values()  # nothing skipped
    # only what was not committed is read again
    assert ledger.reread_after_commit() == [], "\n".join(ledger.story)


def test_kafka_python_member_inside_a_consumer_group(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = _topic(broker, "kp")
    consumer_member = MemberThread(
        lambda: _confluent_kip848(broker.bootstrap, group, topic), "kip848"
    )
    consumer_member.start()
    classic: MemberThread | None = None
    try:
        wait_until(lambda: len(consumer_member.current) == PARTITIONS, "the KIP-848 member")
        classic = MemberThread(
            lambda: KafkaPythonMember(broker.bootstrap, group, topic), "kafka-python"
        )
        classic.start()
        both = lambda: [consumer_member.current, classic.current]  # type: ignore[union-attr]  # noqa: E731
        wait_until(
            lambda: partitions_cover(both(), PARTITIONS) and all(both()),
            "the kafka-python member to get partitions from the server-side assignor",
        )
        # the uniform assignor splits evenly; the group stayed a consumer group
        assert sorted(map(len, both())) == [3, 3]
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        assert _group_type(admin, group) == ConsumerGroupType.CONSUMER
        # `groups describe` shows the group's type and which protocol each member speaks
        capsys.readouterr()
        argv = ["groups", "describe", group, "--bootstrap", broker.bootstrap, "--output", "json"]
        assert main(argv) == 0
        described = json.loads(capsys.readouterr().out)
        assert described["type"] == "consumer"
        assert sorted(m["protocol"] for m in described["members"]) == ["classic", "consumer"]
        # the classic member's (auto-)commits are accepted: its partitions' records are done
        theirs = classic.current
        produce_spread(broker.bootstrap, topic, PARTITIONS, 2, "kp")
        wait_until(
            lambda: all(_committed(admin, group, topic).get(p) == 2 for p in theirs),
            "the kafka-python member's commits",
        )
    finally:
        consumer_member.stop()
        if classic is not None:
            classic.stop()
            classic.close()
        consumer_member.close()


def _committed(admin: confluent_kafka.admin.AdminClient, group: str, topic: str) -> dict:
    request = confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    (future,) = admin.list_consumer_group_offsets([request]).values()
    return {tp.partition: tp.offset for tp in future.result(WAIT).topic_partitions}


def _confluent_kip848(bootstrap: str, group: str, topic: str) -> Any:
    from .group_clients import ConfluentMember

    return ConfluentMember(bootstrap, group, topic, protocol="consumer")


def test_disabled_policy_gives_kafkas_refusal(broker_factory: Any, tmp_path: Path) -> None:
    broker = broker_factory(*SETTINGS, "group.consumer.migration.policy=disabled")
    topic, group = _topic(broker, "disabled")
    classic = MemberThread(lambda: KafkaPythonMember(broker.bootstrap, group, topic), "classic")
    classic.start()
    try:
        wait_until(lambda: len(classic.current) == PARTITIONS, "the classic member")
        answer = _consumer_group_heartbeat(broker, group, topic)
        assert answer.error_code == ErrorCode.group_id_not_found
        assert answer.error_message == f"Group {group} is not a consumer group."
        assert classic.current == frozenset(range(PARTITIONS))  # undisturbed
    finally:
        classic.close()


def _consumer_group_heartbeat(broker: BrokerProcess, group: str, topic: str) -> Any:
    """A joining member's ConsumerGroupHeartbeat (v0), as librdkafka sends it."""
    request = make(
        request_class(68, 0),
        group_id=group,
        member_id="",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_MS),
        subscribed_topic_names=(topic,),
        server_assignor=None,
        topic_partitions=(),
    )
    with socket.create_connection((broker.host, broker.port), timeout=WAIT) as sock:
        sock.sendall(request_frame(request))
        (size,) = struct.unpack(">i", _read(sock, 4))
        _, response = parse_response(_read(sock, size), response_class(68, 0), 1)
    return response


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data

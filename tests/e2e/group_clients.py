"""Consumer-group members for the end-to-end group tests, one adapter per real client.

Every adapter subscribes one consumer to one topic in one group and offers the same small
surface: `poll(timeout)` -> [(partition, offset, value)], `assignment()` -> partitions,
`commit(offsets)` (explicit, synchronous), `committed(partitions)`, `close()`, and the
rebalance callbacks it saw (`assigned` / `revoked`, lists of partition sets).

`MemberThread` drives a synchronous adapter (confluent-kafka, kafka-python) in a thread;
`AioMember` drives an aiokafka consumer as an asyncio task. Both keep polling until told to
stop and publish what they consumed and their current assignment, so a test can watch a
whole group from outside. Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import confluent_kafka
import kafka
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.abc import ConsumerRebalanceListener as AioRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRoundRobin
from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyPartitionAssignor as AioSticky,
)
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.structs import OffsetAndMetadata

Record = tuple[int, int, bytes]  # partition, offset, value
Events = tuple[list[frozenset[int]], list[frozenset[int]]]  # assigned, revoked
Pace = tuple[int, float]  # at most this many records per poll, then sleep this long

HEARTBEAT_MS = 500
SESSION_MS = 6000
REBALANCE_MS = 10000  # max.poll.interval.ms: the rebalance timeout the members send
WAIT = 30.0  # the longest any single wait in these tests may take

KAFKA_PYTHON_ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
AIOKAFKA_ASSIGNORS = {"range": AioRange, "roundrobin": AioRoundRobin, "sticky": AioSticky}


# -- topics and records -------------------------------------------------------------------
def produce_spread(
    bootstrap: str, topic: str, partitions: int, per_partition: int, label: str
) -> list[bytes]:
    """Produce `per_partition` records to each partition (explicitly, not by key hash) and
    return every value; value `label:p:i` is the i-th record of partition p."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    )
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    values = []
    for i in range(per_partition):
        for p in range(partitions):
            value = f"{label}:{p}:{i:05d}".encode()
            values.append(value)
            while True:
                try:
                    producer.produce(topic, value, partition=p, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(WAIT) == 0, "produce did not finish"
    assert not errors, errors[:3]
    return values


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> float:
    """Poll `predicate` until true; return the seconds it took. Fails after `timeout`."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def partitions_cover(assignments: Iterable[frozenset[int]], partitions: int) -> bool:
    """Disjoint, and together exactly partitions 0..n-1."""
    sets = list(assignments)
    return sum(len(s) for s in sets) == partitions and set().union(*sets) == set(range(partitions))


def duplicates(values: Iterable[bytes]) -> list[bytes]:
    return sorted(v for v, n in Counter(values).items() if n > 1)


# -- synchronous adapters -----------------------------------------------------------------
def _note(events: list[frozenset[int]], tps: Iterable[Any]) -> None:
    """Record a rebalance callback's partitions; empty ones (kafka-python revokes nothing
    before its first join) are not events."""
    partitions = frozenset(tp.partition for tp in tps)
    if partitions:
        events.append(partitions)


class SyncMember(Protocol):
    assigned: list[frozenset[int]]
    revoked: list[frozenset[int]]

    def poll(self, timeout: float, limit: int = 500) -> list[Record]: ...
    def assignment(self) -> frozenset[int]: ...
    def commit(self, offsets: dict[int, int]) -> None: ...
    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]: ...
    def close(self) -> None: ...


class ConfluentMember:
    """A confluent-kafka consumer; `assignor` is librdkafka's strategy name.

    With `protocol="consumer"` it speaks KIP-848 (ConsumerGroupHeartbeat): the session
    timeout, heartbeat interval and assignor are then the broker's (`assignor`, if given,
    names the server-side one), and librdkafka refuses the classic-only settings."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        assignor: str | None = None,
        session_ms: int = SESSION_MS,
        auto_commit: bool = True,
        instance_id: str | None = None,
        protocol: str = "classic",
    ) -> None:
        self.topic = topic
        self.assigned: list[frozenset[int]] = []
        self.revoked: list[frozenset[int]] = []
        self.member_id: str | None = None
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "max.poll.interval.ms": max(REBALANCE_MS, session_ms),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": auto_commit,
            "auto.commit.interval.ms": 500,
        }
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
            if assignor is not None:
                config["group.remote.assignor"] = assignor
        else:
            config["partition.assignment.strategy"] = assignor or "range"
            config["session.timeout.ms"] = session_ms
            config["heartbeat.interval.ms"] = HEARTBEAT_MS
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        self.consumer = confluent_kafka.Consumer(config)
        # Without assign()/unassign() in the callbacks the library does it for us.
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _consumer: object, tps: list[confluent_kafka.TopicPartition]) -> None:
        _note(self.assigned, tps)

    def _on_revoke(self, _consumer: object, tps: list[confluent_kafka.TopicPartition]) -> None:
        _note(self.revoked, tps)

    def poll(self, timeout: float, limit: int = 500) -> list[Record]:
        out = []
        for msg in self.consumer.consume(limit, timeout=timeout):
            error = msg.error()
            if error is not None:
                if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                raise confluent_kafka.KafkaException(error)
            out.append((msg.partition(), msg.offset(), msg.value()))
        # Read here, in the polling thread: memberid() from another thread blocks meanwhile.
        self.member_id = self.consumer.memberid()
        return out

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self, offsets: dict[int, int]) -> None:
        tps = [confluent_kafka.TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        for tp in self.consumer.commit(offsets=tps, asynchronous=False) or []:
            assert tp.error is None, tp

    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        tps = [confluent_kafka.TopicPartition(self.topic, p) for p in partitions]
        got = self.consumer.committed(tps, timeout=10)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in got}

    def close(self) -> None:
        self.consumer.close()


class _KafkaPythonListener(ConsumerRebalanceListener):
    def __init__(self, member: KafkaPythonMember) -> None:
        self.member = member

    def on_partitions_revoked(self, revoked: Any) -> None:
        _note(self.member.revoked, revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        _note(self.member.assigned, assigned)


class KafkaPythonMember:
    """A kafka-python consumer; `assignor` is a key of KAFKA_PYTHON_ASSIGNORS."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        assignor: str = "range",
        session_ms: int = SESSION_MS,
        auto_commit: bool = True,
        instance_id: str | None = None,
    ) -> None:
        self.topic = topic
        self.assigned: list[frozenset[int]] = []
        self.revoked: list[frozenset[int]] = []
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            group_instance_id=instance_id,
            partition_assignment_strategy=[KAFKA_PYTHON_ASSIGNORS[assignor]],
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=max(REBALANCE_MS, session_ms),
            auto_offset_reset="earliest",
            enable_auto_commit=auto_commit,
            auto_commit_interval_ms=500,
        )
        self.consumer.subscribe(topics=[topic], listener=_KafkaPythonListener(self))

    def poll(self, timeout: float, limit: int = 500) -> list[Record]:
        batches = self.consumer.poll(timeout_ms=int(timeout * 1000), max_records=limit)
        return [(tp.partition, m.offset, m.value) for tp, msgs in batches.items() for m in msgs]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self, offsets: dict[int, int]) -> None:
        self.consumer.commit(
            {
                kafka.TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                for p, o in offsets.items()
            }
        )

    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        return {
            p: self.consumer.committed(kafka.TopicPartition(self.topic, p), timeout_ms=10000)
            for p in partitions
        }

    def close(self) -> None:
        self.consumer.close(timeout_ms=10000)


class _AioListener(AioRebalanceListener):
    def __init__(self, member: AioMember) -> None:
        self.member = member

    async def on_partitions_revoked(self, revoked: Any) -> None:
        _note(self.member.revoked, revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        _note(self.member.assigned, assigned)


# -- aiokafka -----------------------------------------------------------------------------
class AioMember:
    """An aiokafka consumer in the running event loop; `assignor` keys AIOKAFKA_ASSIGNORS.

    `await start()`, then either `run()` as a task (polls until `stop()`, publishing records
    and assignment like MemberThread) or the single calls `poll`/`commit`/`committed`."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        assignor: str = "range",
        session_ms: int = SESSION_MS,
        auto_commit: bool = True,
        instance_id: str | None = None,
    ) -> None:
        self.topic = topic
        self.bootstrap = bootstrap
        self.assigned: list[frozenset[int]] = []
        self.revoked: list[frozenset[int]] = []
        self.records: list[Record] = []
        self.current: frozenset[int] = frozenset()
        self.stopping = False
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            group_instance_id=instance_id,
            partition_assignment_strategy=(AIOKAFKA_ASSIGNORS[assignor],),
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=max(REBALANCE_MS, session_ms),
            rebalance_timeout_ms=max(REBALANCE_MS, session_ms),
            auto_offset_reset="earliest",
            enable_auto_commit=auto_commit,
            auto_commit_interval_ms=500,
        )
        self.consumer.subscribe([topic], listener=_AioListener(self))

    async def start(self) -> None:
        await asyncio.wait_for(self.consumer.start(), WAIT)

    async def poll(self, timeout: float, limit: int = 500) -> list[Record]:
        batches = await self.consumer.getmany(timeout_ms=int(timeout * 1000), max_records=limit)
        return [(tp.partition, m.offset, m.value) for tp, msgs in batches.items() for m in msgs]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    async def commit(self, offsets: dict[int, int]) -> None:
        await self.consumer.commit(
            {AioTopicPartition(self.topic, p): o for p, o in offsets.items()}
        )

    async def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        return {
            p: await self.consumer.committed(AioTopicPartition(self.topic, p)) for p in partitions
        }

    async def run(self, pace: Pace | None = None) -> None:
        limit, pause = pace or (500, 0.0)
        while not self.stopping:
            self.records += await self.poll(0.2, limit)
            self.current = self.assignment()
            if pause:
                await asyncio.sleep(pause)

    def stop(self) -> None:
        self.stopping = True

    async def close(self) -> None:
        await asyncio.wait_for(self.consumer.stop(), WAIT)


async def async_wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


class AioSyncMember:
    """aiokafka behind the synchronous interface, for tests written once for all clients.

    It owns an event loop that runs during each call; the thread that polls it polls all
    the time, so aiokafka's heartbeat and commit tasks keep running. Build, use and close it
    in one thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, **opts: Any) -> None:
        self._runner = asyncio.Runner()
        self.aio: AioMember = self._runner.run(self._start(bootstrap, group, topic, opts))
        self.assigned = self.aio.assigned
        self.revoked = self.aio.revoked

    @staticmethod
    async def _start(bootstrap: str, group: str, topic: str, opts: dict[str, Any]) -> AioMember:
        member = AioMember(bootstrap, group, topic, **opts)
        await member.start()
        return member

    def poll(self, timeout: float, limit: int = 500) -> list[Record]:
        return self._runner.run(self.aio.poll(timeout, limit))

    def assignment(self) -> frozenset[int]:
        return self.aio.assignment()

    def commit(self, offsets: dict[int, int]) -> None:
        self._runner.run(self.aio.commit(offsets))

    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        return self._runner.run(self.aio.committed(partitions))

    def close(self) -> None:
        try:
            self._runner.run(self.aio.close())
        finally:
            self._runner.close()


SYNC_MEMBERS: dict[str, type[ConfluentMember] | type[KafkaPythonMember] | type[AioSyncMember]] = {
    "confluent": ConfluentMember,
    "kafka-python": KafkaPythonMember,
    "aiokafka": AioSyncMember,
}


# -- a member in a thread -----------------------------------------------------------------
class MemberThread(threading.Thread):
    """Builds a synchronous member inside its own thread and polls it until `stop()`.

    `records` and `current` (the assignment after the latest poll) may be read from other
    threads; `error` holds whatever the member raised. `close()` stops, joins and re-raises.
    """

    def __init__(
        self, make: Callable[[], SyncMember], name: str = "member", pace: Pace | None = None
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._make = make
        self._limit, self._pause = pace or (500, 0.0)
        self._stop_event = threading.Event()
        self.ready = threading.Event()
        self.member: SyncMember | None = None
        self.records: list[Record] = []
        self.current: frozenset[int] = frozenset()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.member = self._make()
            self.ready.set()
            try:
                while not self._stop_event.is_set():
                    self.records += self.member.poll(0.2, self._limit)
                    self.current = self.member.assignment()
                    if self._pause:
                        time.sleep(self._pause)
            finally:
                self.member.close()
        except BaseException as exc:
            self.error = exc
        finally:
            self.ready.set()

    def values(self) -> list[bytes]:
        return [v for _, _, v in list(self.records)]

    def events(self) -> Events:
        """(assigned, revoked) as the member's rebalance callbacks saw them so far."""
        if self.member is None:
            return [], []
        return list(self.member.assigned), list(self.member.revoked)

    def stop(self) -> None:
        self._stop_event.set()

    def close(self, timeout: float = WAIT) -> None:
        self.stop()
        self.join(timeout)
        assert not self.is_alive(), f"{self.name} did not close within {timeout:.0f}s"
        if self.error is not None:
            raise self.error


def start_members(
    makers: list[Callable[[], SyncMember]], pace: Pace | None = None
) -> list[MemberThread]:
    threads = [MemberThread(make, f"member-{i}", pace) for i, make in enumerate(makers)]
    for thread in threads:
        thread.start()
    return threads


def close_members(threads: list[MemberThread]) -> None:
    """Stop every member (all at once, so nobody waits out the others' rebalance), then join
    them; re-raise the first failure."""
    for thread in threads:
        thread.stop()
    errors = []
    for thread in threads:
        try:
            thread.close()
        except BaseException as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


# -- a member in a child process (to be SIGKILLed) ----------------------------------------
MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")


class MemberProcess:
    """`group_member.py` in a child process; `current` follows the assignment it reports."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, **opts: Any) -> None:
        args = [sys.executable, str(MEMBER_SCRIPT), client, bootstrap, group, topic]
        args.append(json.dumps(opts))
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.current: frozenset[int] = frozenset()
        self.consumed = 0
        self._events: Events = ([], [])
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            report = json.loads(line)
            self.current = frozenset(report["assignment"])
            self.consumed = report["consumed"]
            self._events = (
                [frozenset(a) for a in report["assigned"]],
                [frozenset(r) for r in report["revoked"]],
            )

    def events(self) -> Events:
        return self._events

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def holds(self) -> frozenset[int]:
        """Its current assignment; fails at once (with its stderr) if the process died."""
        assert self.alive(), "member process died:\n" + "\n".join(self.stderr[-30:])
        return self.current

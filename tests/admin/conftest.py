"""Fixtures of the `rafka-actors groups` tests: one real broker per module, real groups.

Starting a broker per test would dominate the run time, so `broker` is module-scoped here
(it overrides the per-test one of tests/conftest.py, keeping its name so that a failing
test still shows the broker's log); tests keep apart by using their own topic and group
names. `active_groups` runs, for the whole module, one classic member (confluent-kafka,
range assignor) and one KIP-848 member (`group.protocol=consumer`) on a 3-partition topic
with 10 records per partition; each member commits known offsets once its group is Stable.

`cli(...)` runs `rafka_actors.cli.main` in-process and returns the exit status and what it
printed; `Result.rows()` reads a table back as dicts keyed by its header.
"""

from __future__ import annotations

import json
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from rafka_actors.admin import calls
from rafka_actors.admin.client import KafkaClient
from rafka_actors.cli import main

from ..broker_process import BrokerProcess
from ..e2e.clients import Confluent
from ..e2e.group_clients import WAIT, ConfluentMember, wait_until

SETTINGS = (
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.assignment.interval.ms=200",
    "group.initial.rebalance.delay.ms=200",
    "group.min.session.timeout.ms=1000",
)
PARTITIONS = 3
PER_PARTITION = 10
CLASSIC_COMMITS = {0: 3, 1: 7}  # partition 2: no commit
CONSUMER_COMMITS = {1: 5}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(Path(tmp_path_factory.mktemp("admin")) / "data", *SETTINGS).start()
    yield process
    if process.alive():
        process.kill()


def unique(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


def make_topic(broker: BrokerProcess, tag: str = "topic") -> str:
    """A new topic of PARTITIONS partitions with PER_PARTITION records in each."""
    topic = unique(tag)
    Confluent(broker.bootstrap).create_topic(topic, PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(topic, f"{p}:{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    return topic


def _standalone(broker: BrokerProcess, group: str) -> Any:
    return confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )


def commit_simple(broker: BrokerProcess, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a consumer that never joins: the group exists, Empty, with these offsets."""
    consumer = _standalone(broker, group)
    try:
        tps = [confluent_kafka.TopicPartition(topic, p, o) for p, o in offsets.items()]
        for tp in consumer.commit(offsets=tps, asynchronous=False) or []:
            assert tp.error is None, tp
    finally:
        consumer.close()


def committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offsets as confluent-kafka reads them (None: no commit)."""
    consumer = _standalone(broker, group)
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        got = consumer.committed(tps, timeout=10)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in got}
    finally:
        consumer.close()


def describe(broker: BrokerProcess, group: str) -> Any:
    with KafkaClient(broker.bootstrap) as client:
        return calls.describe_group(client, group)


class Member(threading.Thread):
    """A confluent-kafka member polling in its own thread; `call(fn)` runs `fn(member)` in
    that thread (librdkafka's synchronous commit blocks when called beside a running poll)."""

    def __init__(self, make: Callable[[], ConfluentMember]) -> None:
        super().__init__(daemon=True)
        self._make = make
        self._tasks: queue.SimpleQueue[tuple[Callable[[ConfluentMember], Any], Future[Any]]]
        self._tasks = queue.SimpleQueue()
        self._stopping = threading.Event()
        self.member_id: str | None = None
        self.current: frozenset[int] = frozenset()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            member = self._make()
            try:
                while not self._stopping.is_set():
                    member.poll(0.1)
                    self.current, self.member_id = member.assignment(), member.member_id
                    while not self._tasks.empty():
                        fn, future = self._tasks.get()
                        try:
                            future.set_result(fn(member))
                        except BaseException as exc:
                            future.set_exception(exc)
            finally:
                member.close()
        except BaseException as exc:
            self.error = exc

    def call(self, fn: Callable[[ConfluentMember], Any]) -> Any:
        future: Future[Any] = Future()
        self._tasks.put((fn, future))
        return future.result(WAIT)

    def close(self) -> None:
        self._stopping.set()
        self.join(WAIT)
        assert self.error is None, self.error


@dataclass
class ActiveGroups:
    topic: str
    classic: str
    consumer: str
    classic_member: Member
    consumer_member: Member


def _settled(broker: BrokerProcess, group: str) -> bool:
    described = describe(broker, group)
    held = sum(len(m.partitions()) for m in described.members)
    return described.state == "Stable" and held == PARTITIONS


@pytest.fixture(scope="module")
def active_groups(broker: BrokerProcess) -> Iterator[ActiveGroups]:
    topic = make_topic(broker, "active")
    classic, consumer = unique("classic"), unique("consumer")
    threads = [
        Member(lambda: ConfluentMember(broker.bootstrap, classic, topic, auto_commit=False)),
        Member(
            lambda: ConfluentMember(
                broker.bootstrap, consumer, topic, auto_commit=False, protocol="consumer"
            )
        ),
    ]
    for thread in threads:
        thread.start()
    try:
        for group, thread in zip((classic, consumer), threads, strict=True):
            wait_until(lambda g=group: _settled(broker, g), f"group {group} to settle")
            wait_until(lambda t=thread: len(t.current) == PARTITIONS, "the member's assignment")
        threads[0].call(lambda m: m.commit(CLASSIC_COMMITS))
        threads[1].call(lambda m: m.commit(CONSUMER_COMMITS))
        yield ActiveGroups(topic, classic, consumer, *threads)
    finally:
        for thread in threads:
            thread.close()


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def rows(self) -> list[dict[str, str]]:
        """The first table on stdout, as dicts keyed by its header."""
        lines = self.out.split("\n\n")[0].splitlines()
        header = lines[0].split()
        return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]

    def tables(self) -> list[list[dict[str, str]]]:
        """Every table on stdout (blank-line separated)."""
        return [Result(self.code, chunk, "").rows() for chunk in self.out.strip().split("\n\n")]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> Any:
    def run(*argv: str, bootstrap: str | None = None) -> Result:
        capsys.readouterr()
        code = main(["groups", *argv, "--bootstrap", bootstrap or broker.bootstrap])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run

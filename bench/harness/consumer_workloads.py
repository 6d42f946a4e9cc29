"""Workloads (a)-(d) of issue 8, driven by a real client: confluent-kafka (librdkafka).

(a) one consumer: subscribe() to its first assignment (classic; KIP-848 where served);
(b) 10 and 100 consumers of one group starting together, until every one holds partitions
    and together they hold each partition of the topic exactly once (classic, KIP-848);
(c) synchronous commits/s from 1 client (with p50/p99 latency), and in aggregate from 16
    clients in 16 groups, each on its own thread (librdkafka releases the GIL while waiting);
    these are simple consumers (no membership: generation -1). Then commits/s of one
    subscribed group member (classic protocol: it joined, holds its partition and commits
    with its generation and member id), once with its fetcher running and once with its
    partition paused, 5 s each;
(d) committed() (OffsetFetch) calls/s from 1 client, with p99 latency.

Consumers use a 10 s session timeout (librdkafka's 45 s default would make Tansu, which holds
joins for half the session, take 22 s per figure). Every wait is bounded; a figure that could
not be measured has no value and the reason goes to the log.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import confluent_kafka
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .core import Figure, Options, Target, Workload
from .loadgen import percentile

log = logging.getLogger(__name__)

ASSIGN_TIMEOUT_S = 60.0
WINDOW_S, QUICK_WINDOW_S = 3.0, 0.5
MEMBER_WINDOW_S = 5.0  # (c)'s subscribed member, per figure (QUICK_WINDOW_S with --quick)
SIZES, QUICK_SIZES = (10, 100), (3, 6)
AGGREGATE_CLIENTS, QUICK_AGGREGATE = 16, 4
SESSION_MS = 10_000


def _figure(key: str, label: str, unit: str, better: bool, value: float | None) -> Figure:
    return Figure(key, label, unit, better, [] if value is None else [value])


def _classic(target: Target, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": target.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 1000,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }


def _kip848(target: Target, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": target.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }


PROTOCOLS: dict[str, Callable[[Target, str], dict[str, Any]]] = {
    "classic": _classic,
    "consumer": _kip848,
}


def _protocols(target: Target) -> list[str]:
    return ["classic", "consumer"] if target.kip848 else ["classic"]


def create_topic(target: Target, partitions: int) -> str:
    """A fresh topic with `partitions` partitions, known to the broker's metadata."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            return name
        time.sleep(0.05)
    raise TimeoutError(f"topic {name} never showed {partitions} partitions")


class _Member:
    """One consumer polled on its own thread; `held` is its current assignment."""

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self.consumer = confluent_kafka.Consumer(config)
        self.topic = topic
        self.held: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _assigned(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.held = self.held | {p.partition for p in partitions}

    def _revoked(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.held = self.held - {p.partition for p in partitions}

    def start(self, go: threading.Event) -> None:
        self._go = go
        self._thread.start()

    def _run(self) -> None:
        try:
            self._go.wait()
            self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
            while not self._stop.is_set():
                self.consumer.poll(0.02)
        except BaseException as exc:  # reported by the workload
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()
        # The consumer holds our callbacks and we hold it: a cycle that only the rare full
        # collection frees, and a confluent-kafka client keeps a thread-local key until it
        # is freed. Some thousands of them used up the process's keys ("Failed to initialize
        # thread local storage" for every later client, a 7-run guard's (b)-(e)).
        del self.consumer


def _stop_all(members: list[_Member]) -> None:
    """Close every consumer at once: one by one, 100 LeaveGroups that each start a
    rebalance took minutes against some brokers."""
    closers = [threading.Thread(target=m.stop, daemon=True) for m in members]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join(60)


def _assemble(target: Target, protocol: str, consumers: int, partitions: int) -> float:
    """Seconds from a common start until `consumers` members hold a disjoint, complete
    assignment of a `partitions`-partition topic (each member at least one partition)."""
    topic = create_topic(target, partitions)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [_Member(PROTOCOLS[protocol](target, group), topic) for _ in range(consumers)]
    go = threading.Event()
    for member in members:
        member.start(go)
    try:
        start = time.monotonic()
        go.set()
        while time.monotonic() - start < ASSIGN_TIMEOUT_S:
            held = [m.held for m in members]
            complete = all(held) and sum(map(len, held)) == partitions
            if complete and frozenset().union(*held) == frozenset(range(partitions)):
                return time.monotonic() - start
            failed = next((m.error for m in members if m.error), None)
            if failed is not None:
                raise failed
            time.sleep(0.002)
        raise TimeoutError(f"{consumers} consumers not assigned in {ASSIGN_TIMEOUT_S:.0f}s")
    finally:
        _stop_all(members)


def _measured(what: str, fn: Callable[[], float]) -> float | None:
    try:
        return fn()
    except Exception as exc:  # the figure stays empty; the run goes on
        log.warning("%s failed: %s", what, exc)
        return None


def _assembly(target: Target, protocol: str, n: int) -> Callable[[], float]:
    return lambda: _assemble(target, protocol, n, n)


def first_assignment(target: Target, opts: Options) -> list[Figure]:
    figures = []
    for protocol in _protocols(target):
        value = _measured(f"(a) {protocol}", _assembly(target, protocol, 1))
        figures.append(
            _figure(
                f"a.first_assignment_{protocol}",
                f"subscribe to first assignment, {protocol} protocol",
                "s",
                False,
                value,
            )
        )
    return figures


def consumers_together(target: Target, opts: Options) -> list[Figure]:
    figures = []
    for n in QUICK_SIZES if opts.quick else SIZES:
        for protocol in _protocols(target):
            value = _measured(f"(b) {n} {protocol}", _assembly(target, protocol, n))
            figures.append(
                _figure(
                    f"b.assigned_{n}_{protocol}",
                    f"{n} consumers start together: all assigned, {protocol} protocol",
                    "s",
                    False,
                    value,
                )
            )
    return figures


def _calls(consumer: Any, call: Callable[[], Any], seconds: float) -> list[float]:
    """Latencies (s) of back-to-back `call()`s for `seconds`."""
    latencies = []
    end = time.perf_counter() + seconds
    while (now := time.perf_counter()) < end:
        call()
        latencies.append(time.perf_counter() - now)
    return latencies


def _committer(target: Target, topic: str) -> Any:
    consumer = confluent_kafka.Consumer(_classic(target, f"bench-{uuid.uuid4().hex[:8]}"))
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # warm up
    return consumer


def _commit_loop(consumer: Any, topic: str, seconds: float) -> list[float]:
    offset = iter(range(1, 1 << 62))
    return _calls(
        consumer,
        lambda: consumer.commit(
            offsets=[TopicPartition(topic, 0, next(offset))], asynchronous=False
        ),
        seconds,
    )


def commits(target: Target, opts: Options) -> list[Figure]:
    window = QUICK_WINDOW_S if opts.quick else WINDOW_S
    clients = QUICK_AGGREGATE if opts.quick else AGGREGATE_CLIENTS
    got: dict[str, float | None] = dict.fromkeys(("one", "p50", "p99", "many"))
    try:
        topic = create_topic(target, 1)
        consumer = _committer(target, topic)
        try:
            latencies = _commit_loop(consumer, topic, window)
        finally:
            consumer.close()
        got["one"] = len(latencies) / window
        got["p50"] = percentile(latencies, 50) * 1000
        got["p99"] = percentile(latencies, 99) * 1000
        got["many"] = aggregate_commits([(target, topic)], clients, window)
    except Exception as exc:
        log.warning("(c) commits failed: %s", exc)
    member_window = QUICK_WINDOW_S if opts.quick else MEMBER_WINDOW_S
    member = _measured(
        "(c) a subscribed member's commits",
        lambda: member_commits(target, member_window, paused=False),
    )
    paused = _measured(
        "(c) a paused member's commits",
        lambda: member_commits(target, member_window, paused=True),
    )
    return [
        _figure("c.commits_1", "sync commits/s, 1 client", "/s", True, got["one"]),
        _figure("c.commit_p50_ms", "  commit latency p50, 1 client", "ms", False, got["p50"]),
        _figure("c.commit_p99_ms", "  commit latency p99, 1 client", "ms", False, got["p99"]),
        _figure(
            f"c.commits_{clients}",
            f"sync commits/s, {clients} clients in {clients} groups",
            "/s",
            True,
            got["many"],
        ),
        _figure(
            "c.member_commits_per_s",
            "sync commits/s, subscribed member, fetcher running",
            "/s",
            True,
            member,
        ),
        _figure(
            "c.member_paused_commits_per_s",
            "sync commits/s, subscribed member, partition paused",
            "/s",
            True,
            paused,
        ),
    ]


def member_commits(target: Target, window: float, *, paused: bool) -> float:
    """Synchronous commits/s of a classic group member: it subscribes to a fresh one-partition
    topic, polls until it holds the partition (it has joined and synced), pauses it if
    `paused` (its fetcher stops asking for records), then commits back to back for `window`
    seconds; librdkafka sends its generation and member id with each commit. The offset
    the group holds afterwards must be the last one committed."""
    topic = create_topic(target, 1)
    consumer = confluent_kafka.Consumer(_classic(target, f"bench-{uuid.uuid4().hex[:8]}"))
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + ASSIGN_TIMEOUT_S
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no assignment in {ASSIGN_TIMEOUT_S:.0f}s")
            consumer.poll(0.05)
        if paused:
            consumer.pause(consumer.assignment())
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # warm up
        latencies = _commit_loop(consumer, topic, window)
        (held,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        if held.offset != len(latencies):
            raise RuntimeError(f"the group holds offset {held.offset}, not {len(latencies)}")
        return len(latencies) / window
    finally:
        consumer.close()


def aggregate_commits(places: Sequence[tuple[Target, str]], clients: int, window: float) -> float:
    """Synchronous commits/s of `clients` committers, each in its own group and thread; client
    i commits to the topic and broker of ``places[i % len(places)]``."""
    homes = [places[i % len(places)] for i in range(clients)]
    consumers = [_committer(target, topic) for target, topic in homes]
    counts = [0] * clients
    go = threading.Barrier(clients + 1)

    def run(i: int) -> None:
        go.wait()
        counts[i] = len(_commit_loop(consumers[i], homes[i][1], window))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    go.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join(window + 60)
    elapsed = time.perf_counter() - start
    for consumer in consumers:
        consumer.close()
    return sum(counts) / elapsed


def offset_fetches(target: Target, opts: Options) -> list[Figure]:
    window = QUICK_WINDOW_S if opts.quick else WINDOW_S
    got: dict[str, float | None] = dict.fromkeys(("rate", "p99"))
    try:
        topic = create_topic(target, 1)
        consumer = _committer(target, topic)
        wanted = [TopicPartition(topic, 0)]
        try:
            latencies = _calls(consumer, lambda: consumer.committed(wanted, timeout=10), window)
        finally:
            consumer.close()
        got["rate"] = len(latencies) / window
        got["p99"] = percentile(latencies, 99) * 1000
    except Exception as exc:
        log.warning("(d) offset fetches failed: %s", exc)
    return [
        _figure(
            "d.fetches_1", "committed() (OffsetFetch) calls/s, 1 client", "/s", True, got["rate"]
        ),
        _figure("d.fetch_p99_ms", "  OffsetFetch latency p99, 1 client", "ms", False, got["p99"]),
    ]


WORKLOADS: dict[str, Workload] = {
    "a": Workload("a", "subscribe to first assignment", first_assignment),
    "b": Workload("b", "10 and 100 consumers starting together", consumers_together),
    "c": Workload("c", "synchronous commits/s, 1 and 16 clients, and a subscribed member", commits),
    "d": Workload("d", "OffsetFetch (committed()) calls/s", offset_fetches),
}

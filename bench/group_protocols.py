"""Classic consumer groups (JoinGroup/SyncGroup) against KIP-848 (ConsumerGroupHeartbeat).

Starts `rafka-actors serve` (tests/broker_process.py's BrokerProcess on 127.0.0.1:0, temporary
data dir) once per broker configuration and, per protocol, over --runs runs, each with a fresh
topic (--partitions, default 20) and a fresh group, measures with confluent-kafka consumers
(`group.protocol=classic` / `group.protocol=consumer`), one polling thread each:

* "10 consumers assigned": 10 consumers subscribe together; seconds from the first
  subscribe() until all 10 hold a non-empty assignment, the assignments are pairwise
  disjoint and together cover every partition.
* "join settles": once those 10 are settled (and the group has been quiet for a moment), an
  11th consumer subscribes; seconds from its subscribe() until all 11 again hold a disjoint,
  complete assignment and the newcomer holds at least one partition.
* "close 11" (for information): seconds to close the 11 consumers, all in parallel.

Every polling thread samples consumer.assignment() after each poll(0.01) (so every ~10 ms)
and checks the condition itself when its assignment changes, so a figure is the moment the
last needed assignment arrived, not when a watcher happened to look.

Why the broker's timers dominate these figures:

* Classic: the first JoinGroup of an empty group waits `group.initial.rebalance.delay.ms`
  (Kafka's default 3000, extended for each member that joins meanwhile) so that a fleet of
  starting consumers ends up in one rebalance rather than ten. When an 11th member joins a
  stable group, the others learn of the rebalance only on their next Heartbeat
  (REBALANCE_IN_PROGRESS, `heartbeat.interval.ms`, librdkafka's default 3000), then revoke
  everything (eager assignors), rejoin and sync.
* KIP-848: there is no join barrier; the broker computes a target assignment (at most once
  per `group.consumer.assignment.interval.ms`) and each member learns of its new target only
  in the response to its next ConsumerGroupHeartbeat, sent every
  `group.consumer.heartbeat.interval.ms` (Kafka's default 5000; the broker sets it, the
  client may not). A partition that moves must first be revoked by its owner (acknowledged
  in a heartbeat) before the newcomer is given it on one of *its* next heartbeats, so
  "join settles" costs about one to two heartbeat intervals.

Hence two broker configurations, printed as separate sections (--config):

* defaults: Kafka's defaults (initial rebalance delay 3000 ms, consumer heartbeat interval
  5000 ms, assignment interval 1000 ms); classic consumers keep librdkafka's defaults except
  session.timeout.ms=10000.
* tuned: short timers for both: initial rebalance delay 0; consumer heartbeat interval 500 ms
  and assignment interval 0; classic consumers with heartbeat.interval.ms=500 (and
  session.timeout.ms=6000).

    .venv/bin/python bench/group_protocols.py [--runs 3] [--config defaults|tuned|both]
        [--partitions 20] [--members 10] [--timeout 60] [--debug cgrp] [-o KEY=VALUE ...]

-o settings are passed to the broker after the configuration's own, so they win. Progress
goes to stderr; the table and the command that produced it go to stdout.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.broker_process import BrokerProcess

PROTOCOLS = ("classic", "consumer")
LABELS = {"classic": "classic", "consumer": "KIP-848"}
POLL_S = 0.01
SUSPICIOUS = ("ERROR", "Traceback", "CRITICAL", "WARNING")


@dataclass(frozen=True)
class Setup:
    name: str
    broker: tuple[str, ...]  # -o settings
    classic: dict[str, Any]  # extra librdkafka settings of classic consumers
    quiet_s: dict[str, float]  # how long assignments must not move before the join


SETUPS = {
    "defaults": Setup(
        "defaults",
        (
            "group.initial.rebalance.delay.ms=3000",
            "group.consumer.heartbeat.interval.ms=5000",
            "group.consumer.assignment.interval.ms=1000",
        ),
        {"session.timeout.ms": 10000},
        # a little more than one heartbeat interval: every member has heard the latest news
        {"classic": 3.5, "consumer": 5.5},
    ),
    "tuned": Setup(
        "tuned",
        (
            "group.initial.rebalance.delay.ms=0",
            "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.assignment.interval.ms=0",
        ),
        {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
        {"classic": 1.0, "consumer": 1.0},
    ),
}


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- the group, watched from its members' polling threads ---------------------------------
class Watch:
    """The members' latest assignments; `check` runs the current phase's condition whenever
    one of them changes and stamps the first moment it holds."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.lock = threading.Lock()
        self.held: dict[int, frozenset[int]] = {}
        self.changed_at = time.perf_counter()
        self.changes = 0
        self.members: tuple[int, ...] = ()
        self.newcomer: int | None = None
        self.settled_at: float | None = None
        self.settled = threading.Event()

    def arm(self, members: tuple[int, ...], newcomer: int | None = None) -> None:
        with self.lock:
            self.members, self.newcomer = members, newcomer
            self.settled_at = None
            self.settled.clear()
            self._check(time.perf_counter())

    def update(self, index: int, assignment: frozenset[int]) -> None:
        now = time.perf_counter()
        with self.lock:
            if self.held.get(index) == assignment:
                return
            self.held[index] = assignment
            self.changed_at = now
            self.changes += 1
            self._check(now)

    def holds(self) -> bool:
        with self.lock:
            return self._holds()

    def _holds(self) -> bool:
        if not self.members:
            return False
        sets = [self.held.get(i, frozenset()) for i in self.members]
        if not all(sets):
            return False
        if self.newcomer is not None and not self.held.get(self.newcomer):
            return False
        covered: set[int] = set().union(*sets)
        return sum(map(len, sets)) == self.partitions and covered == set(range(self.partitions))

    def _check(self, now: float) -> None:
        if self.settled_at is None and self._holds():
            self.settled_at = now
            self.settled.set()

    def snapshot(self) -> dict[int, list[int]]:
        with self.lock:
            return {i: sorted(self.held.get(i, ())) for i in self.members}


class Member(threading.Thread):
    """Builds a consumer in its own thread, subscribes when `go` is set, polls every ~10 ms
    and reports its assignment to the Watch until stopped; then closes it."""

    def __init__(self, index: int, config: dict[str, Any], topic: str, watch: Watch) -> None:
        super().__init__(name=f"member-{index}", daemon=True)
        self.index, self.config, self.topic, self.watch = index, config, topic, watch
        self.built = threading.Event()
        self.go = threading.Event()
        self.stopping = threading.Event()
        self.subscribed_at: float | None = None
        self.closed_at: float | None = None
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            consumer = confluent_kafka.Consumer(self.config)
        except BaseException as exc:
            self.errors.append(f"constructing: {exc!r}")
            self.built.set()
            return
        self.built.set()
        try:
            self.go.wait()
            self.subscribed_at = time.perf_counter()
            consumer.subscribe([self.topic])
            while not self.stopping.is_set():
                msg = consumer.poll(POLL_S)
                error = None if msg is None else msg.error()
                if error is not None and error.code() != confluent_kafka.KafkaError._PARTITION_EOF:
                    self.errors.append(str(error))
                held = frozenset(tp.partition for tp in consumer.assignment())
                self.watch.update(self.index, held)
        except BaseException as exc:
            self.errors.append(repr(exc))
        finally:
            try:
                consumer.close()
            except BaseException as exc:
                self.errors.append(f"closing: {exc!r}")
            self.closed_at = time.perf_counter()


# -- one run -------------------------------------------------------------------------------
@dataclass
class RunResult:
    assigned: float | None = None
    join: float | None = None
    close: float | None = None
    notes: list[str] = field(default_factory=list)


def consumer_config(
    bootstrap: str,
    group: str,
    protocol: str,
    setup: Setup,
    debug: str | None,
    index: int,
    newcomer: int,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "client.id": f"bench-{protocol}-{index}",
    }
    if protocol == "classic":
        config.update(setup.classic)
    # librdkafka logs to stderr; one of the first members and the newcomer are enough
    if debug and index in (0, newcomer):
        config["debug"] = debug
    return config


def wait_quiet(watch: Watch, quiet_s: float, timeout: float) -> bool:
    """Until the condition holds and no assignment has moved for `quiet_s`."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        with watch.lock:
            calm = time.perf_counter() - watch.changed_at >= quiet_s and watch._holds()
        if calm:
            return True
        time.sleep(0.05)
    return False


def one_run(
    bootstrap: str,
    admin: AdminClient,
    protocol: str,
    setup: Setup,
    opts: argparse.Namespace,
    label: str,
) -> RunResult:
    result = RunResult()
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"gp-{protocol}-{suffix}", f"gp-{protocol}-{suffix}"
    admin.create_topics([NewTopic(topic, opts.partitions, 1)])[topic].result(30)
    watch = Watch(opts.partitions)
    n = opts.members

    def make(i: int) -> Member:
        config = consumer_config(bootstrap, group, protocol, setup, opts.debug, i, n)
        member = Member(i, config, topic, watch)
        member.start()
        return member

    first = [make(i) for i in range(n)]
    members = list(first)
    try:
        for m in first:
            m.built.wait(30)
        watch.arm(tuple(range(n)))
        for m in first:
            m.go.set()
        if not watch.settled.wait(opts.timeout):
            result.notes.append(f"{n} consumers never settled: {watch.snapshot()}")
            return result
        start = min(m.subscribed_at for m in first if m.subscribed_at is not None)
        assert watch.settled_at is not None
        result.assigned = watch.settled_at - start
        at_settle, changes = watch.snapshot(), watch.changes
        if not wait_quiet(watch, setup.quiet_s[protocol], opts.timeout):
            result.notes.append(f"{n} consumers never went quiet: {watch.snapshot()}")
            return result
        if watch.snapshot() != at_settle:
            result.notes.append(
                f"assignments moved {watch.changes - changes}x after first settling "
                f"({at_settle} -> {watch.snapshot()})"
            )
        newcomer = make(n)
        members.append(newcomer)
        newcomer.built.wait(30)
        watch.arm(tuple(range(n + 1)), newcomer=n)
        newcomer.go.set()
        if not watch.settled.wait(opts.timeout):
            result.notes.append(f"the join never settled: {watch.snapshot()}")
            return result
        assert watch.settled_at is not None and newcomer.subscribed_at is not None
        result.join = watch.settled_at - newcomer.subscribed_at
        return result
    finally:
        closing = time.perf_counter()
        for m in members:
            m.go.set()  # a member still waiting to subscribe subscribes, then closes
            m.stopping.set()
        for m in members:
            m.join(opts.timeout)
        stuck = [m.name for m in members if m.is_alive()]
        if stuck:
            result.notes.append(f"not closed within {opts.timeout:.0f}s: {stuck}")
        else:
            result.close = max(m.closed_at or closing for m in members) - closing
        for m in members:
            for error in m.errors[:3]:
                result.notes.append(f"{m.name}: {error}")
        figures = ", ".join(
            f"{name} {value:.3f}s" if value is not None else f"{name} n/a"
            for name, value in (
                ("assigned", result.assigned),
                ("join", result.join),
                ("close", result.close),
            )
        )
        log(f"{label}: {figures}")
        for note in result.notes:
            log(f"{label}:   note: {note}")
        admin.delete_topics([topic])


# -- the table ----------------------------------------------------------------------------
FIGURES = (
    ("assigned", "{n} consumers assigned s"),
    ("join", "join settles ({n1}th) s"),
    ("close", "close {n1} (info) s"),
)


def fmt(values: list[float | None], runs: int) -> str:
    done = [v for v in values if v is not None]
    if not done:
        return f"{'n/a':>26}"
    text = f"{min(done):7.3f} {statistics.median(done):7.3f} {max(done):7.3f}"
    if len(done) < runs:
        text += f" ({len(done)}/{runs})"
    return f"{text:>26}"


def table(
    setup: Setup,
    results: dict[str, list[RunResult]],
    opts: argparse.Namespace,
    broker_errors: list[str],
) -> list[str]:
    classic = ", ".join(f"{k}={v}" for k, v in setup.classic.items())
    lines = [
        "",
        f"== {setup.name}: broker -o {' -o '.join((*setup.broker, *opts.overrides))}",
        f"   classic consumers: librdkafka defaults but {classic}; "
        f"KIP-848 consumers: group.protocol=consumer (server-side timers and assignor)",
        f"{'figure (min median max)':32}{'classic':>26}{'KIP-848':>26}"
        f"{'classic/KIP-848 (median)':>26}",
    ]
    n, n1 = opts.members, opts.members + 1
    for key, title in FIGURES:
        row = f"{title.format(n=n, n1=n1):32}"
        medians = []
        for protocol in PROTOCOLS:
            values = [getattr(r, key) for r in results[protocol]]
            row += fmt(values, opts.runs)
            done = [v for v in values if v is not None]
            medians.append(statistics.median(done) if done else None)
        if medians[0] is not None and medians[1]:
            row += f"{medians[0] / medians[1]:26.2f}"
        else:
            row += f"{'n/a':>26}"
        lines.append(row)
    notes = [
        f"{LABELS[p]} run {i + 1}: {note}"
        for p in PROTOCOLS
        for i, r in enumerate(results[p])
        for note in r.notes
    ]
    lines += [f"   note: {note}" for note in notes]
    lines += [f"   broker log: {line}" for line in broker_errors[:10]]
    return lines


def run_setup(setup: Setup, opts: argparse.Namespace) -> list[str]:
    results: dict[str, list[RunResult]] = {p: [] for p in PROTOCOLS}
    with tempfile.TemporaryDirectory() as data:
        broker = BrokerProcess(Path(data), *setup.broker, *opts.overrides).start()
        log(f"{setup.name}: broker on {broker.bootstrap} with {' '.join(setup.broker)}")
        # quiet: it would complain about the broker going away at the end
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})
        try:
            for run in range(opts.runs):
                for protocol in PROTOCOLS:
                    label = f"{setup.name} run {run + 1}/{opts.runs} {LABELS[protocol]}"
                    results[protocol].append(
                        one_run(broker.bootstrap, admin, protocol, setup, opts, label)
                    )
        finally:
            code = broker.stop()
        errors = [line for line in broker.lines if any(w in line for w in SUSPICIOUS)]
        if code != 0:
            errors.append(f"exit code {code}")
        for line in errors[:20]:
            log(f"{setup.name}: broker log: {line}")
    return table(setup, results, opts, errors)


def main() -> None:
    args = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    args.add_argument("--runs", type=int, default=3, help="runs per protocol (default 3)")
    args.add_argument(
        "--config",
        choices=("defaults", "tuned", "both"),
        default="both",
        help="broker/client timer settings to compare under (default both)",
    )
    args.add_argument("--partitions", type=int, default=20, help="partitions of each topic")
    args.add_argument("--members", type=int, default=10, help="consumers in the first wave")
    args.add_argument(
        "--timeout", type=float, default=60.0, help="longest wait for any one phase, seconds"
    )
    args.add_argument(
        "--debug", metavar="CONTEXTS", help="librdkafka debug= for member 0 and the newcomer"
    )
    args.add_argument(
        "-o",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker setting, e.g. -o coordinator.log.fsync=interval",
    )
    opts = args.parse_args()
    names = ("defaults", "tuned") if opts.config == "both" else (opts.config,)
    lines = []
    for name in names:
        lines += run_setup(SETUPS[name], opts)
    command = shlex.join([os.path.relpath(sys.executable), *sys.argv])
    print(
        f"cores: {os.cpu_count()}  runs: {opts.runs}  partitions: {opts.partitions}  "
        f"command: {command}"
    )
    print(
        f"confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()

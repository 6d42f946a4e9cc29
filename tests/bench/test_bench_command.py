"""`bench/run.py`: the table's arithmetic, broker variants, and real runs of workloads
(a)-(d) at tiny sizes (the group-size chart is test_sweep.py's). No timing is asserted: each
figure must be present and plausible, which shows the workload completed what it claims to
measure."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka
import pytest

from harness import brokers, consumer_workloads
from harness.command import measure, measure_in_turns
from harness.core import Figure, Options, Target, Workload
from harness.table import Results, cell, markdown, ratio
from rafka_actors.admin.client import KafkaClient

from ..broker_process import BrokerProcess
from . import BENCH

pytestmark = pytest.mark.bench

QUICK = Options(runs=1, quick=True)


def fig(values: list[float], higher_is_better: bool = True, key: str = "x.y") -> Figure:
    return Figure(key, "label", "/s", higher_is_better, values)


def test_ratio_is_oriented_so_that_above_one_is_better_for_the_first_target() -> None:
    assert ratio(fig([200.0]), fig([100.0])) == "2.00x"  # twice the rate
    assert ratio(fig([1.0], False), fig([0.5], False)) == "0.50x"  # twice the time
    assert ratio(fig([]), fig([1.0])) == "-"
    assert ratio(None, fig([1.0])) == "n/a"


def test_cells_show_median_and_range_or_a_dash() -> None:
    assert cell(fig([3.0, 1.0, 2.0])) == "2 (1-3)"
    assert cell(fig([1234.0])) == "1,234"
    assert cell(fig([])) == "-"
    assert cell(None) == "n/a"


def test_markdown_has_a_row_per_figure_and_a_ratio_column_per_peer() -> None:
    results = Results(
        ["rafka-actors", "peer"],
        {
            "rafka-actors": {"c.x": fig([10.0], key="c.x"), "a.y": fig([1.0], False, "a.y")},
            "peer": {"c.x": fig([5.0], key="c.x")},
        },
    )
    lines = markdown(results, ["# title"]).splitlines()
    assert lines[0] == "# title"
    assert lines[2].startswith("| figure | unit | rafka-actors | peer | vs peer |")
    assert lines[4].endswith("| 10.0 | 5 | 2.00x |")
    assert lines[5].endswith("| 1 | n/a | n/a |")  # the peer has no such figure


def test_broker_variants_carry_their_settings() -> None:
    parsed = brokers.parse_brokers(
        ["rafka-actors", "rafka-actors[coordinator.log.fsync=never]", "tansu"], ["a=1"]
    )
    assert [(b.name, b.kind, b.settings) for b in parsed] == [
        ("rafka-actors", "rafka-actors", ("a=1",)),
        (
            "rafka-actors[coordinator.log.fsync=never]",
            "rafka-actors",
            ("a=1", "coordinator.log.fsync=never"),
        ),
        ("tansu", "tansu", ()),
    ]
    assert brokers.parse_brokers(["kafka"], [])[0] == brokers.Broker("kafka", "kafka")
    with pytest.raises(ValueError):
        brokers.parse_brokers(["redpanda"], [])
    with pytest.raises(ValueError):  # only rafka-actors runs under another interpreter
        brokers.parse_brokers(["kafka@/opt/old/bin/python"], [])


def test_broker_list_splits_outside_brackets() -> None:
    listed = "rafka-actors,rafka-actors[coordinator.log.fsync=never,num.partitions=2],noida-db"
    assert brokers.split_broker_list(listed) == [
        "rafka-actors",
        "rafka-actors[coordinator.log.fsync=never,num.partitions=2]",
        "noida-db",
    ]
    variant = brokers.parse_brokers(brokers.split_broker_list(listed), [])[1]
    assert variant.settings == ("coordinator.log.fsync=never", "num.partitions=2")


def test_a_broker_can_be_named_and_run_by_another_interpreter() -> None:
    listed = "old=rafka-actors@/opt/old/bin/python[coordinator.log.fsync=never],new=rafka-actors"
    old, new = brokers.parse_brokers(brokers.split_broker_list(listed), ["a=1"])
    assert old == brokers.Broker(
        "old", "rafka-actors", ("a=1", "coordinator.log.fsync=never"), "/opt/old/bin/python"
    )
    assert new == brokers.Broker("new", "rafka-actors", ("a=1",), None)
    assert brokers.parse_brokers(["rafka-actors@/p/python"], [])[0].name == "rafka-actors@/p/python"
    with pytest.raises(ValueError, match="only rafka-actors"):
        brokers.parse_brokers(["noida-db@/opt/old/bin/python"], [])


def test_another_interpreter_serves_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # another installation's interpreter: here, a script that notes its arguments and runs ours
    python, used = tmp_path / "python", tmp_path / "used"
    python.write_text(f'#!/bin/sh\necho "$@" > {used}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    settings = ("group.initial.rebalance.delay.ms=0",)
    monkeypatch.chdir(tmp_path)  # a path relative to where the bench runs, not the broker
    broker = brokers.Broker("other", "rafka-actors", settings, "./python")
    with brokers.running(broker) as target, KafkaClient(target.bootstrap, timeout=10) as client:
        assert 18 in client.versions
    assert used.read_text().startswith("-m rafka_actors serve --listen 127.0.0.1:")
    missing = brokers.Broker("gone", "rafka-actors", (), str(tmp_path / "nothing"))
    with pytest.raises(brokers.BrokerUnavailable, match="no interpreter"):
        brokers.command(missing, 1, tmp_path)


def test_measure_merges_runs_and_skips_what_does_not_apply() -> None:
    calls: list[str] = []

    def run(target: Target, opts: Options) -> list[Figure]:
        calls.append(target.name)
        return [fig([float(len(calls))])]

    applies = Workload("x", "counts", run)
    never = Workload("z", "never", run, needs=lambda target: False)
    merged = measure(Target("t", "127.0.0.1:1"), [applies, never], Options(runs=3), print)
    assert calls == ["t"] * 3
    assert merged["x.y"].values == [1.0, 2.0, 3.0]


def test_a_workload_measuring_what_the_broker_holds_gets_a_fresh_broker_per_run() -> None:
    started: list[str] = []
    seen: list[tuple[str, str]] = []

    @contextmanager
    def fresh() -> Iterator[Target]:
        started.append(f"fresh{len(started)}")
        yield Target(started[-1], "127.0.0.1:2")

    def run(letter: str) -> Callable[[Target, Options], list[Figure]]:
        def one(target: Target, opts: Options) -> list[Figure]:
            seen.append((letter, target.name))
            return [fig([1.0], key=f"{letter}.y")]

        return one

    shared, own = (
        Workload("a", "shared", run("a")),
        Workload("g", "own", run("g"), fresh_broker=True),
    )
    merged = measure(Target("t", "127.0.0.1:1"), [shared, own], Options(runs=2), print, fresh)
    assert seen == [("a", "t"), ("a", "t"), ("g", "fresh0"), ("g", "fresh1")]
    assert merged["g.y"].values == [1.0, 1.0]
    seen.clear()  # without a way to start one (--bootstrap), the broker at hand serves
    measure(Target("t", "127.0.0.1:1"), [own], Options(runs=1), print)
    assert seen == [("g", "t")]


def test_in_turns_each_run_goes_to_every_broker_before_the_next() -> None:
    """--interleave: a figure's runs on different brokers are seconds apart, so the
    machine's drift over minutes is the same for all of them; every other run goes in the
    reverse order, so that neither always goes first."""
    seen: list[tuple[str, str]] = []

    def fresh_for(name: str) -> Callable[[], Iterator[Target]]:
        @contextmanager
        def fresh() -> Iterator[Target]:
            yield Target(f"{name}-own", "127.0.0.1:2")

        return fresh

    def run(letter: str) -> Callable[[Target, Options], list[Figure]]:
        def one(target: Target, opts: Options) -> list[Figure]:
            seen.append((letter, target.name))
            return [fig([float(len(seen))], key=f"{letter}.y")]

        return one

    shared = Workload("a", "shared", run("a"))
    own = Workload("g", "own", run("g"), fresh_broker=True)
    only_p = Workload("b", "only p", run("b"), needs=lambda target: target.name == "p")
    targets = [(Target(name, "127.0.0.1:1"), fresh_for(name)) for name in ("r", "p")]
    merged = measure_in_turns(targets, [shared, only_p, own], Options(runs=2), print)
    assert seen == [
        ("a", "r"), ("a", "p"), ("a", "p"), ("a", "r"),
        ("b", "p"), ("b", "p"),
        ("g", "r-own"), ("g", "p-own"), ("g", "p-own"), ("g", "r-own"),
    ]  # fmt: skip
    assert merged["r"]["a.y"].values == [1.0, 4.0] and merged["p"]["a.y"].values == [2.0, 3.0]
    assert "b.y" not in merged["r"] and merged["p"]["b.y"].values == [5.0, 6.0]


@pytest.fixture
def target(broker_factory) -> Target:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = broker_factory("group.initial.rebalance.delay.ms=0")
    assert broker.proc is not None
    return Target("rafka-actors", broker.bootstrap, pid=broker.proc.pid, kip848=True)


def values(figures: list[Figure]) -> dict[str, float]:
    assert all(len(f.values) == 1 for f in figures), [(f.key, f.values) for f in figures]
    return {f.key: f.values[0] for f in figures}


def test_client_workloads_measure_every_figure(target: Target) -> None:
    got: dict[str, float] = {}
    for letter in "acd":
        got |= values(consumer_workloads.WORKLOADS[letter].run(target, QUICK))
    assert 0 < got["a.first_assignment_classic"] < 60
    assert 0 < got["a.first_assignment_consumer"] < 60
    assert got["c.commits_1"] > 0 and got["c.commits_4"] > 0
    assert 0 < got["c.commit_p50_ms"] <= got["c.commit_p99_ms"]
    # a subscribed member's commits (the workload checks the group holds the last offset)
    assert got["c.member_commits_per_s"] > 0 and got["c.member_paused_commits_per_s"] > 0
    assert got["d.fetches_1"] > 0 and got["d.fetch_p99_ms"] > 0


def test_consumers_starting_together_end_disjoint_and_complete(target: Target) -> None:
    got = values(consumer_workloads.consumers_together(target, QUICK))
    assert set(got) == {
        f"b.assigned_{n}_{p}"
        for n in consumer_workloads.QUICK_SIZES
        for p in ("classic", "consumer")
    }
    assert all(0 < v < consumer_workloads.ASSIGN_TIMEOUT_S for v in got.values())
    # Each client freed at once, not left to a full collection: a confluent-kafka client
    # holds a thread-local key until freed, and a long run used up the process's keys.
    # Seen to fail (every client alive) with `_Member.stop` keeping its consumer.
    alive = [o for o in gc.get_objects() if isinstance(o, confluent_kafka.Consumer)]
    assert not alive


def test_bench_run_starts_its_broker_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [
            *(sys.executable, str(BENCH / "run.py"), "--brokers", "rafka-actors"),
            *("--workloads", "ad", "--quick", "--runs", "2", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "| subscribe to first assignment, classic protocol | s |" in done.stdout
    assert "; the brokers took turns run by run" in done.stdout  # the default
    figures = json.loads(out.read_text())["figures"]["rafka-actors"]
    assert len(figures["a.first_assignment_classic"]["values"]) == 2
    assert len(figures["d.fetches_1"]["values"]) == 2


@pytest.mark.parametrize("kind", ["noida-db", "tansu"])
def test_peer_brokers_start_answer_and_stop(kind: str) -> None:
    broker = brokers.Broker(kind, kind)
    try:
        brokers.command(broker, 1, Path("/nonexistent"))
    except brokers.BrokerUnavailable as exc:
        pytest.skip(str(exc))
    with brokers.running(broker) as target:
        assert target.pid is not None and not target.kip848
        with KafkaClient(target.bootstrap, timeout=10) as client:
            assert 18 in client.versions  # it answered ApiVersions
        pid = target.pid
    with pytest.raises(ProcessLookupError):  # nothing of it is left running
        os.killpg(pid, 0)


def test_kafka_starts_as_a_kip848_peer_and_is_stopped() -> None:
    try:
        brokers._kafka_ref()
    except brokers.BrokerUnavailable as exc:
        pytest.skip(str(exc))
    with brokers.running(brokers.Broker("kafka", "kafka")) as target:
        assert target.pid is not None and target.kip848
        with KafkaClient(target.bootstrap, timeout=10) as client:
            assert 68 in client.versions  # ConsumerGroupHeartbeat: it serves KIP-848
        pid = target.pid
    with pytest.raises(ProcessLookupError):  # its JVM is gone
        os.kill(pid, 0)

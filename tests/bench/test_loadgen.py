"""Workloads (e)-(h) and their load generator, at tiny sizes against the real broker.

No timing is asserted (a loaded CI box would make any bound flaky): each figure must be
present and plausible, which proves the generator completed the protocol it claims to speak.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trio

from harness.core import Figure, Options, Target
from harness.loadgen import (
    CLIENT_ID,
    HEARTBEAT,
    OFFSET_FETCH,
    Connection,
    CpuTimeline,
    Prepared,
    assigned_partitions,
    percentile,
    range_assign,
    schema,
    subscribed_topics,
    subscription,
)
from harness.scale_workloads import (
    TOPIC,
    WORKLOADS,
    commit_all,
    heartbeats,
    many_groups,
    rebalance,
    recovery,
)
from rafka_actors.gateway.apis._build import make
from rafka_actors.protocol.codec import encode_request
from rafka_actors.protocol.messages import request_class

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.bench

QUICK = Options(runs=1, quick=True)


@pytest.fixture
def target(broker_factory) -> Target:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = broker_factory("group.initial.rebalance.delay.ms=0")
    assert broker.proc is not None
    return Target("rafka-actors", broker.bootstrap, pid=broker.proc.pid)


def values(figures: list[Figure]) -> dict[str, float | None]:
    keys = [f.key for f in figures]
    assert len(keys) == len(set(keys)), keys
    for figure in figures:
        assert len(figure.values) <= 1  # one value per run
    return {f.key: (f.values[0] if f.values else None) for f in figures}


def test_range_assignment_is_disjoint_complete_and_round_trips() -> None:
    plan = range_assign([f"m{i}" for i in range(7)], "t", 20)
    held = sorted(p for data in plan.values() for p in assigned_partitions(data))
    assert held == list(range(20))
    assert [len(assigned_partitions(plan[f"m{i}"])) for i in range(7)] == [3] * 6 + [2]
    assert subscribed_topics(subscription(["a", "bc"])) == ["a", "bc"]
    assert assigned_partitions(range_assign(["a", "b"], "t", 1)["b"]) == ()


def test_percentile_is_nearest_rank() -> None:
    data = [float(i) for i in range(1, 101)]
    assert percentile(data, 50) == 50.0
    assert percentile(data, 99) == 99.0
    assert percentile([3.0], 99) == 3.0


def test_workloads_are_registered_and_h_is_ours_only() -> None:
    """(h) restarts the broker on a written log: only a rafka-actors the runner started (it
    knows the interpreter), whatever its column is named; not a peer, nor --bootstrap's."""
    assert sorted(WORKLOADS) == ["e", "f", "g", "h"]
    assert WORKLOADS["h"].needs(Target("rafka-actors", "x:1", python="python3"))
    assert WORKLOADS["h"].needs(Target("old", "x:1", python="/old/.venv/bin/python"))
    assert not WORKLOADS["h"].needs(Target("noida-db", "x:1"))
    assert not WORKLOADS["h"].needs(Target("external", "x:1"))
    assert WORKLOADS["g"].needs(Target("tansu", "x:1"))


def test_heartbeats_closed_loop(target: Target) -> None:
    got = values(heartbeats(target, QUICK, members=20, groups=2, window_s=1.0))
    assert got["e.heartbeats"] is not None and got["e.heartbeats"] > 0
    assert got["e.p50_ms"] is not None and 0 < got["e.p50_ms"] <= got["e.p99_ms"]  # type: ignore[operator]
    assert got["e.stable_s"] is not None and got["e.stable_s"] > 0
    assert got["e.broker_us"] is not None and got["e.broker_us"] > 0  # we gave it the pid
    assert got["e.loadgen_us"] is not None and got["e.loadgen_us"] > 0


def test_rebalance_after_one_member_leaves(target: Target) -> None:
    got = values(rebalance(target, QUICK, sizes=(20,)))
    total, clients, coordinator = (
        got["f.rebalance_20"],
        got["f.clients_20"],
        got["f.coordinator_20"],
    )
    assert got["f.form_20"] is not None and got["f.form_20"] > 0
    assert total is not None and clients is not None and coordinator is not None
    assert clients > 0 and coordinator >= 0
    assert clients + coordinator == pytest.approx(total)
    assert got["f.react_20_p99"] is not None
    # the broker's CPU within the coordinator's share: read, as we gave the pid (a tick of
    # /proc's 10 ms at each end of a window this short)
    assert got["f.coordinator_cpu_20"] is not None
    assert 0 <= got["f.coordinator_cpu_20"] <= coordinator + 0.03
    assert got["f.coordinator_generator_cpu_20"] is not None
    assert 0 <= got["f.coordinator_generator_cpu_20"] <= coordinator + 0.03


def test_cpu_timeline_reads_a_window_known_afterwards() -> None:
    with CpuTimeline(os.getpid()) as timeline:
        time.sleep(0.05)
        start, used = time.monotonic(), time.process_time()
        while time.process_time() - used < 0.3:  # busy for 0.3 s of CPU
            pass
        end = time.monotonic()
        time.sleep(0.05)
    busy = timeline.between(start, end)
    assert busy is not None and busy == pytest.approx(0.3, abs=0.03)
    assert timeline.between(start - 60, end) is None  # before the first sample
    with CpuTimeline(None) as nobody:  # a broker not ours to see
        pass
    assert nobody.between(start, end) is None


def test_many_groups_memory_and_fetch_latency(target: Target) -> None:
    got = values(many_groups(target, QUICK, groups=200))
    assert got["g.create_per_s"] is not None and got["g.create_per_s"] > 0
    assert got["g.rss_mib"] is not None and got["g.rss_mib"] > 10
    assert got["g.bytes_per_group"] is not None  # growth can be ~0 at this size
    assert got["g.fetch_p50_ms"] is not None and got["g.fetch_p50_ms"] <= got["g.fetch_p99_ms"]  # type: ignore[operator]


def test_a_prepared_request_is_sent_as_encoded_with_each_correlation_id() -> None:
    request = make(
        request_class(HEARTBEAT, 4),
        group_id="g",
        generation_id=3,
        member_id="m-1",
        group_instance_id=None,
    )
    prepared = Prepared(encode_request(request, 0, CLIENT_ID), HEARTBEAT, 4)
    for correlation in (1, 7, 2**31 - 1):
        assert prepared.stamped(correlation) == encode_request(request, correlation, CLIENT_ID)


def test_group_creation_is_timed_from_the_first_commit_to_the_last_answer(
    target: Target,
) -> None:
    started = time.perf_counter()
    seconds = trio.run(commit_all, target.bootstrap, "timed", 300)
    wall = time.perf_counter() - started
    # the connections, the topic and the 300 encoded commits come before the clock starts
    assert 0 < seconds < wall

    async def committed(i: int) -> int:
        conn = await Connection.open(target.bootstrap)
        try:
            nested = schema(OFFSET_FETCH, conn.version(OFFSET_FETCH))
            topics = (nested.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),)
            request = conn.request(
                OFFSET_FETCH, group_id=f"timed-{i}", topics=topics, require_stable=False
            )
            answer = await conn.call(request)
            return int(answer.topics[0].partitions[0].committed_offset)
        finally:
            await conn.aclose()

    assert [trio.run(committed, i) for i in (0, 150, 299)] == [0, 150, 299]


def test_many_groups_without_a_pid_has_no_memory_figures(target: Target) -> None:
    blind = Target("external", target.bootstrap)
    got = values(many_groups(blind, QUICK, groups=50))
    assert got["g.bytes_per_group"] is None and got["g.rss_mib"] is None
    assert got["g.fetch_p99_ms"] is not None


def test_nothing_listening_gives_missing_values_not_a_hang(tmp_path: Path) -> None:
    nobody = Target("rafka-actors", "127.0.0.1:1")
    got = values(many_groups(nobody, QUICK, groups=10))
    assert set(got.values()) == {None}
    got = values(heartbeats(nobody, QUICK, members=2, groups=1, window_s=0.5))
    assert set(got.values()) == {None}


def test_recovery_of_a_written_log() -> None:
    got = values(recovery(Target("rafka-actors", "unused:1"), QUICK, records=10_000))
    assert got["h.listening_s"] is not None and got["h.empty_s"] is not None
    assert got["h.listening_s"] > 0
    if got["h.replay_per_s"] is not None:  # 10 000 records may replay within the noise
        assert got["h.replay_per_s"] > 0

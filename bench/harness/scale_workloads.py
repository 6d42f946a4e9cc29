"""Workloads (e)-(h) of issue 8: the coordinator at scale, driven by the direct-protocol loadgen.

(e) heartbeats/s sustained by 1 000 members in 100 groups of 10, each member sending its next
    Heartbeat as soon as the last is answered (closed loop), over a fixed window once every
    group is Stable; p50/p99 heartbeat latency, and CPU per heartbeat (broker and generator).
(f) one group of 1 000 members (and of 100): time for all to be Stable when they start
    together; then one member leaves and we time until every other member holds its assignment
    of the new generation. Members heartbeat every 100 ms, so they learn of the rebalance
    within about that; the figure is split into the clients' share (LeaveGroup sent -> the last
    member's JoinGroup sent) and the coordinator's (that -> the last assignment received).
    The coordinator's share also holds the generator's own work (reading 999 JoinGroup answers,
    the leader's assignment, 999 SyncGroups), so the broker's CPU and the generator's within it
    are shown as well.
    The generator's own reaction (REBALANCE_IN_PROGRESS answer -> JoinGroup sent) is shown too.
(g) 100 000 simple groups (generation -1, one partition) get one OffsetCommit each, pipelined
    over many connections, on a broker started for the run (the runner's `fresh_broker`);
    groups created per second (the commits encoded before the clock starts: encoding them took
    the generator a core against noida-db), the broker's memory growth per group (VmRSS of its
    process tree, when the runner gave us its pid) a second after the last commit, and
    OffsetFetch latency over random groups afterwards. rafka-actors then still holds the
    actors of the groups used within `group.passivation.idle.ms`; docs/performance.md reads
    the figure.
(h) rafka-actors only: a coordinator log of 1 000 000 OffsetCommit records (1 000 groups x 100
    partitions, cycled) is written straight into the segment files, and a broker started on it;
    seconds from spawn to `listening on`, and records/s replayed, i.e. records divided by the
    start-up time beyond that of an empty broker.

Every run returns every figure; one that could not be measured (a timeout, an error from the
broker, no pid) has no value. Group names carry a per-run random prefix, so runs never meet.
"""

from __future__ import annotations

import datetime
import logging
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from array import array
from collections.abc import Callable, Coroutine
from functools import partial
from multiprocessing.connection import Connection as Connection_
from pathlib import Path
from typing import Any

import trio

from .core import Figure, Options, Target, Workload
from .fleet import Fleet, running
from .loadgen import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    Connection,
    CpuMeter,
    CpuTimeline,
    LoadgenError,
    Prepared,
    create_topic,
    make,
    percentile,
    rss_bytes,
    schema,
)

log = logging.getLogger(__name__)

E_MEMBERS, E_GROUPS, E_WINDOW_S = 1000, 100, 10.0
E_QUICK = (100, 10, 2.0)
E_PROCESSES, E_WARMUP_S, E_STABLE_S = 1, 1.0, 60.0
F_SIZES, F_QUICK = (1000, 100), (100, 20)
F_HEARTBEAT_S, F_STABLE_S = 0.1, 60.0
G_GROUPS, G_QUICK, G_FETCHES, G_CONNECTIONS, G_WINDOW = 100_000, 2_000, 5_000, 32, 32
H_RECORDS, H_QUICK = 1_000_000, 100_000
SESSION_S, REBALANCE_S = 10.0, 30.0
TOPIC = "bench"
_NO_RETENTION = datetime.timedelta(milliseconds=-1)


def _figure(key: str, label: str, unit: str, better: bool, value: float | None) -> Figure:
    return Figure(key, label, unit, better, [] if value is None else [value])


def _run(what: str, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """trio.run(fn); a failure is logged and leaves the figures it did not fill empty."""
    try:
        trio.run(fn)
    except Exception as exc:
        log.warning("%s failed: %s", what, _why(exc), exc_info=log.isEnabledFor(logging.DEBUG))


def _why(exc: BaseException) -> str:
    """The distinct messages of an exception (group)'s leaves."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_why(e) for e in exc.exceptions))
    return f"{type(exc).__name__}: {exc}"


def _prefix(letter: str) -> str:
    return f"bench-{letter}-{uuid.uuid4().hex[:8]}"


# -- (e) heartbeats ---------------------------------------------------------------------------


def heartbeats(
    target: Target,
    opts: Options,
    *,
    members: int | None = None,
    groups: int | None = None,
    window_s: float | None = None,
    processes: int = E_PROCESSES,
) -> list[Figure]:
    n, g, window = E_QUICK if opts.quick else (E_MEMBERS, E_GROUPS, E_WINDOW_S)
    n, g, window = members or n, groups or g, window_s or window
    got: dict[str, float | None] = dict.fromkeys(("rate", "p50", "p99", "stable", "us", "gen"))
    names = [f"{_prefix('e')}-{i}" for i in range(g)]
    try:
        result = _heartbeat_processes(target, names, n // g, window, processes)
    except (OSError, TimeoutError, LoadgenError, EOFError) as exc:
        log.warning("(e) heartbeats failed: %s", _why(exc))
    else:
        stable, latency, ours, theirs = result
        got["stable"] = stable
        if latency:
            done = len(latency)
            got["rate"] = done / window
            got["p50"] = percentile(latency, 50) * 1000
            got["p99"] = percentile(latency, 99) * 1000
            got["gen"] = ours / done * 1e6
            got["us"] = None if theirs is None else theirs / done * 1e6
        log.info(
            "(e) generator %.2f cores, broker %s cores",
            ours / window,
            None if theirs is None else round(theirs / window, 2),
        )
    label = f"{n} members / {g} groups"
    return [
        _figure("e.heartbeats", f"heartbeats/s, {label}, closed loop", "/s", True, got["rate"]),
        _figure("e.p50_ms", "heartbeat latency p50", "ms", False, got["p50"]),
        _figure("e.p99_ms", "heartbeat latency p99", "ms", False, got["p99"]),
        _figure("e.stable_s", f"{label} joining together: all Stable", "s", False, got["stable"]),
        _figure("e.broker_us", "broker CPU per heartbeat", "us", False, got["us"]),
        _figure("e.loadgen_us", "generator CPU per heartbeat", "us", False, got["gen"]),
    ]


def _heartbeat_processes(
    target: Target, names: list[str], size: int, window: float, processes: int
) -> tuple[float, array[float], float, float | None]:
    """Run the groups' members in `processes` generator processes; once every group is Stable
    all go closed loop together and record for `window` seconds. Returns (seconds until all
    Stable, heartbeat latencies, generator CPU seconds and broker CPU seconds in the window)."""
    ctx = multiprocessing.get_context("fork")  # spawn would re-run an unguarded __main__
    workers = []
    for i in range(processes):
        ours, theirs = ctx.Pipe()
        spec = (target.bootstrap, names[i::processes], size)
        proc = ctx.Process(target=_heartbeat_worker, args=(theirs, spec), daemon=True)
        proc.start()
        workers.append((proc, ours))
    try:
        started, stable = [], []
        for _, pipe in workers:
            _, first, last = _receive(pipe, E_STABLE_S + 60)
            started.append(first)
            stable.append(last)
        now = time.monotonic()
        record_at = now + 0.2 + E_WARMUP_S
        for _, pipe in workers:
            pipe.send((now + 0.2, record_at, record_at + window))
        time.sleep(max(0.0, record_at - time.monotonic()))
        meter = CpuMeter(target.pid)
        time.sleep(window)
        broker = meter.read()[1]
        latency, cpu = array("d"), 0.0
        for _, pipe in workers:
            _, raw, errors, used = _receive(pipe, 60)
            latency.frombytes(raw)
            cpu += used
            if errors:
                log.warning("(e) heartbeat errors in the window: %s", errors)
        return max(stable) - min(started), latency, cpu, None if broker is None else broker * window
    finally:
        for proc, pipe in workers:
            proc.join(15)
            if proc.is_alive():
                proc.kill()
            pipe.close()


def _receive(pipe: Connection_, timeout: float) -> tuple[Any, ...]:
    if not pipe.poll(timeout):
        raise TimeoutError(f"a generator process said nothing for {timeout:g} s")
    message = pipe.recv()
    if message[0] == "error":
        raise LoadgenError(message[1])
    return tuple(message)


def _heartbeat_worker(pipe: Connection_, spec: tuple[str, list[str], int]) -> None:
    """One generator process of (e): its members, Stable, then closed loop as scheduled."""
    bootstrap, names, size = spec

    async def main() -> None:
        fleet = Fleet(bootstrap, session_timeout_s=SESSION_S, rebalance_timeout_s=REBALANCE_S)
        for name in names:
            fleet.add_group(name, size)
        async with running(fleet, connect_timeout=60):
            if not await fleet.wait_stable(E_STABLE_S):
                raise TimeoutError(f"not all {len(names)} groups Stable in {E_STABLE_S:g} s")
            now, mono = trio.current_time(), time.monotonic()
            last = max(t.stable_at for t in fleet.groups.values())
            pipe.send(("stable", mono - (now - fleet.started_at), mono - (now - last)))
            with trio.fail_after(120):
                closed_at, record_at, end_at = await trio.to_thread.run_sync(
                    pipe.recv, abandon_on_cancel=True
                )
            await trio.sleep(max(0.0, closed_at - time.monotonic()))
            fleet.go_closed_loop()
            await trio.sleep(max(0.0, record_at - time.monotonic()))
            fleet.recording, cpu = True, time.process_time()
            await trio.sleep(max(0.0, end_at - time.monotonic()))
            fleet.recording, cpu = False, time.process_time() - cpu
        errors = dict(fleet.heartbeat_errors)
        pipe.send(("done", fleet.heartbeat_latency.tobytes(), errors, cpu))

    try:
        trio.run(main)
    except Exception as exc:
        pipe.send(("error", _why(exc)))


# -- (f) a rebalance after one member leaves --------------------------------------------------


def rebalance(
    target: Target, opts: Options, *, sizes: tuple[int, ...] | None = None
) -> list[Figure]:
    figures: list[Figure] = []
    for n in sizes or (F_QUICK if opts.quick else F_SIZES):
        figures += _rebalance_one(target, n)
    return figures


def _rebalance_one(target: Target, n: int) -> list[Figure]:
    got: dict[str, float | None] = dict.fromkeys(
        ("form", "total", "clients", "coord", "coord_cpu", "coord_generator_cpu", "react")
    )
    window: list[float] = []  # the coordinator's share, in time.monotonic()

    async def main() -> None:
        fleet = Fleet(
            target.bootstrap,
            session_timeout_s=SESSION_S,
            rebalance_timeout_s=REBALANCE_S,
            heartbeat_interval_s=F_HEARTBEAT_S,
        )
        tracker = fleet.add_group(_prefix("f"), n)
        async with running(fleet, connect_timeout=60):
            if not await fleet.wait_stable(F_STABLE_S):
                raise TimeoutError(f"{n} members not Stable within {F_STABLE_S:g} s")
            got["form"] = tracker.stable_at - fleet.started_at
            await trio.sleep(1.0)  # let heartbeats settle into their rhythm
            leaver = random.choice([m for m in fleet.members if not m.is_leader])
            fleet.reactions, fleet.last_join_sent = array("d"), 0.0
            leaver.leave()
            with trio.move_on_after(REBALANCE_S + 30):
                await tracker.stable.wait()
            if not tracker.stable.is_set() or leaver.left_at is None:
                raise TimeoutError(f"{n - 1} members did not rebalance after one left")
            got["total"] = tracker.stable_at - leaver.left_at
            if fleet.last_join_sent > leaver.left_at:
                got["clients"] = fleet.last_join_sent - leaver.left_at
                got["coord"] = tracker.stable_at - fleet.last_join_sent
                to_monotonic = time.monotonic() - trio.current_time()
                window[:] = [fleet.last_join_sent + to_monotonic, tracker.stable_at + to_monotonic]
            if fleet.reactions:
                got["react"] = percentile(fleet.reactions, 99) * 1000

    with (
        CpuTimeline(os.getpid(), alone=True) as generator_cpu,
        CpuTimeline(target.pid) as broker_cpu,
    ):
        _run(f"(f) rebalance of {n}", main)
    if window:
        got["coord_cpu"] = broker_cpu.between(*window)
        got["coord_generator_cpu"] = generator_cpu.between(*window)
    return [
        _figure(f"f.form_{n}", f"{n} members joining together: Stable", "s", False, got["form"]),
        _figure(
            f"f.rebalance_{n}", f"{n} members, one leaves: rebalanced", "s", False, got["total"]
        ),
        _figure(
            f"f.clients_{n}",
            f"  of which clients' rejoin (heartbeat {F_HEARTBEAT_S * 1000:g} ms)",
            "s",
            False,
            got["clients"],
        ),
        _figure(f"f.coordinator_{n}", "  of which coordinator", "s", False, got["coord"]),
        _figure(
            f"f.coordinator_cpu_{n}",
            "    broker CPU in the coordinator's share",
            "s",
            False,
            got["coord_cpu"],
        ),
        _figure(
            f"f.coordinator_generator_cpu_{n}",
            "    generator CPU in the coordinator's share",
            "s",
            False,
            got["coord_generator_cpu"],
        ),
        _figure(f"f.react_{n}_p99", "  generator's rejoin reaction p99", "ms", False, got["react"]),
    ]


# -- (g) many groups with committed offsets ---------------------------------------------------


def many_groups(target: Target, opts: Options, *, groups: int | None = None) -> list[Figure]:
    n = groups or (G_QUICK if opts.quick else G_GROUPS)
    fetches = min(G_FETCHES, max(n // 2, 100)) if opts.quick else G_FETCHES
    got: dict[str, float | None] = dict.fromkeys(("per_group", "rss", "rate", "p50", "p99"))
    prefix = _prefix("g")

    async def main() -> None:
        before = rss_bytes(target.pid) if target.pid else None
        got["rate"] = n / await commit_all(target.bootstrap, prefix, n)
        await trio.sleep(1.0)
        after = rss_bytes(target.pid) if target.pid else None
        if before is not None and after is not None:
            got["per_group"] = (after - before) / n
            got["rss"] = after / 2**20
        latencies = await fetch_random(target.bootstrap, prefix, n, fetches)
        got["p50"] = percentile(latencies, 50) * 1000
        got["p99"] = percentile(latencies, 99) * 1000

    _run("(g) many groups", main)
    return [
        _figure(
            "g.bytes_per_group",
            f"{n} groups: broker memory per group",
            "B/group",
            False,
            got["per_group"],
        ),
        _figure("g.rss_mib", f"broker RSS after {n} groups", "MiB", False, got["rss"]),
        _figure("g.create_per_s", "groups created (first commit) /s", "/s", True, got["rate"]),
        _figure("g.fetch_p50_ms", "OffsetFetch latency p50, random group", "ms", False, got["p50"]),
        _figure("g.fetch_p99_ms", "OffsetFetch latency p99, random group", "ms", False, got["p99"]),
    ]


def _commit(
    conn: Connection, group: str, offset: int, *, member_id: str = "", generation: int = -1
) -> Any:
    """An OffsetCommit of partition 0 of TOPIC: as a simple consumer (no member, generation
    -1) unless a member's id and generation are given."""
    nested = schema(OFFSET_COMMIT, conn.version(OFFSET_COMMIT))
    partition = make(
        nested.OffsetCommitRequestPartition,
        partition_index=0,
        committed_offset=offset,
        committed_leader_epoch=-1,
        commit_timestamp=-1,
        committed_metadata="",
    )
    topic = nested.OffsetCommitRequestTopic(name=TOPIC, partitions=(partition,))
    return conn.request(
        OFFSET_COMMIT,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        retention_time=_NO_RETENTION,
        topics=(topic,),
    )


async def commit_all(bootstrap: str, prefix: str, n: int) -> float:
    """Commit offset i in group `prefix`-i for i < n, over G_CONNECTIONS connections with
    G_WINDOW commits in flight on each; the seconds from the first commit sent to the last
    answer. The commits are encoded before (`Connection.prepare`): their encoding is the
    generator's work, not the broker's."""
    conn = await Connection.open(bootstrap)
    try:
        await create_topic(conn, TOPIC, 1)
    finally:
        await conn.aclose()
    conns: list[Connection] = []
    try:
        for _ in range(G_CONNECTIONS):
            conns.append(await Connection.open(bootstrap))
        batches = [
            [c.prepare(_commit(c, f"{prefix}-{i}", i)) for i in range(k, n, G_CONNECTIONS)]
            for k, c in enumerate(conns)
        ]
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for c, batch in zip(conns, batches, strict=True):
                nursery.start_soon(_commit_batch, c, batch)
        return trio.current_time() - start
    finally:
        for c in conns:
            await c.aclose()


async def _commit_batch(conn: Connection, commits: list[Prepared]) -> None:
    for answer in await conn.pipeline(commits, G_WINDOW):
        code = answer.topics[0].partitions[0].error_code
        if code != 0:
            raise LoadgenError(f"OffsetCommit failed: {code.name}")


async def fetch_random(bootstrap: str, prefix: str, n: int, fetches: int) -> list[float]:
    conn = await Connection.open(bootstrap)
    nested = schema(OFFSET_FETCH, conn.version(OFFSET_FETCH))
    topics = (nested.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),)
    picks = [random.randrange(n) for _ in range(fetches)]
    latencies, wrong = [], 0
    try:
        # encoded before: a latency is the broker's round trip, not our encoding
        requests = [
            conn.prepare(
                conn.request(
                    OFFSET_FETCH, group_id=f"{prefix}-{i}", topics=topics, require_stable=False
                )
            )
            for i in picks
        ]
        for i, request in zip(picks, requests, strict=True):
            start = trio.current_time()
            answer = await conn.call(request)
            latencies.append(trio.current_time() - start)
            partitions = answer.topics[0].partitions if answer.topics else ()
            if not partitions or partitions[0].committed_offset != i:
                wrong += 1
    finally:
        await conn.aclose()
    if wrong:
        log.warning("(g) %d of %d OffsetFetch answers lacked the committed offset", wrong, fetches)
    return latencies


# -- (h) coordinator log recovery -------------------------------------------------------------

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_REPLAYED = re.compile(r"coordinator log replayed: (\d+) groups")
_LOGS: dict[int, tempfile.TemporaryDirectory[str]] = {}  # records -> a written log, reused


def write_commit_log(data_dir: Path, records: int) -> int:
    """Write `records` OffsetCommit records (1 000 groups x 100 partitions, cycled) straight
    into `data_dir`'s coordinator segments; returns the bytes written."""
    from rafka_actors.group_common.records import OffsetCommitRecord
    from rafka_actors.ids import GroupKey
    from rafka_actors.storage.coordinator_records import decode_entry, encode_entry
    from rafka_actors.storage.coordinator_segments import CoordinatorSegments

    segments = CoordinatorSegments.open(data_dir / "coordinator", decode_entry, lambda _: None)
    batch = []
    for i in range(records):
        group = f"group-{i % 1000}"
        record = OffsetCommitRecord(group, "topic", (i // 1000) % 100, i, -1, "", 1_700_000_000)
        batch.append(encode_entry(GroupKey(0, group), record))
        if len(batch) == 10_000:
            segments.append(batch)
            batch = []
    if batch:
        segments.append(batch)
    segments.fsync()
    size = segments.size_bytes
    segments.close()
    return size


def _written_log(records: int) -> Path:
    if records not in _LOGS:
        tmp = _LOGS[records] = tempfile.TemporaryDirectory(prefix="rafka-bench-h-log-")
        start = time.perf_counter()
        size = write_commit_log(Path(tmp.name), records)
        took = time.perf_counter() - start
        log.info("(h) wrote %d records (%.1f MB) in %.1f s", records, size / 1e6, took)
    return Path(_LOGS[records].name)


def time_to_listening(
    data_dir: Path,
    timeout: float = 300.0,
    *,
    python: str | None = None,
    settings: tuple[str, ...] = (),
) -> tuple[float, int | None]:
    """Start `rafka-actors serve` (under `python`, this interpreter by default, with
    `settings`) on `data_dir`: (seconds from spawn to `listening on`, groups it says it
    replayed). Stops the broker again; raises TimeoutError if it never listens."""
    args = [python or sys.executable, "-m", "rafka_actors", "serve", "--listen", "127.0.0.1:0"]
    args += ["--data-dir", str(data_dir), *(arg for item in settings for arg in ("-o", item))]
    ready, seen = threading.Event(), dict[str, float]()
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:  # read to the end: a full pipe would block the broker
            if (match := _REPLAYED.search(line)) and "groups" not in seen:
                seen["groups"] = int(match.group(1))
            if _LISTENING.search(line) and not ready.is_set():
                seen["listening"] = time.perf_counter()
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not ready.wait(timeout):
            raise TimeoutError(f"the broker on {data_dir} did not listen within {timeout:g} s")
        groups = seen.get("groups")
        return seen["listening"] - start, None if groups is None else int(groups)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def recovery(target: Target, opts: Options, *, records: int | None = None) -> list[Figure]:
    n = records or (H_QUICK if opts.quick else H_RECORDS)
    empty: float | None = None
    full: float | None = None
    rate: float | None = None
    try:
        source = _written_log(n)
        with tempfile.TemporaryDirectory(prefix="rafka-bench-h-") as tmp:
            (Path(tmp) / "empty").mkdir()
            shutil.copytree(source / "coordinator", Path(tmp) / "full" / "coordinator")
            start = partial(time_to_listening, python=target.python, settings=target.settings)
            empty, _ = start(Path(tmp) / "empty")
            full, groups = start(Path(tmp) / "full")
        if groups != 1000:
            log.warning("(h) the broker says it replayed %s groups, expected 1000", groups)
        if full > empty:
            rate = n / (full - empty)
    except (OSError, TimeoutError) as exc:
        log.warning("(h) recovery failed: %s", exc)
    return [
        _figure("h.listening_s", f"start-up with {n} log records: listening", "s", False, full),
        _figure(
            "h.replay_per_s", "records replayed /s (start-up beyond an empty one)", "/s", True, rate
        ),
        _figure("h.empty_s", "start-up with an empty log", "s", False, empty),
    ]


WORKLOADS: dict[str, Workload] = {
    "e": Workload("e", "heartbeats/s, 1 000 members in 100 groups", heartbeats),
    "f": Workload("f", "rebalance of 1 000 members after one leaves", rebalance),
    "g": Workload("g", "100 000 groups with committed offsets", many_groups, fresh_broker=True),
    "h": Workload(
        "h",
        "recovery of a 1 000 000-record coordinator log",
        recovery,
        needs=lambda target: target.python is not None,  # a rafka-actors started here
    ),
}

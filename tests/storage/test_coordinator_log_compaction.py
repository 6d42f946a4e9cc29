"""Compaction of sealed coordinator segments: what survives, crash safety, bounded growth."""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.group_common.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from rafka_actors.group_common.txn_offsets import (
    TxnMarkerRecord,
    TxnOffsetCommitRecord,
    TxnOffsetTombstone,
    TxnProducerEpochRecord,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_records import (
    LatestRecords,
    decode_entry,
    encode_entry,
    entry_compaction_key,
)
from rafka_actors.storage.coordinator_segments import CoordinatorSegments

A, B, C = GroupKey(1, "a"), GroupKey(1, "b"), GroupKey(2, "a")
DAY_MS = 86_400_000
NOW_MS = 1_800_000_000_000


def commit(key: GroupKey, topic: str, offset: int) -> tuple[GroupKey, Record]:
    return key, OffsetCommitRecord(key.group_id, topic, 0, offset, -1, None, 0)


def forget(key: GroupKey, topic: str) -> tuple[GroupKey, Record]:
    return key, OffsetTombstone(key.group_id, topic, 0)


def meta(key: GroupKey, generation: int) -> tuple[GroupKey, Record]:
    record = GroupMetadataRecord(key.group_id, "cgp", "consumer", generation, None, None, 0, ())
    return key, record


def drop(key: GroupKey) -> tuple[GroupKey, Record]:
    return key, GroupTombstone(key.group_id)


def pend(key: GroupKey, producer: int, topic: str, offset: int) -> tuple[GroupKey, Record]:
    """A producer's pending transactional offset."""
    return key, TxnOffsetCommitRecord(key.group_id, producer, 0, topic, 0, offset, -1, None, 0)


def end(key: GroupKey, producer: int) -> tuple[GroupKey, Record]:
    """The producer's transaction ended: its pending offsets are gone."""
    return key, TxnMarkerRecord(key.group_id, producer, 0, True)


def epoch(key: GroupKey, producer: int, value: int) -> tuple[GroupKey, Record]:
    """The latest epoch of the producer's markers."""
    return key, TxnProducerEpochRecord(key.group_id, producer, value)


def unpend(key: GroupKey, producer: int, topic: str) -> tuple[GroupKey, Record]:
    """OffsetDelete of a partition with a pending offset."""
    return key, TxnOffsetTombstone(key.group_id, producer, topic, 0)


# Six sealed segments (the first four sealed two days ago, so their tombstones are past a
# one-day retention) and an active one that compaction never reads.
SCENARIO: list[list[tuple[GroupKey, Record]]] = [
    [*(commit(A, f"t{i}", 1) for i in range(5)), meta(A, 1), commit(B, "t0", 1), meta(C, 1)],
    [commit(A, "t1", 5), commit(B, "t0", 2)],  # all superseded: compaction deletes the file
    [commit(A, "t0", 2), forget(A, "t1"), drop(B)],
    [meta(B, 1), commit(B, "t0", 5), commit(A, "t2", 3)],
    [forget(A, "t3"), drop(C), commit(A, "t9", 1)],
    [meta(C, 2), meta(A, 2)],
    [commit(A, "t0", 99), forget(B, "t0")],
]
OLD_SEGMENTS = 4

State = dict[GroupKey, tuple[Any, ...]]  # (group record, offsets, pending offsets, epochs)


def state_of(view: LatestRecords) -> State:
    """The logical state, independent of the order records were replayed in."""
    state: State = {}
    for key in sorted(view.keys()):
        records = view.records_of(key)
        group = next((r for r in records if isinstance(r, GroupMetadataRecord)), None)
        offsets = {(r.topic, r.partition): r for r in records if isinstance(r, OffsetCommitRecord)}
        pending = {
            (r.producer_id, r.topic, r.partition): r
            for r in records
            if isinstance(r, TxnOffsetCommitRecord)
        }
        epochs = {r.producer_id: r for r in records if isinstance(r, TxnProducerEpochRecord)}
        state[key] = (group, offsets, pending, epochs)
    return state


def open_view(directory: Path, **kw: Any) -> tuple[CoordinatorSegments, LatestRecords]:
    view = LatestRecords()

    def apply(entry: tuple[GroupKey, Record]) -> None:
        view.apply(entry[0], [entry[1]])

    return CoordinatorSegments.open(directory, decode_entry, apply, **kw), view


def raw_entries(directory: Path) -> list[list[tuple[GroupKey, Record]]]:
    """Entries per segment file, in order, read frame by frame."""
    out = []
    for path in sorted(directory.glob("*.log")):
        data, pos, entries = path.read_bytes(), 0, []
        while pos < len(data):
            (length,) = struct.unpack_from(">I", data, pos)
            entries.append(decode_entry(data[pos + 8 : pos + 8 + length]))
            pos += 8 + length
        out.append(entries)
    return out


def build(directory: Path, segments: list[list[tuple[GroupKey, Record]]]) -> None:
    log, _ = open_view(directory, segment_bytes=1)  # every batch gets its own segment
    for batch in segments:
        log.append([encode_entry(key, record) for key, record in batch])
    log.close()
    old_ns, recent_ns = (NOW_MS - 2 * DAY_MS) * 1_000_000, (NOW_MS - 1000) * 1_000_000
    for i, path in enumerate(sorted(directory.glob("*.log"))):
        mtime = old_ns if i < OLD_SEGMENTS else recent_ns
        os.utime(path, ns=(mtime, mtime))


def compact(log: CoordinatorSegments, now_ms: int = NOW_MS) -> Any:
    return log.compact_sealed(entry_compaction_key, now_ms=now_ms, tombstone_retention_ms=DAY_MS)


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    directory = tmp_path / "scenario"
    build(directory, SCENARIO)
    return directory


def test_compaction_keeps_the_latest_entry_per_key(scenario: Path) -> None:
    log, view = open_view(scenario, segment_bytes=1)
    before = state_of(view)
    stats = compact(log)
    log.close()
    assert raw_entries(scenario) == [
        [commit(A, "t4", 1)],
        [commit(A, "t0", 2)],  # superseded only by the active segment: kept
        [meta(B, 1), commit(B, "t0", 5), commit(A, "t2", 3)],
        [forget(A, "t3"), commit(A, "t9", 1)],  # a tombstone inside its retention stays
        [meta(C, 2), meta(A, 2)],
        [commit(A, "t0", 99), forget(B, "t0")],  # the active segment is never touched
    ]
    assert (stats.segments_before, stats.segments_after) == (6, 5)
    assert (stats.entries_before, stats.entries_after) == (21, 9)
    assert stats.files_written == 3  # segments 3 and 5 (from 0) lost nothing: left alone
    _, view = open_view(scenario)
    assert state_of(view) == before
    assert view.records_of(A)[0] == meta(A, 2)[1]
    assert set(state_of(view)[A][1]) == {("t0", 0), ("t2", 0), ("t4", 0), ("t9", 0)}
    assert state_of(view)[B] == (meta(B, 1)[1], {}, {}, {})


def test_tombstones_go_once_their_retention_has_passed(scenario: Path) -> None:
    log, view = open_view(scenario, segment_bytes=1)
    before = state_of(view)
    compact(log)
    assert not log.needs_compaction(NOW_MS, DAY_MS)
    later = NOW_MS + 2 * DAY_MS
    assert log.needs_compaction(later, DAY_MS)  # a clean segment still holds a tombstone
    compact(log, later)
    assert not log.needs_compaction(later, DAY_MS)
    log.close()
    assert [forget(A, "t3")] not in raw_entries(scenario)
    assert not any(
        isinstance(r, OffsetTombstone) for seg in raw_entries(scenario)[:-1] for _, r in seg
    )
    _, view = open_view(scenario)
    assert state_of(view) == before  # nothing came back


def test_outputs_merge_into_few_files(scenario: Path) -> None:
    log, view = open_view(scenario, segment_bytes=1 << 20)
    before = state_of(view)
    stats = compact(log)
    log.close()
    assert (stats.segments_before, stats.segments_after, stats.files_written) == (6, 1, 1)
    assert [p.name for p in sorted(scenario.glob("*.log"))] == [
        "00000000000000000000.log",
        "00000000000000000021.log",
    ]
    _, view = open_view(scenario)
    assert state_of(view) == before


def test_a_group_tombstone_deletes_everything_before_it(tmp_path: Path) -> None:
    first = [meta(A, 1), commit(A, "t", 1), commit(B, "t", 1)]
    build(tmp_path, [first, [drop(A)], [commit(C, "t", 1)]])
    log, _ = open_view(tmp_path, segment_bytes=1)
    compact(log, NOW_MS + 3 * DAY_MS)
    log.close()
    # The expired tombstone went with what it deleted, and its emptied segment with it.
    assert raw_entries(tmp_path) == [[commit(B, "t", 1)], [commit(C, "t", 1)]]


class Crash(Exception):
    pass


@contextmanager
def crash_at(step: int, after: bool) -> Iterator[list[str]]:
    """Make file operation number ``step`` (and every later one) fail, as if the process died."""
    ops: list[str] = []
    names = ("open", "write", "fsync", "utime", "replace", "unlink")
    real = {name: getattr(os, name) for name in names}

    def wrap(name: str) -> Callable[..., Any]:
        def op(*args: Any, **kw: Any) -> Any:
            ops.append(name)
            if len(ops) - 1 < step:
                return real[name](*args, **kw)
            if len(ops) - 1 == step and after:
                real[name](*args, **kw)
            raise Crash(f"{name} #{len(ops) - 1}")

        return op

    for name in names:
        setattr(os, name, wrap(name))
    try:
        yield ops
    finally:
        for name in names:
            setattr(os, name, real[name])


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("expire", [False, True])
def test_a_crash_at_any_step_of_compaction_loses_and_resurrects_nothing(
    scenario: Path, tmp_path: Path, merge: bool, expire: bool
) -> None:
    segment_bytes = 1 << 20 if merge else 1
    now = NOW_MS + 3 * DAY_MS if expire else NOW_MS  # drop every tombstone, or only some
    log, view = open_view(scenario, segment_bytes=segment_bytes)
    expected = state_of(view)
    log.close()
    steps_seen = 0
    for after in (False, True):
        step = 0
        while True:
            directory = tmp_path / f"crash-{after}-{step}"
            shutil.copytree(scenario, directory)
            log, _ = open_view(directory, segment_bytes=segment_bytes)
            with crash_at(step, after) as ops:
                try:
                    compact(log, now)
                    finished = True
                except Crash:
                    finished = False
            log.close()
            log, view = open_view(directory, segment_bytes=segment_bytes)
            assert state_of(view) == expected, (after, step, ops)
            assert not list(directory.glob("*.compacting"))
            compact(log, now)  # and compaction can finish after the restart
            log.close()
            _, view = open_view(directory)
            assert state_of(view) == expected, (after, step, ops, "second compaction")
            steps_seen += 1
            if finished:
                break
            step += 1
    assert steps_seen > 20  # the crash points covered writes, fsyncs, renames and unlinks


def test_appends_go_on_while_compaction_runs_in_a_thread(tmp_path: Path) -> None:
    payload_for = [encode_entry(*commit(A, f"t{i % 50}", i)) for i in range(20_000)]
    log, _ = open_view(tmp_path, segment_bytes=16 << 10)
    for i in range(10_000):
        log.append([payload_for[i]])
    errors: list[BaseException] = []

    def compactor() -> None:
        try:
            for _ in range(5):
                compact(log)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=compactor)
    thread.start()
    for i in range(10_000, 20_000):
        log.append([payload_for[i]])  # rolls new segments while the thread rewrites old ones
    thread.join()
    assert errors == []
    compact(log)
    log.close()
    _, view = open_view(tmp_path)
    offsets = {r.topic: r.offset for r in view.records_of(A) if isinstance(r, OffsetCommitRecord)}
    assert offsets == {f"t{i}": 19_950 + i for i in range(50)}


def run_commits(
    directory: Path, commits: int, partitions: int, segment_bytes: int
) -> dict[str, int]:
    """One group commits the same partitions over and over, compacting as segments seal."""
    log, _ = open_view(directory, segment_bytes=segment_bytes)
    written = peak = 0
    for n in range(commits):
        batch = [encode_entry(*commit(A, f"p{p}", n)) for p in range(partitions)]
        log.append(batch)
        written += sum(len(b) + 8 for b in batch)
        peak = max(peak, log.size_bytes)
        if log.dirty_bytes >= segment_bytes:
            compact(log)
    before = log.size_bytes
    compact(log)
    after = log.size_bytes
    files = log.segment_count
    log.close()
    _, view = open_view(directory)
    latest = {r.topic: r.offset for r in view.records_of(A) if isinstance(r, OffsetCommitRecord)}
    assert latest == {f"p{p}": commits - 1 for p in range(partitions)}
    return {"written": written, "peak": peak, "before": before, "after": after, "files": files}


def test_a_long_run_of_commits_stays_bounded(tmp_path: Path) -> None:
    segment_bytes = 64 << 10
    started = time.perf_counter()
    sizes = run_commits(tmp_path, commits=2_000, partitions=100, segment_bytes=segment_bytes)
    print(f"\n2 000 commits x 100 partitions: {sizes} in {time.perf_counter() - started:.1f}s")
    assert sizes["written"] > 75 * segment_bytes
    assert sizes["peak"] <= 3 * segment_bytes
    assert sizes["after"] <= 2 * segment_bytes
    assert sizes["files"] <= 3


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_very_long_run_of_commits_stays_bounded(tmp_path: Path) -> None:
    """200 000 commits of the same 100 partitions (20M entries): run with -m slow -s."""
    segment_bytes = 1 << 20
    started = time.perf_counter()
    sizes = run_commits(tmp_path, commits=200_000, partitions=100, segment_bytes=segment_bytes)
    print(f"\n200 000 commits x 100 partitions: {sizes} in {time.perf_counter() - started:.0f}s")
    assert sizes["peak"] <= 3 * segment_bytes
    assert sizes["after"] <= 2 * segment_bytes


def entry_strategy() -> st.SearchStrategy[tuple[GroupKey, Record]]:
    keys = st.sampled_from([A, B, C])
    topics = st.sampled_from(["t0", "t1", "t2"])
    producers = st.sampled_from([1, 2])
    return st.one_of(
        st.builds(commit, keys, topics, st.integers(0, 1000)),
        st.builds(forget, keys, topics),
        st.builds(meta, keys, st.integers(0, 9)),
        st.builds(drop, keys),
        st.builds(pend, keys, producers, topics, st.integers(0, 1000)),
        st.builds(end, keys, producers),
        st.builds(unpend, keys, producers, topics),
        st.builds(epoch, keys, producers, st.integers(0, 9)),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.lists(entry_strategy(), min_size=1, max_size=6), max_size=25),
    segment_bytes=st.sampled_from([1, 100, 300, 4096]),
    compact_every=st.integers(1, 6),
    expire=st.booleans(),
)
def test_compaction_never_changes_the_state(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[tuple[GroupKey, Record]]],
    segment_bytes: int,
    compact_every: int,
    expire: bool,
) -> None:
    directory = tmp_path_factory.mktemp("prop")
    model = LatestRecords()
    now = time.time_ns() // 1_000_000 + (2 * DAY_MS if expire else 0)
    log, _ = open_view(directory, segment_bytes=segment_bytes)
    for n, batch in enumerate(batches, 1):
        log.append([encode_entry(key, record) for key, record in batch])
        for key, record in batch:
            model.apply(key, [record])
        if n % compact_every == 0:
            compact(log, now)
    compact(log, now)
    log.close()
    _, view = open_view(directory, segment_bytes=segment_bytes)
    assert state_of(view) == state_of(model)


def test_a_failed_compaction_leaves_a_working_log(
    scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, view = open_view(scenario, segment_bytes=1)
    expected = state_of(view)
    real_utime = os.utime

    def utime_fails_once(*args: Any, **kw: Any) -> None:
        monkeypatch.setattr(os, "utime", real_utime)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "utime", utime_fails_once)
    with pytest.raises(OSError, match="No space"):
        compact(log)
    assert not list(scenario.glob("*.compacting"))
    log.append([encode_entry(*commit(C, "late", 1))])
    compact(log)  # the next compaction does the work
    log.close()
    _, view = open_view(scenario)
    expected[C][1][("late", 0)] = commit(C, "late", 1)[1]  # type: ignore[assignment]
    assert state_of(view) == expected

"""The log cleaner's rounds over real segment files: what each batch keeps (Kafka's rules for
keys, tombstones, transactions and producers), the offsets it never changes, and the swap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rafka_actors.storage.control_batches import marker_batch
from rafka_actors.storage.keyed_records import DELETE_HORIZON_BIT, build_batch, records_of
from rafka_actors.storage.log_cleaner import ENTRY_COST, CleaningJob, CleaningResult, clean
from rafka_actors.storage.partition_log import PartitionLog
from rafka_actors.storage.producer_recovery import rebuild_producers
from rafka_actors.storage.record_batch import BatchHeader, check_batch, parse_header
from tests.batch_builder import build_batch as make_batch

NOW = 1_800_000_000_000
RETENTION = 60_000
TXN = 0x10


def kv(key: str | None, value: str | None) -> tuple[bytes | None, bytes | None]:
    return (None if key is None else key.encode()), (None if value is None else value.encode())


def append(log: PartitionLog, *records: tuple[str | None, str | None], **fields: int) -> int:
    return log.append([make_batch([kv(k, v) for k, v in records], **fields)])


def everything(
    log: PartitionLog, start: int | None = None
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from `start`, read as a consumer reads: fetch,
    then go on from the offset after the last batch returned."""
    offset = log.log_start_offset if start is None else start
    found = []
    while offset < log.log_end_offset:
        data, after = log.read_until(offset, 1000, log.log_end_offset)
        for batch in batches(data):
            header, records = records_of(batch)
            for r in records:
                at = header.base_offset + r.offset_delta
                if at >= offset and not header.is_control:
                    value = None if not r.has_value else _value(r.tail)
                    found.append((at, r.key, value))
        assert after > offset, "a read must make progress"
        offset = after
    return found


def _value(tail: bytes) -> bytes:
    from rafka_actors.storage.keyed_records import read_varint

    _, pos = read_varint(tail, 0)  # offset delta
    key_length, pos = read_varint(tail, pos)
    pos += max(key_length, 0)
    length, pos = read_varint(tail, pos)
    return tail[pos : pos + length]


def batches(data: bytes) -> list[bytes]:
    """The batches of a read (cleaned ones may hold fewer records than offsets)."""
    out, pos = [], 0
    while pos < len(data):
        raw = check_batch(data, pos, len(data), cleaned=True)
        out.append(data[pos : pos + 12 + raw[1]])
        pos += 12 + raw[1]
    return out


def headers(log: PartitionLog) -> list[BatchHeader]:
    return [parse_header(b) for b in batches(log.read(log.log_start_offset, 1 << 20))]


def latest(
    records: list[tuple[int, bytes | None, bytes | None]],
) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for _, key, value in records:
        out[key] = value
    return out


def run_round(
    log: PartitionLog,
    *,
    now_ms: int = NOW,
    budget: int = 1 << 20,
    first_dirty: int | None = None,
    upper: int | None = None,
) -> CleaningResult:
    """One round over every sealed segment, with the producer state rebuilt from the log, and
    its files swapped in."""
    stats = log.segment_stats()
    upper = stats[-1][0] if upper is None else upper
    producers, _ = rebuild_producers(log)
    aborted = producers.aborted_between(log.log_start_offset, upper)
    job = CleaningJob(
        directory=str(log.directory),
        segments=[(base, size) for base, _end, size, _ts in stats[:-1] if base < upper],
        first_dirty=log.log_start_offset if first_dirty is None else first_dirty,
        upper_bound=upper,
        now_ms=now_ms,
        delete_retention_ms=RETENTION,
        segment_bytes=log.segment_bytes,
        map_budget=budget,
        aborted=[(t.producer_id, t.first_offset, t.last_offset) for t in aborted],
        last_batches=producers.last_batches(),
    )
    result = clean(job)
    for group in result.groups:
        assert log.replace_segments(group.first, group.last, group.index)
    return result


@pytest.fixture
def plog(tmp_path: Path) -> Iterator[PartitionLog]:
    log = PartitionLog.open(tmp_path / "p", segment_bytes=400)
    yield log
    log.close()


def roll(log: PartitionLog) -> None:
    """Fill the active segment so the next append rolls it."""
    log.segment_bytes = 1
    append(log, ("roll", "x"))
    log.segment_bytes = 400


def test_keeps_the_latest_record_of_each_key_at_its_offset(plog: PartitionLog) -> None:
    for round_ in range(5):
        for k in range(6):
            append(plog, (f"k{k}", f"v{round_}-{k}"))
    roll(plog)
    append(plog, ("k0", "active"))
    before = everything(plog)
    result = run_round(plog)
    after = everything(plog)
    assert latest(after) == latest(before)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets)), "offsets only grow, none twice"
    assert set(after) <= set(before), "a kept record keeps its offset"
    assert [v for _, k, v in after if k == b"k1"] == [b"v4-1"]
    assert after[-1] == (plog.log_end_offset - 1, b"k0", b"active")  # the active segment stays
    assert result.records_kept < result.records_read and result.bytes_after < result.bytes_before
    assert plog.log_start_offset == 0 and plog.log_end_offset == before[-1][0] + 1
    # every offset of the cleaned range still reads, from the record at or after it
    for offset in range(0, plog.log_end_offset):
        got = everything(plog, offset)
        assert got == [r for r in after if r[0] >= offset]


def test_a_reopened_log_reads_the_same(plog: PartitionLog, tmp_path: Path) -> None:
    for round_ in range(4):
        for k in range(5):
            append(plog, (f"k{k}", f"v{round_}"))
    roll(plog)
    run_round(plog)
    after, end = everything(plog), plog.log_end_offset
    plog.close()
    again = PartitionLog.open(tmp_path / "p", segment_bytes=400)
    assert everything(again) == after and again.log_end_offset == end
    assert again.append([make_batch([kv("k", "v")])]) == end
    again.close()


def test_tombstones_go_after_the_delete_horizon(plog: PartitionLog) -> None:
    append(plog, ("a", "1"), ("b", "1"))
    append(plog, ("a", None))  # a tombstone
    roll(plog)
    run_round(plog)
    kept = everything(plog)
    assert (b"a", None) in [(k, v) for _, k, v in kept] and b"1" not in [
        v for _, k, v in kept if k == b"a"
    ]
    tomb = next(h for h in headers(plog) if h.records_count == 1 and h.base_offset == 2)
    assert tomb.attributes & DELETE_HORIZON_BIT and tomb.base_timestamp == NOW + RETENTION
    run_round(plog, now_ms=NOW + RETENTION - 1)  # not yet
    assert (b"a", None) in [(k, v) for _, k, v in everything(plog)]
    run_round(plog, now_ms=NOW + RETENTION)
    assert [k for _, k, _ in everything(plog)] == [b"b", b"roll"]


def test_aborted_transactions_go_and_their_marker_after_them(plog: PartitionLog) -> None:
    pid = 7
    append(
        plog, ("x", "committed"), producer_id=pid, producer_epoch=0, base_sequence=0, attributes=TXN
    )
    plog.append([marker_batch(pid, 0, True, 0, NOW)])
    append(
        plog,
        ("x", "aborted"),
        ("y", "aborted"),
        producer_id=pid,
        producer_epoch=0,
        base_sequence=1,
        attributes=TXN,
    )
    plog.append([marker_batch(pid, 0, False, 0, NOW)])
    append(plog, ("z", "plain"))
    roll(plog)
    run_round(plog)
    assert latest(everything(plog)) == {b"x": b"committed", b"z": b"plain", b"roll": b"x"}
    found = headers(plog)
    markers = [h for h in found if h.is_control]
    assert len(markers) == 2, "markers stay while their transactions' batches do"
    # the aborted batch was the producer's last: kept, empty, for its sequence
    (empty,) = [h for h in found if h.base_offset == 2]
    assert empty.records_count == 0 and empty.last_offset_delta == 1
    producers, _ = rebuild_producers(plog)
    assert producers.entries[pid].last_seq() == 2


def test_a_producers_last_batch_is_kept_empty(plog: PartitionLog) -> None:
    append(plog, ("k", "1"), producer_id=3, producer_epoch=0, base_sequence=0)
    append(plog, ("k", "2"))
    roll(plog)
    run_round(plog)
    found = headers(plog)
    assert (found[0].producer_id, found[0].records_count, found[0].base_sequence) == (3, 0, 0)
    assert latest(everything(plog))[b"k"] == b"2"


def test_a_full_offset_map_cleans_part_of_the_log(plog: PartitionLog) -> None:
    for round_ in range(3):
        for k in range(8):
            append(plog, (f"key-{k}", f"{round_}"))
    roll(plog)
    before = everything(plog)
    first = run_round(plog, budget=3 * (5 + ENTRY_COST))
    assert 0 < first.end_offset < plog.segment_stats()[-1][0]
    assert latest(everything(plog)) == latest(before)
    second = run_round(plog, first_dirty=first.end_offset)
    assert second.end_offset > first.end_offset
    assert latest(everything(plog)) == latest(before)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_rewritten_in_their_codec(plog: PartitionLog, codec: int) -> None:
    raw = make_batch([kv("a", "old"), kv("b", "keep"), kv("a", "new")])
    header, records = records_of(raw)
    plog.append(
        [build_batch(header, records, base_timestamp=header.base_timestamp, attributes=codec)]
    )
    roll(plog)
    run_round(plog)
    first = batches(plog.read(0, 1 << 20))[0]
    cleaned, kept = records_of(first)
    assert cleaned.attributes & 0x07 == codec and cleaned.last_offset_delta == 2
    assert [(r.offset_delta, r.key) for r in kept] == [(1, b"b"), (2, b"a")]


def test_an_unchanged_segment_is_left_alone(plog: PartitionLog, tmp_path: Path) -> None:
    append(plog, ("a", "1"), ("b", "2"))
    roll(plog)
    inode = (tmp_path / "p" / f"{0:020d}.log").stat().st_ino
    result = run_round(plog)
    assert result.groups == [] and (tmp_path / "p" / f"{0:020d}.log").stat().st_ino == inode


def test_a_swap_refused_when_its_segments_went(plog: PartitionLog) -> None:
    append(plog, ("a", "1"))
    append(plog, ("a", "2"))
    roll(plog)
    stats = plog.segment_stats()
    job = CleaningJob(
        str(plog.directory),
        [(b, s) for b, _, s, _ in stats[:-1]],
        0,
        stats[-1][0],
        NOW,
        RETENTION,
        1 << 20,
        1 << 20,
    )
    (group,) = clean(job).groups
    plog.advance_log_start(stats[1][0])  # DeleteRecords took the segment meanwhile
    assert not plog.replace_segments(group.first, group.last, group.index)


# -- a crash at each step of the swap (segment_swap.py) ---------------------------------------
def _cleaned_but_not_swapped(tmp_path: Path) -> tuple[list, list, CleaningJob]:
    """A log of three sealed segments and an active one, and the output of a round over them,
    written but not swapped in: (what it reads before, what it reads after, the job)."""
    log = PartitionLog.open(tmp_path / "p", segment_bytes=200)
    for version in range(9):
        append(log, ("a", f"{version}"), ("b", f"{version}"))
    stats = log.segment_stats()
    assert len(stats) >= 4
    before = everything(log)
    job = CleaningJob(str(log.directory), [(b, s) for b, _, s, _ in stats[:-1]], 0, stats[-1][0],
                      NOW, RETENTION, 1 << 20, 1 << 20)  # fmt: skip
    (group,) = clean(job).groups
    log.close()
    return before, [group.first, group.last], job


@pytest.mark.parametrize("step", ["written", "committed", "half-finished", "finished"])
def test_a_crash_during_the_swap_loses_nothing(tmp_path: Path, step: str) -> None:
    from rafka_actors.storage import segment_swap

    before, (first, last), _job = _cleaned_but_not_swapped(tmp_path)
    directory = tmp_path / "p"
    cleaned = segment_swap.cleaned_path(directory, first)
    swap = directory / f"{first:020d}-{last:020d}.swap"
    if step != "written":
        cleaned.rename(swap)  # the commit point
    if step in ("half-finished", "finished"):
        replaced = sorted(p for p in directory.glob("*.log") if first < int(p.stem) <= last)
        assert replaced
        replaced[0].unlink()  # the first of the replaced segments after `first` went
    if step == "finished":
        for path in directory.glob("*.log"):
            if first < int(path.stem) <= last:
                path.unlink()
        swap.replace(directory / f"{first:020d}.log")
    log = PartitionLog.open(directory, segment_bytes=200)
    after = everything(log)
    assert not list(directory.glob("*.cleaned")) + list(directory.glob("*.swap"))
    assert latest(after) == latest(before)
    if step == "written":
        assert after == before  # not committed: the original segments, all of them
    else:
        assert len(after) < len(before) and set(after) <= set(before)
    assert [o for o, _, _ in after] == sorted({o for o, _, _ in after})
    log.close()


def test_a_roll_after_a_time_seals_the_active_segment(plog: PartitionLog) -> None:
    plog.segment_bytes = 1 << 20
    append(plog, ("a", "1"), base_timestamp=1000)
    append(plog, ("a", "2"), base_timestamp=5000)
    assert len(plog.segment_stats()) == 1  # by size only
    plog.roll_after_ms = 4000
    append(plog, ("a", "3"), base_timestamp=5000)
    assert len(plog.segment_stats()) == 1  # not more than 4000 ms after the first batch
    append(plog, ("a", "4"), base_timestamp=5001)
    assert [base for base, *_ in plog.segment_stats()] == [0, 3]


# -- the service: a round through the child process, on a data plane ------------------------
async def test_the_service_cleans_through_its_child_and_keeps_its_checkpoint(
    tmp_path: Path,
) -> None:
    from rafka_actors.storage.cleaner_service import (
        CHECKPOINT,
        CleanerDefaults,
        LogCleanerService,
    )
    from rafka_actors.storage.data_plane import DataPlane

    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    configs = {"cleanup.policy": "compact", "segment.bytes": "300", "max.compaction.lag.ms": "9"}
    topic = data.create_topic("t", 1, configs)
    other = data.create_topic("plain", 1)
    txn = make_batch([kv("c", "aborted")], producer_id=5, producer_epoch=0, base_sequence=0,
                     attributes=TXN)  # fmt: skip
    assert data.append(topic, 0, [memoryview(txn)]).base_offset == 0
    assert await data.write_txn_markers(0, 5, 0, False, [("t", 0)]) == {("t", 0): 0}
    for version in range(6):
        batch = make_batch([kv("a", f"{version}"), kv("b", f"{version}")])
        assert data.append(topic, 0, [memoryview(batch)]).base_offset == 2 + 2 * version
    service = LogCleanerService(data, CleanerDefaults())
    assert await service.clean_once()
    partition = topic.partitions[0]
    upper = partition.segment_stats()[-1][0]
    assert int((partition.directory / CHECKPOINT).read_text()) == upper
    assert latest(everything(partition)) == {b"a": b"5", b"b": b"5"}  # "c" was aborted
    assert len(everything(partition)) < 12
    assert partition.roll_after_ms == 9 and other.partitions[0].roll_after_ms is None
    assert not await service.clean_once()  # nothing dirty since
    data.close()


def test_a_segment_cleaned_empty_keeps_the_log_start(plog: PartitionLog, tmp_path: Path) -> None:
    plog.segment_bytes = 1
    for version in range(4):  # one batch a segment: the first three are superseded
        append(plog, ("a", f"{version}"))
    append(plog, ("b", "x"))
    run_round(plog)
    stats = plog.segment_stats()
    assert stats[0][:3] == (0, 0, 0), "the first segment is cleaned empty, and kept"
    assert plog.log_start_offset == 0 and everything(plog, 0)[0][0] == 3
    plog.close()
    again = PartitionLog.open(tmp_path / "p", segment_bytes=1)
    assert again.log_start_offset == 0 and again.segment_stats()[0][:3] == (0, 0, 0)
    assert again.advance_log_start(4) == 4  # DeleteRecords: the empty one goes with the rest
    assert [base for base, *_ in again.segment_stats()] == [4]
    again.close()

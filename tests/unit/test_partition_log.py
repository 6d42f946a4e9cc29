"""Tests for rafka_actors.storage.partition_log."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rafka_actors.storage.partition_log import PartitionLog
from rafka_actors.storage.record_batch import (
    InvalidRecordError,
    assign_offsets,
    parse_header,
    split_batches,
)
from tests.batch_builder import build_batch, decode_batches

LOGGER = "rafka_actors.storage.partition_log"


def batch(n: int = 1, *, value_size: int = 10, ts: int = 1000) -> bytes:
    """A batch of ``n`` records whose max timestamp is ``ts``."""
    return build_batch([(b"k%d" % i, b"v" * value_size) for i in range(n)], base_timestamp=ts)


def offsets_of(blob: bytes) -> list[int]:
    return [r.offset for r in decode_batches(blob)]


def batch_bases(blob: bytes) -> list[int]:
    return [h.base_offset for h in map(parse_header, split_batches(blob))]


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.log"))


@pytest.fixture
def plog(tmp_path: Path) -> Iterator[PartitionLog]:
    log = PartitionLog.open(tmp_path / "p0")
    yield log
    log.close()


def test_empty_log(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "a" / "b")
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.read(0, 1000) == b""
    assert log.max_timestamp() is None
    assert log.offset_for_timestamp(0) is None
    assert segment_files(tmp_path / "a" / "b") == ["00000000000000000000.log"]
    log.close()


def test_offsets_assigned_across_appends(plog: PartitionLog) -> None:
    assert plog.append([batch(3)]) == 0
    assert plog.append([batch(2), batch(1)]) == 3
    assert plog.append([]) == 6  # nothing written
    assert plog.append([memoryview(batch(4))]) == 6
    assert plog.log_end_offset == 10
    blob = plog.read(0, 1 << 20)
    assert offsets_of(blob) == list(range(10))
    assert batch_bases(blob) == [0, 3, 5, 6]
    assert all(parse_header(b).partition_leader_epoch == 0 for b in split_batches(blob))
    assert plog.size_bytes == len(blob)


def test_segment_file_is_kafka_format(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path)
    batches = [batch(2), batch(3)]
    log.append(batches)
    log.close()
    on_disk = (tmp_path / "00000000000000000000.log").read_bytes()
    assert on_disk == assign_offsets(batches[0], 0) + assign_offsets(batches[1], 2)


def test_read_from_offset_inside_batch(plog: PartitionLog) -> None:
    plog.append([batch(3), batch(3), batch(3)])
    for offset in range(9):
        blob = plog.read(offset, 1 << 20)
        assert batch_bases(blob)[0] == offset // 3 * 3
        assert offsets_of(blob)[-1] == 8
    assert plog.read(9, 1 << 20) == b""
    assert plog.read(100, 1 << 20) == b""


def test_kip74_oversized_first_batch(plog: PartitionLog) -> None:
    big, small = batch(1, value_size=5000), batch(1)
    plog.append([big, small])
    blob = plog.read(0, 10)
    assert batch_bases(blob) == [0] and len(blob) == len(big)
    assert plog.read(0, 0) == blob
    assert batch_bases(plog.read(1, 1)) == [1]


def test_max_bytes_cuts_at_whole_batches(plog: PartitionLog) -> None:
    b = batch(2)
    size = len(b)
    plog.append([b] * 5)
    assert batch_bases(plog.read(0, 2 * size)) == [0, 2]
    assert batch_bases(plog.read(0, 3 * size - 1)) == [0, 2]
    assert batch_bases(plog.read(3, 2 * size + 1)) == [2, 4]
    assert batch_bases(plog.read(0, 100 * size)) == [0, 2, 4, 6, 8]


def test_segment_roll_and_reads_across_segments(tmp_path: Path) -> None:
    b = batch(2)
    size = len(b)
    log = PartitionLog.open(tmp_path, segment_bytes=2 * size + size // 2)
    for _ in range(5):
        log.append([b])  # 2 batches per segment
    log.append([b, b, b])  # one append never straddles segments: this overfills a new one
    assert segment_files(tmp_path) == [f"{o:020d}.log" for o in (0, 4, 8, 10)]
    assert log.log_end_offset == 16
    assert batch_bases(log.read(0, 1 << 20)) == list(range(0, 16, 2))
    assert batch_bases(log.read(2, 3 * size)) == [2, 4, 6]  # spans segment 0 -> 4 -> 4
    assert batch_bases(log.read(3, 2 * size)) == [2, 4]
    assert batch_bases(log.read(7, size - 1)) == [6]  # KIP-74 within a later segment
    assert batch_bases(log.read(9, 10 * size)) == [8, 10, 12, 14]
    assert log.size_bytes == 8 * size
    log.close()


def test_roll_fsyncs_previous_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = PartitionLog.open(tmp_path, segment_bytes=1)
    log.append([batch()])
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    log.append([batch()])
    assert synced and len(segment_files(tmp_path)) == 2
    log.close()


def _state(log: PartitionLog) -> tuple:
    return (
        log.log_start_offset,
        log.log_end_offset,
        log.size_bytes,
        log.read(log.log_start_offset, 1 << 30),
        log.max_timestamp(),
        [log.offset_for_timestamp(ts) for ts in (0, 1500, 2500, 10_000)],
        [log.read(o, 1) for o in range(log.log_start_offset, log.log_end_offset)],
    )


def test_reopen_rebuilds_same_state(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, segment_bytes=500)
    for i in range(30):
        log.append([batch(i % 4 + 1, ts=1000 + 100 * (i % 7))])
    before = _state(log)
    log.close()
    again = PartitionLog.open(tmp_path, segment_bytes=500)
    assert _state(again) == before
    assert again.append([batch()]) == before[1]
    again.close()


def _torn_setup(tmp_path: Path, segment_bytes: int) -> tuple[int, int, int]:
    """Write a log; return (start position of its last batch, file size, end offset before)."""
    log = PartitionLog.open(tmp_path, segment_bytes=segment_bytes)
    log.append([batch(2), batch(3)])
    log.append([batch(4, value_size=30)])
    end = log.log_end_offset
    log.close()
    last = sorted(tmp_path.glob("*.log"))[-1]
    size = last.stat().st_size
    return size - len(batch(4, value_size=30)), size, end


@pytest.mark.parametrize("segment_bytes", [1 << 20, 1])
def test_torn_tail_at_every_byte(
    tmp_path: Path, segment_bytes: int, caplog: pytest.LogCaptureFixture
) -> None:
    start, size, end = _torn_setup(tmp_path / "orig", segment_bytes)
    last_name = segment_files(tmp_path / "orig")[-1]
    for cut in range(start, size):
        work = tmp_path / f"cut{cut}"
        work.mkdir()
        for p in (tmp_path / "orig").glob("*.log"):
            (work / p.name).write_bytes(p.read_bytes())
        with open(work / last_name, "r+b") as f:
            f.truncate(cut)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            log = PartitionLog.open(work, segment_bytes=segment_bytes)
        assert log.log_end_offset == end - 4, cut
        assert (work / last_name).stat().st_size == start
        assert offsets_of(log.read(0, 1 << 20)) == list(range(end - 4))
        assert bool(caplog.records) == (cut > start)
        assert log.append([batch(1)]) == end - 4
        assert offsets_of(log.read(end - 4, 1 << 20)) == [end - 4]
        log.close()


def test_bit_flip_in_last_batch_truncates_with_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    start, size, end = _torn_setup(tmp_path, 1 << 20)
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[start + 40] ^= 0x04
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log = PartitionLog.open(tmp_path)
    assert log.log_end_offset == end - 4
    assert path.stat().st_size == start
    (record,) = caplog.records
    message = record.getMessage()
    assert path.name in message and f"byte {start}" in message
    assert f"{size - start} bytes dropped" in message and "CRC" in message
    log.close()


def test_overlapping_offsets_truncated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = assign_offsets(batch(2), 0) + assign_offsets(batch(2), 2)
    (tmp_path / f"{0:020d}.log").write_bytes(good + assign_offsets(batch(2), 3))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log = PartitionLog.open(tmp_path)
    assert log.log_end_offset == 4 and log.size_bytes == len(good)
    assert "below 4" in caplog.text
    log.close()


def test_offset_gaps_are_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The log cleaner leaves gaps between batches (and between segments): they are not damage,
    and a read from an offset in a gap starts at the next batch."""
    first = assign_offsets(batch(2), 0) + assign_offsets(batch(2), 7)
    (tmp_path / f"{0:020d}.log").write_bytes(first)
    (tmp_path / f"{20:020d}.log").write_bytes(assign_offsets(batch(1), 25))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log = PartitionLog.open(tmp_path)
    assert not caplog.records
    size = len(first) + len(batch(1))
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 26, size)
    assert offsets_of(log.read(3, 1 << 20)) == [7, 8, 25]
    assert log.read_until(0, 1, 30)[1] == 2  # one batch, then the offset after it
    assert offsets_of(log.read(9, 1 << 20)) == [25]
    assert offsets_of(log.read(22, 1 << 20)) == [25]
    assert log.read(26, 1 << 20) == b""
    assert log.append([batch(1)]) == 26
    log.close()


def test_damage_in_earlier_segment_drops_later_ones(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = PartitionLog.open(tmp_path, segment_bytes=1)
    for _ in range(4):
        log.append([batch(2)])
    log.close()
    second = tmp_path / f"{2:020d}.log"
    second.write_bytes(second.read_bytes()[:-5])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log = PartitionLog.open(tmp_path, segment_bytes=1)
    assert segment_files(tmp_path) == [f"{0:020d}.log", f"{2:020d}.log"]
    assert log.log_end_offset == 2 and second.stat().st_size == 0
    assert "deleting segment" in caplog.text
    assert log.append([batch(1)]) == 2
    log.close()


def test_nonzero_log_start(tmp_path: Path) -> None:
    (tmp_path / f"{100:020d}.log").write_bytes(assign_offsets(batch(3), 100))
    log = PartitionLog.open(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (100, 103)
    assert offsets_of(log.read(101, 1)) == [100, 101, 102]
    with pytest.raises(ValueError, match="log start"):
        log.read(99, 100)
    assert log.append([batch()]) == 103
    log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, segment_bytes=3 * len(batch(2)))
    for ts in (100, 50, 300, 200, 300, 400, 350):
        log.append([batch(2, ts=ts)])
    assert len(segment_files(tmp_path)) == 3
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(101) == (4, 300)
    assert log.offset_for_timestamp(250) == (4, 300)
    assert log.offset_for_timestamp(301) == (10, 400)  # in a later segment
    assert log.offset_for_timestamp(401) is None
    log.close()


def test_offset_for_timestamp_finds_the_record_inside_its_batch(plog: PartitionLog) -> None:
    # one batch, records of distinct timestamps, not in order (Kafka's LogSegment search)
    stamps = [10, 90, 40, 60, 90]
    plog.append([build_batch([(None, b"x")] * 5, base_timestamp=10, timestamps=stamps)])
    plog.append([build_batch([(None, b"y")] * 2, base_timestamp=95, timestamps=[95, 99])])
    assert plog.offset_for_timestamp(10) == (0, 10)
    assert plog.offset_for_timestamp(11) == (1, 90)
    assert plog.offset_for_timestamp(90) == (1, 90)
    assert plog.offset_for_timestamp(91) == (5, 95)
    assert plog.offset_for_timestamp(96) == (6, 99)
    assert plog.offset_for_timestamp(100) is None
    assert plog.max_timestamp() == (6, 99)
    plog.advance_log_start(2)  # DeleteRecords inside the first batch
    assert plog.offset_for_timestamp(11) == (2, 40)
    assert plog.offset_for_timestamp(41) == (3, 60)
    assert plog.offset_for_timestamp(61) == (4, 90)


def test_offset_for_timestamp_reads_compressed_and_log_append_time_batches(
    plog: PartitionLog,
) -> None:
    from rafka_actors.storage.batch_records import recompressed, stamped

    records = build_batch([(None, b"v")] * 3, base_timestamp=100, timestamps=[100, 120, 110])
    plog.append([recompressed(records, 4, None)])  # zstd
    plog.append([stamped(records, 500)])  # LogAppendTime: every record at 500
    assert plog.offset_for_timestamp(101) == (1, 120)
    assert plog.offset_for_timestamp(121) == (3, 500)
    assert plog.max_timestamp() == (3, 500)


def test_max_timestamp(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, segment_bytes=2 * len(batch(1)))
    for ts in (100, 300, 300, 50, 200):
        log.append([batch(1, ts=ts)])
    assert log.max_timestamp() == (1, 300)  # earliest batch holding the maximum
    log.append([batch(1, ts=301)])
    assert log.max_timestamp() == (5, 301)
    log.close()


def test_invalid_append_leaves_log_unchanged(plog: PartitionLog) -> None:
    plog.append([batch(2)])
    with pytest.raises(InvalidRecordError):
        plog.append([batch(1), batch(1, ts=5)[:-3]])
    with pytest.raises(InvalidRecordError):
        plog.append([build_batch([(None, b"x")], last_offset_delta=-1)])
    assert plog.log_end_offset == 2 and offsets_of(plog.read(0, 1 << 20)) == [0, 1]


def test_failed_write_is_rolled_back(plog: PartitionLog, monkeypatch: pytest.MonkeyPatch) -> None:
    plog.append([batch(2)])
    size = plog.size_bytes
    real_write = os.write

    def half_then_fail(fd: int, data: memoryview) -> int:
        if len(data) > 0 and not getattr(half_then_fail, "done", False):
            half_then_fail.done = True  # type: ignore[attr-defined]
            return real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError, match="space"):
        plog.append([batch(3)])
    monkeypatch.undo()
    assert (plog.log_end_offset, plog.size_bytes) == (2, size)
    assert plog.append([batch(1)]) == 2
    assert offsets_of(plog.read(0, 1 << 20)) == [0, 1, 2]


def test_close_and_delete(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "p")
    log.append([batch()])
    log.close()
    log.close()  # idempotent
    log.flush()  # no-op once closed
    with pytest.raises(ValueError, match="closed"):
        log.append([batch()])
    with pytest.raises(ValueError, match="closed"):
        log.read(0, 100)
    log = PartitionLog.open(tmp_path / "p")
    assert log.log_end_offset == 1
    log.delete()
    assert not (tmp_path / "p").exists()


def test_sigkill_after_append_loses_nothing(tmp_path: Path) -> None:
    blob = b"".join(batch(i + 1) for i in range(20))
    (tmp_path / "blob").write_bytes(blob)
    script = f"""
        import os, signal
        from pathlib import Path
        from rafka_actors.storage.partition_log import PartitionLog
        from rafka_actors.storage.record_batch import split_batches
        log = PartitionLog.open(Path({str(tmp_path / "log")!r}))
        for b in split_batches(Path({str(tmp_path / "blob")!r}).read_bytes()):
            log.append([b])
        os.kill(os.getpid(), signal.SIGKILL)
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=False)
    assert proc.returncode == -signal.SIGKILL
    log = PartitionLog.open(tmp_path / "log")
    assert log.log_end_offset == sum(range(1, 21))
    log.close()


@settings(max_examples=40, deadline=None)
@given(
    appends=st.lists(
        st.lists(st.tuples(st.integers(1, 5), st.integers(0, 200), st.integers(0, 50)), max_size=4),
        max_size=25,
    ),
    segment_bytes=st.integers(100, 3000),
    max_bytes=st.integers(0, 2000),
)
def test_random_appends_match_model_and_survive_reopen(
    tmp_path_factory: pytest.TempPathFactory,
    appends: list[list[tuple[int, int, int]]],
    segment_bytes: int,
    max_bytes: int,
) -> None:
    directory = tmp_path_factory.mktemp("log")
    log = PartitionLog.open(directory, segment_bytes=segment_bytes)
    model: list[tuple[int, bytes]] = []  # (base offset, stamped batch)
    for spec in appends:
        built = [batch(n, value_size=size, ts=ts) for n, size, ts in spec]
        base = log.append(built)
        for b in built:
            model.append((base, assign_offsets(b, base)))
            base += parse_header(b).records_count
    assert log.log_end_offset == sum(parse_header(b).records_count for _, b in model)
    assert log.read(0, 1 << 30) == b"".join(b for _, b in model)
    _check_reads(log, model, max_bytes)
    before = _state(log)
    log.close()
    again = PartitionLog.open(directory, segment_bytes=segment_bytes)
    assert _state(again) == before
    again.close()


def _check_reads(log: PartitionLog, model: list[tuple[int, bytes]], max_bytes: int) -> None:
    for offset in range(log.log_end_offset):
        first = max(i for i, (base, _) in enumerate(model) if base <= offset)
        expected, total = [model[first][1]], len(model[first][1])
        for _, b in model[first + 1 :]:
            if total + len(b) > max_bytes:
                break
            expected.append(b)
            total += len(b)
        assert log.read(offset, max_bytes) == b"".join(expected)

"""Coordinator segment files: framing, torn tails, corruption in the middle, rolling, failures."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import cbor2
import pytest
from crc32c import crc32c

from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_records import decode_entry, encode_entry
from rafka_actors.storage.coordinator_segments import (
    CoordinatorLogError,
    CoordinatorLogFailed,
    CoordinatorSegments,
    CorruptCoordinatorLog,
    read_segment,
)

LOGGER = "rafka_actors.storage.coordinator_segments"
KEY = GroupKey(1, "g")


def payload(i: int) -> bytes:
    return encode_entry(KEY, OffsetCommitRecord("g", "t", i % 7, i, -1, f"m{i}", 1000 + i))


def open_log(
    directory: Path, **kw: object
) -> tuple[CoordinatorSegments, list[tuple[GroupKey, object]]]:
    entries: list[tuple[GroupKey, object]] = []
    log = CoordinatorSegments.open(directory, decode_entry, entries.append, **kw)  # type: ignore[arg-type]
    return log, entries


def offsets(entries: list[tuple[GroupKey, object]]) -> list[int]:
    return [r.offset for _, r in entries]  # type: ignore[attr-defined]


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def write_log(directory: Path, batches: list[list[int]], **kw: object) -> list[Path]:
    log, _ = open_log(directory, **kw)
    for batch in batches:
        log.append([payload(i) for i in batch])
    log.close()
    return segment_files(directory)


def appends_continue(log: CoordinatorSegments, directory: Path, before: list[int]) -> None:
    """Append one more entry, close, and check a reopened log has ``before`` and it."""
    log.append([payload(len(before))])
    log.close()
    _, entries = open_log(directory)
    assert offsets(entries) == [*before, len(before)]


def frame_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += 8 + struct.unpack_from(">I", data, pos)[0]
    return starts


def flip(path: Path, position: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 1 << bit
    path.write_bytes(bytes(data))


def test_new_log_and_frame_layout(tmp_path: Path) -> None:
    files = write_log(tmp_path, [[0, 1], [2]])
    assert [f.name for f in files] == ["00000000000000000000.log"]
    data = files[0].read_bytes()
    first = payload(0)
    assert data[:8] == struct.pack(">II", len(first), crc32c(first))
    assert data[8 : 8 + len(first)] == first
    assert len(frame_starts(data)) == 3
    log, entries = open_log(tmp_path)
    assert offsets(entries) == [0, 1, 2]
    log.close()


def test_a_batch_is_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log, _ = open_log(tmp_path)
    writes: list[int] = []
    real_write = os.pwrite

    def counting_write(fd: int, data: bytes, offset: int) -> int:
        writes.append(len(data))
        return real_write(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", counting_write)
    log.append([payload(i) for i in range(50)])
    monkeypatch.undo()
    assert len(writes) == 1
    log.close()


def test_replay_after_reopen_and_appends_continue(tmp_path: Path) -> None:
    write_log(tmp_path, [[0], [1, 2]])
    log, entries = open_log(tmp_path)
    assert offsets(entries) == [0, 1, 2]
    appends_continue(log, tmp_path, [0, 1, 2])


def test_torn_tail_at_every_byte_of_the_last_frame(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = write_log(tmp_path / "src", [[0, 1, 2], [3]])
    data = files[0].read_bytes()
    last = frame_starts(data)[-1]
    for cut in range(last, len(data)):  # every length short of the whole last frame
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        (directory / files[0].name).write_bytes(data[:cut])
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger=LOGGER):
            log, entries = open_log(directory)
        assert offsets(entries) == [0, 1, 2]
        if any(data[last:cut]):
            assert f"torn or corrupt tail at byte {last}" in caplog.text
            assert files[0].name in caplog.text
        elif cut > last:  # the zero bytes of a length's start: as if preallocated, unwritten
            assert f"dropping {cut - last} bytes of unused preallocated space" in caplog.text
        assert (directory / files[0].name).stat().st_size == last
        log.append([payload(9)])  # appends go on after the cut
        log.close()
        _, entries = open_log(directory)
        assert offsets(entries) == [0, 1, 2, 9]


@pytest.mark.parametrize("where", ["length", "crc", "payload"])
def test_bit_flip_in_the_last_frame_truncates_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    [path] = write_log(tmp_path, [[0, 1], [2]])
    last = frame_starts(path.read_bytes())[-1]
    flip(path, {"length": last + 3, "crc": last + 5, "payload": last + 12}[where], bit=2)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log, entries = open_log(tmp_path)
    assert offsets(entries) == [0, 1]
    assert f"{path}: torn or corrupt tail at byte {last}" in caplog.text
    log.close()


def test_zeroed_tail_is_a_torn_tail(tmp_path: Path) -> None:
    [path] = write_log(tmp_path, [[0, 1]])
    with path.open("ab") as f:
        f.write(bytes(4096))  # what a power loss can leave after the last good page
    log, entries = open_log(tmp_path)
    assert offsets(entries) == [0, 1]
    log.close()


def test_undecodable_last_payload_is_truncated(tmp_path: Path) -> None:
    [path] = write_log(tmp_path, [[0]])
    junk = b"\xff\xff"
    with path.open("ab") as f:
        f.write(struct.pack(">II", len(junk), crc32c(junk)) + junk)
    log, entries = open_log(tmp_path)
    assert offsets(entries) == [0]
    log.close()


@pytest.mark.parametrize("where", ["length", "crc", "payload"])
def test_bit_flip_in_a_middle_frame_is_corruption(tmp_path: Path, where: str) -> None:
    [path] = write_log(tmp_path, [[0, 1, 2, 3]])
    second = frame_starts(path.read_bytes())[1]
    flip(path, {"length": second + 1, "crc": second + 6, "payload": second + 20}[where])
    with pytest.raises(CorruptCoordinatorLog) as info:
        open_log(tmp_path)
    assert info.value.path == path
    assert info.value.position == second
    assert f"{path}: damaged frame at byte {second}" in str(info.value)


def test_skip_corruption_keeps_the_other_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    [path] = write_log(tmp_path, [[0, 1, 2, 3, 4]])
    starts = frame_starts(path.read_bytes())
    flip(path, starts[1] + 1)  # length of frame 1: no way to step over it but to scan
    flip(path, starts[3] + 20)  # payload of frame 3
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log, entries = open_log(tmp_path, skip_corruption=True)
    assert offsets(entries) == [0, 2, 4]
    assert f"skipping damaged bytes {starts[1]}..{starts[2]}" in caplog.text
    log.append([payload(5)])
    log.close()
    _, entries = open_log(tmp_path, skip_corruption=True)
    assert offsets(entries) == [0, 2, 4, 5]


def test_damage_in_a_sealed_segment_is_corruption_even_at_its_end(tmp_path: Path) -> None:
    files = write_log(tmp_path, [[0, 1], [2, 3], [4]], segment_bytes=1)
    assert len(files) == 3
    with files[0].open("r+b") as f:
        f.truncate(files[0].stat().st_size - 1)
    with pytest.raises(CorruptCoordinatorLog) as info:
        open_log(tmp_path)
    assert info.value.path == files[0]
    log, entries = open_log(tmp_path, skip_corruption=True)
    assert offsets(entries) == [0, 2, 3, 4]
    log.close()


def test_the_active_segment_is_preallocated_and_cut_back_when_sealed_or_closed(
    tmp_path: Path,
) -> None:
    sizes = [len(payload(i)) + 8 for i in range(41)]
    log, _ = open_log(tmp_path, segment_bytes=sum(sizes[:40]), preallocate_bytes=500)
    log.append([payload(0)])
    [active] = segment_files(tmp_path)
    assert active.stat().st_size == sizes[0] + 500  # grown ahead: fsyncs find its size unchanged
    assert log.size_bytes == sizes[0]
    log.append([payload(i) for i in range(1, 10)])  # within the space
    assert active.stat().st_size == sizes[0] + 500
    log.append([payload(i) for i in range(10, 40)])  # past it: grown, up to the segment size
    assert active.stat().st_size == sum(sizes[:40])
    log.append([payload(40)])  # does not fit: the segment is sealed
    sealed, active = segment_files(tmp_path)
    assert sealed.stat().st_size == sum(sizes[:40])
    assert active.stat().st_size == sizes[40] + 500
    log.close()
    assert active.stat().st_size == sizes[40]  # its frames and nothing after them
    _, entries = open_log(tmp_path)
    assert offsets(entries) == list(range(41))


def test_a_crash_leaves_unused_space_that_replay_drops_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log, _ = open_log(tmp_path / "live", preallocate_bytes=1 << 16)
    log.append([payload(0), payload(1)])
    log.append([payload(2)])
    [live] = segment_files(tmp_path / "live")
    image = tmp_path / "crashed"  # the files as a kill -9 leaves them: never closed
    image.mkdir()
    (image / live.name).write_bytes(live.read_bytes())
    log.close()
    frames = live.stat().st_size
    assert (image / live.name).stat().st_size > frames + 60_000  # zeros after the frames
    assert offsets([e for _, e in read_segment(image / live.name, decode_entry)]) == [0, 1, 2]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log, entries = open_log(image)
    assert offsets(entries) == [0, 1, 2]
    assert not caplog.records  # unwritten space is not damage
    assert (image / live.name).stat().st_size == frames
    appends_continue(log, image, [0, 1, 2])


def test_a_frame_torn_inside_preallocated_space_is_a_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    [path] = write_log(tmp_path, [[0, 1]])
    data = path.read_bytes()
    last = frame_starts(data)[-1]
    path.write_bytes(data[: last + 20] + bytes(4096))  # half a frame, then unwritten space
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log, entries = open_log(tmp_path)
    assert offsets(entries) == [0]
    assert f"torn or corrupt tail at byte {last}" in caplog.text
    log.close()


def test_appends_go_on_where_space_cannot_be_preallocated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    log, _ = open_log(tmp_path)
    log.append([payload(0)])
    log.append([payload(1)])
    [path] = segment_files(tmp_path)
    assert path.stat().st_size == log.size_bytes == 2 * (len(payload(0)) + 8)
    log.close()
    _, entries = open_log(tmp_path)
    assert offsets(entries) == [0, 1]


def test_rolls_segments_named_by_first_sequence(tmp_path: Path) -> None:
    one = len(payload(0)) + 8
    log, _ = open_log(tmp_path, segment_bytes=3 * one)
    for i in range(8):
        log.append([payload(i)])
    assert [f.name for f in segment_files(tmp_path)] == [
        "00000000000000000000.log",
        "00000000000000000003.log",
        "00000000000000000006.log",
    ]
    assert log.dirty_bytes == 6 * one
    assert log.size_bytes == 8 * one
    assert log.fsyncs == 2  # each sealed segment was fsynced when it was sealed
    log.close()
    log, entries = open_log(tmp_path, segment_bytes=3 * one)
    assert offsets(entries) == list(range(8))
    log.append([payload(8), payload(9)])  # 2 + 2 frames would not fit: a new segment
    assert segment_files(tmp_path)[-1].name == "00000000000000000008.log"
    log.close()


def test_a_failed_write_raises_and_leaves_no_partial_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = open_log(tmp_path)
    log.append([payload(0)])
    real_write = os.pwrite

    def short_then_fail(fd: int, data: bytes, offset: int) -> int:
        monkeypatch.setattr(os, "pwrite", failing)
        return real_write(fd, bytes(data)[:5], offset)

    def failing(fd: int, data: bytes, offset: int) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", short_then_fail)
    with pytest.raises(CoordinatorLogError, match="write failed"):
        log.append([payload(1)])
    monkeypatch.undo()
    log.append([payload(2)])  # the log is still usable
    log.close()
    _, entries = open_log(tmp_path)
    assert offsets(entries) == [0, 2]


def test_a_failed_fsync_poisons_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log, _ = open_log(tmp_path)
    log.append([payload(0)])

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(CoordinatorLogFailed):
        log.fsync()
    monkeypatch.undo()
    with pytest.raises(CoordinatorLogFailed):
        log.append([payload(1)])
    log.close()


def test_records_from_a_newer_broker_are_fatal_not_a_torn_tail(tmp_path: Path) -> None:
    [path] = write_log(tmp_path, [[0]])
    future = cbor2.dumps([1, 1, 1, "g", "whatever"])
    with path.open("ab") as f:
        f.write(struct.pack(">II", len(future), crc32c(future)) + future)
    with pytest.raises(CoordinatorLogError, match="unknown version 1") as info:
        open_log(tmp_path)
    assert any(f"at byte {frame_starts(path.read_bytes())[1]}" in n for n in info.value.__notes__)
    assert path.stat().st_size > 0 and len(frame_starts(path.read_bytes())) == 2  # untouched


def test_leftover_compaction_output_is_removed(tmp_path: Path) -> None:
    write_log(tmp_path, [[0]])
    stray = tmp_path / "00000000000000000000.log.compacting"
    stray.write_bytes(b"half written")
    log, entries = open_log(tmp_path)
    assert offsets(entries) == [0]
    assert not stray.exists()
    log.close()


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    log.close()
    log.close()  # idempotent
    with pytest.raises(CoordinatorLogError, match="closed"):
        log.append([payload(0)])

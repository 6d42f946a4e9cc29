"""One partition's append-only log, stored in Kafka's on-disk segment format.

Layout
------
A partition is a directory of segment files named ``{base_offset:020d}.log``. A segment is the
plain concatenation of v2 record batches carrying their assigned offsets (exactly what a Fetch
response returns), so reads are a ``pread`` of a byte range and no re-encoding ever happens. Only
the newest ("active") segment is appended to; when an append would push it past
``segment_bytes`` it is fsynced and a new one is started at the log end offset.

Index
-----
There are no index files: on open every segment's batch headers are scanned and an in-memory
index is rebuilt. Per segment it is four parallel ``array('q')`` (32 bytes per batch): batch base
offsets, the offsets that follow them, file positions, and the *running maximum* of batch
max-timestamps. Appends give contiguous offsets (each batch takes ``lastOffsetDelta + 1``), but
the log cleaner (log_cleaner.py) removes records and whole batches of a compacted topic, leaving
gaps: a read from an offset in a gap starts at the next batch, and a segment may start after
its base offset or be empty. ``bisect`` on the base offsets finds the batch holding an offset;
because the running maximum is non-decreasing, ``bisect`` on it finds the first batch whose max
timestamp reaches a target (ListOffsets by timestamp).

Durability and recovery
-----------------------
An append is one unbuffered ``os.write`` of all its batches, so once ``append`` returns the data is
in the OS page cache and survives the death of the process (not of the machine: call ``flush``
for that; rolled segments are fsynced). A crash can therefore only leave a torn tail on the active
segment. On open, the last segment is also CRC-checked, and the log is cut at the first bad byte:
truncated header or batch, CRC mismatch, or a base offset below the end of the previous
batch. Like Kafka, if the damage is found in an earlier segment everything after it is deleted.
Recovery logs a warning and never raises for damaged data. `open` only reads: finishing a swap
a crash interrupted (below), the cuts and deletions, creating a first segment and opening the
active one for appends are handed to a `StartupWrites` (startup_writes.py), which the broker
applies once every log checked out.
Segment files are created mode 0644 (less what the umask takes), never executable.

A failed write (a full disk: ENOSPC, EDQUOT; EIO) raises OSError and leaves the log as it was:
the partial batch is cut off again. If even that fails, or an fsync fails (after which the
kernel may have dropped dirty pages), the log refuses every later append with OSError until
it is reopened, as Kafka takes a failed log dir offline; reads go on.

The cleaner swaps its rewritten segments in with `replace_segments` (segment_swap.py makes
the swap atomic on disk and finishes one a crash interrupted; `open` reads the segments as
that will leave them).

This module is synchronous and trio-free: it is driven from a single thread.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import shutil
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path

from .batch_records import record_stamps
from .failures import detached
from .fsutil import fsync_dir
from .record_batch import (
    BATCH_OVERHEAD,
    HEADER_SIZE,
    InvalidRecordError,
    check_batch,
    parse_header,
    stamp_offsets,
)
from .segment_swap import SUFFIX as _SUFFIX
from .segment_swap import SegmentIndex, commit_swap, finish_swaps, swapped_listing
from .segment_swap import segment_name as _segment_name
from .startup_writes import StartupWrites, Write

__all__ = ["PartitionLog"]

log = logging.getLogger(__name__)

_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
_FILE_MODE = 0o644  # os.open's default is 0o777: segments would be executable
# Header tuple indices (see record_batch.BatchHeader).
_BASE, _LENGTH, _ATTRIBUTES, _DELTA, _MAX_TS = 0, 1, 5, 6, 8
_HEADER = struct.Struct(">qiibIhiqqqhii")
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43
_CONTROL_BIT = 0x20


class _Segment:
    """A segment file, its open descriptor and its in-memory batch index."""

    __slots__ = (
        "base_offset",
        "end_offset",
        "fd",
        "max_ts",
        "next_offsets",
        "offsets",
        "path",
        "positions",
        "size",
    )

    def __init__(self, path: Path, base_offset: int, flags: int | None) -> None:
        """Open the file with `flags`; None: not opened (nor created) yet, empty."""
        self.path = path
        self.base_offset = base_offset
        self.fd = -1 if flags is None else os.open(path, flags, _FILE_MODE)
        self.size = 0 if flags is None else os.fstat(self.fd).st_size
        self.reset_index()

    def reset_index(self) -> None:
        self.offsets = array("q")
        self.next_offsets = array("q")  # the offset after each batch's last
        self.positions = array("q")
        self.max_ts = array("q")  # running maximum of the batches' maxTimestamp
        self.end_offset = self.base_offset  # next offset after this segment's last batch

    def add(self, offset: int, position: int, max_ts: int, next_offset: int) -> None:
        running = self.max_ts
        self.offsets.append(offset)
        self.next_offsets.append(next_offset)
        self.positions.append(position)
        running.append(max(running[-1], max_ts) if running else max_ts)
        self.end_offset = next_offset

    def position_of(self, offset: int) -> int:
        """File position of the first batch that starts at or after ``offset``."""
        i = bisect_left(self.offsets, offset)
        return self.positions[i] if i < len(self.positions) else self.size

    def offset_after(self, position: int) -> int:
        """The offset after the last batch that ends at or before ``position`` (a batch
        boundary; the segment's base offset if none does)."""
        i = bisect_left(self.positions, position)
        return self.next_offsets[i - 1] if i else self.base_offset

    def install(self, index: SegmentIndex) -> None:
        """Take the index the cleaner computed for this (rewritten) file."""
        self.reset_index()
        for name in ("offsets", "next_offsets", "positions", "max_ts"):
            getattr(self, name).frombytes(getattr(index, name))
        self.end_offset = self.next_offsets[-1] if self.next_offsets else self.base_offset

    def batch_end(self, i: int) -> int:
        return self.positions[i + 1] if i + 1 < len(self.positions) else self.size

    def span(self, i: int, budget: int) -> int:
        """End position of the longest run of whole batches from batch ``i`` within ``budget``."""
        limit = self.positions[i] + budget
        if self.size <= limit:
            return self.size
        # First batch starting beyond the limit; the batch before it is the first not to fit.
        return self.positions[bisect_right(self.positions, limit, i + 1) - 1]

    def scan(self, *, verify_crc: bool) -> tuple[int, str | None]:
        """Rebuild the index from the file: (valid byte length, why the scan stopped early)."""
        self.reset_index()
        if self.size == 0:
            return 0, None
        with mmap.mmap(self.fd, self.size, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                return self._scan_view(view, verify_crc)
            finally:
                view.release()

    def _scan_view(self, view: memoryview, verify_crc: bool) -> tuple[int, str | None]:
        pos, end, expected = 0, len(view), self.base_offset
        while pos < end:
            try:
                header = check_batch(view, pos, end, verify_crc=verify_crc, cleaned=True)
            except InvalidRecordError as exc:
                return pos, str(exc)
            base = header[_BASE]
            if base < expected:  # (above it: a gap the cleaner left)
                return pos, f"batch at {pos} has base offset {base}, below {expected}"
            nxt = base + header[_DELTA] + 1
            self.add(base, pos, header[_MAX_TS], nxt)
            expected = nxt
            pos += BATCH_OVERHEAD + header[_LENGTH]
        return pos, None

    def truncate(self, length: int, reason: str) -> Write:
        """Forget the bytes from `length` on; the write that cuts them off the file."""
        dropped, self.size = self.size - length, length
        path = self.path

        def cut() -> None:
            log.warning(
                "%s: torn or corrupt tail at byte %d, truncating (%d bytes dropped): %s",
                path,
                length,
                dropped,
                reason,
            )
            os.truncate(path, length)

        return cut

    def reopen(self, flags: int) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = os.open(self.path, flags, _FILE_MODE)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _list_segments(directory: Path) -> list[tuple[int, Path]]:
    found = []
    for path in directory.iterdir():
        stem = path.name.removesuffix(_SUFFIX)
        if path.name.endswith(_SUFFIX) and len(stem) == 20 and stem.isdigit():
            found.append((int(stem), path))
    return sorted(found)


def _discard(paths: Sequence[Path], reason: str) -> Write:
    def delete() -> None:
        for path in paths:
            log.warning("%s: deleting segment following corruption: %s", path, reason)
            path.unlink()

    return delete


def _recover(directory: Path) -> tuple[list[_Segment], list[Write]]:
    """Open (read-only) and index the segments, as the cleaner's interrupted swaps will leave
    them and as cut at the first damaged byte; and the writes that make the files so (made
    later: see the module docstring)."""
    files = swapped_listing(directory, _list_segments(directory))
    segments: list[_Segment] = []
    repairs: list[Write] = [lambda: finish_swaps(directory)]  # first: the files as listed
    for k, (base, now, path) in enumerate(files):
        is_last = k == len(files) - 1
        if segments and base < segments[-1].end_offset:
            paths = [p for _, _, p in files[k:]]
            repairs.append(_discard(paths, f"base {base} < {segments[-1].end_offset}"))
            break
        seg = _Segment(now, base, _READ_FLAGS)
        seg.path = path  # where it will be (`now` is a swap file, if a swap was interrupted)
        valid, reason = seg.scan(verify_crc=is_last)
        if reason is None and seg.size == 0 and segments and not is_last:
            seg.close()  # a stray empty segment in the middle holds nothing: drop it
            # (an empty first one keeps the log start where cleaning found it)
            repairs.append(path.unlink)
            continue
        segments.append(seg)
        if reason is not None:
            repairs.append(seg.truncate(valid, reason))
            repairs.append(_discard([p for _, _, p in files[k + 1 :]], f"{path.name} truncated"))
            break
    if segments and segments[-1].path != files[-1][2]:
        # became the tail only because later files were dropped
        repairs.extend(_verify_new_tail(segments[-1]))
    if len(files) != len(segments):
        repairs.append(lambda: fsync_dir(directory))
    return segments, repairs


def _verify_new_tail(seg: _Segment) -> list[Write]:
    valid, reason = seg.scan(verify_crc=True)
    return [] if reason is None else [seg.truncate(valid, reason)]


_START_FILE = "log-start-offset"


def read_log_start(directory: Path) -> int:
    """The log start DeleteRecords left in a partition's directory (0: none; the pipeline
    reads it too)."""
    path = directory / _START_FILE
    try:
        return int(path.read_text().strip() or 0)
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as exc:  # the segments' own start stands in
        log.warning("%s: unreadable (%s); the log starts at its first segment", path, exc)
        return 0


def _write_start(directory: Path, offset: int) -> None:
    tmp = directory / (_START_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(str(offset))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / _START_FILE)
    fsync_dir(directory)


class PartitionLog:
    """An append-only, segmented log of record batches for one partition."""

    def __init__(self, directory: Path, segments: list[_Segment], segment_bytes: int) -> None:
        self._dir = directory
        self._segments = segments
        self._bases = [s.base_offset for s in segments]  # for bisect over segments
        self._segment_bytes = segment_bytes
        self._end = segments[-1].end_offset
        self._size = sum(s.size for s in segments)
        self._closed = False
        # DeleteRecords may move the log start inside the first segment (issue 45): kept in
        # a file of its own, as Kafka's log-start-offset checkpoint.
        self._start_floor = min(read_log_start(directory), self._end)
        self._failed: OSError | None = None  # set by a write or fsync that could not be undone
        self._writable = False  # recovery's writes made, the active segment open for appends
        # Roll also when a batch is this much newer than the active segment's first (Kafka's
        # time rule, which a compacted topic's max.compaction.lag.ms sets: the log cleaner
        # only cleans sealed segments); None: by size only.
        self.roll_after_ms: int | None = None

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        segment_bytes: int = 1 << 30,
        writes: StartupWrites | None = None,
    ) -> PartitionLog:
        """Open (creating if needed) the log in ``directory``, recovering any torn tail. Reads
        only: the recovery's writes, and opening the log for appends, go to ``writes`` (made
        at once if None); the log takes appends once they are made."""
        segments, repairs = _recover(directory) if directory.is_dir() else ([], [])
        if not segments:
            segments = [_Segment(directory / _segment_name(0), 0, None)]
        partition = cls(directory, segments, segment_bytes)
        (writes or StartupWrites.now()).add(lambda: partition._start_writing(repairs))
        return partition

    def _start_writing(self, repairs: list[Write]) -> None:
        for repair in repairs:
            repair()
        active = self._segments[-1]
        if active.fd >= 0:
            active.reopen(_APPEND_FLAGS)
        else:
            self._dir.mkdir(parents=True, exist_ok=True)
            active.reopen(_APPEND_FLAGS | os.O_CREAT)
            fsync_dir(self._dir)
        self._writable = True

    # -- properties -----------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def log_start_offset(self) -> int:
        return max(self._segments[0].base_offset, self._start_floor)

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned (also the high watermark: there are no replicas)."""
        return self._end

    @property
    def size_bytes(self) -> int:
        return self._size

    # -- writing --------------------------------------------------------------------------

    def append(self, batches: Sequence[bytes | memoryview]) -> int:
        """Append validated batches with consecutive offsets; return the first one's offset.

        Batches are expected to come from ``split_batches`` (CRC already checked); their
        structure is re-checked cheaply so the log's offset invariants cannot be broken. An empty
        sequence writes nothing and returns the log end offset.
        """
        self._check_writable()
        if self._failed is not None:
            raise OSError(self._failed.errno, f"{self._dir} refuses appends since: {self._failed}")
        if not batches:
            return self._end
        buf = bytearray().join(batches)  # the one copy: offsets are stamped into it in place
        first = offset = self._end
        entries: list[tuple[int, int, int, int]] = []  # (offset, position in buf, max ts, next)
        pos, end = 0, len(buf)
        while pos < end:
            header = check_batch(buf, pos, end, verify_crc=False)
            stamp_offsets(buf, pos, offset)
            nxt = offset + header[_DELTA] + 1
            entries.append((offset, pos, header[_MAX_TS], nxt))
            offset = nxt
            pos += BATCH_OVERHEAD + header[_LENGTH]
        seg = self._segments[-1]
        if seg.size and (seg.size + end > self._segment_bytes or self._roll_due(seg, entries)):
            seg = self._roll()
        self._write(seg, buf)
        for batch_offset, rel, max_ts, nxt in entries:
            seg.add(batch_offset, seg.size + rel, max_ts, nxt)
        seg.size += end
        self._size += end
        self._end = offset
        return first

    def _roll_due(self, seg: _Segment, entries: list[tuple[int, int, int, int]]) -> bool:
        """Kafka's time rule: the batches' newest timestamp is more than `roll_after_ms`
        past the active segment's first batch's."""
        if self.roll_after_ms is None or not seg.max_ts or seg.max_ts[0] < 0:
            return False
        return max(e[2] for e in entries) - seg.max_ts[0] > self.roll_after_ms

    def _write(self, seg: _Segment, data: bytearray) -> None:
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):  # a regular file only writes short on huge buffers
                written += os.write(seg.fd, view[written:] if written else view)
        except BaseException:
            try:  # never leave a partial batch for the next append
                os.ftruncate(seg.fd, seg.size)
            except OSError as exc:
                self._failed = detached(exc)
            raise

    def _roll(self) -> _Segment:
        self._fsync(self._segments[-1].fd)
        path = self._dir / _segment_name(self._end)
        seg = _Segment(path, self._end, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL)
        try:
            fsync_dir(self._dir)
        except OSError:
            seg.close()
            path.unlink(missing_ok=True)  # so that the next roll can try again
            raise
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        return seg

    # -- reading --------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``.

        With ``min_one`` the first batch is returned even if larger than ``max_bytes``
        (KIP-74), so a consumer always makes progress; Fetch asks it for the first partition
        that returns data only. Empty at or past the log end. Offsets below the log start are
        the caller's to reject (OFFSET_OUT_OF_RANGE): they raise ValueError here.
        """
        return self.read_until(offset, max_bytes, self._end, min_one=min_one)[0]

    def read_until(
        self, offset: int, max_bytes: int, stop_offset: int, *, min_one: bool = True
    ) -> tuple[bytes, int]:
        """As `read`, but only batches that start below ``stop_offset``, a batch's base offset
        or the log end (a read_committed fetch stops at the last stable offset); also returns
        the offset that follows the last batch returned (``offset`` itself when nothing is)."""
        self._check_open()
        if offset < self.log_start_offset:
            raise ValueError(f"offset {offset} < log start offset {self.log_start_offset}")
        stop_offset = min(stop_offset, self._end)
        found = self._locate(offset) if offset < stop_offset else None
        if found is None:
            return b"", offset
        si, i = found
        seg = self._segments[si]
        chunks: list[bytes] = []
        budget, after = max_bytes, offset
        while seg.offsets[i] < stop_offset:
            start = seg.positions[i]
            limit = seg.size
            if seg.end_offset > stop_offset:  # the stop is inside this segment
                limit = seg.position_of(stop_offset)
            stop = min(seg.span(i, budget), limit)
            if stop == start:
                if chunks:
                    break
                if not min_one:
                    return b"", offset
                stop = seg.batch_end(i)  # KIP-74: the first batch goes out whole
            chunks.append(os.pread(seg.fd, stop - start, start))
            budget -= stop - start
            after = seg.offset_after(stop)
            nxt = self._next_nonempty(si + 1)
            if stop < seg.size or budget <= 0 or nxt is None:
                break
            si, seg, i = nxt, self._segments[nxt], 0
        if not chunks:
            return b"", offset
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return data, after

    def _locate(self, offset: int) -> tuple[int, int] | None:
        """(segment, batch) indexes of the first batch that holds an offset at or after
        `offset` (the one holding it, or the next after a gap); None if there is none."""
        si = max(bisect_right(self._bases, offset) - 1, 0)
        seg = self._segments[si]
        i = bisect_right(seg.offsets, offset) - 1
        if i < 0 or seg.next_offsets[i] <= offset:
            i += 1  # (a gap: the next batch starts above `offset`)
        if i < len(seg.offsets):
            return si, i
        nxt = self._next_nonempty(si + 1)
        return None if nxt is None else (nxt, 0)

    def _next_nonempty(self, si: int) -> int | None:
        """The index of the first segment from `si` on that holds a batch."""
        while si < len(self._segments):
            if self._segments[si].offsets:
                return si
            si += 1
        return None

    def producer_batches(
        self, records_prefix: int, start_offset: int = 0
    ) -> Iterator[tuple[tuple[int, ...], bytes]]:
        """Every batch written by a producer (producer id >= 0) that starts at or after
        ``start_offset``, in offset order: its raw header (field order as
        record_batch.BatchHeader) and, for a control batch, the first ``records_prefix`` bytes
        of its records (a marker's type is in its record's key).

        One pass over mapped segments reading eight bytes per batch, for the producer state
        rebuilt at start-up (producer_recovery.py).
        """
        self._check_open()
        for seg in self._segments:
            if not seg.size or seg.end_offset <= start_offset:
                continue
            first = bisect_left(seg.offsets, start_offset)
            with mmap.mmap(seg.fd, seg.size, access=mmap.ACCESS_READ) as mm:
                for pos in seg.positions[first:]:
                    if _PRODUCER_ID.unpack_from(mm, pos + _PRODUCER_ID_AT)[0] < 0:
                        continue
                    header = _HEADER.unpack_from(mm, pos)
                    body = b""
                    if header[_ATTRIBUTES] & _CONTROL_BIT:
                        body = mm[pos + HEADER_SIZE : pos + HEADER_SIZE + records_prefix]
                    yield header, body

    def crc_of_batch_ending_at(self, end_offset: int) -> int | None:
        """The CRC of the batch whose last offset is ``end_offset - 1``; None if no batch
        ends there (a snapshot taken at ``end_offset`` checks with it that the log it
        describes is still this one)."""
        self._check_open()
        if not self.log_start_offset < end_offset <= self._end:
            return None
        seg = self._segments[bisect_right(self._bases, end_offset - 1) - 1]
        i = bisect_right(seg.offsets, end_offset - 1) - 1
        if i < 0 or seg.next_offsets[i] != end_offset:
            return None
        header = _HEADER.unpack(os.pread(seg.fd, HEADER_SIZE, seg.positions[i]))
        return int(header[4])

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or past the log start whose timestamp
        is >= ``ts``, as Kafka's time index and segment search find it; None if none is.

        The index finds the first batch whose max timestamp reaches ``ts`` (the running max
        first reaches it there); that batch's records are read for the record itself. A
        batch whose max timestamp lied (no record reaches it) sends the search on.
        """
        self._check_open()
        start = self.log_start_offset
        for seg in self._segments:
            if not seg.max_ts or seg.max_ts[-1] < ts or seg.end_offset <= start:
                continue
            first = max(bisect_left(seg.max_ts, ts), bisect_right(seg.offsets, start) - 1)
            for i in range(first, len(seg.offsets)):
                found = self._first_record_from(seg, i, ts, start)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with the largest timestamp (ListOffsets'
        MAX_TIMESTAMP); None for an empty log."""
        best: tuple[_Segment, int] | None = None
        for seg in self._segments:
            if seg.max_ts and (best is None or seg.max_ts[-1] > best[0].max_ts[-1]):
                best = seg, bisect_left(seg.max_ts, seg.max_ts[-1])
        if best is None:
            return None
        seg, i = best
        top = seg.max_ts[-1]
        found = self._first_record_from(seg, i, top, self.log_start_offset)
        return found or (max(seg.offsets[i], self.log_start_offset), top)

    def _first_record_from(
        self, seg: _Segment, i: int, ts: int, start: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record of batch `i` of `seg` at or past `start`
        whose timestamp is >= `ts`; None if it has none (or cannot be read: logged)."""
        position = seg.positions[i]
        batch = os.pread(seg.fd, seg.batch_end(i) - position, position)
        if parse_header(batch).max_timestamp < ts:
            return None
        try:
            for offset, stamp in record_stamps(batch):
                if offset >= start and stamp >= ts:
                    return offset, stamp
        except InvalidRecordError as exc:
            log.warning("%s: records of the batch at offset %d unreadable: %s",
                        self._dir, seg.offsets[i], exc)  # fmt: skip
        return None

    # -- retention and DeleteRecords (issue 45; storage/retention.py decides what goes) -----

    @property
    def segment_bytes(self) -> int:
        return self._segment_bytes

    @segment_bytes.setter
    def segment_bytes(self, value: int) -> None:
        self._segment_bytes = value  # the topic's segment.bytes, from the next roll on

    def segment_stats(self) -> list[tuple[int, int, int, int]]:
        """(base offset, end offset, bytes, largest timestamp (-1: none)) of each segment,
        oldest first; the last one is the active segment."""
        return [
            (s.base_offset, s.end_offset, s.size, s.max_ts[-1] if s.max_ts else -1)
            for s in self._segments
        ]

    def first_batch_timestamps(self) -> list[int]:
        """Each segment's first batch's max timestamp (-1 for an empty one), oldest first:
        when its records began to wait for the cleaner (max.compaction.lag.ms)."""
        return [s.max_ts[0] if s.max_ts else -1 for s in self._segments]

    def advance_log_start(self, offset: int) -> int:
        """Move the log start up to `offset` (at most the log end), durably before it returns,
        and delete the segments wholly below it; returns the new log start."""
        self._check_writable()
        offset = min(offset, self._end)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        _write_start(self._dir, offset)
        self._start_floor = offset
        active = self._segments[-1]  # (an empty one holds nothing below; a cleaned one may)
        below = sum(
            1 for s in self._segments if s.end_offset <= offset and (s.size or s is not active)
        )
        self.delete_oldest_segments(below)
        return self.log_start_offset

    def delete_oldest_segments(self, count: int) -> int:
        """Delete the `count` oldest segments, as Kafka's retention does: whole segments only;
        if that takes the active one, a new empty segment is rolled first at the log end."""
        self._check_writable()
        count = min(count, len(self._segments))
        if count <= 0:
            return 0
        if count == len(self._segments):
            if not self._segments[-1].size:
                count -= 1  # an empty active segment holds nothing
            else:
                self._roll()
        doomed, self._segments = self._segments[:count], self._segments[count:]
        self._bases = [s.base_offset for s in self._segments]
        for seg in doomed:
            seg.close()
            seg.path.unlink()
            self._size -= seg.size
        if doomed:
            fsync_dir(self._dir)
        return len(doomed)

    # -- the log cleaner (log_cleaner.py rewrites segments, segment_swap.py swaps them) ------

    @property
    def closed(self) -> bool:
        return self._closed

    def replace_segments(self, first: int, last: int, index: SegmentIndex) -> bool:
        """Swap the cleaner's file for the sealed segments with base offsets `first` to
        `last` in, on disk and in the index. False, changing nothing, if they are no longer
        all here and sealed (retention or DeleteRecords took some, or the log was closed):
        the caller then deletes the file. An OSError midway leaves the disk for the next
        open to finish (segment_swap.py) and the log refusing appends, as a failed fsync."""
        if self._closed or self._failed is not None or not self._writable:
            return False
        k, j = bisect_left(self._bases, first), bisect_left(self._bases, last)
        if j >= len(self._bases) - 1 or self._bases[k] != first or self._bases[j] != last:
            return False
        try:
            path = commit_swap(self._dir, first, last)
            seg = _Segment(path, first, _READ_FLAGS)
        except OSError as exc:
            if (self._dir / _segment_name(first)).exists():  # the rename (the commit) failed
                raise
            self._failed = detached(exc)
            raise
        seg.install(index)
        old, self._segments[k : j + 1] = self._segments[k : j + 1], [seg]
        self._bases = [s.base_offset for s in self._segments]
        for replaced in old:
            replaced.close()
            self._size -= replaced.size
        self._size += seg.size
        return True

    # -- lag (the metrics endpoint; the pipeline reads the same headers) -------------------

    def batch_max_timestamp(self, offset: int) -> int | None:
        """The max timestamp of the batch holding ``offset``: its "append time", as the
        pipeline's partition index has it (one 61-byte pread). None past the log end or
        before its start."""
        self._check_open()
        if offset < self.log_start_offset or offset >= self._end:
            return None
        seg = self._segments[bisect_right(self._bases, offset) - 1]
        i = bisect_right(seg.offsets, offset) - 1
        if i < 0:
            return None
        header = os.pread(seg.fd, HEADER_SIZE, seg.positions[i])
        return parse_header(header).max_timestamp if len(header) == HEADER_SIZE else None

    def end_offset_at(self, ts: int) -> int:
        """The log end as of time ``ts``: the base offset of the first batch whose (running)
        max timestamp is later than ``ts``, or the log end if none is."""
        for seg in self._segments:
            if seg.max_ts and seg.max_ts[-1] > ts:
                return seg.offsets[bisect_right(seg.max_ts, ts)]
        return self._end

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the active segment (rolled ones were fsynced when rolled). No-op once closed
        or failed (a failed log promises nothing more)."""
        if not self._closed and self._failed is None and self._segments[-1].fd >= 0:
            self._fsync(self._segments[-1].fd)

    def flush_handle(self) -> int:
        """A duplicate of the active segment's descriptor, for an fsync off the event loop (a
        roll or close meanwhile cannot pull it from under the worker thread); -1 if closed or
        failed. The caller closes it and reports a failed fsync with `fsync_failed`."""
        if self._closed or self._failed is not None or self._segments[-1].fd < 0:
            return -1
        return os.dup(self._segments[-1].fd)

    def fsync_failed(self, exc: OSError) -> None:
        """An fsync of `flush_handle`'s descriptor failed: refuse appends, as `flush` does."""
        self._failed = detached(exc)

    @property
    def failed(self) -> bool:
        """A write or fsync failed: the log refuses appends and promises nothing more."""
        return self._failed is not None

    def _fsync(self, fd: int) -> None:
        try:
            os.fsync(fd)
        except OSError as exc:
            self._failed = detached(exc)
            raise

    def close(self) -> None:
        """Flush and release file descriptors. Idempotent."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            for seg in self._segments:
                seg.close()

    def delete(self) -> None:
        """Close the log and remove its directory."""
        self.close()
        shutil.rmtree(self._dir)

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:  # a write now would meet a read-only or missing file
            raise OSError(errno.EBADF, f"partition log {self._dir} is not open for appends yet")

    def _check_open(self) -> None:
        # A closed fd number may be reused by another file: never touch it again.
        if self._closed:
            raise ValueError(f"partition log {self._dir} is closed")

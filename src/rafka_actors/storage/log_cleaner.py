"""The log cleaner: one cleaning round over a compacted partition's sealed segments.

Kafka's Cleaner.doClean, in two passes over segment files that nothing else changes meanwhile
(sealed segments below the round's upper bound; cleaner_plan.py picks the range):

1. *Offset map.* From the first dirty offset to the upper bound, each key's latest offset
   (records of aborted transactions left out). The map is bounded by
   `log.cleaner.dedupe.buffer.size` (a key costs its length plus `ENTRY_COST`): when full, the
   round ends at the last batch mapped whole, and the next round goes on from there.
2. *Copy.* Every segment from the log's first up to the map's end, in groups of consecutive
   segments whose sizes add up to at most `segment.bytes`, is copied into one new file,
   ``<first>.log.cleaned``, keeping what cleaner_filter.py says each batch keeps, and fsynced.
   Offsets never change: a kept batch keeps its base offset and last offset delta, so a
   consumer reading across a cleaned range meets gaps, never a record twice.

The files written here replace nothing: the partition's owner swaps them in afterwards
(PartitionLog.replace_segments, segment_swap.py), each only if the segments it replaces are
still there. A group copied unchanged (one segment, nothing removed) is not written at all.

Runs in a child process (cleaner_child.py): a round decodes every record of the segments it
reads, which would hold the GIL against the event loop for as long.
"""

from __future__ import annotations

import logging
import mmap
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .cleaner_filter import FilterContext, TxnTracker, clean_batch
from .keyed_records import records_of
from .record_batch import BATCH_OVERHEAD, BatchHeader, check_batch, parse_header
from .segment_swap import SegmentIndex, cleaned_path, segment_name

__all__ = ["ENTRY_COST", "CleanedGroup", "CleaningJob", "CleaningResult", "clean"]

log = logging.getLogger(__name__)

ENTRY_COST = 100  # bytes a key of the offset map costs besides its own (a dict entry, an int)
_WRITE_CHUNK = 1 << 20
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


@dataclass(slots=True)
class CleaningJob:
    """One round, as the partition's owner saw the partition when it started it."""

    directory: str
    segments: list[tuple[int, int]]  # (base offset, size) of each sealed one below the bound
    first_dirty: int
    upper_bound: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int  # the most a group of segments copied into one file may hold
    map_budget: int  # log.cleaner.dedupe.buffer.size
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, first, marker)
    last_batches: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(slots=True)
class CleanedGroup:
    first: int  # base offsets of the first and last segment it replaces
    last: int
    index: SegmentIndex


@dataclass(slots=True)
class CleaningResult:
    end_offset: int  # the next round's first dirty offset
    groups: list[CleanedGroup]
    bytes_before: int = 0
    bytes_after: int = 0
    records_read: int = 0
    records_kept: int = 0


def clean(job: CleaningJob) -> CleaningResult:
    """Run the round; ValueError if a segment does not read back as whole batches."""
    latest, end = _offset_map(job)
    ctx = FilterContext(
        latest,
        end,
        job.upper_bound,
        job.now_ms,
        job.delete_retention_ms,
        job.last_batches,
        TxnTracker(job.aborted),
    )
    result = CleaningResult(end, [])
    for group in _groups([s for s in job.segments if s[0] < end], job.segment_bytes):
        result.bytes_before += sum(size for _, size in group)
        cleaned = _copy(Path(job.directory), [base for base, _ in group], ctx)
        if cleaned is None:
            result.bytes_after += sum(size for _, size in group)
        else:
            result.groups.append(cleaned)
            result.bytes_after += cleaned.index.size
    result.records_read, result.records_kept = ctx.read, ctx.kept
    return result


def _offset_map(job: CleaningJob) -> tuple[dict[bytes, int], int]:
    """Each key's latest offset from the first dirty offset on, and the offset after the
    range mapped (the upper bound, or less when the budget ran out)."""
    latest: dict[bytes, int] = {}
    used, mapped = 0, job.first_dirty - 1  # the last offset mapped whole
    txns = TxnTracker(job.aborted)
    bases = [base for base, _ in job.segments]
    for k, base in enumerate(bases):
        after = bases[k + 1] if k + 1 < len(bases) else job.upper_bound
        if after <= job.first_dirty:
            continue
        for header, batch in _batches(Path(job.directory) / segment_name(base)):
            if header.last_offset < job.first_dirty:
                continue
            if header.is_control:
                txns.on_marker(header, records_of(batch)[1])
            elif not txns.on_data(header):
                for record in records_of(batch)[1]:
                    offset = header.base_offset + record.offset_delta
                    if record.key is None or offset < job.first_dirty:
                        continue
                    if record.key not in latest:
                        used += len(record.key) + ENTRY_COST
                        if used > job.map_budget and mapped >= job.first_dirty:
                            return latest, mapped + 1  # full: this batch is for the next round
                    latest[record.key] = offset
            mapped = max(mapped, header.last_offset)
        mapped = max(mapped, after - 1)  # (a gap at the segment's end)
    return latest, mapped + 1


def _groups(segments: list[tuple[int, int]], limit: int) -> Iterator[list[tuple[int, int]]]:
    """Runs of consecutive segments whose sizes add up to at most `limit` (one at least)."""
    group: list[tuple[int, int]] = []
    size = 0
    for segment in segments:
        if group and size + segment[1] > limit:
            yield group
            group, size = [], 0
        group.append(segment)
        size += segment[1]
    if group:
        yield group


class _Output:
    """A cleaned file being written, and its batch index."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, _CREATE_FLAGS, 0o644)
        self.columns = [array("q") for _ in range(4)]  # as SegmentIndex's fields
        self.size = 0
        self._pending: list[bytes | memoryview] = []
        self._pending_size = 0

    def add(self, header: BatchHeader, batch: bytes | memoryview) -> None:
        offsets, nexts, positions, max_ts = self.columns
        offsets.append(header.base_offset)
        nexts.append(header.last_offset + 1)
        positions.append(self.size)
        max_ts.append(max(max_ts[-1], header.max_timestamp) if max_ts else header.max_timestamp)
        self._pending.append(batch)
        self.size += len(batch)
        self._pending_size += len(batch)
        if self._pending_size >= _WRITE_CHUNK:
            self.flush()

    def flush(self) -> None:
        view = memoryview(b"".join(self._pending))
        self._pending.clear()
        self._pending_size = 0
        while view:
            view = view[os.write(self.fd, view) :]

    def index(self) -> SegmentIndex:
        offsets, nexts, positions, max_ts = (column.tobytes() for column in self.columns)
        return SegmentIndex(offsets, nexts, positions, max_ts, self.size)


def _copy(directory: Path, bases: list[int], ctx: FilterContext) -> CleanedGroup | None:
    """Copy the segments `bases` into their cleaned file; None if that would change nothing."""
    out = _Output(cleaned_path(directory, bases[0]))
    changed = len(bases) > 1
    try:
        for base in bases:
            for header, batch in _batches(directory / segment_name(base)):
                kept = clean_batch(batch, ctx)
                changed = changed or kept is not batch
                if kept is not None:
                    out.add(header if kept is batch else parse_header(kept), kept)
        out.flush()
        if changed:
            os.fsync(out.fd)
    except BaseException:
        os.close(out.fd)
        out.path.unlink(missing_ok=True)
        raise
    os.close(out.fd)
    if not changed:
        out.path.unlink()
        return None
    return CleanedGroup(bases[0], bases[-1], out.index())


def _batches(path: Path) -> Iterator[tuple[BatchHeader, bytes]]:
    """Each batch of a segment file (ValueError at the first that is not whole and sound)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                pos = 0
                while pos < size:
                    raw = check_batch(view, pos, size, verify_crc=True, cleaned=True)
                    stop = pos + BATCH_OVERHEAD + raw[1]
                    yield BatchHeader._make(raw), mm[pos:stop]
                    pos = stop
            finally:
                view.release()

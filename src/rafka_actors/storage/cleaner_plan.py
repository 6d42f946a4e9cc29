"""Which part of a compacted partition the log cleaner may clean now, and how dirty it is.

Kafka's rules (LogCleanerManager.cleanableOffsets, calculateCleanableBytes, maxCompactionDelay):

- The log is cut at the *first dirty offset*: below it everything was cleaned by an earlier
  round (the round's end, kept in a checkpoint), above it nothing was. A checkpoint outside
  [log start, log end] counts as none (the whole log is dirty).
- Cleaning never goes past the *first uncleanable offset*: the lowest of the last stable offset
  (an open transaction's records are not decided yet), the active segment's base, and, with
  `min.compaction.lag.ms`, the base of the first dirty segment holding a record newer than
  that lag. It is rounded down to the base of the segment holding it: whole segments only.
- The *dirty ratio* is the bytes of the cleanable segments (from the first dirty one up to the
  uncleanable one) over those plus the clean segments' bytes. The log is cleaned when the
  ratio exceeds `min.cleanable.dirty.ratio`, or when it is *overdue*: a dirty sealed segment's
  first batch is older than `max.compaction.lag.ms` (and there is something to clean).

Among the partitions that qualify, the cleaner takes the one with the highest ratio.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["Cleanable", "CleanerSettings", "SegmentStat", "cleanable"]


class SegmentStat(NamedTuple):
    base: int
    end: int  # the offset after its last batch
    size: int
    largest_ts: int  # its largest record timestamp (-1: none)
    first_ts: int  # its first batch's max timestamp (-1: none)


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """A topic's cleaning configs (its own, or the broker's defaults)."""

    min_cleanable_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    delete_retention_ms: int


@dataclass(frozen=True, slots=True)
class Cleanable:
    first_dirty: int
    upper_bound: int  # the first uncleanable segment's base offset (exclusive bound)
    cleanable_bytes: int
    total_bytes: int
    overdue: bool  # max.compaction.lag.ms passed for some dirty record

    @property
    def ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable(
    segments: Sequence[SegmentStat],
    *,
    log_start: int,
    log_end: int,
    last_stable: int,
    checkpoint: int | None,
    settings: CleanerSettings,
    now_ms: int,
) -> Cleanable | None:
    """The partition's cleanable range if it should be cleaned now (None otherwise);
    `segments` oldest first, the last one active."""
    if not segments:
        return None
    first_dirty = log_start
    if checkpoint is not None and log_start <= checkpoint <= log_end:
        first_dirty = checkpoint
    sealed = segments[:-1]
    bounds = [last_stable, segments[-1].base]
    dirty = sealed[_floor(sealed, first_dirty) :] if sealed else []
    if settings.min_compaction_lag_ms > 0:
        horizon = now_ms - settings.min_compaction_lag_ms
        bounds += [s.base for s in dirty if s.largest_ts > horizon][:1]
    uncleanable = max(first_dirty, min(bounds))
    upper = segments[_floor(segments, uncleanable)].base
    cleanable_bytes = _bytes(segments, min(first_dirty, upper), upper)
    total = _bytes(segments, -1, first_dirty) + cleanable_bytes
    firsts = [s.first_ts for s in dirty if s.first_ts > 0]
    overdue = bool(firsts) and min(firsts) < now_ms - settings.max_compaction_lag_ms
    found = Cleanable(first_dirty, upper, cleanable_bytes, total, overdue)
    if total <= 0 or cleanable_bytes <= 0:
        return None
    if overdue or found.ratio > settings.min_cleanable_ratio:
        return found
    return None


def _floor(segments: Sequence[SegmentStat], offset: int) -> int:
    """The index of the segment holding `offset` (the last one whose base is <= it; 0 if
    none is)."""
    index = 0
    for k, segment in enumerate(segments):
        if segment.base > offset:
            break
        index = k
    return index


def _bytes(segments: Sequence[SegmentStat], start: int, stop: int) -> int:
    """Bytes of the segments that overlap offsets [start, stop), as Kafka's logSegments."""
    if start >= stop:
        return 0
    first = _floor(segments, start)
    return sum(s.size for s in segments[first:] if s.base < stop)

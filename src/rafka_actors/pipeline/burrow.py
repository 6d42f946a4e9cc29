"""Burrow's consumer-lag evaluation, as pure functions over one partition's commits.

LinkedIn's Burrow judges a consumer not by a lag threshold but by how its committed offsets and
its lag move over a sliding window of the latest commits (its "intervals", default 10). Per
partition, with the window's commits oldest first and ``current lag`` = the log-end offset now
minus the last committed offset:

1. If the current lag is zero, or the lag was zero at any commit in the window, the partition
   is OK (the consumer caught up at least once): no other rule is looked at.
2. REWIND if the committed offset ever went backwards between two commits of the window.
3. STOP if the time since the last commit is longer than the window spans (last commit time
   minus first): the consumer stopped committing. "Now" is the caller's: the wall clock, for
   the broker's metrics and by default for the pipeline (rafka_actors/lag.py), as in Burrow.
4. STALL if the committed offset never moved across the window (while there is lag).
5. WARN if the offsets move but the lag never decreased between two commits: the consumer is
   falling behind.
6. Otherwise OK.

The rules are tried in that order, so a window that both rewound and stopped is REWIND. Before
that, commits closer in time than ``min_distance_ms`` to the previous *kept* commit replace it
(its offset and lag, keeping its time), as Burrow's storage does, so a consumer committing
faster than that does not shrink the window's time span to nothing.

Two choices are ours, not Burrow's: ``allowed_lag`` (default 0, which is Burrow) makes a lag at
or below it count as zero in rule 1 (caught up), for consumers that are always a few records behind
by design; and a window of one commit follows Burrow literally (STOP once any time has passed,
else STALL), which we keep so that the statuses match Burrow's.

A group's status is the worst of its partitions', with STOP, STALL and REWIND reported as ERR
(Burrow's group statuses are OK, WARN and ERR).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import pairwise
from typing import NamedTuple

__all__ = ["Commit", "Status", "Verdict", "collapse", "evaluate", "group_status"]


class Status(IntEnum):
    """Burrow's status constants, in its order of severity."""

    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


class Commit(NamedTuple):
    """One commit of one partition: when (epoch ms), which offset, and the lag then."""

    time_ms: int
    offset: int
    lag: int


@dataclass(frozen=True, slots=True)
class Verdict:
    status: Status
    window: tuple[Commit, ...]  # the commits judged, oldest first (after min-distance)
    current_lag: int
    complete: float  # how full the window is (Burrow's "complete"), 0.0 for no commits


def collapse(commits: Iterable[tuple[int, int, int]], min_distance_ms: int) -> list[Commit]:
    """Burrow's min-distance: a commit closer than that to the last kept one replaces it."""
    kept: list[Commit] = []
    for time_ms, offset, lag in commits:
        if kept and time_ms - kept[-1].time_ms < min_distance_ms:
            kept[-1] = Commit(kept[-1].time_ms, offset, lag)
        else:
            kept.append(Commit(time_ms, offset, lag))
    return kept


def evaluate(
    commits: Iterable[tuple[int, int, int]],
    *,
    now_ms: int,
    log_end_offset: int | None = None,
    window: int = 10,
    min_distance_ms: int = 0,
    allowed_lag: int = 0,
    log_start_offset: int = 0,
) -> Verdict:
    """Judge one partition from its commits, (time ms, offset, lag) in log order.

    ``log_end_offset`` is the partition's log end now, for the current lag (Burrow's); without
    it the lag at the last commit stands in. A last commit below ``log_start_offset`` (the
    records it points at were deleted by retention) counts from the log start, where its
    consumer resumes.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    kept = tuple(collapse(commits, min_distance_ms)[-window:])
    if not kept:
        return Verdict(Status.OK, (), 0, 0.0)
    last = kept[-1]
    position = max(last.offset, log_start_offset)
    current = last.lag if log_end_offset is None else max(0, log_end_offset - position)
    status = _status(kept, current, now_ms, allowed_lag)
    return Verdict(status, kept, current, len(kept) / window)


def _status(kept: Sequence[Commit], current_lag: int, now_ms: int, allowed_lag: int) -> Status:
    lags = [c.lag for c in kept]
    if current_lag <= allowed_lag or min(lags) <= allowed_lag:
        return Status.OK
    pairs = list(pairwise(c.offset for c in kept))
    if any(b < a for a, b in pairs):
        return Status.REWIND
    if now_ms - kept[-1].time_ms > kept[-1].time_ms - kept[0].time_ms:
        return Status.STOP
    if all(a == b for a, b in pairs):
        return Status.STALL
    if all(b >= a for a, b in pairwise(lags)):
        return Status.WARN
    return Status.OK


def group_status(statuses: Iterable[Status]) -> Status:
    """The worst partition status, STOP, STALL and REWIND counting as ERR; OK for none."""
    worst = max(statuses, default=Status.OK)
    return min(worst, Status.ERR)

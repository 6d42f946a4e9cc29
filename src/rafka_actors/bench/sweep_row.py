"""One size's figures of the group-size sweep: what sweep.py measures and chart.py draws."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SweepRow:
    size: int
    join_s: float | None  # all N start together -> all hold an assignment
    rebalance_s: float | None  # one leaves -> the rest rebalanced (N = 1: the lone join)
    coordinator_s: float | None  # of which after the last JoinGroup was sent
    commit_p50_ms: float | None
    commit_p99_ms: float | None
    commits: float | None  # commits answered in the window
    runs: int  # runs that measured every figure

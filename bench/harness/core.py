"""The shared vocabulary of the benchmark: targets, options, figures and workloads.

A `Workload` runs against one `Target` (a broker reachable at `bootstrap`) and returns
`Figure`s, one value per figure per run; the runner repeats it `runs` times and the report
shows min / median / max of each figure per target, and each peer's median as a ratio of
rafka-actors' (oriented so that > 1.0 means rafka-actors is better).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # "rafka-actors", "noida-db", "tansu", or "external"
    bootstrap: str  # HOST:PORT
    pid: int | None = None  # the broker process, for memory figures (None: not ours to see)
    kip848: bool = False  # serves ConsumerGroupHeartbeat (group.protocol=consumer)
    data_dir: str | None = None  # where its data lives, when we started it
    # For a rafka-actors we started: its interpreter (`PYTHON -m rafka_actors serve`) and its
    # settings (-o KEY=VALUE), so that a workload can start it again, e.g. on a given log.
    python: str | None = None
    settings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Options:
    runs: int = 3
    quick: bool = False  # smaller sizes, for a smoke test


@dataclass(slots=True)
class Figure:
    key: str  # stable id, e.g. "c.commits_1" (workload letter, dot, name)
    label: str  # what the table shows, e.g. "sync commits/s, 1 client"
    unit: str  # "s", "/s", "ms", "MiB", "B/group"
    higher_is_better: bool
    values: list[float] = field(default_factory=list)

    def summary(self) -> tuple[float, float, float] | None:
        if not self.values:
            return None
        return min(self.values), statistics.median(self.values), max(self.values)


@dataclass(frozen=True, slots=True)
class Workload:
    letter: str  # "a".."h", as issue 8 names them
    title: str
    # one run against a target: Figures holding one value each; the runner merges runs by key
    run: Callable[[Target, Options], list[Figure]]
    needs: Callable[[Target], bool] = lambda target: True  # False: not applicable (n/a)
    # Each run on a broker started for it, where the runner can start one: the figures are
    # of what the broker holds, and every earlier run would have added to that.
    fresh_broker: bool = False


@dataclass(frozen=True, slots=True)
class SweepRow:
    """One group size's figures of the sweep (sweep.py), as the chart (chart.py) draws them."""

    size: int
    join_s: float | None  # all N start together -> all hold an assignment
    rebalance_s: float | None  # one leaves -> the rest rebalanced (N = 1: the lone join)
    coordinator_s: float | None  # of which after the last JoinGroup was sent
    commit_p50_ms: float | None
    commit_p99_ms: float | None
    commits: float | None  # commits answered in the window
    runs: int  # runs that measured every figure

"""The group-size chart of docs/performance.md, drawn from `SweepRow`s (sweep_row.py).

Two panels side by side, both against the group size on a log axis: the rebalance after one
member leaves (total, and the coordinator's share), and one member's OffsetCommit latency
(p50, p99). The figure is built with matplotlib's object API (no pyplot, so no global state
and no display backend: savefig renders a PNG with Agg). A figure a run could not measure is
left out of its line.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from typing import Any

from .sweep_row import SweepRow


def chart(rows: Sequence[SweepRow], png_path: str, title: str, note: str = "") -> None:
    """Write the chart of `rows` to `png_path`; `note` goes into the subtitle."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    grown = [r for r in rows if r.size > 1]  # one member has nobody to rebalance with
    _line(left, grown, "rebalance_s", "o-", "total: LeaveGroup sent -> all reassigned")
    _line(left, grown, "coordinator_s", "s--", "coordinator: last JoinGroup sent -> all reassigned")
    _line(left, [r for r in rows if r.size == 1], "rebalance_s", "kD", "1 member: its own join")
    left.set_title("Rebalance after one member leaves")
    left.set_ylabel("seconds")
    _line(right, rows, "commit_p50_ms", "o-", "p50")
    _line(right, rows, "commit_p99_ms", "s--", "p99")
    right.set_title("OffsetCommit latency, one member, back to back")
    right.set_ylabel("milliseconds")
    sizes = sorted({r.size for r in rows})
    for axes in (left, right):
        axes.set_xscale("log")
        axes.set_xticks(sizes, [str(n) for n in sizes])
        axes.minorticks_off()
        axes.set_xlabel("members in the group")
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8, loc="upper left")
    subtitle = (
        f"{os.cpu_count()} cores shared by the broker and the load generator, "
        f"{datetime.date.today()}"
    )
    fig.suptitle(f"{title}\n{subtitle}" + (f"\n{note}" if note else ""), fontsize=9)
    fig.savefig(png_path, dpi=110)


def _line(axes: Any, rows: Sequence[SweepRow], name: str, style: str, label: str) -> None:
    points = [(r.size, getattr(r, name)) for r in rows if getattr(r, name) is not None]
    axes.plot([x for x, _ in points], [y for _, y in points], style, label=label)

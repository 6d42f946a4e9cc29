"""A PNG of lag over time for the worst groups: one panel per group, one line per partition.

Pure drawing over plain data (no Spark): the job collects the lag rows of the few groups it
shows and hands them here. matplotlib runs on its Agg backend (a file, no display). Lag is
drawn as a step line, since it holds from one commit to the next; a group with many partitions
shows its ``max_lines`` most lagging ones, so a panel stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["GroupSeries", "draw_lag_chart"]


@dataclass(slots=True)
class GroupSeries:
    """One group's panel: its title parts and, per partition, (commit time, lag) points."""

    org_id: int
    group_id: str
    status: str
    lines: dict[tuple[str, int], list[tuple[datetime, int]]] = field(default_factory=dict)


def draw_lag_chart(
    groups: Sequence[GroupSeries],
    path: Path,
    *,
    now: datetime | None = None,
    max_lines: int = 8,
) -> Path:
    """Draw ``groups`` (worst first) into a PNG at ``path``; an empty chart says so.

    ``now`` (the moment the statuses were judged at) is drawn as a dashed line, so that a
    consumer that stopped committing shows the gap.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    panels = max(1, len(groups))
    fig, axes = plt.subplots(panels, 1, figsize=(10, 3.2 * panels), squeeze=False)
    try:
        if not groups:
            axes[0][0].text(0.5, 0.5, "no commits in this data dir", ha="center", va="center")
            axes[0][0].set_axis_off()
        for ax, group in zip((row[0] for row in axes), groups, strict=False):
            _panel(ax, group, max_lines, now)
        fig.suptitle("consumer lag over time (records behind the log end at each commit)")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path


def _panel(ax: Axes, group: GroupSeries, max_lines: int, now: datetime | None) -> None:
    from matplotlib.dates import date2num
    from matplotlib.ticker import MaxNLocator

    worst = sorted(group.lines.items(), key=lambda item: -max(lag for _, lag in item[1]))
    for (topic, partition), points in worst[:max_lines]:
        ordered = sorted(points)
        times = date2num([t for t, _ in ordered])
        ax.step(
            times,
            [lag for _, lag in ordered],
            where="post",
            marker=".",
            label=f"{topic}-{partition}",
        )
    hidden = len(worst) - max_lines
    title = f"org {group.org_id} / {group.group_id}: {group.status}"
    ax.set_title(title + (f" ({hidden} more partitions not drawn)" if hidden > 0 else ""))
    ax.set_ylabel("lag (records)")
    if now is not None:
        ax.axvline(float(date2num(now)), color="grey", linestyle="--", linewidth=1, label="now")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.xaxis_date()
    if group.lines:
        ax.legend(loc="upper left", fontsize="small")

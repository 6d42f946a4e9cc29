"""A PNG of lag over time for the worst groups: one row per group, lag in records on the left
and in seconds on the right, one line per partition.

Pure drawing over plain data (no Spark): the job collects the lag rows of the few groups it
shows and hands them here. matplotlib runs on its Agg backend (a file, no display). Lag is
drawn as a step line, since it holds from one commit to the next; a group with many partitions
shows its ``max_lines`` most lagging ones, so a panel stays readable. A partition has one
colour in both panels of its group (each panel drawing its own worst partitions would take
matplotlib's colours in its own order, and the same colour would mean two partitions).

Sparse data must read well too: one commit alone would get matplotlib's default span of
years on the x-axis, and a caught-up group a y-axis of fractions of a record. So the time axis
spans the points (and "now") with a small margin, at least a minute; the records axis has
whole-number ticks and runs from 0 to at least 1; and the zero line is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["GroupSeries", "draw_lag_chart", "lag_figure"]


@dataclass(slots=True)
class GroupSeries:
    """One group's panel: its title parts and, per partition, (commit time, lag) points."""

    org_id: int
    group_id: str
    status: str
    lines: dict[tuple[str, int], list[tuple[datetime, int]]] = field(default_factory=dict)
    # per partition, (commit time, lag in seconds): the age of the record at the committed
    # offset then (lag.py)
    time_lines: dict[tuple[str, int], list[tuple[datetime, float]]] = field(default_factory=dict)


MIN_SPAN = timedelta(minutes=1)


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
    from matplotlib import pyplot as plt

    fig = lag_figure(groups, now=now, max_lines=max_lines)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path


def lag_figure(groups: Sequence[GroupSeries], *, now: datetime | None, max_lines: int) -> Figure:
    """The chart's figure (on the Agg backend), which the caller closes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    panels = max(1, len(groups))
    fig, axes = plt.subplots(panels, 2, figsize=(14, 3.2 * panels), squeeze=False)
    if not groups:
        axes[0][0].text(0.5, 0.5, "no commits in this data dir", ha="center", va="center")
        axes[0][0].set_axis_off()
        axes[0][1].set_axis_off()
    for row, group in zip(axes, groups, strict=False):
        bounds = _time_bounds(group, now)
        colours = _colours(group, max_lines)
        _panel(row[0], group, group.lines, max_lines, now, bounds, colours, records=True)
        _panel(row[1], group, group.time_lines, max_lines, now, bounds, colours, records=False)
    fig.suptitle(
        "consumer lag over time at each commit: records behind the log end, and the age "
        "of the record at the committed offset"
    )
    fig.tight_layout()
    return fig


def _worst(
    lines: Mapping[tuple[str, int], Sequence[tuple[datetime, float]]],
) -> list[tuple[tuple[str, int], Sequence[tuple[datetime, float]]]]:
    return sorted(lines.items(), key=lambda item: -max(lag for _, lag in item[1]))


def _colours(group: GroupSeries, max_lines: int) -> dict[tuple[str, int], str]:
    """One colour per partition drawn in either panel: the records panel's first, in its
    order, then the seconds panel's others."""
    drawn: dict[tuple[str, int], None] = {}
    for lines in (group.lines, group.time_lines):
        drawn.update((tp, None) for tp, _ in _worst(lines)[:max_lines])
    palette = "tab10" if len(drawn) <= 10 else "tab20"
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps[palette]
    return {tp: to_hex(cmap(i % cmap.N)) for i, tp in enumerate(drawn)}


def _time_bounds(group: GroupSeries, now: datetime | None) -> tuple[float, float]:
    """The span of the group's commits (and now), widened by 5% and to at least a minute, in
    matplotlib's date numbers (days; naive and aware datetimes alike)."""
    from matplotlib.dates import date2num

    times = [float(date2num(t)) for points in group.lines.values() for t, _ in points]
    if now is not None:
        times.append(float(date2num(now)))
    least = MIN_SPAN / timedelta(days=1)
    if not times:
        return 0.0, least
    first, last = min(times), max(times)
    margin = max((last - first) * 0.05, (least - (last - first)) / 2, least / 60)
    return first - margin, last + margin


def _panel(
    ax: Axes,
    group: GroupSeries,
    lines: Mapping[tuple[str, int], Sequence[tuple[datetime, float]]],
    max_lines: int,
    now: datetime | None,
    bounds: tuple[float, float],
    colours: Mapping[tuple[str, int], str],
    *,
    records: bool,
) -> None:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
    from matplotlib.ticker import MaxNLocator

    worst = _worst(lines)
    top = 0.0
    for (topic, partition), points in worst[:max_lines]:
        ordered = sorted(points)
        top = max(top, *(lag for _, lag in ordered))
        ax.step(
            date2num([t for t, _ in ordered]),
            [lag for _, lag in ordered],
            where="post",
            marker=".",
            label=f"{topic}-{partition}",
            color=colours[(topic, partition)],
        )
    hidden = len(worst) - max_lines
    title = f"org {group.org_id} / {group.group_id}: {group.status}"
    if not records:
        title = f"{group.group_id}: lag in seconds"
    ax.set_title(title + (f" ({hidden} more partitions not drawn)" if hidden > 0 else ""))
    ax.set_ylabel("lag (records)" if records else "lag (seconds)")
    if now is not None:
        ax.axvline(float(date2num(now)), color="grey", linestyle="--", linewidth=1, label="now")
    ax.axhline(0, color="black", linewidth=0.8)  # caught up
    ax.set_xlim(*bounds)
    ax.set_ylim(bottom=-0.02 * max(top, 1), top=max(top, 1) * 1.1)
    if records:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.grid(True, alpha=0.3)
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    if lines:
        ax.legend(loc="best", fontsize="small")

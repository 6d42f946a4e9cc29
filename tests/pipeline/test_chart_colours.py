"""The lag chart's two panels of a group give a partition the same colour (issue 51: each
panel drew its own worst partitions in matplotlib's colour order, so one colour meant one
partition in the records panel and another in the seconds panel)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from matplotlib import pyplot as plt

from rafka_actors.pipeline.chart import GroupSeries, lag_figure

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def series(lags: dict[int, tuple[int, float]]) -> GroupSeries:
    """Partition p lags lags[p][0] records and lags[p][1] seconds at two commits."""
    group = GroupSeries(0, "billing", "WARN")
    for p, (records, seconds) in lags.items():
        times = (T0, T0 + timedelta(seconds=30))
        group.lines[("orders", p)] = [(t, records) for t in times]
        group.time_lines[("orders", p)] = [(t, seconds) for t in times]
    return group


def colours_by_label(ax: object) -> dict[str, object]:
    return {line.get_label(): line.get_color() for line in ax.get_lines()}  # type: ignore[attr-defined]


def test_a_partition_has_one_colour_in_both_panels() -> None:
    # records panel, worst first: orders-0, -1, -2; seconds panel: orders-3, -2, -1
    group = series({0: (900, 1.0), 1: (500, 20.0), 2: (100, 300.0), 3: (50, 400.0)})
    fig = lag_figure([group], now=T0 + timedelta(minutes=1), max_lines=3)
    try:
        left, right = colours_by_label(fig.axes[0]), colours_by_label(fig.axes[1])
        assert {"orders-0", "orders-1", "orders-2"} <= set(left) and "orders-3" not in left
        assert {"orders-3", "orders-2", "orders-1"} <= set(right) and "orders-0" not in right
        assert left["orders-1"] == right["orders-1"] and left["orders-2"] == right["orders-2"]
        drawn = {label: c for label, c in {**left, **right}.items() if label.startswith("orders")}
        assert len(set(drawn.values())) == 4  # no colour means two partitions
    finally:
        plt.close(fig)

"""The lag job's terminal summary: plain-text tables from plain rows (pure, no Spark).

Groups come worst first (the order the job collects them in); below them, every partition that
is not OK, with the window its verdict was drawn from, so an operator sees why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["format_table", "summary"]

Row = Mapping[str, Any]

GROUP_COLUMNS = (
    ("ORG", "org_id"),
    ("GROUP", "group_id"),
    ("STATUS", "status"),
    ("PARTITIONS", "partitions"),
    ("NOT-OK", "partitions_not_ok"),
    ("TOTAL-LAG", "total_lag"),
    ("MAX-LAG", "max_lag"),
    ("AT", "max_lag_at"),
    ("MAX-LAG-S", "max_time_lag_s"),
)
PARTITION_COLUMNS = (
    ("ORG", "org_id"),
    ("GROUP", "group_id"),
    ("TOPIC", "topic"),
    ("PARTITION", "partition"),
    ("STATUS", "status"),
    ("LAG", "current_lag"),
    ("LAG-S", "current_time_lag_s"),
    ("COMMITS", "commits"),
    ("FIRST-COMMIT", "window_start"),
    ("LAST-COMMIT", "window_end"),
    ("OFFSETS", "offsets"),
    ("LAGS", "lags"),
)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns two spaces apart, the way kafka-consumer-groups.sh prints them."""
    cells = [list(headers), *([_text(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def summary(
    groups: Sequence[Row],
    partitions: Sequence[Row],
    *,
    now: datetime,
    now_is: str = "the wall clock",
    groups_total: int | None = None,
    partitions_total: int | None = None,
) -> str:
    """The whole summary: "now", the groups, then the partitions that are not OK.

    The job passes the first rows of each (worst first) with the full counts, to say how many
    more are in the Parquet output.
    """
    lines = [f"now = {_text(now)} UTC ({now_is})", ""]
    shown = [
        {**g, "max_lag_at": _at(g), "max_time_lag_s": _seconds(g.get("max_time_lag_ms"))}
        for g in groups
    ]
    lines.append(format_table([h for h, _ in GROUP_COLUMNS], _cells(shown, GROUP_COLUMNS)))
    lines += _more(len(groups), groups_total, "groups", "group_status")
    bad = [
        {
            **p,
            "offsets": _span(p, "offset"),
            "lags": _span(p, "lag"),
            "current_time_lag_s": _seconds(p.get("current_time_lag_ms")),
        }
        for p in partitions
        if p["status"] != "OK"
    ]
    if bad:
        lines += ["", "partitions not OK:"]
        lines.append(
            format_table([h for h, _ in PARTITION_COLUMNS], _cells(bad, PARTITION_COLUMNS))
        )
        lines += _more(len(bad), partitions_total, "partitions", "partition_status")
    return "\n".join(lines)


def _more(shown: int, total: int | None, what: str, where: str) -> list[str]:
    if total is None or total <= shown:
        return []
    return [f"... and {total - shown} more {what} (see {where}/)"]


def _cells(rows: Sequence[Row], columns: Sequence[tuple[str, str]]) -> list[list[Any]]:
    return [[row.get(key) for _, key in columns] for row in rows]


def _at(group: Row) -> str | None:
    topic = group.get("max_lag_topic")
    return None if topic is None else f"{topic}-{group.get('max_lag_partition')}"


def _span(partition: Row, what: str) -> str:
    return f"{partition[f'start_{what}']}->{partition[f'end_{what}']}"


def _seconds(ms: Any) -> str | None:
    return None if ms is None else f"{ms / 1000:.1f}"

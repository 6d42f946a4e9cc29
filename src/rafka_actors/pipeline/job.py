"""`pipeline lag` end to end: compute, write Parquet, summarise, draw.

The heavy work happens in Spark (lag.py); this module only moves small results to the driver:
the first ``shown`` groups and not-OK partitions (worst first) for the terminal, and the lag
rows of the ``charted`` worst groups for the PNG. Everything else stays in the Parquet output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .chart import GroupSeries, draw_lag_chart
from .coordinator_rows import at
from .lag import GROUP_KEY, LagResult, LagSettings, compute_lag, write_parquet
from .report import summary

__all__ = ["LagReport", "run_lag_job"]


@dataclass(slots=True)
class LagReport:
    result: LagResult
    summary: str
    chart: Path
    groups: list[dict[str, Any]]  # the first groups, worst first
    partitions: list[dict[str, Any]]  # the first partitions not OK, worst first


def run_lag_job(
    spark: SparkSession,
    data_dir: str | Path,
    out: str | Path,
    settings: LagSettings | None = None,
    *,
    now_ms: int | Literal["newest"] | None = None,
    shown: int = 50,
    charted: int = 4,
) -> LagReport:
    """Run the lag job over ``data_dir`` as of ``now_ms`` (lag.compute_lag); Parquet under
    ``out``, the chart at ``out/lag.png``."""
    result = compute_lag(spark, data_dir, settings, now_ms=now_ms)
    write_parquet(result, out)
    worst_groups = result.group_status.orderBy(
        F.desc("status_code"), F.desc("total_lag"), *GROUP_KEY
    )
    not_ok = result.partition_status.where(F.col("status") != "OK").orderBy(
        F.desc("status_code"), F.desc("current_lag"), *GROUP_KEY, "topic", "partition"
    )
    groups = _dicts(worst_groups.limit(shown))
    partitions = _dicts(not_ok.limit(shown))
    text = summary(
        groups,
        partitions,
        now=at(result.now_ms),
        now_is=result.now_is,
        groups_total=result.group_status.count(),
        partitions_total=not_ok.count(),
    )
    series = _series(result.lag, groups[:charted])
    chart = draw_lag_chart(series, Path(out) / "lag.png", now=at(result.now_ms))
    return LagReport(result, text, chart, groups, partitions)


def _dicts(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in frame.collect()]


def _series(lag: DataFrame, groups: list[dict[str, Any]]) -> list[GroupSeries]:
    """The lag points of ``groups`` (in their order), collected to the driver."""
    if not groups:
        return []
    series = {
        (g["org_id"], g["group_id"]): GroupSeries(g["org_id"], g["group_id"], g["status"])
        for g in groups
    }
    wanted = lag.sparkSession.createDataFrame(list(series), "org_id int, group_id string")
    rows = lag.join(wanted, list(GROUP_KEY)).select(
        *GROUP_KEY, "topic", "partition", "commit_time", "lag", "time_lag_ms"
    )
    for row in rows.collect():
        group = series[(row.org_id, row.group_id)]
        key = (row.topic, row.partition)
        group.lines.setdefault(key, []).append((row.commit_time, row.lag))
        group.time_lines.setdefault(key, []).append((row.commit_time, row.time_lag_ms / 1000))
    return list(series.values())

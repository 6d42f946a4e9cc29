"""The rebalances job: every rebalance of every group, with its start, end, members and cause.

It reads the coordinator log's group changes (`rafka-coordinator-log`, ``records=groups``),
hands each group's rows, in log order (segment, position), to one pandas call
(``groupBy(org, group).applyInPandas``) that runs the pure `history.rebalances`, and gets one
row per rebalance back: the work is spread over the executors, one group at a time, and only
the result comes back to the driver. Written as Parquet (``OUT/rebalances/``) and summarised
on the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from .coordinator_rows import GROUPS
from .history import Rebalance, rebalances
from .report import format_table
from .sources import COORDINATOR_LOG, register

REBALANCES_SCHEMA = (
    "org_id int, group_id string, group_type string, generation int, start timestamp, "
    "`end` timestamp, duration_ms long, cause string, joined array<string>, "
    "left array<string>, evicted array<string>"
)
_COLUMNS = (
    "org_id",
    "group_id",
    "group_type",
    "generation",
    "members",
    "reason",
    "time",
    "rebalance_started",
    "departed",
    "deleted",
)


def rebalance_history(spark: SparkSession, data_dir: str | Path) -> DataFrame:
    register(spark)
    groups = spark.read.format(COORDINATOR_LOG).option("records", GROUPS).load(str(data_dir))
    return (
        groups.groupBy("org_id", "group_id")
        .applyInPandas(_history, schema=REBALANCES_SCHEMA)
        .orderBy("org_id", "group_id", "start")
    )


def _history(frame: Any) -> Any:
    import pandas as pd  # on the executor

    frame = frame.sort_values(["segment", "position"])
    rows = [_plain(record) for record in frame[list(_COLUMNS)].to_dict("records")]
    found = rebalances(rows)
    return pd.DataFrame([_row(r) for r in found], columns=_output_columns())


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    """pandas' cells as `history` wants them: NaT/NaN as None, arrays as lists, ms ints."""
    import pandas as pd

    out: dict[str, Any] = {}
    for key, value in record.items():
        if value is None or (not hasattr(value, "__len__") and pd.isna(value)):
            out[key] = None
        elif isinstance(value, pd.Timestamp):
            out[key] = round(value.timestamp() * 1000)
        elif key in ("members", "departed"):
            out[key] = list(value)
        else:
            out[key] = value.item() if hasattr(value, "item") else value
    return out


def _output_columns() -> list[str]:
    return [c.split()[0].strip("`") for c in REBALANCES_SCHEMA.split(", ")]


def _row(r: Rebalance) -> tuple[Any, ...]:
    import pandas as pd

    return (
        r.org_id,
        r.group_id,
        r.group_type,
        r.generation,
        pd.Timestamp(r.start_ms, unit="ms", tz="UTC"),
        pd.Timestamp(r.end_ms, unit="ms", tz="UTC"),
        r.duration_ms,
        r.cause,
        list(r.joined),
        list(r.left),
        list(r.evicted),
    )


def write_and_summarise(history: DataFrame, out: str | Path, limit: int = 30) -> str:
    history.write.mode("overwrite").parquet(str(Path(out) / "rebalances"))
    rows = [r.asDict() for r in history.limit(limit).collect()]
    return format_table(_HEADERS, [_cells(r) for r in rows])


_HEADERS = ("GROUP", "TYPE", "GEN", "START", "DURATION", "CAUSE", "JOINED", "LEFT", "EVICTED")


def _cells(row: dict[str, Any]) -> Sequence[Any]:
    return (
        row["group_id"],
        row["group_type"],
        row["generation"],
        row["start"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
        f"{row['duration_ms'] / 1000:.3f}s",
        row["cause"],
        _names(row["joined"]),
        _names(row["left"]),
        _names(row["evicted"]),
    )


def _names(members: Sequence[str]) -> str:
    return ", ".join(members) if members else "-"

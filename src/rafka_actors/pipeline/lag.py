"""The lag job: every commit's lag over time, then Burrow's verdict per partition and per group.

Inputs are the two data sources (sources.py) over one data dir: the coordinator log's commits
and the partition logs' batch index. Three DataFrames come out (`LagResult`):

``lag``: one row per offset commit: (org, group, topic, partition, commit time, committed
offset, log-end offset at that moment, lag). The log end at time t is the end of the newest
batch appended by t: the largest ``last_offset + 1`` over the partition's batches whose append
time (the batch's max timestamp, see partition_index.py) is at or before t, or 0 if none is.
Computed without a range join: the batches' (time, end) and the distinct commit times of a
topic-partition are merged into one stream sorted by time (batches first at equal times), and a
running maximum of ``end`` over it gives each commit time its log end; one sort per
topic-partition, whatever the number of groups. Each org has its own topics, so a commit is
matched with its own org's partition: the join is on (org, topic, partition), never on the name
alone. lag = max(0, log end - committed offset).

``partition_status``: Burrow's evaluation (burrow.py) of each (org, group, topic, partition)
over its *live* commits: those after the last deletion of that offset (an OffsetTombstone) or of
the whole group (a GroupTombstone), in log order; a partition whose offset is deleted has no
status. The current lag is the partition's log end now minus the last committed offset (or
minus the log start, the oldest batch left, if the offset fell below it). Each
partition's commits go to one pandas call (``groupBy(...).applyInPandas``), which sorts them in
log order and calls the pure `evaluate`: the work is spread over the executors and only one row
per partition comes back, unlike collecting every commit on the driver. All of a partition's
commits are needed, not just the last ``window``: min-distance collapsing runs from the first.

``group_status``: per group the worst partition status (STOP, STALL, REWIND as ERR), with its
partition count, how many are not OK, total and max current lag.

"Now", for Burrow's STOP rule and the current lag in seconds, is the wall clock at the job's
start (`LagResult.now_ms`), as for the broker's live metrics (rafka_actors/lag.py) and in
Burrow: on a live broker's data dir the two agree. A data dir copied off a broker can be judged
as of when it was written instead: ``now_ms=NEWEST`` takes the newest timestamp in it (the
latest commit time or batch append time, whichever is later), or any epoch ms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..lag import lag_ms, wall_clock_ms
from .burrow import Status, evaluate
from .partition_index import LOG_START_SCHEMA, log_start_floors
from .sources import COORDINATOR_LOG, PARTITION_INDEX, register

__all__ = [
    "NEWEST",
    "LagResult",
    "LagSettings",
    "compute_lag",
    "group_statuses",
    "lag_history",
    "newest_time_ms",
    "partition_statuses",
    "read_commits",
    "read_index",
    "write_parquet",
]

NEWEST: Final = "newest"  # "now" is the newest commit or batch time in the data dir
PARTITION_KEY = ("org_id", "group_id", "topic", "partition")
GROUP_KEY = ("org_id", "group_id")
TOPIC_PARTITION = ("org_id", "topic", "partition")  # a partition log: topics are per org
_EVALUATED_SCHEMA = (
    "org_id int, group_id string, topic string, partition int, status string, "
    "status_code int, current_lag long, current_time_lag_ms long, log_end_offset long, "
    "commits long, complete double, "
    "start_time_ms long, start_offset long, start_lag long, "
    "end_time_ms long, end_offset long, end_lag long"
)


@dataclass(frozen=True, slots=True)
class LagSettings:
    """Burrow's knobs: window (its "intervals"), min-distance, and our allowed lag."""

    window: int = 10
    min_distance_ms: int = 0
    allowed_lag: int = 0


@dataclass(frozen=True, slots=True)
class LagResult:
    lag: DataFrame
    partition_status: DataFrame
    group_status: DataFrame
    now_ms: int
    now_is: str = "the wall clock"  # where "now" came from, as the summary says it


def read_commits(spark: SparkSession, data_dir: str | Path) -> DataFrame:
    register(spark)
    return spark.read.format(COORDINATOR_LOG).option("records", "commits").load(str(data_dir))


def read_index(spark: SparkSession, data_dir: str | Path) -> DataFrame:
    register(spark)
    return spark.read.format(PARTITION_INDEX).option("orgs", "all").load(str(data_dir))


def compute_lag(
    spark: SparkSession,
    data_dir: str | Path,
    settings: LagSettings | None = None,
    *,
    now_ms: int | Literal["newest"] | None = None,
) -> LagResult:
    """The whole job over one data dir, judged as of ``now_ms``: the wall clock (None), the
    newest timestamp in the data dir (NEWEST), or the epoch ms given."""
    settings = settings or LagSettings()
    started = wall_clock_ms()
    commits = read_commits(spark, data_dir).cache()
    index = read_index(spark, data_dir).cache()
    if isinstance(now_ms, int):
        now, now_is = now_ms, "given"
    elif now_ms == NEWEST:
        now, now_is = newest_time_ms(commits, index), "the newest commit or batch in the data dir"
    else:
        now, now_is = started, "the wall clock"
    lag = lag_history(commits, index).cache()
    floors = spark.createDataFrame(log_start_floors(data_dir), LOG_START_SCHEMA)
    statuses = partition_statuses(lag, commits, index, now, settings, floors).cache()
    return LagResult(lag, statuses, group_statuses(statuses), now, now_is)


def newest_time_ms(commits: DataFrame, index: DataFrame) -> int:
    """The latest commit time or batch append time (epoch ms; 0 for an empty data dir)."""
    newest = [
        frame.agg(F.max(F.unix_millis(column))).first()
        for frame, column in ((commits, F.col("commit_time")), (index, F.col("append_time")))
    ]
    return max((row[0] for row in newest if row is not None and row[0] is not None), default=0)


def lag_history(commits: DataFrame, index: DataFrame) -> DataFrame:
    """One row per commit: its time, offset, the log end then, and the lag (see the docstring)."""
    done = commits.where(F.col("offset").isNotNull()).withColumn(
        "time_ms", F.unix_millis("commit_time")
    )
    batches = index.where(F.col("append_time").isNotNull()).select(
        *TOPIC_PARTITION,
        F.unix_millis("append_time").alias("time_ms"),
        (F.col("last_offset") + 1).alias("end"),
        F.lit(0).alias("kind"),
    )
    asks = done.select(
        *TOPIC_PARTITION,
        "time_ms",
        F.lit(None).cast("long").alias("end"),
        F.lit(1).alias("kind"),
    ).distinct()
    running = (
        Window.partitionBy(*TOPIC_PARTITION)
        .orderBy("time_ms", "kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    log_ends = (
        batches.unionByName(asks)
        .select(
            *TOPIC_PARTITION,
            "time_ms",
            "kind",
            F.coalesce(F.max("end").over(running), F.lit(0)).alias("log_end_offset"),
        )
        .where(F.col("kind") == 1)
        .drop("kind")
    )
    appended = _append_times(done, index)
    caught_up = F.col("offset") >= F.col("log_end_offset")
    age = F.greatest(F.lit(0), F.col("time_ms") - F.col("append_ms"))
    return (
        done.join(log_ends, [*TOPIC_PARTITION, "time_ms"], "left")
        .join(appended, [*TOPIC_PARTITION, "offset"], "left")
        .select(
            *PARTITION_KEY,
            "commit_time",
            F.col("offset").alias("committed_offset"),
            "log_end_offset",
            F.greatest(F.lit(0), F.col("log_end_offset") - F.col("offset")).alias("lag"),
            F.when(caught_up | F.col("append_ms").isNull(), F.lit(0))
            .otherwise(age)
            .alias("time_lag_ms"),
            "time_ms",
            "append_ms",
            "segment",
            "position",
        )
    )


def _append_times(done: DataFrame, index: DataFrame) -> DataFrame:
    """Per committed offset, the append time of the batch holding it (lag.py): the
    batches' (base offset, time) and the committed offsets of a topic-partition merged into one
    stream sorted by offset (batches first at equal offsets), where the last batch time seen
    is that of the batch the offset falls in; no range join. Past the log end it is the last
    batch's, which the caller ignores (caught up)."""
    batches = index.select(
        *TOPIC_PARTITION,
        F.col("base_offset").alias("offset"),
        F.unix_millis("append_time").alias("append_ms"),
        F.lit(0).alias("kind"),
    )
    asks = done.select(
        *TOPIC_PARTITION,
        "offset",
        F.lit(None).cast("long").alias("append_ms"),
        F.lit(1).alias("kind"),
    ).distinct()
    running = (
        Window.partitionBy(*TOPIC_PARTITION)
        .orderBy("offset", "kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        batches.unionByName(asks)
        .select(
            *TOPIC_PARTITION,
            "offset",
            "kind",
            F.last("append_ms", ignorenulls=True).over(running).alias("append_ms"),
        )
        .where(F.col("kind") == 1)
        .drop("kind")
    )


def _live(lag: DataFrame, commits: DataFrame) -> DataFrame:
    """The commits after the last deletion of their offset or of their group, in log order."""
    at = F.struct("segment", "position")
    deletions = commits.where(F.col("offset").isNull())
    of_offsets = (
        deletions.where(F.col("topic").isNotNull())
        .groupBy(*PARTITION_KEY)
        .agg(F.max(at).alias("offset_deleted"))
    )
    of_groups = (
        deletions.where(F.col("topic").isNull())
        .groupBy(*GROUP_KEY)
        .agg(F.max(at).alias("group_deleted"))
    )
    after = _after(at, "offset_deleted") & _after(at, "group_deleted")
    return (
        lag.join(of_offsets, list(PARTITION_KEY), "left")
        .join(of_groups, list(GROUP_KEY), "left")
        .where(after)
        .drop("offset_deleted", "group_deleted")
    )


def _after(at: Column, deleted: str) -> Column:
    return F.col(deleted).isNull() | (at > F.col(deleted))


def partition_statuses(
    lag: DataFrame,
    commits: DataFrame,
    index: DataFrame,
    now_ms: int,
    settings: LagSettings,
    floors: DataFrame | None = None,
) -> DataFrame:
    """Burrow's verdict per partition, over its live commits. `floors` (`LOG_START_SCHEMA`)
    are the log starts DeleteRecords moved inside a segment."""
    log_end_now = index.groupBy(*TOPIC_PARTITION).agg(
        (F.max("last_offset") + 1).alias("log_end_now"),
        # the oldest batch left: retention deletes whole segments (issue 45)
        F.min("base_offset").alias("log_start_now"),
    )
    if floors is not None:
        log_end_now = log_end_now.join(floors, list(TOPIC_PARTITION), "left").select(
            *TOPIC_PARTITION,
            "log_end_now",
            F.greatest("log_start_now", F.coalesce("log_start_floor", F.lit(0))).alias(
                "log_start_now"
            ),
        )
    live = _live(lag, commits).join(log_end_now, list(TOPIC_PARTITION), "left")
    judged = (
        live.select(
            *PARTITION_KEY,
            "time_ms",
            F.col("committed_offset").alias("offset"),
            "lag",
            "append_ms",
            "segment",
            "position",
            F.coalesce("log_end_now", F.lit(0)).alias("log_end_now"),
            F.coalesce("log_start_now", F.lit(0)).alias("log_start_now"),
        )
        .groupBy(*PARTITION_KEY)
        .applyInPandas(_judge(now_ms, settings), _EVALUATED_SCHEMA)
    )
    return judged.select(
        *PARTITION_KEY,
        "status",
        "status_code",
        "current_lag",
        "current_time_lag_ms",
        "log_end_offset",
        "commits",
        "complete",
        F.timestamp_millis("start_time_ms").alias("window_start"),
        "start_offset",
        "start_lag",
        F.timestamp_millis("end_time_ms").alias("window_end"),
        "end_offset",
        "end_lag",
    )


def _judge(now_ms: int, settings: LagSettings) -> Callable[[Any], Any]:
    """The per-partition pandas function, with ``now`` and the settings bound in."""

    def judge(frame: Any) -> Any:
        return _verdict_frame(frame, now_ms, settings)

    return judge


def _verdict_frame(frame: Any, now_ms: int, settings: LagSettings) -> Any:
    """One partition's commits (a pandas DataFrame) in, its one-row verdict out."""
    import pandas as pd

    frame = frame.sort_values(["segment", "position"], kind="stable")
    commits = zip(
        frame["time_ms"].tolist(), frame["offset"].tolist(), frame["lag"].tolist(), strict=True
    )
    log_end = int(frame["log_end_now"].iloc[-1])
    verdict = evaluate(
        commits,
        now_ms=now_ms,
        log_end_offset=log_end,
        log_start_offset=int(frame["log_start_now"].iloc[-1]),
        window=settings.window,
        min_distance_ms=settings.min_distance_ms,
        allowed_lag=settings.allowed_lag,
    )
    first, last = verdict.window[0], verdict.window[-1]
    newest = frame.iloc[-1]  # the last live commit: the live metric's committed offset
    appended = None if pd.isna(newest["append_ms"]) else int(newest["append_ms"])
    time_lag = lag_ms(now_ms, log_end, int(newest["offset"]), appended)
    key = frame.iloc[0]
    row = {
        "org_id": int(key["org_id"]),
        "group_id": str(key["group_id"]),
        "topic": str(key["topic"]),
        "partition": int(key["partition"]),
        "status": verdict.status.name,
        "status_code": int(verdict.status),
        "current_lag": verdict.current_lag,
        "current_time_lag_ms": time_lag,
        "log_end_offset": log_end,
        "commits": len(verdict.window),
        "complete": verdict.complete,
        "start_time_ms": first.time_ms,
        "start_offset": first.offset,
        "start_lag": first.lag,
        "end_time_ms": last.time_ms,
        "end_offset": last.offset,
        "end_lag": last.lag,
    }
    return pd.DataFrame([row])


def group_statuses(partition_status: DataFrame) -> DataFrame:
    """Per group: the worst partition status (STOP/STALL/REWIND as ERR) and lag totals."""
    worst = F.least(F.max("status_code"), F.lit(int(Status.ERR)))
    biggest = F.max_by(F.struct("topic", "partition", "current_lag"), "current_lag")
    grouped = partition_status.groupBy(*GROUP_KEY).agg(
        worst.alias("status_code"),
        F.count(F.lit(1)).alias("partitions"),
        F.sum((F.col("status") != Status.OK.name).cast("int")).alias("partitions_not_ok"),
        F.sum("current_lag").alias("total_lag"),
        F.max("current_time_lag_ms").alias("max_time_lag_ms"),
        biggest.alias("biggest"),
    )
    names = F.create_map(*(x for s in Status for x in (F.lit(int(s)), F.lit(s.name))))
    return grouped.select(
        *GROUP_KEY,
        names[F.col("status_code")].alias("status"),
        "status_code",
        "partitions",
        "partitions_not_ok",
        "total_lag",
        F.col("biggest.current_lag").alias("max_lag"),
        F.col("biggest.topic").alias("max_lag_topic"),
        F.col("biggest.partition").alias("max_lag_partition"),
        "max_time_lag_ms",
    )


def write_parquet(result: LagResult, out: str | Path) -> None:
    """``OUT/lag/``, ``OUT/partition_status/``, ``OUT/group_status/`` (replaced if present)."""
    base = str(out).rstrip("/")
    result.lag.drop("time_ms", "append_ms").write.mode("overwrite").parquet(f"{base}/lag")
    result.partition_status.write.mode("overwrite").parquet(f"{base}/partition_status")
    result.group_status.write.mode("overwrite").parquet(f"{base}/group_status")

"""`rafka-actors pipeline JOB ...`: the analytics jobs on Spark, over a broker's data dir.

    rafka-actors pipeline lag --data-dir D --out OUT [--master URL] [--window 10]
                              [--min-distance-ms N] [--allowed-lag N] [--now WHEN]
                              [--conf KEY=VALUE]
    rafka-actors pipeline rebalances --data-dir D --out OUT [--master URL] [--conf KEY=VALUE]

Importing this module is cheap (the `rafka-actors` command imports it to build its parser):
PySpark, pandas and matplotlib are imported only when a job runs.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add the ``pipeline`` subcommand and its jobs to the ``rafka-actors`` subparsers."""
    parser = commands.add_parser(
        "pipeline",
        help="analytics jobs on Spark over a data dir (lag, Burrow-style health, rebalances)",
        description="Analytics jobs on Spark over a broker's data dir (see docs/pipeline.md). "
        "Local by default (local[*]); --master runs them on a cluster.",
    )
    jobs = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    lag = jobs.add_parser(
        "lag",
        help="committed offsets, log-end offsets and lag (records, seconds) over time, judged "
        "by Burrow's rules",
        description="Lag of every group's partitions over time, in records and in seconds (the "
        "age of the record at the committed offset, as the broker's metrics have it), and "
        "Burrow's verdict per partition and group; Parquet under OUT, a summary here, a chart "
        "at OUT/lag.png.",
    )
    _spark_arguments(lag)
    lag.add_argument("--window", type=int, default=10, help="commits per window (default 10)")
    lag.add_argument(
        "--min-distance-ms",
        type=int,
        default=0,
        metavar="N",
        help="a commit within N ms of the previous kept one replaces it (default 0)",
    )
    lag.add_argument(
        "--allowed-lag",
        type=int,
        default=0,
        metavar="N",
        help="a lag of at most N records counts as caught up (default 0, as in Burrow)",
    )
    lag.add_argument(
        "--now",
        default="wall",
        metavar="WHEN",
        help="the moment to judge at: wall (default: the wall clock, as the broker's metrics "
        "judge), newest (the newest commit or batch in the data dir: for a copy taken "
        "earlier), or a time (epoch ms, or ISO 8601, UTC unless it says)",
    )
    lag.set_defaults(run=_run_lag)
    rebalances = jobs.add_parser(
        "rebalances",
        help="every rebalance of every group: start, end, members joined/left/evicted, cause",
        description="Each rebalance of each group from the coordinator log, with its cause; "
        "Parquet under OUT/rebalances/, a summary here.",
    )
    _spark_arguments(rebalances)
    rebalances.set_defaults(run=_run_rebalances)


def _spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", required=True, type=Path, metavar="D", help="a data dir")
    parser.add_argument("--out", required=True, type=Path, metavar="OUT", help="output dir")
    parser.add_argument(
        "--master", metavar="URL", help="Spark master, e.g. spark://host:7077 (default local[*])"
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any Spark setting, e.g. --conf spark.executor.memory=4g (repeatable)",
    )


def _conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--conf wants KEY=VALUE, got {item!r}")
        conf[key] = value
    return conf


def now_ms(when: str) -> int | Literal["newest"] | None:
    """`--now`'s moment: None (the wall clock), "newest", or epoch ms; ValueError if unreadable."""
    if when == "wall":
        return None
    if when == "newest":
        return "newest"
    if when.isdigit():
        return int(when)
    try:
        moment = datetime.fromisoformat(when)
    except ValueError:
        raise ValueError(
            f"--now wants wall, newest, epoch ms or an ISO time, got {when!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _check(args: argparse.Namespace) -> str | None:
    """Why the arguments can't run, if they can't."""
    if getattr(args, "window", 1) < 1:
        return "--window must be at least 1"
    if getattr(args, "min_distance_ms", 0) < 0 or getattr(args, "allowed_lag", 0) < 0:
        return "--min-distance-ms and --allowed-lag can't be negative"
    try:
        now_ms(getattr(args, "now", "wall"))
    except ValueError as exc:
        return str(exc)
    data_dir: Path = args.data_dir
    if not (data_dir / "coordinator").is_dir() and not (data_dir / "topics").is_dir():
        return f"{data_dir} is not a data dir (it has neither coordinator/ nor topics/)"
    return None


def _checked_conf(args: argparse.Namespace, job: str) -> dict[str, str] | None:
    """The Spark settings of a job whose arguments can run; None (and why, on stderr) if not."""
    problem = _check(args)
    conf: dict[str, str] = {}
    try:
        conf = _conf(args.conf)
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        print(f"rafka-actors pipeline {job}: {problem}", file=sys.stderr)
        return None
    return conf


def _run_lag(args: argparse.Namespace) -> int:
    conf = _checked_conf(args, "lag")
    if conf is None:
        return 2

    from pyspark.sql import SparkSession

    from .job import run_lag_job
    from .lag import LagSettings
    from .session import build_session

    settings = LagSettings(args.window, args.min_distance_ms, args.allowed_lag)
    running = SparkSession.getActiveSession()  # e.g. a notebook's or a test's: reuse, keep
    spark = build_session(args.master, app_name="rafka-actors pipeline lag", conf=conf)
    try:
        report = run_lag_job(
            spark, args.data_dir.resolve(), args.out.resolve(), settings, now_ms=now_ms(args.now)
        )
    finally:
        if running is None:
            spark.stop()
    print(report.summary)
    print()
    print(f"Parquet: {args.out}/lag/, {args.out}/partition_status/, {args.out}/group_status/")
    print(f"chart:   {report.chart}")
    return 0


def _run_rebalances(args: argparse.Namespace) -> int:
    conf = _checked_conf(args, "rebalances")
    if conf is None:
        return 2

    from pyspark.sql import SparkSession

    from .rebalances import rebalance_history, write_and_summarise
    from .session import build_session

    running = SparkSession.getActiveSession()
    spark = build_session(args.master, app_name="rafka-actors pipeline rebalances", conf=conf)
    try:
        table = write_and_summarise(
            rebalance_history(spark, args.data_dir.resolve()), args.out.resolve()
        )
    finally:
        if running is None:
            spark.stop()
    print(table)
    print()
    print(f"Parquet: {args.out}/rebalances/")
    return 0

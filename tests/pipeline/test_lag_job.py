"""The lag job on a synthetic data dir: exact lags, Burrow statuses, Parquet, summary, chart.

The data dir (datadir.burrow_scenario) has one consumer per Burrow status; every number below
follows from its docstring. The job runs once for the module (`report`); assertions read the
Parquet it wrote, as a user of the output would.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .datadir import T0, Scenario, burrow_scenario

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rafka_actors.pipeline.job import LagReport


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Scenario]:
    root = tmp_path_factory.mktemp("burrow") / "data"
    return root, burrow_scenario(root)


@pytest.fixture(scope="module")
def report(
    spark: SparkSession, scenario: tuple[Path, Scenario], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, LagReport]:
    from rafka_actors.pipeline.job import run_lag_job
    from rafka_actors.pipeline.lag import NEWEST

    out = tmp_path_factory.mktemp("out")
    # judged as of when the synthetic data dir was "written" (its statuses are written so)
    return out, run_lag_job(spark, scenario[0], out, now_ms=NEWEST)


def parquet(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    return [row.asDict() for row in spark.read.parquet(str(path)).collect()]


def ms(value: datetime) -> int:
    """A timestamp as Spark hands it back (naive, in this machine's zone) in epoch ms."""
    return round(value.timestamp() * 1000)


def test_now_is_the_newest_batch_or_commit(
    report: tuple[Path, LagReport], scenario: tuple[Path, Scenario]
) -> None:
    assert report[1].result.now_ms == scenario[1].now_ms == T0 + 95_000


def test_every_commit_has_its_log_end_and_lag(
    spark: SparkSession, report: tuple[Path, LagReport], scenario: tuple[Path, Scenario]
) -> None:
    rows = parquet(spark, report[0] / "lag")
    found: dict[tuple[str, str, int], list[tuple[int, int, int, int]]] = {}
    for r in sorted(rows, key=lambda r: (r["segment"], r["position"])):
        key = (r["group_id"], r["topic"], r["partition"])
        point = (ms(r["commit_time"]), r["committed_offset"], r["log_end_offset"], r["lag"])
        found.setdefault(key, []).append(point)
    assert found == scenario[1].lag
    assert {r["org_id"] for r in rows} == {0}
    # spot checks against the scenario's docstring
    assert found[("stuck", "events", 2)][-1] == (T0 + 90_000, 7, 100, 93)
    assert found[("gone", "events", 0)] == [(T0 + 20_000, 10, 30, 20)]


def test_every_commit_has_its_time_lag(spark: SparkSession, report: tuple[Path, LagReport]) -> None:
    rows = parquet(spark, report[0] / "lag")
    stuck = sorted(
        (ms(r["commit_time"]), r["time_lag_ms"]) for r in rows if r["group_id"] == "stuck"
    )
    # offset 7 was appended in batch 0 (T0 - 5 s); commit i at T0 + 10 i s
    assert stuck == [(T0 + i * 10_000, i * 10_000 + 5_000) for i in range(10)]
    assert {r["time_lag_ms"] for r in rows if r["group_id"] == "ok"} == {0}  # caught up
    slow = sorted((ms(r["commit_time"]), r["time_lag_ms"]) for r in rows if r["group_id"] == "slow")
    # slow commits 5 (i + 1): in batch (i + 1) // 2, appended at T0 + 10 ((i + 1) // 2) s - 5 s
    assert slow == [(T0 + i * 10_000, (i - (i + 1) // 2) * 10_000 + 5_000) for i in range(10)]


def test_partition_statuses_follow_burrow(
    spark: SparkSession, report: tuple[Path, LagReport], scenario: tuple[Path, Scenario]
) -> None:
    rows = parquet(spark, report[0] / "partition_status")
    statuses = {(r["group_id"], r["topic"], r["partition"]): r["status"] for r in rows}
    assert statuses == scenario[1].partition_status  # "gone" was deleted: no status
    lags = {(r["group_id"], r["topic"], r["partition"]): r["current_lag"] for r in rows}
    assert lags == scenario[1].current_lag
    by_group = {(r["group_id"], r["partition"]): r for r in rows}
    quit_ = by_group[("quit", 3)]
    assert (quit_["commits"], quit_["start_offset"], quit_["end_offset"]) == (4, 8, 38)
    assert (ms(quit_["window_start"]), ms(quit_["window_end"])) == (T0, T0 + 30_000)
    assert quit_["complete"] == pytest.approx(0.4)
    assert {r["log_end_offset"] for r in rows} == {110}
    revived = by_group[("revived", 0)]  # judged after its offset was deleted: no rewind
    assert (revived["commits"], revived["start_offset"], revived["end_offset"]) == (2, 30, 40)
    assert (revived["start_lag"], revived["end_lag"]) == (60, 60)


def test_group_status_is_the_worst_partition_with_errors_as_err(
    spark: SparkSession, report: tuple[Path, LagReport], scenario: tuple[Path, Scenario]
) -> None:
    rows = parquet(spark, report[0] / "group_status")
    assert {r["group_id"]: r["status"] for r in rows} == scenario[1].group_status
    mixed = next(r for r in rows if r["group_id"] == "mixed")
    assert (mixed["partitions"], mixed["partitions_not_ok"], mixed["total_lag"]) == (2, 1, 70)
    assert (mixed["max_lag"], mixed["max_lag_topic"], mixed["max_lag_partition"]) == (
        60,
        "events",
        1,
    )


def test_summary_lists_groups_worst_first_and_the_partitions_not_ok(
    report: tuple[Path, LagReport],
) -> None:
    text = report[1].summary
    assert text.startswith("now = 2023-11-14 22:14:55.000 UTC")
    groups = [g["group_id"] for g in report[1].groups]
    # worst status first, then the most lag, then by name
    assert groups == ["stuck", "rewound", "quit", "mixed", "revived", "slow", "ok"]
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("ORG"))
    assert lines[header].split() == [
        "ORG", "GROUP", "STATUS", "PARTITIONS", "NOT-OK", "TOTAL-LAG", "MAX-LAG", "AT",
        "MAX-LAG-S",
    ]  # fmt: skip
    # offset 7 is in batch 0 (T0 - 5 s); now is T0 + 95 s
    assert lines[header + 1].split() == [
        "0", "stuck", "ERR", "1", "1", "103", "103", "events-2", "100.0",
    ]  # fmt: skip
    assert "partitions not OK:" in lines
    stall = next(line for line in lines if " STALL " in line)
    assert stall.split()[:6] == ["0", "stuck", "events", "2", "STALL", "103"]
    assert stall.split()[-2:] == ["7->7", "3->93"]


def test_chart_is_a_png(report: tuple[Path, LagReport]) -> None:
    chart = report[0] / "lag.png"
    assert report[1].chart == chart
    data = chart.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


def test_allowed_lag_counts_small_lags_as_caught_up(
    spark: SparkSession, scenario: tuple[Path, Scenario]
) -> None:
    from rafka_actors.pipeline.lag import NEWEST, LagSettings, compute_lag

    result = compute_lag(spark, scenario[0], LagSettings(allowed_lag=2), now_ms=NEWEST)
    statuses = {r["group_id"]: r["status"] for r in result.group_status.collect()}
    assert statuses["quit"] == "OK"  # always 2 behind: caught up, as far as we care
    assert statuses["rewound"] == statuses["stuck"] == "ERR"  # never fewer than 3 behind


def test_min_distance_and_window_narrow_what_is_judged(
    spark: SparkSession, scenario: tuple[Path, Scenario]
) -> None:
    from rafka_actors.pipeline.lag import NEWEST, LagSettings, compute_lag

    # commits 10 s apart, min distance 15 s: kept at 0, 20, ..., 80 s with the offsets of the
    # commits at 10, 30, ..., 90 s; a window of 3 keeps the last three
    settings = LagSettings(window=3, min_distance_ms=15_000)
    result = compute_lag(spark, scenario[0], settings, now_ms=NEWEST)
    rows = {r["group_id"]: r for r in result.partition_status.collect() if r["partition"] == 1}
    slow = rows["slow"]
    assert (slow["commits"], slow["start_offset"], slow["end_offset"]) == (3, 30, 50)
    assert (ms(slow["window_start"]), ms(slow["window_end"])) == (T0 + 40_000, T0 + 80_000)
    assert slow["status"] == "WARN"


def test_an_empty_data_dir_gives_empty_outputs(spark: SparkSession, tmp_path: Path) -> None:
    from rafka_actors.pipeline.job import run_lag_job
    from rafka_actors.pipeline.lag import NEWEST

    (tmp_path / "data" / "topics").mkdir(parents=True)
    report = run_lag_job(spark, tmp_path / "data", tmp_path / "out", now_ms=NEWEST)
    assert report.groups == [] and report.result.now_ms == 0
    assert spark.read.parquet(str(tmp_path / "out" / "lag")).count() == 0
    assert (tmp_path / "out" / "lag.png").read_bytes()[:4] == b"\x89PNG"


async def test_the_live_metric_agrees_with_the_pipeline(
    spark: SparkSession,
    report: tuple[Path, LagReport],
    scenario: tuple[Path, Scenario],
    tmp_path: Path,
) -> None:
    """The broker's lag gauges (metrics/collector.py), read over a copy of the same data dir
    at the same "now", equal the pipeline's current lag in records and in seconds."""
    import shutil

    import trio
    from prometheus_client.core import Metric

    from rafka_actors.actors.group_registry import GroupRegistry
    from rafka_actors.broker import group_config
    from rafka_actors.config import BrokerConfig
    from rafka_actors.data_dir import open_coordinator_log
    from rafka_actors.metrics.collector import BrokerCollector
    from rafka_actors.metrics.instruments import BrokerMetrics, LabelPolicy
    from rafka_actors.storage.data_plane import DataPlane

    copy = tmp_path / "data"
    shutil.copytree(scenario[0], copy)  # opening the logs may write to them
    config = BrokerConfig(data_dir=copy)
    data = DataPlane.open(copy, segment_bytes=config.log_segment_bytes)
    log = open_coordinator_log(config)
    families: list[Metric] = []
    try:
        async with trio.open_nursery() as nursery:
            groups = GroupRegistry(nursery, group_config(config), log, topics=data.image_of)
            now_s = report[1].result.now_ms / 1000
            collector = BrokerCollector(
                BrokerMetrics(LabelPolicy()), groups, data, 10, clock=lambda: now_s
            )
            families = list(collector.collect())
            nursery.cancel_scope.cancel()
    finally:
        log.close()
        data.close()
    live: dict[tuple[str, str, int], dict[str, float]] = {}
    for family in families:
        for sample in family.samples:
            if sample.name in ("rafka_group_lag_records", "rafka_group_lag_seconds"):
                labels = sample.labels
                key = (labels["group"], labels["topic"], int(labels["partition"]))
                live.setdefault(key, {})[sample.name] = sample.value
    rows = parquet(spark, report[0] / "partition_status")
    assert live == {
        (r["group_id"], r["topic"], r["partition"]): {
            "rafka_group_lag_records": r["current_lag"],
            "rafka_group_lag_seconds": r["current_time_lag_ms"] / 1000,
        }
        for r in rows
    }
    assert any(r["current_time_lag_ms"] > 0 for r in rows)

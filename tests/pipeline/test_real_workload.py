"""The pipeline over a data dir made by a real workload through the real broker (workload.py):
exact lags and Burrow statuses for the five scripted consumers, the eviction and the leave of
the classic group as rebalance causes, and a valid chart."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rafka_actors.pipeline.job import LagReport, run_lag_job
from rafka_actors.pipeline.lag import NEWEST, LagSettings
from rafka_actors.pipeline.rebalances import rebalance_history

from .workload import BURROW_GROUPS, EXPECTED_LAG, TOPIC, run_workload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("workload") / "data"
    return data_dir, run_workload(data_dir)


@pytest.fixture(scope="module")
def lag_report(spark: SparkSession, workload: tuple[Path, dict[str, str]]) -> LagReport:
    out = workload[0].parent / "out"
    # as of the workload's end: a wall clock later, "warn" would have stopped committing
    return run_lag_job(spark, workload[0], out, LagSettings(window=10), now_ms=NEWEST)


def _rows(frame: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in frame.collect()]


def test_every_commit_has_its_exact_log_end_and_lag(lag_report: LagReport) -> None:
    found: dict[str, list[tuple[int, int, int]]] = {}
    for r in sorted(_rows(lag_report.result.lag), key=lambda r: (r["segment"], r["position"])):
        if r["group_id"] in BURROW_GROUPS:
            assert (r["topic"], r["partition"]) == (TOPIC, 0)
            found.setdefault(r["group_id"], []).append(
                (r["committed_offset"], r["log_end_offset"], r["lag"])
            )
    assert found == EXPECTED_LAG


def test_burrow_statuses_of_the_scripted_consumers(lag_report: LagReport) -> None:
    partitions = {r["group_id"]: r for r in _rows(lag_report.result.partition_status)}
    assert {g: partitions[g]["status"] for g in BURROW_GROUPS} == {
        "ok": "OK",
        "warn": "WARN",
        "stall": "STALL",
        "stop": "STOP",
        "rewind": "REWIND",
    }
    assert {g: partitions[g]["current_lag"] for g in BURROW_GROUPS} == {
        "ok": 0,
        "warn": 60,
        "stall": 115,
        "stop": 83,
        "rewind": 2,
    }
    groups = {r["group_id"]: r["status"] for r in _rows(lag_report.result.group_status)}
    assert {g: groups[g] for g in BURROW_GROUPS} == {
        "ok": "OK",
        "warn": "WARN",
        "stall": "ERR",
        "stop": "ERR",
        "rewind": "ERR",
    }


def test_chart_is_a_png(lag_report: LagReport) -> None:
    data = lag_report.chart.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_rebalance_causes_of_the_classic_group(
    spark: SparkSession, workload: tuple[Path, dict[str, str]]
) -> None:
    survivor = workload[1]["survivor"]
    history = [r for r in _rows(rebalance_history(spark, workload[0])) if r["group_id"] == "evict"]
    causes = [r["cause"] for r in history]
    assert causes[0].startswith("member joined (")  # the victim forms the group
    (victim,) = history[0]["joined"]
    assert victim != survivor
    assert causes[1:] == [
        f"member joined ({survivor})",
        f"session timeout of {victim}",
        f"member left ({survivor})",
    ]
    eviction = history[2]
    assert (eviction["evicted"], eviction["left"], eviction["joined"]) == ([victim], [], [])
    assert history[3]["left"] == [survivor]
    assert all(r["group_type"] == "classic" and r["duration_ms"] >= 0 for r in history)
    assert [r["generation"] for r in history] == [1, 2, 3, 4]

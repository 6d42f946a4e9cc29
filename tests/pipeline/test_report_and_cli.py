"""The terminal summary's tables, and the `pipeline` command line (its cheap import, its checks,
and one run through `rafka-actors`'s own `main`)."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rafka_actors.cli import main
from rafka_actors.pipeline.report import format_table, summary

from .datadir import burrow_scenario

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_format_table_aligns_columns_and_shows_nulls_as_dashes() -> None:
    text = format_table(["A", "LONGER"], [["x", None], ["wide cell", 3]])
    assert text.splitlines() == ["A          LONGER", "x          -", "wide cell  3"]


def test_summary_says_how_many_more_are_in_the_output() -> None:
    group = {
        "org_id": 0, "group_id": "g", "status": "OK", "partitions": 1, "partitions_not_ok": 0,
        "total_lag": 0, "max_lag": 0, "max_lag_topic": "t", "max_lag_partition": 0,
    }  # fmt: skip
    now = datetime(2024, 1, 2, 3, 4, 5, 6_000)
    text = summary([group], [], now=now, groups_total=3)
    assert text.splitlines()[0] == "now = 2024-01-02 03:04:05.006 UTC (the wall clock)"
    assert "... and 2 more groups (see group_status/)" in text
    assert "partitions not OK" not in text


def test_importing_the_cli_does_not_import_spark() -> None:
    code = (
        "import sys, rafka_actors.cli; rafka_actors.cli._parser(); "
        "print('pyspark' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["--window", "0"], "--window must be at least 1"),
        (["--allowed-lag", "-1"], "can't be negative"),
        (["--conf", "nonsense"], "--conf wants KEY=VALUE"),
        (["--now", "yesterday"], "--now wants wall, newest, epoch ms or an ISO time"),
    ],
)
def test_bad_arguments_exit_2_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], complaint: str
) -> None:
    (tmp_path / "coordinator").mkdir()
    argv = ["pipeline", "lag", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), *extra]
    assert main(argv) == 2
    assert complaint in capsys.readouterr().err


def test_a_dir_that_is_not_a_data_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pipeline", "lag", "--data-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "is not a data dir" in capsys.readouterr().err


def test_pipeline_lag_runs_and_prints_the_summary(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    burrow_scenario(tmp_path / "data")
    out = tmp_path / "out"
    argv = ["pipeline", "lag", "--data-dir", str(tmp_path / "data"), "--out", str(out)]
    assert main([*argv, "--master", "local[2]", "--window", "5", "--now", "newest"]) == 0
    text = capsys.readouterr().out
    assert "now = 2023-11-14 22:14:55.000 UTC (the newest commit or batch in the data dir)" in text
    assert f"chart:   {out / 'lag.png'}" in text
    assert (out / "group_status").is_dir() and (out / "lag.png").is_file()
    # the shared session was already running: the command used it and left it running
    assert spark.range(1).count() == 1

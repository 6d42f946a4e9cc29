"""The group-size sweep and its chart, at tiny sizes against the real broker.

No timing is asserted (a loaded CI box would make any bound flaky): every figure must be
present and plausible, and the chart a PNG.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from rafka_actors.bench.chart import chart
from rafka_actors.bench.sweep import main, sweep, table
from rafka_actors.bench.sweep_row import SweepRow

from ..broker_process import BrokerProcess

_PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def bootstrap(broker_factory) -> str:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = broker_factory("group.initial.rebalance.delay.ms=0")
    return broker.bootstrap


def assert_plausible(row: SweepRow) -> None:
    assert row.runs == 1
    for name in ("join_s", "rebalance_s", "coordinator_s", "commit_p50_ms", "commit_p99_ms"):
        value = getattr(row, name)
        assert value is not None and value > 0, (row.size, name, value)
    assert row.coordinator_s <= row.rebalance_s  # type: ignore[operator]
    assert row.commit_p99_ms >= row.commit_p50_ms  # type: ignore[operator]
    assert row.commits is not None and row.commits >= 1


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(_PNG) and len(data) > len(_PNG)


def test_sweep_of_one_and_five_members_measures_every_figure_and_charts_them(
    bootstrap: str, tmp_path: Path
) -> None:
    rows = sweep(bootstrap, [1, 5], 1, window_s=0.5)
    assert [r.size for r in rows] == [1, 5]
    for row in rows:
        assert_plausible(row)
    assert rows[0].rebalance_s == rows[0].coordinator_s  # a lone join: all the coordinator's
    png = tmp_path / "sweep.png"
    chart(rows, str(png), "test")
    assert_png(png)


def test_command_line_writes_the_table_csv_and_png(
    bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png, rows_csv = tmp_path / "c.png", tmp_path / "c.csv"
    argv = ["--bootstrap", bootstrap, "--quick", "--sizes", "2", "--png", str(png)]
    assert main([*argv, "--csv", str(rows_csv)]) == 0
    out = capsys.readouterr().out
    assert "| 2 |" in out and "rafka_actors.bench.sweep --bootstrap" in out
    with open(rows_csv) as f:
        (row,) = csv.DictReader(f)
    assert row["size"] == "2" and row["runs"] == "1"
    assert float(row["commit_p99_ms"]) >= float(row["commit_p50_ms"]) > 0
    assert_png(png)


def test_a_size_that_failed_shows_as_missing_not_as_zero(tmp_path: Path) -> None:
    rows = [
        SweepRow(1, 0.01, 0.01, 0.01, 1.0, 2.0, 500, 1),
        SweepRow(10, None, None, None, None, None, None, 0),
    ]
    assert "| 10 | - | - | - | - | - | - | 0 |" in table(rows)
    chart(rows, str(tmp_path / "partial.png"), "partial")
    assert_png(tmp_path / "partial.png")

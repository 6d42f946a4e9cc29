"""bench/hostile_clients.py runs and prints its table (no timing is asserted: the figures are
for the report, and a loaded CI box would make any bound flaky)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hostile_clients.py"
HEADER = ("load", "n", "p50 ms", "p99 ms", "max ms", "base p99", "p99/base")


def run_bench(*args: str, timeout: float) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=BENCH.parents[1],
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def table_rows(out: str) -> dict[str, list[str]]:
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["load", "n"])
    assert all(word in lines[head] for word in HEADER)
    rows = {}
    for line in lines[head + 1 :]:
        if not line.strip():
            break
        name, *figures = line.split()
        rows[name] = figures
    return rows


def test_quickest_run_prints_the_table_the_load_and_the_command() -> None:
    out = run_bench("--seconds", "0.5", "--loads", "garbage", timeout=90)
    rows = table_rows(out)
    assert set(rows) == {"garbage"}
    for figures in rows.values():
        float(figures[-11])  # p50 ms (n p50 p99 max base ratio >10ms errors cpu rss fds log)
    assert "what the hostile clients did" in out
    assert "garbage" in out.split("what the hostile clients did")[1]
    assert out.rstrip().splitlines()[-1].startswith("command: ")


@pytest.mark.slow
def test_quick_run_of_every_load() -> None:
    out = run_bench(timeout=300)
    rows = table_rows(out)
    expected = {"none", "slowloris", "garbage", "maxframe-100MiB", "maxframe-1MiB"}
    expected |= {"connflood", "reqflood-noread", "reqflood-drain"}
    assert expected <= set(rows)  # "none (baseline)" splits at the space
    assert "sasl-plain-flood" in rows or "sasl-plain-flood: skipped" in out

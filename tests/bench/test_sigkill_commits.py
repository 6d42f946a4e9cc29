"""bench/sigkill_commits.py: acknowledged commits, a SIGKILL, a restart on the same data dir,
and the offsets that came back, per broker."""

from __future__ import annotations

import pytest

from . import run_bench_script

pytestmark = [pytest.mark.bench, pytest.mark.e2e]


def test_counts_the_acknowledged_commits_that_came_back() -> None:
    out = run_bench_script(
        "sigkill_commits.py",
        *("--brokers", "rafka-actors,tansu", "--groups", "3", "--commits", "4"),
        timeout=180,
    )
    rows = {line.split(" | ")[0].lstrip("| "): line for line in out.splitlines()}
    assert "| 3 of 3 | 4x3 |" in rows["rafka-actors"], out
    # Tansu, on in-memory storage, forgets everything: the script must see the loss.
    assert "| 0 of 3 | -1001x3 |" in rows["tansu"], out

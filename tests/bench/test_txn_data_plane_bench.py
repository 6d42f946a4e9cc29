"""bench/txn_data_plane.py and bench/read_committed_peers.py (rafka-actors only) run and
print their lines; the peers' bench checks what a read_committed client keeps."""

from __future__ import annotations

import re

import pytest

from . import run_bench_script

pytestmark = pytest.mark.bench


def test_txn_data_plane_prints_fetch_and_startup_costs() -> None:
    out = run_bench_script(
        "txn_data_plane.py",
        *("--records", "4000", "--requests", "50", "--rounds", "2", "--batches", "2000"),
        timeout=300,
    )
    fetches = re.findall(r"^fetch (plain|txn)\s+(read_\w+)\s*: best\s+([\d.]+) us", out, re.M)
    assert len(fetches) == 4 and all(float(us) > 0 for *_, us in fetches)
    assert "from the snapshot" in out


def test_read_committed_peers_on_rafka_actors() -> None:
    out = run_bench_script(
        "read_committed_peers.py",
        *("--brokers", "rafka-actors", "--records", "2000", "--rounds", "1"),
        timeout=300,
    )
    assert "txn   read_committed  :" in out
    assert "a read_committed client keeps 1,800 records" in out

"""bench/fsync_latency.py: every way writes, flushes and prints its latency (no timing
asserted), and leaves nothing behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from . import run_bench_script

pytestmark = pytest.mark.bench


def test_every_way_prints_its_latencies(tmp_path: Path) -> None:
    out = run_bench_script(
        "fsync_latency.py", "--dir", str(tmp_path), "--rounds", "5", "--passes", "2", timeout=60
    )
    assert out.splitlines()[0] == f"# bench/fsync_latency.py --dir {tmp_path} --rounds 5 --passes 2"
    found = dict(re.findall(r"^\s*(.+?): median ([\d.]+, [\d.]+) us; p90", out, re.MULTILINE))
    assert set(found) == {
        "append + fsync",
        "append + fdatasync",
        "preallocated + fsync",
        "preallocated + fdatasync",
    }
    assert all(float(m) > 0 for pair in found.values() for m in pair.split(", "))
    assert list(tmp_path.iterdir()) == []

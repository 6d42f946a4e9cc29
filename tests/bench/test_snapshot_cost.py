"""bench/snapshot_cost.py: prints what publishing a group's snapshot costs (no timing
asserted)."""

from __future__ import annotations

import re

import pytest

from . import run_bench_script

pytestmark = pytest.mark.bench


def test_it_prints_the_cost_of_a_snapshot_with_and_without_a_copy() -> None:
    out = run_bench_script("snapshot_cost.py", "--offsets", "10", "--repeat", "1", timeout=60)
    assert out.splitlines()[0] == "# bench/snapshot_cost.py --offsets 10 --repeat 1"
    found = re.findall(r"^snapshot_of, 10 offsets, (.+): ([\d.]+) us$", out, re.MULTILINE)
    assert [name for name, _ in found] == ["after a commit", "no offset changed"]
    assert all(float(us) > 0 for _, us in found)

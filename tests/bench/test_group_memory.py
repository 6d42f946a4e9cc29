"""bench/group_memory.py: creates the groups, counts their memory and prints it (no figure
asserted but the counts: one group held per group, none with a running actor once idle, and
the retention sweep starts and keeps none)."""

from __future__ import annotations

import re

import pytest

from . import run_bench_script

pytestmark = pytest.mark.bench


def test_it_prints_memory_per_group_and_leaves_no_actor_running() -> None:
    out = run_bench_script("group_memory.py", "--groups", "50", timeout=60)
    assert out.splitlines()[0] == "# bench/group_memory.py --groups 50"
    found = re.search(
        r"^50 groups: ([\d,]+) B of Python objects per group; "
        r"250 groups held, (\d+) actors running",
        out,
        re.MULTILINE,
    )
    assert found is not None, out
    assert int(found.group(1).replace(",", "")) > 0 and int(found.group(2)) == 0
    sweep = r"^retention sweep from a fresh registry: peak -?[\d,]+ B per group; 0 tasks running"
    assert re.search(sweep + " and 0 groups held after it$", out, re.MULTILINE), out

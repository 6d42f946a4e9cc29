"""bench/group_memory.py: creates the groups, counts their memory and prints it (no figure
asserted but the counts of actors: a simple consumer's group has no task, and the retention
sweep starts and keeps none)."""

from __future__ import annotations

import re

from . import run_bench_script


def test_it_prints_memory_per_group_and_no_group_holds_a_running_actor() -> None:
    out = run_bench_script("group_memory.py", "--groups", "50", timeout=60)
    assert out.splitlines()[0] == "# bench/group_memory.py --groups 50"
    found = re.search(
        r"^50 groups: ([\d,]+) B of Python objects per group; 250 actors held, 0 of them running",
        out,
        re.MULTILINE,
    )
    assert found is not None, out
    assert int(found.group(1).replace(",", "")) > 0
    sweep = r"^retention sweep from a fresh registry: peak -?[\d,]+ B per group; 0 tasks running"
    assert re.search(sweep + " and 0 actors held after it$", out, re.MULTILINE), out

"""bench/group_memory.py: creates the groups, counts their memory and prints it (no figure
asserted but the count of running actors: a simple consumer's group has no task)."""

from __future__ import annotations

import re

from . import run_bench_script


def test_it_prints_memory_per_group_and_holds_no_running_actor() -> None:
    out = run_bench_script("group_memory.py", "--groups", "50", timeout=60)
    assert out.splitlines()[0] == "# bench/group_memory.py --groups 50"
    found = re.search(
        r"^50 groups: ([\d,]+) B of Python objects per group; 250 actors held, 0 of them running",
        out,
        re.MULTILINE,
    )
    assert found is not None, out
    assert int(found.group(1).replace(",", "")) > 0

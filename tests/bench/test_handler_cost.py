"""bench/handler_cost.py in process: each op is timed, and each random fetch is answered with
its own group's offset."""

from __future__ import annotations

import re

import pytest

from . import run_bench_script

pytestmark = pytest.mark.bench


def test_random_fetches_each_get_their_groups_offset() -> None:
    out = run_bench_script(
        "handler_cost.py",
        *("--ops", "fetch-random", "--requests", "300", "--rounds", "2"),
        timeout=120,
    )
    assert out.startswith("# bench/handler_cost.py --ops fetch-random")
    cost = re.search(r"^fetch-random: best ([\d.]+) us, median ([\d.]+) us", out, re.MULTILINE)
    assert cost is not None and 0 < float(cost.group(1)) <= float(cost.group(2))


def test_each_op_prints_its_cost() -> None:
    out = run_bench_script(
        "handler_cost.py",
        *("--ops", "apiversions,commit,fetch", "--requests", "300", "--rounds", "2"),
        timeout=120,
    )
    assert out.startswith("# bench/handler_cost.py --ops apiversions,commit,fetch")
    costs = dict(re.findall(r"^([\w-]+): best ([\d.]+) us", out, re.MULTILINE))
    assert set(costs) == {"apiversions", "commit", "fetch"}
    assert all(float(us) > 0 for us in costs.values())

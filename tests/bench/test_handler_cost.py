"""bench/handler_cost.py in process: the repeated commit's op goes through the reactor's
repeat path (gateway/commit_repeat.py) and every commit it times reaches the group; each
random fetch is answered with its own group's offset."""

from __future__ import annotations

import re
import subprocess
import sys

from . import BENCH, run_bench_script


def test_repeated_commits_are_answered_from_the_kept_one_and_committed() -> None:
    requests = 300
    out = run_bench_script(
        "handler_cost.py",
        *("--ops", "commit-repeat,commit", "--requests", str(requests), "--rounds", "2"),
        timeout=120,
    )
    assert out.startswith("# bench/handler_cost.py --ops commit-repeat,commit")
    costs = dict(re.findall(r"^([\w-]+): best ([\d.]+) us", out, re.MULTILINE))
    assert set(costs) == {"commit-repeat", "commit"}
    assert all(float(us) > 0 for us in costs.values())
    # each round sends offsets 2**41 .. 2**41 + requests - 1, in that order
    last = re.search(r"^commit-repeat: the group's committed offset is (\d+)$", out, re.MULTILINE)
    assert last is not None and int(last.group(1)) == (1 << 41) + requests - 1


def test_commit_repeat_is_refused_under_fsync_always() -> None:
    script = str(BENCH / "handler_cost.py")
    done = subprocess.run(
        [sys.executable, script, "--ops", "commit-repeat", "--fsync", "always"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "under fsync always the reactor answers no commit inline" in done.stderr


def test_random_fetches_each_get_their_groups_offset() -> None:
    out = run_bench_script(
        "handler_cost.py",
        *("--ops", "fetch-random", "--requests", "300", "--rounds", "2"),
        timeout=120,
    )
    assert out.startswith("# bench/handler_cost.py --ops fetch-random")
    cost = re.search(r"^fetch-random: best ([\d.]+) us, median ([\d.]+) us", out, re.MULTILINE)
    assert cost is not None and 0 < float(cost.group(1)) <= float(cost.group(2))

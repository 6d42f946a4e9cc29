"""bench/request_cost.py against a real broker: with --clients, every client replays its own
group's request at once and the printed rate is their sum (no timing asserted)."""

from __future__ import annotations

import re

import pytest

from . import run_bench_script

pytestmark = pytest.mark.bench


def test_several_clients_replay_at_once_and_the_figures_are_printed() -> None:
    out = run_bench_script(
        "request_cost.py",
        *("--ops", "commit,fetch", "--seconds", "0.3", "--rounds", "1", "--clients", "3"),
        *("-o", "coordinator.log.fsync=never"),
        timeout=120,
    )
    assert out.startswith("# bench/request_cost.py --ops commit,fetch")
    found = {
        m.group(1): (float(m.group(2).replace(",", "")), float(m.group(3)))
        for m in re.finditer(
            r"^(\w+): ([\d,]+) requests/s; broker CPU per request: best (\d+) us",
            out,
            re.MULTILINE,
        )
    }
    assert set(found) == {"commit", "fetch"}
    assert all(rate > 0 and cpu_us > 0 for rate, cpu_us in found.values())


def test_brokers_take_turns_and_a_heartbeat_is_replayed_by_a_joined_member() -> None:
    out = run_bench_script(
        "request_cost.py",
        *("--ops", "heartbeat", "--seconds", "0.3", "--rounds", "2"),
        *("--brokers", "new=rafka-actors,old=rafka-actors[coordinator.log.fsync=never]"),
        timeout=120,
    )
    new = re.search(r"^new heartbeat: ([\d,]+) requests/s", out, re.MULTILINE)
    old = re.search(r"^old heartbeat: ([\d,]+) requests/s; .*first/this: rate", out, re.MULTILINE)
    assert new and old, out
    assert float(new.group(1).replace(",", "")) > 0

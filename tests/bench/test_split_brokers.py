"""bench/split_brokers.py's measurement: committers spread over several brokers really commit
on each (no timing asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from harness.consumer_workloads import aggregate_commits, create_topic
from harness.core import Target

from ..broker_process import BrokerProcess
from . import run_bench_script

pytestmark = [pytest.mark.bench, pytest.mark.e2e]


def _groups(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a dropped one cancels
    listed = admin.list_consumer_groups().result(10)
    return {group.group_id for group in listed.valid}


def test_committers_are_spread_over_the_brokers_given(tmp_path: Path) -> None:
    brokers = [BrokerProcess(tmp_path / name).start() for name in ("one", "two")]
    try:
        targets = [Target("rafka-actors", broker.bootstrap) for broker in brokers]
        places = [(target, create_topic(target, 1)) for target in targets]
        rate = aggregate_commits(places, 4, 0.3)
        assert rate > 0
        # each committer has a group of its own, on the broker it was given: two on each
        assert [len(_groups(b.bootstrap)) for b in brokers] == [2, 2]
    finally:
        for broker in brokers:
            broker.stop()


def test_the_script_compares_one_broker_with_two() -> None:
    args = ["--rounds", "1", "--seconds", "0.3", "--clients", "2"]
    out = run_bench_script("split_brokers.py", *args, timeout=120)
    last = out.strip().splitlines()[-1]
    assert last.startswith("2 committers: one broker ") and "two/one = " in last, out

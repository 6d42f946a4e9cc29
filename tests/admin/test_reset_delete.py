"""`rafka-actors groups reset-offsets | delete` against the real broker.

Each reset case starts from a group with committed offsets {0: 4, 1: 6, 2: 8} on a topic of
3 x 10 records: the dry run prints the plan and commits nothing (as confluent-kafka then
reads back), `--execute` prints the same plan and commits it. Targets outside the log are
clamped with a warning; shifting needs a committed offset; an active group's refusal
(UNKNOWN_MEMBER_ID) is explained. Delete removes an empty group and reports the broker's
error for an active or unknown one.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..broker_process import BrokerProcess
from .conftest import (
    CLASSIC_COMMITS,
    ActiveGroups,
    commit_simple,
    committed,
    describe,
    make_topic,
    unique,
)

pytestmark = pytest.mark.e2e

START = {0: 4, 1: 6, 2: 8}
CASES = {
    "to-earliest": (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
    "to-latest": (["--to-latest"], {0: 10, 1: 10, 2: 10}),
    "to-offset": (["--to-offset", "5"], {0: 5, 1: 5, 2: 5}),
    "shift-by": (["--shift-by", "-3"], {0: 1, 1: 3, 2: 5}),
}


def _group(broker: BrokerProcess) -> tuple[str, str]:
    topic, group = make_topic(broker), unique("reset")
    commit_simple(broker, group, topic, START)
    return topic, group


def _planned(result: Any) -> dict[int, int]:
    return {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in result.rows()}


@pytest.mark.parametrize("mode", CASES)
@pytest.mark.parametrize("scope", ["topic", "all-topics"])
def test_reset_dry_run_then_execute(cli: Any, broker: BrokerProcess, mode: str, scope: str) -> None:
    topic, group = _group(broker)
    flags, expected = CASES[mode]
    where = ["--topic", topic] if scope == "topic" else ["--all-topics"]
    dry = cli("reset-offsets", group, *where, *flags)
    assert dry.code == 0, dry.err
    assert "Dry run" in dry.err
    assert _planned(dry) == expected
    assert [r["CURRENT-OFFSET"] for r in dry.rows()] == ["4", "6", "8"]
    assert committed(broker, group, topic) == START

    done = cli("reset-offsets", group, *where, *flags, "--execute")
    assert done.code == 0, done.err
    assert "Dry run" not in done.err
    assert _planned(done) == expected
    assert committed(broker, group, topic) == expected


def test_reset_some_partitions_as_json(cli: Any, broker: BrokerProcess) -> None:
    topic, group = _group(broker)
    result = cli(
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:0,2",
        "--to-latest",
        "--execute",
        "--output",
        "json",
    )
    assert result.code == 0, result.err
    plan = result.json()
    assert plan["executed"] is True and plan["group"] == group
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in plan["partitions"]] == [
        (0, 4, 10),
        (2, 8, 10),
    ]
    assert committed(broker, group, topic) == {0: 10, 1: 6, 2: 10}


def test_reset_a_new_group_creates_it(cli: Any, broker: BrokerProcess) -> None:
    topic, group = make_topic(broker), unique("fresh")
    assert cli("reset-offsets", group, "--topic", topic, "--to-offset", "2", "--execute").code == 0
    assert committed(broker, group, topic) == {0: 2, 1: 2, 2: 2}
    assert describe(broker, group).state == "Empty"


def test_targets_outside_the_log_are_clamped(cli: Any, broker: BrokerProcess) -> None:
    topic, group = _group(broker)
    high = cli("reset-offsets", group, "--all-topics", "--to-offset", "50")
    assert _planned(high) == {0: 10, 1: 10, 2: 10}
    assert (
        f"WARN: New offset (50) is higher than latest offset for topic partition {topic}-0. "
        "Value will be set to 10"
    ) in high.err
    low = cli("reset-offsets", group, "--all-topics", "--shift-by", "-100", "--execute")
    assert _planned(low) == {0: 0, 1: 0, 2: 0}
    assert "is lower than earliest offset" in low.err
    assert committed(broker, group, topic) == {0: 0, 1: 0, 2: 0}


def test_shift_needs_a_committed_offset(cli: Any, broker: BrokerProcess) -> None:
    topic, group = make_topic(broker), unique("partial")
    commit_simple(broker, group, topic, {0: 4})
    result = cli("reset-offsets", group, "--topic", topic, "--shift-by", "1")
    assert result.code == 1
    assert f"cannot shift the offset of {topic}-1" in result.err


def test_unknown_topic_is_reported_by_name(cli: Any) -> None:
    result = cli("reset-offsets", "g", "--topic", "no-such-topic", "--to-earliest")
    assert result.code == 1
    assert "looking up topic 'no-such-topic': UNKNOWN_TOPIC_OR_PARTITION" in result.err


@pytest.mark.parametrize("kind", ["classic", "consumer"])
def test_reset_is_refused_while_the_group_has_members(
    cli: Any, broker: BrokerProcess, active_groups: ActiveGroups, kind: str
) -> None:
    group = getattr(active_groups, kind)
    dry = cli("reset-offsets", group, "--topic", active_groups.topic, "--to-earliest")
    assert dry.code == 0
    assert f"group '{group}' is Stable" in dry.err
    result = cli(
        "reset-offsets", group, "--topic", active_groups.topic, "--to-earliest", "--execute"
    )
    assert result.code == 1
    assert result.out == ""
    assert (
        f"error: the broker refused to reset the offsets of group '{group}': UNKNOWN_MEMBER_ID "
        "(offsets can only be reset while the group has no active members; it was Stable with "
        "1 member: stop its consumers first)"
    ) in result.err
    if kind == "classic":
        assert {p: o for p, o in committed(broker, group, active_groups.topic).items() if o} == (
            CLASSIC_COMMITS
        )


def test_delete(cli: Any, broker: BrokerProcess, active_groups: ActiveGroups) -> None:
    topic, group = _group(broker)
    result = cli("delete", group)
    assert result.code == 0, result.err
    assert (
        result.out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    )
    assert group not in {g["group"] for g in cli("list", "--output", "json").json()}
    assert committed(broker, group, topic) == {0: None, 1: None, 2: None}

    refused = cli("delete", active_groups.classic, "never-was", "--output", "json")
    assert refused.code == 1
    assert refused.json() == [
        {"group": active_groups.classic, "deleted": False, "error": "NON_EMPTY_GROUP"},
        {"group": "never-was", "deleted": False, "error": "GROUP_ID_NOT_FOUND"},
    ]
    table = cli("delete", "never-was")
    assert "* Group 'never-was' could not be deleted due to: GROUP_ID_NOT_FOUND" in table.out

"""The heartbeat interval told to KIP-848 members (consumer_group/cadence.py).

Kafka always tells `group.consumer.heartbeat.interval.ms`; here a member with a rebalance step
ahead, in a group whose target is due, or that joined within the last steady interval is told
`group.consumer.rebalance.heartbeat.interval.ms`, and a settled member the steady interval.
"""

from __future__ import annotations

import dataclasses

import pytest

from rafka_actors.consumer_group.state import ConsumerGroupState, MemberState

from .harness import CONFIG, ConsumerHarness

STEADY, FAST = 5_000, 250


@pytest.fixture
def h() -> ConsumerHarness:
    config = dataclasses.replace(CONFIG, consumer_rebalance_heartbeat_interval_ms=FAST)
    harness = ConsumerHarness(config=config)
    harness.create_topic("foo", 6)
    return harness


def test_a_new_member_checks_back_fast_until_one_steady_interval_has_passed(
    h: ConsumerHarness,
) -> None:
    joined = h.join("m1")
    assert joined.heartbeat_interval_ms == FAST
    assert h.consumer.state is ConsumerGroupState.STABLE
    h.sleep(STEADY - 1)
    assert h.heartbeat("m1", 1).heartbeat_interval_ms == FAST
    h.sleep(1)
    assert h.heartbeat("m1", 1).heartbeat_interval_ms == STEADY


def test_members_with_a_step_ahead_check_back_fast_and_settled_ones_slow(
    h: ConsumerHarness,
) -> None:
    h.join("m1")
    h.sleep(STEADY)
    assert h.heartbeat("m1", 1).heartbeat_interval_ms == STEADY
    h.sleep(STEADY)
    second = h.join("m2")  # nothing free yet: m1 holds all six
    assert second.heartbeat_interval_ms == FAST
    assert h.member("m2").current.state is MemberState.UNRELEASED_PARTITIONS
    h.sleep(STEADY)  # m2 is no longer new, but still waits for partitions
    assert h.heartbeat("m2", 2, owned={}).heartbeat_interval_ms == FAST
    revoke = h.heartbeat("m1", 1, owned={"foo": set(range(6))})
    assert h.member("m1").current.state is MemberState.UNREVOKED_PARTITIONS
    assert revoke.heartbeat_interval_ms == FAST
    kept = h.named(revoke.assignment)
    assert kept is not None
    done = h.heartbeat("m1", 1, owned=kept)  # revoked: settled at epoch 2, joined long ago
    assert (done.member_epoch, done.heartbeat_interval_ms) == (2, STEADY)
    got = h.heartbeat("m2", 2, owned={})
    assert h.member("m2").current.state is MemberState.STABLE
    assert got.heartbeat_interval_ms == STEADY
    assert h.consumer.state is ConsumerGroupState.STABLE


def test_everyone_checks_back_fast_while_a_throttled_target_is_due(
    h: ConsumerHarness,
) -> None:
    h.config = dataclasses.replace(h.config, consumer_assignment_interval_ms=1_000)
    h.join("m1")
    h.sleep(STEADY)
    h.join("m2")  # the assignor runs at once: its last run was long ago
    revoke = h.heartbeat("m1", 1, owned={"foo": set(range(6))})
    kept = h.named(revoke.assignment)
    assert kept is not None
    assert h.heartbeat("m1", 1, owned=kept).heartbeat_interval_ms == STEADY
    h.sleep(10)
    h.join("m3")  # within the assignment interval: the new target waits
    assert h.consumer.state is ConsumerGroupState.ASSIGNING
    # m1 is settled at the current target and joined long ago, but a new target is coming
    assert h.heartbeat("m1", 2, owned=kept).heartbeat_interval_ms == FAST


def test_a_rebalance_cadence_above_the_steady_one_is_kafkas(h: ConsumerHarness) -> None:
    h.config = dataclasses.replace(h.config, consumer_rebalance_heartbeat_interval_ms=8_000)
    assert h.join("m1").heartbeat_interval_ms == STEADY


def test_a_replayed_member_is_not_new(h: ConsumerHarness) -> None:
    h.join("m1")
    h.group = h.replayed()  # joined_ms is soft: a restart does not restart the fast window
    assert h.heartbeat("m1", 1).heartbeat_interval_ms == STEADY

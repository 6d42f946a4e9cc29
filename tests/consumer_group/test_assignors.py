"""Tests of the server-side assignors (``uniform`` and ``range``).

The scenario tests are named after Kafka's ``OptimizedUniformAssignmentBuilderTest``,
``UniformHeterogeneousAssignmentBuilderTest`` and ``RangeAssignorTest``. Where Kafka's expected
assignment depends on Java hash-set iteration order, ours is the one given by sorted topic ids
(``T1 < T2 < T3 < T4``) and member ids; the comment says so. Then come hypothesis property tests.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Mapping
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rafka_actors.consumer_group.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    Assignment,
    MemberSpec,
    TopicId,
    uniform,
)
from rafka_actors.consumer_group.assignors import range as range_assignor
from rafka_actors.group_common.effects import ASSIGNOR_NAMES, GroupConfig

T1, T2, T3, T4 = (uuid.UUID(int=i) for i in (1, 2, 3, 4))
MISSING = uuid.UUID(int=99)

Members = dict[str, MemberSpec]
K = TypeVar("K")
V = TypeVar("V")
Result = dict[str, Assignment]


def member(
    *topics: TopicId,
    current: Mapping[TopicId, set[int]] | None = None,
    instance_id: str | None = None,
) -> MemberSpec:
    return MemberSpec(
        subscribed=frozenset(topics),
        current={t: frozenset(ps) for t, ps in (current or {}).items()},
        instance_id=instance_id,
    )


def a(**topics: set[int]) -> Assignment:
    """An expected assignment: ``a(T1={0, 1})``."""
    names = {"T1": T1, "T2": T2, "T3": T3, "T4": T4}
    return {names[name]: frozenset(ps) for name, ps in topics.items()}


def sizes(result: Result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in assigned.values()) for m, assigned in result.items()}


def with_current(members: Members, result: Result) -> Members:
    """The same members, with ``result`` as their current assignment."""
    return {
        m: MemberSpec(spec.subscribed, result.get(m, {}), spec.instance_id, spec.rack_id)
        for m, spec in members.items()
    }


def check_valid(members: Members, partitions: Mapping[TopicId, int], result: Result) -> None:
    """Every member present; every subscribed partition exactly once, to a subscriber."""
    assert set(result) == set(members)
    owners: dict[tuple[TopicId, int], str] = {}
    for member_id, assigned in result.items():
        for topic_id, ps in assigned.items():
            assert ps, "no empty partition sets"
            assert topic_id in members[member_id].subscribed
            for p in ps:
                assert 0 <= p < partitions[topic_id]
                assert (topic_id, p) not in owners, "partition assigned twice"
                owners[topic_id, p] = member_id
    subscribed = {t for spec in members.values() for t in spec.subscribed if t in partitions}
    expected = {(t, p) for t in subscribed for p in range(partitions[t])}
    assert set(owners) == expected


def check_heterogeneous_balance(members: Members, result: Result) -> None:
    """Kafka's balance check: no partition could move to a subscriber holding 2+ fewer."""
    count = sizes(result)
    for giver, assigned in result.items():
        for taker, spec in members.items():
            if count[giver] - count[taker] >= 2:
                assert not (assigned.keys() & spec.subscribed), (giver, taker)


def uniform_assign(members: Members, partitions: Mapping[TopicId, int]) -> Result:
    result = uniform.assign(members, partitions)
    check_valid(members, partitions, result)
    return result


def range_assign(members: Members, partitions: Mapping[TopicId, int]) -> Result:
    result = range_assignor.assign(members, partitions)
    check_valid(members, partitions, result)
    return result


# --- registry ---------------------------------------------------------------------------------


def test_registry() -> None:
    assert DEFAULT_ASSIGNOR == "uniform"
    assert sorted(ASSIGNORS) == ["range", "uniform"]
    assert ASSIGNORS["uniform"] is uniform.assign
    assert ASSIGNORS["range"] is range_assignor.assign
    # the names the broker's settings are checked against are the ones implemented
    assert tuple(ASSIGNORS) == ASSIGNOR_NAMES == GroupConfig().consumer_assignors


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_no_members(name: str) -> None:
    assert ASSIGNORS[name]({}, {T1: 3}) == {}


# --- uniform, homogeneous (OptimizedUniformAssignmentBuilderTest) -----------------------------


def test_one_member_no_topic_subscription() -> None:
    assert uniform_assign({"A": member()}, {T1: 3}) == {"A": {}}


def test_one_member_subscribed_to_nonexistent_topic() -> None:
    # Kafka raises; here topics missing from ``partitions`` are ignored.
    assert uniform_assign({"A": member(MISSING)}, {T1: 3}) == {"A": {}}


def test_first_assignment_two_members_two_topics_no_member_racks() -> None:
    # Kafka's expectation follows its hash order of topics; ours, topic id order.
    members = {"A": member(T1, T3), "B": member(T1, T3)}
    result = uniform_assign(members, {T1: 3, T3: 2})
    assert result == {"A": a(T1={0, 1, 2}), "B": a(T3={0, 1})}


def test_first_assignment_num_members_greater_than_total_num_partitions() -> None:
    members = {"A": member(T3), "B": member(T3), "C": member(T3)}
    result = uniform_assign(members, {T3: 2})
    assert result == {"A": a(T3={0}), "B": a(T3={1}), "C": {}}


def test_validity_and_balance_for_large_sample_set() -> None:
    topics = {uuid.UUID(int=random.Random(i).getrandbits(128)): 3 for i in range(1, 100)}
    members = {f"member{i}": MemberSpec(frozenset(topics)) for i in range(1, 50)}
    count = sizes(uniform_assign(members, topics))
    assert max(count.values()) - min(count.values()) <= 1


def test_reassignment_for_two_members_two_topics_given_unbalanced_prev_assignment() -> None:
    members = {
        "A": member(T1, T2, current={T1: {0, 1}, T2: {0, 1}}),
        "B": member(T1, T2, current={T1: {2}, T2: {2}}),
    }
    result = uniform_assign(members, {T1: 3, T2: 3})
    assert result == {"A": a(T1={0, 1}, T2={0}), "B": a(T1={2}, T2={1, 2})}


def test_reassignment_when_partitions_are_added_for_two_members_two_topics() -> None:
    # Nothing moves; which member takes which new partitions differs from Kafka's hash order.
    members = {
        "A": member(T1, T2, current={T1: {0, 2}, T2: {0}}),
        "B": member(T1, T2, current={T1: {1}, T2: {1, 2}}),
    }
    result = uniform_assign(members, {T1: 6, T2: 5})
    assert result == {"A": a(T1={0, 2, 3, 4, 5}, T2={0}), "B": a(T1={1}, T2={1, 2, 3, 4})}


def test_reassignment_when_one_member_added_two_members_two_topics() -> None:
    members = {
        "A": member(T1, T2, current={T1: {0, 2}, T2: {0}}),
        "B": member(T1, T2, current={T1: {1}, T2: {1, 2}}),
        "C": member(T1, T2),
    }
    result = uniform_assign(members, {T1: 3, T2: 3})
    assert result == {"A": a(T1={0, 2}), "B": a(T1={1}, T2={1}), "C": a(T2={0, 2})}


def test_reassignment_when_one_member_removed_three_members_two_topics() -> None:
    # Member C (which had T1:2 and T2:2) left; the survivors keep theirs and share C's.
    members = {
        "A": member(T1, T2, current={T1: {0}, T2: {0}}),
        "B": member(T1, T2, current={T1: {1}, T2: {1}}),
    }
    result = uniform_assign(members, {T1: 3, T2: 3})
    assert result == {"A": a(T1={0, 2}, T2={0}), "B": a(T1={1}, T2={1, 2})}


def test_reassignment_when_one_subscription_removed_two_members_two_topics() -> None:
    members = {
        "A": member(T2, current={T1: {0}, T2: {0}}),
        "B": member(T2, current={T1: {1}, T2: {1}}),
    }
    result = uniform_assign(members, {T1: 2, T2: 2})
    assert result == {"A": a(T2={0}), "B": a(T2={1})}


def test_extra_partition_goes_to_member_holding_most() -> None:
    # 5 partitions over 2 members after a third left: B holds 2, A holds 1; B keeps both.
    members = {"A": member(T1, current={T1: {0}}), "B": member(T1, current={T1: {1, 2}})}
    result = uniform_assign(members, {T1: 5})
    assert result == {"A": a(T1={0, 3}), "B": a(T1={1, 2, 4})}


def test_invalid_current_assignment_is_cleaned() -> None:
    # Out-of-range partitions and unknown topics are dropped; a partition claimed twice stays
    # with the first claimant in member-id order.
    members = {
        "A": member(T1, current={T1: {0, 7}, MISSING: {0}}),
        "B": member(T1, current={T1: {0, 1}}),
    }
    result = uniform_assign(members, {T1: 4})
    assert result == {"A": a(T1={0, 2}), "B": a(T1={1, 3})}


def test_homogeneous_path_rejects_heterogeneous_members() -> None:
    with pytest.raises(ValueError):
        uniform.assign_homogeneous({"A": member(T1), "B": member(T2)}, {T1: 1, T2: 1})


# --- uniform, heterogeneous (UniformHeterogeneousAssignmentBuilderTest) -----------------------


def test_two_members_no_topic_subscription() -> None:
    assert uniform_assign({"A": member(), "B": member()}, {T1: 3}) == {"A": {}, "B": {}}


def test_two_members_subscribed_to_nonexistent_topics() -> None:
    members = {"A": member(T3), "B": member(T2)}
    assert uniform_assign(members, {T1: 3}) == {"A": {}, "B": {}}


def test_first_assignment_two_members_two_topics() -> None:
    members = {"A": member(T1, T3), "B": member(T3)}
    result = uniform_assign(members, {T1: 3, T3: 6})
    assert result == {"A": a(T1={0, 1, 2}, T3={4}), "B": a(T3={0, 1, 2, 3, 5})}


def test_heterogeneous_first_assignment_num_members_greater_than_total_num_partitions() -> None:
    members = {"A": member(T3), "B": member(T3), "C": member(T1)}
    result = uniform_assign(members, {T3: 1, T1: 2})
    assert result == {"A": a(T3={0}), "B": {}, "C": a(T1={0, 1})}


def test_reassignment_for_two_members_three_topics_given_unbalanced_prev_assignment() -> None:
    members = {
        "A": member(T1, current={T1: {0, 1, 2}}),
        "B": member(T1, T2, current={T1: {3}, T2: {0}}),
        "C": member(T1, T2, T3, current={T1: {4, 5}, T2: {1, 2, 3}, T3: {0, 1, 2, 3}}),
    }
    result = uniform_assign(members, {T1: 6, T2: 4, T3: 4})
    assert result == {
        "A": a(T1={0, 1, 2, 5}),
        "B": a(T1={3}, T2={0, 1, 2, 3}),
        "C": a(T1={4}, T3={0, 1, 2, 3}),
    }


def test_reassignment_when_partitions_are_added_for_two_members() -> None:
    members = {
        "A": member(T1, T3, current={T1: {0, 1, 2, 3}, T3: {0, 1}}),
        "B": member(T1, T2, T3, T4, current={T2: {0, 1, 2}, T4: {0, 1, 2}}),
    }
    result = uniform_assign(members, {T1: 6, T2: 5, T3: 3, T4: 3})
    assert result == {
        "A": a(T1={0, 1, 2, 3, 4, 5}, T3={0, 1, 2}),
        "B": a(T2={0, 1, 2, 3, 4}, T4={0, 1, 2}),
    }


def test_reassignment_when_one_member_added_and_partitions_added_two_members_two_topics() -> None:
    members = {
        "A": member(T1, current={T1: {0, 2}, T2: {0}}),
        "B": member(T1, T2, current={T1: {1}, T2: {1, 2}}),
        "C": member(T1, T2),
    }
    result = uniform_assign(members, {T1: 6, T2: 7})
    assert result == {
        "A": a(T1={0, 2, 3, 4, 5}),
        "B": a(T1={1}, T2={1, 2, 6}),
        "C": a(T2={0, 3, 4, 5}),
    }


def test_reassignment_when_one_member_removed_three_members_three_topics() -> None:
    members = {
        "A": member(T1, T3, current={T1: {0, 1, 2}, T3: {0, 1}}),
        "B": member(T2, current={T2: {3, 4, 5, 6}}),
    }
    result = uniform_assign(members, {T1: 3, T2: 8, T3: 3})
    assert result == {"A": a(T1={0, 1, 2}, T3={0, 1, 2}), "B": a(T2=set(range(8)))}


def test_heterogeneous_reassignment_when_one_subscription_removed() -> None:
    members = {
        "A": member(T1, current={T1: {0, 2}, T2: {1, 3}}),
        "B": member(T1, T2, current={T1: {1}, T2: {0, 2, 4}}),
    }
    result = uniform_assign(members, {T1: 3, T2: 5})
    assert result == {"A": a(T1={0, 1, 2}), "B": a(T2={0, 1, 2, 3, 4})}


def test_reassignment_when_topic_partitions_run_out_and_members_have_no_partitions() -> None:
    members = {
        "A": member(T1, T2, T3, current={T1: {0, 1}, T2: {0, 1}, T3: {0, 1}}),
        "B": member(T1, T2, T3),
    }
    partitions = {T1: 2, T2: 2, T3: 2}
    # Kafka's test drives the heterogeneous builder with identical subscriptions.
    result = uniform.assign_heterogeneous(members, partitions)
    assert result == {"A": a(T2={0}, T3={0, 1}), "B": a(T1={0, 1}, T2={1})}
    # ``assign`` takes the homogeneous path, which keeps A's first three partitions.
    result = uniform_assign(members, partitions)
    assert result == {"A": a(T1={0, 1}, T2={0}), "B": a(T2={1}, T3={0, 1})}


def test_first_assignment_with_two_members_including_one_without_subscriptions() -> None:
    result = uniform_assign({"A": member(T1), "B": member()}, {T1: 3})
    assert result == {"A": a(T1={0, 1, 2}), "B": {}}


def test_overlapping_subscriptions_are_balanced_per_topic() -> None:
    # The limitation Kafka documents: A on T1, B on T1 and T2, C on T2. Each topic is balanced
    # among its own subscribers (9/10 and 10/11), but the group is 9/10/11, not 10/10/10.
    members = {"A": member(T1), "B": member(T1, T2), "C": member(T2)}
    result = uniform_assign(members, {T1: 15, T2: 15})
    assert sizes(result) == {"A": 9, "B": 10, "C": 11}
    check_heterogeneous_balance(members, result)


# --- range (RangeAssignorTest) ----------------------------------------------------------------


def test_one_member_no_topic() -> None:
    assert range_assign({"A": member()}, {T1: 3}) == {"A": {}}


def test_range_one_member_subscribed_to_nonexistent_topic() -> None:
    assert range_assign({"A": member(MISSING)}, {T1: 3}) == {"A": {}}


def test_first_assignment_two_members_two_topics_same_subscriptions() -> None:
    members = {"A": member(T1, T3), "B": member(T1, T3)}
    result = range_assign(members, {T1: 3, T3: 2})
    assert result == {"A": a(T1={0, 1}, T3={0}), "B": a(T1={2}, T3={1})}


def test_first_assignment_three_members_three_topics_different_subscriptions() -> None:
    members = {"A": member(T1, T2), "B": member(T3), "C": member(T2, T3)}
    result = range_assign(members, {T1: 3, T2: 3, T3: 2})
    assert result == {
        "A": a(T1={0, 1, 2}, T2={0, 1}),
        "B": a(T3={0}),
        "C": a(T2={2}, T3={1}),
    }


def test_first_assignment_num_members_greater_than_num_partitions() -> None:
    members = {"A": member(T1, T3), "B": member(T1, T3), "C": member(T1, T3)}
    result = range_assign(members, {T1: 3, T3: 2})
    assert result == {"A": a(T1={0}, T3={0}), "B": a(T1={1}, T3={1}), "C": a(T1={2})}


def test_static_membership() -> None:
    members = {"A": member(T1, instance_id="instanceA"), "B": member(T1, instance_id="instanceB")}
    before = range_assign(members, {T1: 3})
    del members["A"]
    members["memberA1"] = member(T1, instance_id="instanceA")
    after = range_assign(members, {T1: 3})
    assert after["memberA1"] == before["A"]
    assert after["B"] == before["B"]


def test_mixed_static_membership() -> None:
    members = {
        "A": member(T1, instance_id="instanceA"),
        "C": member(T1, instance_id="instanceC"),
        "B": member(T1),
    }
    before = range_assign(members, {T1: 5})
    # Static members first, by instance id, then dynamic ones by member id.
    assert before == {"A": a(T1={0, 1}), "C": a(T1={2, 3}), "B": a(T1={4})}
    del members["A"]
    members["memberA1"] = member(T1, instance_id="instanceA")
    after = range_assign(members, {T1: 5})
    assert after == {"memberA1": before["A"], "B": before["B"], "C": before["C"]}


def test_reassignment_num_members_greater_than_num_partitions_when_one_member_added() -> None:
    members = {
        "A": member(T1, T2, current={T1: {0}, T2: {0}}),
        "B": member(T1, T2, current={T1: {1}, T2: {1}}),
        "C": member(T1, T2),
    }
    result = range_assign(members, {T1: 2, T2: 2})
    assert result == {"A": a(T1={0}, T2={0}), "B": a(T1={1}, T2={1}), "C": {}}


def test_reassignment_when_one_partition_added_for_two_members_two_topics() -> None:
    members = {
        "A": member(T1, T2, current={T1: {0, 1}, T2: {0, 1}}),
        "B": member(T1, T2, current={T1: {2}, T2: {2}}),
    }
    result = range_assign(members, {T1: 4, T2: 4})
    assert result == {"A": a(T1={0, 1}, T2={0, 1}), "B": a(T1={2, 3}, T2={2, 3})}


def test_range_reassignment_when_one_member_added_after_initial_assignment() -> None:
    members = {
        "A": member(T1, T2, current={T1: {0, 1}, T2: {0, 1}}),
        "B": member(T1, T2, current={T1: {2}, T2: {2}}),
        "C": member(T1, T2),
    }
    result = range_assign(members, {T1: 3, T2: 3})
    assert result == {"A": a(T1={0}, T2={0}), "B": a(T1={1}, T2={1}), "C": a(T1={2}, T2={2})}


def test_reassignment_when_one_member_added_and_one_partition_after_initial_assignment() -> None:
    members = {
        "A": member(T1, T2, current={T1: {0, 1}, T2: {0, 1}}),
        "B": member(T1, T2, current={T1: {2}, T2: {2}}),
        "C": member(T1),
    }
    result = range_assign(members, {T1: 4, T2: 3})
    assert result == {"A": a(T1={0, 1}, T2={0, 1}), "B": a(T1={2}, T2={2}), "C": a(T1={3})}


def test_range_reassignment_when_one_member_removed_after_initial_assignment() -> None:
    members = {"B": member(T1, T2, current={T1: {2}, T2: {2}})}
    result = range_assign(members, {T1: 3, T2: 3})
    assert result == {"B": a(T1={0, 1, 2}, T2={0, 1, 2})}


def test_reassignment_when_multiple_subscriptions_removed_after_initial_assignment() -> None:
    members = {
        "A": member(T1, current={T1: {0, 1, 2}, T2: {0}}),
        "B": member(T1, T2, T3, current={T2: {1}}),
        "C": member(T2, current={T2: {2}, T3: {0, 1}}),
    }
    result = range_assign(members, {T1: 3, T2: 3, T3: 2})
    assert result == {
        "A": a(T1={0, 1}),
        "B": a(T1={2}, T2={0, 1}, T3={0, 1}),
        "C": a(T2={2}),
    }


# --- properties -------------------------------------------------------------------------------

_topic_ids = st.lists(st.integers(1, 2**128 - 1), min_size=1, max_size=5, unique=True)


@st.composite
def groups(
    draw: st.DrawFn, homogeneous: bool = False, with_current: bool = True
) -> tuple[Members, dict[TopicId, int]]:
    """A group of members over a few topics; current assignments may be stale or invalid."""
    topics = [uuid.UUID(int=i) for i in draw(_topic_ids)]
    partitions = {t: draw(st.integers(0, 12)) for t in topics}
    candidates = [*topics, MISSING]
    member_ids = draw(st.lists(st.text("abcdef", min_size=1, max_size=3), max_size=8, unique=True))
    shared = frozenset(draw(st.lists(st.sampled_from(candidates), unique=True)))
    members: Members = {}
    for member_id in member_ids:
        subscribed = shared
        if not homogeneous:
            subscribed = frozenset(draw(st.lists(st.sampled_from(candidates), unique=True)))
        current: dict[TopicId, frozenset[int]] = {}
        if with_current:
            for t in draw(st.lists(st.sampled_from(candidates), unique=True)):
                current[t] = frozenset(draw(st.lists(st.integers(0, 14), max_size=6)))
        instance_id = draw(st.none() | st.sampled_from(["i1", "i2", "i3"]))
        members[member_id] = MemberSpec(subscribed, current, instance_id)
    return members, partitions


def reordered(mapping: Mapping[K, V], rng: random.Random) -> dict[K, V]:
    keys = list(mapping)
    rng.shuffle(keys)
    return {k: mapping[k] for k in keys}


def shuffled(
    members: Members, partitions: dict[TopicId, int], rng: random.Random
) -> tuple[Members, dict[TopicId, int]]:
    """The same input, with every mapping (and set) rebuilt in another order."""
    new_members: Members = {}
    for member_id, spec in reordered(members, rng).items():
        current = {t: frozenset(rng.sample(sorted(ps), len(ps))) for t, ps in spec.current.items()}
        subscribed = frozenset(rng.sample(sorted(spec.subscribed), len(spec.subscribed)))
        new_members[member_id] = MemberSpec(subscribed, reordered(current, rng), spec.instance_id)
    return new_members, reordered(partitions, rng)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=300, deadline=None)
@given(group=groups(), seed=st.integers(0, 2**32))
def test_property_valid_and_deterministic(
    name: str, group: tuple[Members, dict[TopicId, int]], seed: int
) -> None:
    members, partitions = group
    result = ASSIGNORS[name](members, partitions)
    check_valid(members, partitions, result)
    assert ASSIGNORS[name](*shuffled(members, partitions, random.Random(seed))) == result


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True))
def test_property_uniform_homogeneous_balance(group: tuple[Members, dict[TopicId, int]]) -> None:
    members, partitions = group
    count = sizes(uniform_assign(members, partitions)).values()
    assert not count or max(count) - min(count) <= 1


@settings(max_examples=300, deadline=None)
@given(group=groups())
def test_property_uniform_heterogeneous_balance(group: tuple[Members, dict[TopicId, int]]) -> None:
    members, partitions = group
    check_heterogeneous_balance(members, uniform_assign(members, partitions))


@settings(max_examples=300, deadline=None)
@given(group=groups())
def test_property_uniform_is_stable(group: tuple[Members, dict[TopicId, int]]) -> None:
    """Fed its own output as the current assignment, uniform changes nothing."""
    members, partitions = group
    result = uniform_assign(members, partitions)
    assert uniform_assign(with_current(members, result), partitions) == result


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True, with_current=False), newcomer=st.text("xyz", min_size=1))
def test_property_uniform_sticky_when_member_added(
    group: tuple[Members, dict[TopicId, int]], newcomer: str
) -> None:
    """Existing members only give partitions up, and only the newcomer's share moves.

    That share is at most ``ceil(P / (M + 1))``: the least any balanced assignment can move.
    """
    members, partitions = group
    before = uniform_assign(members, partitions)
    shared = next(iter(members.values())).subscribed if members else frozenset()
    grown = {**with_current(members, before), newcomer: MemberSpec(shared)}
    after = uniform_assign(grown, partitions)
    for member_id, assigned in before.items():
        for t, ps in after[member_id].items():
            assert ps <= assigned.get(t, frozenset())
    total = sum(sizes(before).values())
    moved = total - sum(sizes({m: after[m] for m in before}).values())
    assert moved == sizes(after)[newcomer] <= math.ceil(total / len(grown))


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True, with_current=False), data=st.data())
def test_property_uniform_sticky_when_member_removed(
    group: tuple[Members, dict[TopicId, int]], data: st.DataObject
) -> None:
    """The survivors keep everything they had and share out the leaver's partitions."""
    members, partitions = group
    if len(members) < 2:
        return
    before = uniform_assign(members, partitions)
    leaver = data.draw(st.sampled_from(sorted(members)))
    survivors = {m: s for m, s in with_current(members, before).items() if m != leaver}
    after = uniform_assign(survivors, partitions)
    for member_id in survivors:
        for t, ps in before[member_id].items():
            assert ps <= after[member_id][t]


@settings(max_examples=300, deadline=None)
@given(group=groups())
def test_property_range_contiguous_and_co_partitioned(
    group: tuple[Members, dict[TopicId, int]],
) -> None:
    members, partitions = group
    result = range_assign(members, partitions)
    order = range_assignor.member_order(members)
    for t, count in partitions.items():
        subscribers = [m for m in order if t in members[m].subscribed]
        if not subscribers:
            continue
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for position, m in enumerate(subscribers):
            end = start + quota + (position < extra)
            assert result[m].get(t, frozenset()) == frozenset(range(start, end))
            start = end
    # Co-partitioning: when all members subscribe to the same topics, all of the same partition
    # count, each member gets the same partition numbers of every topic.
    subscriptions = {s.subscribed & frozenset(partitions) for s in members.values()}
    if len(subscriptions) == 1 and len({partitions[t] for t in subscriptions.pop()}) == 1:
        for m, spec in members.items():
            assert len({result[m].get(t) for t in spec.subscribed if t in partitions}) == 1


def test_large_group() -> None:
    """1000 members over 100 topics of 10 partitions (the size the performance target is for)."""
    topics = {uuid.UUID(int=random.Random(i).getrandbits(128)): 10 for i in range(100)}
    members = {f"member-{i:04d}": MemberSpec(frozenset(topics)) for i in range(1000)}
    result = uniform_assign(members, topics)
    assert set(sizes(result).values()) == {1}
    # Range splits each topic alone: the first ten members get partition i of every topic.
    result = range_assign(members, topics)
    for i in range(10):
        assert result[f"member-{i:04d}"] == {t: frozenset({i}) for t in topics}
    assert sum(sizes(result).values()) == 1000

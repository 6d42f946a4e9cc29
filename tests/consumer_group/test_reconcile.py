"""One member's reconciliation step, named after Kafka's CurrentAssignmentBuilderTest."""

from __future__ import annotations

import uuid

import pytest

from rafka_actors.consumer_group.reconcile import FencedMember, reconcile
from rafka_actors.consumer_group.state import Assignment, MemberState, Reconciliation

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
S, UNREVOKED, UNRELEASED = (
    MemberState.STABLE,
    MemberState.UNREVOKED_PARTITIONS,
    MemberState.UNRELEASED_PARTITIONS,
)


def a(**topics: set[int]) -> Assignment:
    ids = {"t1": T1, "t2": T2}
    return {ids[name]: frozenset(parts) for name, parts in topics.items()}


def nobody_else(topic_id: uuid.UUID, partition: int) -> bool:
    return False


def others_own(*owned: tuple[uuid.UUID, int]):  # type: ignore[no-untyped-def]
    return lambda topic_id, partition: (topic_id, partition) in owned


def member(epoch: int, state: MemberState = S, **kw: Assignment) -> Reconciliation:
    return Reconciliation(epoch, epoch - 1, state, kw.get("assigned", {}), kw.get("pending", {}))


def test_stable_to_stable() -> None:
    current = member(10, assigned=a(t1={1, 2}, t2={3, 4}))
    updated = reconcile(current, 11, a(t1={1, 2}, t2={3, 4}), nobody_else, None)
    assert updated == Reconciliation(11, 10, S, a(t1={1, 2}, t2={3, 4}), {})


def test_stable_to_stable_with_new_partitions() -> None:
    current = member(10, assigned=a(t1={1, 2}, t2={3, 4}))
    updated = reconcile(current, 11, a(t1={1, 2, 3}, t2={3, 4, 5}), nobody_else, None)
    assert updated == Reconciliation(11, 10, S, a(t1={1, 2, 3}, t2={3, 4, 5}), {})


def test_stable_to_unrevoked_partitions() -> None:
    current = member(10, assigned=a(t1={1, 2}, t2={3, 4}))
    updated = reconcile(current, 11, a(t1={2, 3}, t2={4, 5}), nobody_else, None)
    assert updated == Reconciliation(10, 10, UNREVOKED, a(t1={2}, t2={4}), a(t1={1}, t2={3}))


def test_stable_to_unreleased_partitions() -> None:
    current = member(10, assigned=a(t1={1, 2}, t2={3, 4}))
    updated = reconcile(
        current, 11, a(t1={1, 2, 3}, t2={3, 4, 5}), others_own((T1, 3), (T2, 5)), None
    )
    assert updated == Reconciliation(11, 10, UNRELEASED, a(t1={1, 2}, t2={3, 4}), {})


def test_stable_to_unreleased_partitions_with_owned_topic_partitions_not_having_revoked() -> None:
    # The member already dropped what it would be asked to revoke: straight to the target.
    current = member(10, assigned=a(t1={1, 2}, t2={3, 4}))
    updated = reconcile(current, 11, a(t1={2, 3}, t2={4}), others_own((T1, 3)), a(t1={2}, t2={4}))
    assert updated == Reconciliation(11, 10, UNRELEASED, a(t1={2}, t2={4}), {})


def test_unrevoked_partitions_to_stable() -> None:
    current = member(10, UNREVOKED, assigned=a(t1={2}, t2={4}), pending=a(t1={1}, t2={3}))
    updated = reconcile(current, 11, a(t1={2, 3}, t2={4, 5}), nobody_else, a(t1={2}, t2={4}))
    assert updated == Reconciliation(11, 10, S, a(t1={2, 3}, t2={4, 5}), {})


def test_remains_in_unrevoked_partitions() -> None:
    current = member(10, UNREVOKED, assigned=a(t1={2}, t2={4}), pending=a(t1={1}, t2={3}))
    target = a(t1={2, 3}, t2={4, 5})
    assert reconcile(current, 12, target, nobody_else, None) is current
    assert reconcile(current, 12, target, nobody_else, a(t1={1, 2}, t2={4})) is current


def test_unrevoked_partitions_to_unrevoked_partitions() -> None:
    # The target moved again while the member was revoking: it revokes the new extras next.
    current = member(10, UNREVOKED, assigned=a(t1={2, 3}, t2={5, 6}), pending=a(t1={1}, t2={4}))
    updated = reconcile(current, 12, a(t1={3}, t2={6}), nobody_else, a(t1={2, 3}, t2={5, 6}))
    assert updated == Reconciliation(11, 10, UNREVOKED, a(t1={3}, t2={6}), a(t1={2}, t2={5}))


def test_unrevoked_partitions_to_unreleased_partitions() -> None:
    current = member(10, UNREVOKED, assigned=a(t1={2, 3}, t2={5, 6}), pending=a(t1={1}, t2={4}))
    updated = reconcile(
        current, 11, a(t1={2, 3, 4}, t2={5, 6, 7}), others_own((T1, 4), (T2, 7)), a(t1={2, 3})
    )
    assert updated == Reconciliation(11, 10, UNRELEASED, a(t1={2, 3}, t2={5, 6}), {})


def test_unreleased_partitions_to_stable() -> None:
    current = member(11, UNRELEASED, assigned=a(t1={2, 3}, t2={5, 6}))
    updated = reconcile(current, 12, a(t1={2, 3}, t2={5, 6}), nobody_else, None)
    assert updated == Reconciliation(12, 11, S, a(t1={2, 3}, t2={5, 6}), {})


def test_unreleased_partitions_to_stable_with_new_partitions() -> None:
    current = member(11, UNRELEASED, assigned=a(t1={2, 3}, t2={5, 6}))
    updated = reconcile(current, 11, a(t1={2, 3, 4}, t2={5, 6, 7}), nobody_else, None)
    assert updated == Reconciliation(11, 11, S, a(t1={2, 3, 4}, t2={5, 6, 7}), {})


def test_unreleased_partitions_to_unreleased_partitions() -> None:
    current = member(11, UNRELEASED, assigned=a(t1={2, 3}, t2={5, 6}))
    target = a(t1={2, 3, 4}, t2={5, 6, 7})
    updated = reconcile(current, 11, target, others_own((T1, 4), (T2, 7)), None)
    assert updated == Reconciliation(11, 11, UNRELEASED, a(t1={2, 3}, t2={5, 6}), {})


def test_unreleased_partitions_to_unrevoked_partitions() -> None:
    current = member(11, UNRELEASED, assigned=a(t1={2, 3}, t2={5, 6}))
    updated = reconcile(current, 12, a(t1={3}, t2={6}), nobody_else, None)
    assert updated == Reconciliation(11, 11, UNREVOKED, a(t1={3}, t2={6}), a(t1={2}, t2={5}))


def test_unknown_state() -> None:
    current = member(11, MemberState.UNKNOWN, assigned=a(t1={2, 3}))
    with pytest.raises(FencedMember):
        reconcile(current, 11, a(t1={3}), nobody_else, None)
    with pytest.raises(FencedMember):
        reconcile(current, 11, a(t1={3}), nobody_else, a(t1={2}))
    # Owning nothing, it is reconciled afresh: nothing to revoke, so straight to the target.
    updated = reconcile(current, 11, a(t1={3}), nobody_else, {})
    assert updated == Reconciliation(11, 11, S, a(t1={3}), {})

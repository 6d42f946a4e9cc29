"""Moving one member one step towards its target assignment (Kafka's CurrentAssignmentBuilder).

For every topic the member's current partitions split three ways against the target:

    kept               = assigned & target
    pending revocation = assigned - kept
    pending assignment = target - kept - (partitions another member still owns)

Revoke before assign: while the member still owns a partition it must give up, it stays on
its epoch in UNREVOKED_PARTITIONS and is asked to drop those partitions; it moves to the target
epoch only once a heartbeat reports them gone. Never double-assign: a target partition that
another member still holds is held back (UNRELEASED_PARTITIONS) and handed over on a later
heartbeat, once its owner has let it go. A member thus advances by at most one step per
heartbeat, and nobody waits for anybody else's barrier.

`owned` is what the member reported owning in this heartbeat, or None if it did not say
(the request field is null when unchanged): then it is assumed to still own everything.
"""

from __future__ import annotations

from collections.abc import Callable

from .state import Assignment, MemberState, Reconciliation, TopicId

OwnedElsewhere = Callable[[TopicId, int], bool]
Owned = dict[TopicId, frozenset[int]] | None


class FencedMember(Exception):
    """The member must abandon all its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(
    current: Reconciliation,
    target_epoch: int,
    target: Assignment,
    owned_elsewhere: OwnedElsewhere,
    owned: Owned,
) -> Reconciliation:
    state = current.state
    if state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(current, current.member_epoch, target_epoch, target, owned_elsewhere, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.pending_revocation):
            return current
        return _next(
            current, current.member_epoch + 1, target_epoch, target, owned_elsewhere, owned
        )
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(current, current.member_epoch, target_epoch, target, owned_elsewhere, owned)
    # UNKNOWN: written by a newer broker we were downgraded from; start the member afresh
    if owned is None or any(owned.values()):
        raise FencedMember("the member is in an unknown state")
    return _next(current, target_epoch, target_epoch, target, owned_elsewhere, owned)


def _owns_any(owned: Owned, partitions: Assignment) -> bool:
    if owned is None:
        return True
    for topic_id, held in owned.items():
        pending = partitions.get(topic_id)
        if pending and not pending.isdisjoint(held):
            return True
    return False


def _next(
    current: Reconciliation,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    owned_elsewhere: OwnedElsewhere,
    owned: Owned,
) -> Reconciliation:
    kept: Assignment = {}
    revoking: Assignment = {}
    adding: Assignment = {}
    unreleased = False
    for topic_id in target.keys() | current.assigned.keys():
        wanted = target.get(topic_id, frozenset())
        have = current.assigned.get(topic_id, frozenset())
        keep = have & wanted
        if keep:
            kept[topic_id] = keep
        if have - keep:
            revoking[topic_id] = have - keep
        missing = wanted - keep
        free = frozenset(p for p in missing if not owned_elsewhere(topic_id, p))
        unreleased = unreleased or len(free) != len(missing)
        if free:
            adding[topic_id] = free

    if revoking and _owns_any(owned, revoking):
        return _build(current, MemberState.UNREVOKED_PARTITIONS, member_epoch, kept, revoking)
    for topic_id, partitions in adding.items():
        kept[topic_id] = kept.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _build(current, state, target_epoch, kept, {})


def _build(
    current: Reconciliation,
    state: MemberState,
    member_epoch: int,
    assigned: Assignment,
    pending_revocation: Assignment,
) -> Reconciliation:
    # Kafka's updateMemberEpoch: the previous epoch is always the one the member had, so a
    # member whose epoch-bump response got lost can come back with it (see heartbeat.py).
    return Reconciliation(member_epoch, current.member_epoch, state, assigned, pending_revocation)

"""Members coming, changing, leaving and being fenced, and the records each of those writes.

Fencing (Kafka's `consumerGroupFenceMember`) removes a member for good: its three records get
one tombstone, its partitions are free for others, and the group epoch moves so the assignor
runs again. It happens when a member leaves with epoch -1, when its session times out, and
when it sits on partitions it was asked to revoke past its rebalance timeout.

A static member (one with an instance id) that leaves with epoch -2 only steps out: it keeps
its assignment, the group epoch stays, and a new member with the same instance id takes its
place, and its partitions, with no rebalance (`replace`). If nobody comes back within the
session timeout, it is fenced like any other.
"""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode

from ..group_common.effects import Effects, MemberFenced
from ..group_common.ops import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from .ops import (
    ConsumerGroupHeartbeatOp,
    ConsumerGroupHeartbeatOpResp,
)
from .reconcile import Owned, reconcile
from .records import (
    ConsumerCurrentAssignmentRecord,
    ConsumerGroupMetadataRecord,
    ConsumerMemberMetadataRecord,
    ConsumerMemberTombstone,
    ConsumerTargetMemberRecord,
    ConsumerTargetMetadataRecord,
    to_rows,
)
from .state import (
    ClassicMembership,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    OtherGroup,
    Reconciliation,
    Subscription,
)
from .subscription import metadata_hash, subscribed_names
from .target import maybe_assign


class Refusal(Exception):
    """A heartbeat answered with an error; raised before any change, caught by the handler."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def response(self) -> ConsumerGroupHeartbeatOpResp:
        # As Kafka's: an error answer carries no member id or epoch.
        return ConsumerGroupHeartbeatOpResp(self.code, self.message)


def validate_epoch(member: ConsumerMember, received: int, owned: Owned) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid, with KAFKA-19233's rejoin at 0."""
    current = member.member_epoch
    if received == 0 or received == current:
        return
    if received > current:
        raise Refusal(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({current}). The member must abandon all its "
            "partitions and rejoin.",
        )
    # A member whose epoch-bump response got lost comes back with its previous epoch and
    # (a subset of) the partitions it has: that is no zombie.
    previous = member.current.previous_member_epoch
    if received != previous or not _is_subset(owned, member.current.assigned):
        raise Refusal(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({current}). The member must abandon all its "
            "partitions and rejoin.",
        )


def _is_subset(owned: Owned, assigned: dict) -> bool:
    if owned is None:
        return False
    return all(parts <= assigned.get(topic_id, frozenset()) for topic_id, parts in owned.items())


# -- records (each written through Effects.write: records.py's apply makes its change) -------
def store_member(
    group: ConsumerGroup,
    member_id: str,
    s: Subscription,
    classic: ClassicMembership | None,
    fx: Effects,
) -> ConsumerMember:
    """Add the member, or change its subscription; the member as the group now holds it."""
    fx.write(
        group,
        ConsumerMemberMetadataRecord(
            group.group_id,
            member_id,
            s.instance_id,
            s.rack_id,
            s.client_id,
            s.client_host,
            s.topic_names,
            s.topic_regex,
            s.rebalance_timeout_ms,
            s.server_assignor,
            -1 if classic is None else classic.session_timeout_ms,
            () if classic is None else classic.protocols,
        ),
    )
    return group.members[member_id]


def set_current(
    group: ConsumerGroup, member: ConsumerMember, current: Reconciliation, fx: Effects
) -> None:
    fx.write(
        group,
        ConsumerCurrentAssignmentRecord(
            group.group_id,
            member.member_id,
            current.member_epoch,
            current.previous_member_epoch,
            int(current.state),
            to_rows(current.assigned),
            to_rows(current.pending_revocation),
        ),
    )
    if current.state is MemberState.UNREVOKED_PARTITIONS:
        # It must let go of what it is asked to revoke within its rebalance timeout.
        member.rebalance_deadline = fx.now + max(member.subscription.rebalance_timeout_ms, 0)
        member.rebalance_epoch = current.member_epoch
    else:
        member.rebalance_deadline = None


def bump_epoch_if_metadata_changed(
    group: ConsumerGroup, fx: Effects, reason: str, *, force: bool = False
) -> None:
    """Recompute the subscribed topics' metadata hash when it may have moved; bump the group
    epoch if it did, or if `force` (a member joined, left or changed its subscription)."""
    image = fx.topics
    if not force and group.topics_version == image.version:
        return
    group.topics_version = image.version
    new_hash = metadata_hash(subscribed_names(group.members.values(), image), image)
    if new_hash == group.metadata_hash and not force:
        return
    epoch = group.group_epoch + 1
    fx.write(
        group,
        ConsumerGroupMetadataRecord(group.group_id, group.cgp_id, epoch, new_hash, reason, fx.now),
    )


# -- static members coming back --------------------------------------------------------------
def successor(static: ConsumerMember, member_id: str) -> ConsumerMember:
    """The new member that takes a departed static member's place and assignment."""
    current = dataclasses.replace(static.current, member_epoch=0, previous_member_epoch=0)
    return ConsumerMember(member_id, static.subscription, current)


def replace(group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember, fx: Effects) -> None:
    """`new` takes `old`'s place, target and assignment (it is in the group after this)."""
    target = group.target.get(old.member_id, {})
    fx.write(group, ConsumerMemberTombstone(group.group_id, old.member_id))
    member = store_member(group, new.member_id, new.subscription, new.classic, fx)
    fx.write(group, ConsumerTargetMemberRecord(group.group_id, new.member_id, to_rows(target)))
    set_current(group, member, new.current, fx)


# -- leaving and fencing ---------------------------------------------------------------------
def leave(
    group: ConsumerGroup | OtherGroup | None,
    op: ConsumerGroupHeartbeatOp,
    waiter: int,
    fx: Effects,
) -> ConsumerGroup | OtherGroup | None:
    if not isinstance(group, ConsumerGroup):
        raise Refusal(ErrorCode.group_id_not_found, f"Consumer group {op.group_id} not found.")
    if op.instance_id is None:
        member = group.members.get(op.member_id)
        if member is None:
            raise Refusal(
                ErrorCode.unknown_member_id,
                f"Member {op.member_id} is not a member of group {op.group_id}.",
            )
    else:
        member = group.static_member(op.instance_id)
        if member is None:
            raise Refusal(ErrorCode.unknown_member_id, f"Instance id {op.instance_id} is unknown.")
        if member.member_id != op.member_id:
            raise Refusal(
                ErrorCode.fenced_instance_id,
                f"Static member {op.member_id} with instance id {op.instance_id} was fenced by "
                f"member {member.member_id}.",
            )
        if op.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            _step_out(group, member, fx)
            fx.reply(waiter, _left(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH))
            return group
    fence(group, member, fx, f"member {member.member_id} left")
    fx.reply(waiter, _left(member.member_id, op.member_epoch))
    return group


def downgrade_follows(group: ConsumerGroup, gone: ConsumerMember, fx: Effects) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember, once `gone` is out: the last
    consumer-protocol member went, classic members remain, and the migration policy and the
    classic group size allow a downgrade."""
    config = fx.config
    return (
        gone.classic is None
        and bool(group.members)
        and config.downgrade_enabled()
        and len(group.members) <= config.max_size
        and group.uses_classic_protocol_only()
    )


def _left(member_id: str, epoch: int) -> ConsumerGroupHeartbeatOpResp:
    return ConsumerGroupHeartbeatOpResp(ErrorCode.none, None, member_id, epoch)


def _step_out(group: ConsumerGroup, member: ConsumerMember, fx: Effects) -> None:
    """A static member's temporary leave: it keeps its assignment; no epoch bump."""
    away = dataclasses.replace(
        member.current, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={}
    )
    set_current(group, member, away, fx)


def fence(group: ConsumerGroup, member: ConsumerMember, fx: Effects, reason: str) -> None:
    fx.write(group, ConsumerMemberTombstone(group.group_id, member.member_id))
    if downgrade_follows(group, member, fx):
        # Kafka converts the group instead of bumping its epoch: the classic group takes the
        # current epoch as its generation and the target as its members' assignments.
        fx.events.append(
            MemberFenced(group.group_id, member.member_id, reason, group.group_epoch, True)
        )
        return
    bump_epoch_if_metadata_changed(group, fx, reason, force=True)
    fx.events.append(MemberFenced(group.group_id, member.member_id, reason, group.group_epoch))
    if not group.members:
        # Nobody left to assign to: no new target (Kafka 4.3.1 keeps the assignment epoch, so
        # ConsumerGroupDescribe of the empty group shows the last one), and the next member's
        # assignment must not wait out the throttle (Kafka writes timestamp 0 here too).
        fx.write(group, ConsumerTargetMetadataRecord(group.group_id, group.assignment_epoch, 0))
        group.assignment_deadline = None
        return
    maybe_assign(group, fx)


def reconcile_member(
    group: ConsumerGroup, member: ConsumerMember, owned: Owned, fx: Effects
) -> None:
    """Move `member` toward its target at the group's assignment epoch, given what it says it
    owns (a consumer-protocol heartbeat's, or a classic member's JoinGroup subscription)."""
    epoch = group.assignment_epoch
    if member.current.is_reconciled_to(epoch):
        return
    member_id = member.member_id
    updated = reconcile(
        member.current,
        epoch,
        group.target.get(member_id, {}),
        lambda topic_id, partition: group.owned_by_other(member_id, topic_id, partition),
        owned,
    )
    if updated != member.current:
        set_current(group, member, updated, fx)

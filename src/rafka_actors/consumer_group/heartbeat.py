"""ConsumerGroupHeartbeat: join, stay, reconcile, leave (Kafka's `consumerGroupHeartbeat`).

Every heartbeat that is not a leave runs three steps:

1. create or update the member; if its subscription changed, or a subscribed topic appeared,
   vanished or grew (the metadata hash moved), bump the group epoch;
2. if the group epoch is ahead of the assignment epoch, compute a new target assignment
   (target.py, throttled by `group.consumer.assignment.interval.ms`);
3. move this member one step towards its target (reconcile.py).

Every check that can refuse the request runs before anything changes (`Refusal` is raised and
caught within this module only), so a refused heartbeat leaves the group exactly as it was.
The response carries the member's assignment only when it changed or the request was a full
one (a join, or every field set after an error), as Kafka's does.
"""

from __future__ import annotations

import dataclasses
import uuid

from kio.schema.errors import ErrorCode

from ..group_common.effects import Effects
from ..group_common.ops import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    TopicPartitions,
)
from . import membership
from .cadence import heartbeat_interval_ms
from .membership import Refusal, bump_epoch_if_metadata_changed, store_member, validate_epoch
from .ops import (
    ConsumerGroupHeartbeatOp,
    ConsumerGroupHeartbeatOpResp,
)
from .reconcile import FencedMember, Owned
from .state import Assignment, ConsumerGroup, ConsumerMember, OtherGroup, Subscription
from .subscription import regex_error
from .target import maybe_assign


def heartbeat(
    group: ConsumerGroup | OtherGroup | None,
    op: ConsumerGroupHeartbeatOp,
    waiter: int,
    fx: Effects,
    successor: ConsumerGroup | Refusal | None = None,
) -> ConsumerGroup | OtherGroup | None:
    """`successor`: for a group of another type, the consumer group that may take its place
    if this heartbeat is a new member's (None: it may not; a Refusal: it may not, and why)."""
    try:
        _validate_request(op, fx)
        if op.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return membership.leave(group, op, waiter, fx)
        consumer_group = _group_for(group, op, fx, successor)
        member, replaced = _member_for(consumer_group, op, fx)
    except Refusal as refusal:
        fx.reply(waiter, refusal.response())
        return group
    _join_or_update(consumer_group, member, replaced, op, waiter, fx)
    return consumer_group


def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString: empty after Java's trim() (every char <= U+0020 goes);
    None is not blank (it means "unchanged")."""
    return value is not None and not value.strip(_JAVA_TRIMMED)


_JAVA_TRIMMED = "".join(map(chr, range(33)))


def _validate_request(op: ConsumerGroupHeartbeatOp, fx: Effects) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST and friends."""
    invalid = ErrorCode.invalid_request
    epoch = op.member_epoch
    # v1 members make up their own id (KIP-1082); a v0 member joins without one
    needs_id = epoch != 0 or op.api_version >= 1
    if needs_id and epoch >= LEAVE_GROUP_STATIC_MEMBER_EPOCH and _blank(op.member_id or ""):
        raise Refusal(invalid, "MemberId can't be empty.")
    if _blank(op.instance_id):
        raise Refusal(invalid, "InstanceId can't be empty.")
    if _blank(op.rack_id):
        raise Refusal(invalid, "RackId can't be empty.")
    if epoch == 0:
        if op.rebalance_timeout_ms == -1:
            raise Refusal(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if op.owned is None or op.owned:
            raise Refusal(invalid, "TopicPartitions must be empty when (re-)joining.")
        if op.subscribed_topic_names is None and op.subscribed_topic_regex is None:
            raise Refusal(
                invalid,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining.",
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if op.instance_id is None:
            raise Refusal(invalid, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise Refusal(invalid, "MemberEpoch is invalid.")
    if op.rebalance_timeout_ms < -1:  # not in Kafka, which would take it as "revoke at once"
        raise Refusal(invalid, "RebalanceTimeoutMs can't be negative.")
    if op.subscribed_topic_regex:
        error = regex_error(op.subscribed_topic_regex)
        if error:
            raise Refusal(ErrorCode.invalid_regular_expression, error)
    assignors = fx.config.consumer_assignors
    if op.server_assignor is not None and op.server_assignor not in assignors:
        raise Refusal(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {op.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(assignors)}.",
        )


def _group_for(
    group: object,
    op: ConsumerGroupHeartbeatOp,
    fx: Effects,
    successor: ConsumerGroup | Refusal | None,
) -> ConsumerGroup:
    if isinstance(group, ConsumerGroup):
        return group
    if group is not None:  # a group of another type
        if op.member_epoch == 0 and isinstance(successor, Refusal):
            raise successor
        if op.member_epoch == 0 and isinstance(successor, ConsumerGroup):
            return successor  # the group becomes a consumer group, with its offsets and id
        raise Refusal(ErrorCode.group_id_not_found, f"Group {op.group_id} is not a consumer group.")
    if op.member_epoch != 0:
        raise Refusal(ErrorCode.group_id_not_found, f"Consumer group {op.group_id} not found.")
    return ConsumerGroup(op.group_id, fx.fresh_cgp_id, state_timestamp_ms=fx.now)


def _member_for(
    group: ConsumerGroup, op: ConsumerGroupHeartbeatOp, fx: Effects
) -> tuple[ConsumerMember, ConsumerMember | None]:
    """(the member this heartbeat is about, the static member it replaces or None)."""
    member_id = op.member_id or op.new_member_id
    owned = owned_partitions(op.owned)
    existing = group.members.get(member_id)
    joining = op.member_epoch == 0
    if op.instance_id is None:
        if existing is None:
            if not joining:
                raise Refusal(
                    ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {op.group_id}.",
                )
            _check_room(group, fx)
            return ConsumerMember(member_id, Subscription()), None
        validate_epoch(existing, op.member_epoch, owned)
        return existing, None
    static = group.static_member(op.instance_id)
    if joining:
        if static is None:
            if existing is None:
                _check_room(group, fx)
                return ConsumerMember(member_id, Subscription()), None
            return existing, None
        if static.member_id == member_id:
            return static, None  # a rejoin after being fenced, with its own id
        # a classic static member (online migration) never leaves with -2: its successor
        # speaking the consumer protocol takes its place at once, as in Kafka
        if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and static.classic is None:
            raise Refusal(
                ErrorCode.unreleased_instance_id,
                f"Static member {member_id} with instance id {op.instance_id} cannot join the "
                f"group because the instance id is owned by member {static.member_id}.",
            )
        return membership.successor(static, member_id), static
    if static is None:
        raise Refusal(ErrorCode.unknown_member_id, f"Instance id {op.instance_id} is unknown.")
    if static.member_id != member_id:
        raise Refusal(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {op.instance_id} was fenced by member "
            f"{static.member_id}.",
        )
    validate_epoch(static, op.member_epoch, owned)
    return static, None


def _check_room(group: ConsumerGroup, fx: Effects) -> None:
    if len(group.members) >= fx.config.consumer_max_size:
        raise Refusal(
            ErrorCode.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of "
            f"{fx.config.consumer_max_size} members.",
        )


def owned_partitions(owned: TopicPartitions | None) -> Owned:
    if owned is None:
        return None
    return {topic_id: frozenset(partitions) for topic_id, partitions in owned}


def _join_or_update(
    group: ConsumerGroup,
    member: ConsumerMember,
    replaced: ConsumerMember | None,
    op: ConsumerGroupHeartbeatOp,
    waiter: int,
    fx: Effects,
) -> None:
    member_id = member.member_id
    before = member.current.assigned if member_id in group.members else None
    if replaced is not None:
        membership.replace(group, replaced, member, fx)
    subscription = _updated_subscription(member.subscription, op)
    is_new = member_id not in group.members
    if is_new or subscription != member.subscription:
        changed = is_new or (
            subscription.topic_names != member.subscription.topic_names
            or subscription.topic_regex != member.subscription.topic_regex
        )
        classic = None if is_new else group.members[member_id].classic
        member = store_member(group, member_id, subscription, classic, fx)
        reason = (
            f"member {member_id} joined"
            if is_new
            else f"member {member_id} changed its subscription"
        )
        bump_epoch_if_metadata_changed(group, fx, reason, force=changed)
    else:
        bump_epoch_if_metadata_changed(group, fx, "subscribed topics changed")
    member = group.members[member_id]
    if op.member_epoch == 0:
        member.joined_ms = fx.now
    maybe_assign(group, fx)
    try:
        membership.reconcile_member(group, member, owned_partitions(op.owned), fx)
    except FencedMember as fenced:
        fx.reply(waiter, Refusal(ErrorCode.fenced_member_epoch, str(fenced)).response())
        return
    member.session_deadline = fx.now + fx.config.consumer_session_timeout_ms
    full = op.member_epoch == 0 or (
        op.rebalance_timeout_ms != -1
        and (op.subscribed_topic_names is not None or op.subscribed_topic_regex is not None)
        and op.owned is not None
    )
    after = member.current.assigned
    fx.reply(
        waiter,
        ConsumerGroupHeartbeatOpResp(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=heartbeat_interval_ms(group, member, fx.now, fx.config),
            assignment=response_assignment(after) if full or after != before else None,
        ),
    )


def _updated_subscription(old: Subscription, op: ConsumerGroupHeartbeatOp) -> Subscription:
    """Kafka's maybeUpdate*: a null field keeps what the member said before."""
    regex = old.topic_regex if op.subscribed_topic_regex is None else op.subscribed_topic_regex
    return dataclasses.replace(
        old,
        instance_id=op.instance_id if op.instance_id is not None else old.instance_id,
        rack_id=op.rack_id if op.rack_id is not None else old.rack_id,
        client_id=op.client_id,
        client_host=op.client_host,
        topic_names=(
            old.topic_names
            if op.subscribed_topic_names is None
            else tuple(sorted(set(op.subscribed_topic_names)))
        ),
        topic_regex=regex or None,
        rebalance_timeout_ms=(
            op.rebalance_timeout_ms if op.rebalance_timeout_ms != -1 else old.rebalance_timeout_ms
        ),
        server_assignor=(
            op.server_assignor if op.server_assignor is not None else old.server_assignor
        ),
    )


def response_assignment(assignment: Assignment) -> TopicPartitions:
    return tuple(
        (topic_id, tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items(), key=_by_id)
        if partitions
    )


def _by_id(item: tuple[uuid.UUID, frozenset[int]]) -> bytes:
    return item[0].bytes

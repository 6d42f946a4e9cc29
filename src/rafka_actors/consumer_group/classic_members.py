"""Classic members inside a consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Kafka 4.x lets a consumer that speaks only the classic protocol stay in (or join) a group
that became a consumer group (KIP-848's online migration). Its assignment comes from the
server-side assignor like everyone's; the classic requests are only its way to learn it
(Kafka's classicGroupJoinToConsumerGroup and friends):

- **JoinGroup** updates the member (its subscription comes from the embedded consumer
  protocol), bumps the group epoch if that changed, runs the assignor if due and moves the
  member one reconciliation step, with the partitions its subscription says it still owns.
  It is answered at once, never parked: generation = the member's epoch, no member list, so
  the client is a follower and asks SyncGroup for its assignment. The member then owes a
  SyncGroup within its rebalance timeout.
- **SyncGroup** hands out the member's assigned partitions, in the version of its
  subscription; REBALANCE_IN_PROGRESS if the group's target moved on since its JoinGroup.
- **Heartbeat** keeps its session (the JoinGroup's session timeout, not
  `group.consumer.session.timeout.ms`) and answers REBALANCE_IN_PROGRESS when its assignment
  must change: the target moved past its epoch, it must revoke partitions, or partitions it
  waits for are free. It then owes a JoinGroup within its rebalance timeout.
- **LeaveGroup** fences it.

Kafka compares the member's epoch with the group epoch; here the assignor may be throttled
(`group.consumer.assignment.interval.ms`), so it is compared with the assignment epoch: a
member is asked to rejoin once there is a new target to reconcile to, not earlier (an earlier
rejoin would change nothing, and would loop JoinGroup/SyncGroup until the target exists).

A member that misses its session, or owes a JoinGroup or SyncGroup past its rebalance
timeout, is fenced (timers.py). Errors are Kafka's: UNKNOWN_MEMBER_ID for a member that is
not there or speaks the consumer protocol, ILLEGAL_GENERATION for a generation other than its
epoch, INCONSISTENT_GROUP_PROTOCOL for protocols the group's classic members do not share.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from ..group_common.consumer_embedded import (
    MalformedEmbedded,
    decode_subscription,
    encode_assignment,
    version_of,
)
from ..group_common.effects import Effects
from ..group_common.ops import (
    HeartbeatOp,
    HeartbeatOpResp,
    JoinGroupOp,
    JoinGroupOpResp,
    LeaveGroupOp,
    LeaveGroupOpResp,
    SyncGroupOp,
    SyncGroupOpResp,
)
from ..group_common.topic_image import TopicImage
from . import membership
from .membership import bump_epoch_if_metadata_changed, fence, store_member
from .reconcile import FencedMember, Owned
from .state import (
    Assignment,
    ClassicMembership,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Subscription,
)
from .target import maybe_assign

CONSUMER_PROTOCOL_TYPE = "consumer"
OWES_JOIN = "join"
OWES_SYNC = "sync"


class _Refused(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


# -- JoinGroup -------------------------------------------------------------------------------
def join(group: ConsumerGroup, op: JoinGroupOp, waiter: int, fx: Effects) -> ConsumerGroup:
    try:
        member_id, member, replaced, subscription = _joining(group, op, fx)
    except _Refused as refused:
        fx.reply(waiter, JoinGroupOpResp(refused.code, member_id=op.member_id))
        return group
    if member is None:  # a dynamic member must come back with the id it is given (KIP-394)
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.member_id_required, member_id=member_id))
        return group
    if replaced is not None:
        membership.replace(group, replaced, member, fx)
    classic = ClassicMembership(op.session_timeout_ms, op.protocols)
    updated = dataclasses.replace(
        member.subscription,
        instance_id=op.group_instance_id or member.subscription.instance_id,
        rack_id=subscription.rack_id or member.subscription.rack_id,
        client_id=op.client_id,
        client_host=op.client_host,
        topic_names=tuple(sorted(set(subscription.topics))),
        # JoinGroup v0 has none: Kafka takes the session timeout
        rebalance_timeout_ms=(
            op.rebalance_timeout_ms if op.rebalance_timeout_ms != -1 else op.session_timeout_ms
        ),
    )
    is_new = member_id not in group.members
    if is_new or updated != member.subscription or classic != member.classic:
        changed = is_new or updated.topic_names != member.subscription.topic_names
        member = store_member(group, member_id, updated, classic, fx)
        reason = (
            f"member {member_id} joined"
            if is_new
            else f"member {member_id} changed its subscription"
        )
        bump_epoch_if_metadata_changed(group, fx, reason, force=changed)
    else:
        bump_epoch_if_metadata_changed(group, fx, "subscribed topics changed")
    member = group.members[member_id]
    maybe_assign(group, fx)
    try:
        membership.reconcile_member(
            group, member, _owned_ids(subscription.owned_partitions, fx.topics), fx
        )
    except FencedMember:
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.fenced_member_epoch, member_id=member_id))
        return group
    member.session_deadline = fx.now + classic.session_timeout_ms
    _owe(member, OWES_SYNC, fx)
    fx.reply(
        waiter,
        JoinGroupOpResp(
            ErrorCode.none,
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=classic.protocol_name,
            leader_id="",
            member_id=member_id,
        ),
    )
    return group


def _joining(
    group: ConsumerGroup, op: JoinGroupOp, fx: Effects
) -> tuple[str, ConsumerMember | None, ConsumerMember | None, Any]:
    """(member id, the member or None if it must first get an id, the static member it
    replaces, its decoded subscription); refusals before anything changes."""
    config = fx.config
    if not config.min_session_timeout_ms <= op.session_timeout_ms <= config.max_session_timeout_ms:
        raise _Refused(ErrorCode.invalid_session_timeout)
    unknown = not op.member_id
    member_id = op.member_id or op.new_member_id
    if member_id not in group.members and len(group.members) >= config.consumer_max_size:
        raise _Refused(ErrorCode.group_max_size_reached)
    if not supports_classic_protocols(group, op.protocol_type, [n for n, _ in op.protocols]):
        raise _Refused(ErrorCode.inconsistent_group_protocol)
    if unknown and op.group_instance_id is None and op.require_known_member_id:
        return member_id, None, None, None
    try:
        subscription = decode_subscription(op.protocols[0][1])
    except MalformedEmbedded:
        # Kafka: an IllegalStateException, so UNKNOWN_SERVER_ERROR
        raise _Refused(ErrorCode.unknown_server_error) from None
    if op.group_instance_id is None:
        existing = group.members.get(member_id)
        if existing is not None and existing.classic is None:
            raise _Refused(ErrorCode.unknown_member_id)
        return member_id, existing or ConsumerMember(member_id, Subscription()), None, subscription
    static = group.static_member(op.group_instance_id)
    if not unknown:  # Kafka: the instance must be this member's
        if static is None:
            raise _Refused(ErrorCode.unknown_member_id)
        if static.member_id != member_id:
            raise _Refused(ErrorCode.fenced_instance_id)
        return member_id, static, None, subscription
    if static is None:
        return member_id, ConsumerMember(member_id, Subscription()), None, subscription
    # A static member restarting (a classic one never leaves first) takes its predecessor's
    # place and partitions, whichever protocol the predecessor spoke.
    return member_id, membership.successor(static, member_id), static, subscription


def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: a "consumer" member naming a protocol
    every classic member of the group names."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    if not group.members:
        return bool(names)
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)


def _owned_ids(owned: tuple[tuple[str, tuple[int, ...]], ...], image: TopicImage) -> Owned:
    result: dict = {}
    for topic, partitions in owned:
        info = image.by_name.get(topic)
        if info is not None:
            result[info.topic_id] = result.get(info.topic_id, frozenset()) | frozenset(partitions)
    return result


def _owe(member: ConsumerMember, what: str, fx: Effects) -> None:
    member.classic_owes = what
    member.classic_deadline = fx.now + max(member.subscription.rebalance_timeout_ms, 0)


# -- SyncGroup and Heartbeat -----------------------------------------------------------------
def sync(group: ConsumerGroup, op: SyncGroupOp, waiter: int, fx: Effects) -> ConsumerGroup:
    try:
        member = _classic_member(group, op.member_id, op.group_instance_id)
        _check_generation(member, op.generation_id)
        classic = member.classic
        assert classic is not None
        if op.protocol_type is not None and op.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise _Refused(ErrorCode.inconsistent_group_protocol)
        if op.protocol_name is not None and op.protocol_name != classic.protocol_name:
            raise _Refused(ErrorCode.inconsistent_group_protocol)
        if (
            group.assignment_epoch > member.member_epoch
            and member.current.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            _owe_join_if_absent(member, fx)
            raise _Refused(ErrorCode.rebalance_in_progress)
    except _Refused as refused:
        fx.reply(waiter, SyncGroupOpResp(refused.code))
        return group
    member.classic_deadline = None
    member.classic_owes = ""
    member.session_deadline = fx.now + classic.session_timeout_ms
    version = version_of(classic.protocols[0][1]) if classic.protocols else 0
    fx.reply(
        waiter,
        SyncGroupOpResp(
            ErrorCode.none,
            encode_assignment(named(member.current.assigned, fx.topics), version),
            op.protocol_type,
            op.protocol_name,
        ),
    )
    return group


def heartbeat(group: ConsumerGroup, op: HeartbeatOp, waiter: int, fx: Effects) -> ConsumerGroup:
    try:
        member = _classic_member(group, op.member_id, op.group_instance_id)
        _check_generation(member, op.generation_id)
    except _Refused as refused:
        fx.reply(waiter, HeartbeatOpResp(refused.code))
        return group
    assert member.classic is not None
    member.session_deadline = fx.now + member.classic.session_timeout_ms
    state = member.current.state
    if (
        member.member_epoch < group.assignment_epoch
        or state is MemberState.UNREVOKED_PARTITIONS
        or (
            state is MemberState.UNRELEASED_PARTITIONS
            and not group.waiting_on_unreleased_partition(member)
        )
    ):
        _owe_join_if_absent(member, fx)
        fx.reply(waiter, HeartbeatOpResp(ErrorCode.rebalance_in_progress))
    else:
        fx.reply(waiter, HeartbeatOpResp(ErrorCode.none))
    return group


def _owe_join_if_absent(member: ConsumerMember, fx: Effects) -> None:
    if member.classic_owes != OWES_JOIN:
        _owe(member, OWES_JOIN, fx)


def _classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
    else:
        member = group.static_member(instance_id)
        if member is not None and member.member_id != member_id:
            raise _Refused(ErrorCode.fenced_instance_id)
    if member is None or member.classic is None:
        raise _Refused(ErrorCode.unknown_member_id)
    return member


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise _Refused(ErrorCode.illegal_generation)


def named(assignment: Assignment, image: TopicImage) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """An assignment by topic name (topics no longer in the image are left out)."""
    rows = []
    for topic_id, partitions in assignment.items():
        name = image.name_of(topic_id)
        if name is not None and partitions:
            rows.append((name, tuple(sorted(partitions))))
    return tuple(sorted(rows))


# -- LeaveGroup ------------------------------------------------------------------------------
def leave(group: ConsumerGroup, op: LeaveGroupOp, waiter: int, fx: Effects) -> ConsumerGroup:
    answers = []
    for member_id, instance_id, _reason in op.members:
        try:
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance_id)
                if member is not None and member_id and member.member_id != member_id:
                    raise _Refused(ErrorCode.fenced_instance_id)
            if member is None or member.classic is None:
                raise _Refused(ErrorCode.unknown_member_id)
        except _Refused as refused:
            answers.append((member_id, instance_id, int(refused.code)))
            continue
        fence(group, member, fx, f"member {member.member_id} left")
        answers.append((member.member_id, instance_id, int(ErrorCode.none)))
    fx.reply(waiter, LeaveGroupOpResp(ErrorCode.none, tuple(answers)))
    return group

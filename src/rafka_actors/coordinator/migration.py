"""Online migration of a group with members between the classic and consumer protocols.

Kafka 4.x (`group.consumer.migration.policy`, default `bidirectional`; seed 003):

- **Upgrade.** A classic group whose members use the consumer embedded protocol becomes a
  consumer group when a consumer-protocol member joins it (its first ConsumerGroupHeartbeat).
  Kafka's ConsumerGroup.fromClassicGroup: the group epoch and the assignment epoch are the
  classic generation, and every classic member becomes a member of that epoch, Stable, whose
  assignment and target are its last classic assignment, and which stays a classic member
  (it keeps its session timeout and protocols, and is served by
  consumer_group/classic_members.py). The joining member then bumps the epoch like any other,
  so the classic members hear REBALANCE_IN_PROGRESS on their next heartbeat. JoinGroups and
  SyncGroups parked in the classic rebalance are answered REBALANCE_IN_PROGRESS.
  Refused (GROUP_ID_NOT_FOUND) when the policy does not allow it, when the group's protocol
  type is not "consumer", when it has more members than a consumer group may, and when a
  member's assignment carries user data (a custom assignor's) or does not decode.
- **Downgrade.** A consumer group becomes a classic group again when its last
  consumer-protocol member leaves or is fenced and only classic members remain (Kafka's
  ClassicGroup.fromConsumerGroup): Stable at generation = the group epoch, each member with
  its target assignment, then a rebalance, so the members rejoin and their leader assigns.
  Likewise when a classic static member takes the place of the last consumer-protocol member
  (same instance id): that member goes, and the classic group takes the JoinGroup.

Either way the group keeps its offsets, its `cgp_` id and its history; the change is the new
type's group record, whose reason says why (the rebalance history shows it as the cause).
Empty groups change type whatever the policy (coordinator/machine.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Refusal",
    "Upgrade",
    "by_id",
    "downgrade",
    "downgrade_due",
    "downgrade_for_static_join",
    "upgrade",
]

from kio.schema.errors import ErrorCode

from ..classic_group.rebalance import prepare_rebalance, reschedule_heartbeat
from ..classic_group.records import group_record
from ..classic_group.state import ClassicGroup, GroupState, Member
from ..consumer_group.classic_members import CONSUMER_PROTOCOL_TYPE, named
from ..consumer_group.membership import Refusal, set_current, store_member
from ..consumer_group.records import (
    ConsumerGroupMetadataRecord,
    ConsumerMemberTombstone,
    ConsumerStateTombstone,
    ConsumerTargetMemberRecord,
    ConsumerTargetMetadataRecord,
    taking_over,
    to_rows,
)
from ..consumer_group.state import (
    ClassicMembership,
    ConsumerGroup,
    Reconciliation,
    Subscription,
)
from ..group_common.consumer_embedded import (
    MalformedEmbedded,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)
from ..group_common.effects import Effects, MemberFenced
from ..group_common.ops import (
    JoinGroupOp,
    JoinGroupOpResp,
    SyncGroupOpResp,
)
from ..group_common.records import Record
from ..group_common.topic_image import TopicImage


@dataclass(slots=True)
class Upgrade:
    """A classic group converted, to be used if the heartbeat that asked for it succeeds."""

    group: ConsumerGroup
    records: list[Record] = field(default_factory=list)
    replies: list[tuple[int, Any]] = field(default_factory=list)


def upgrade(classic: ClassicGroup, member_id: str, fx: Effects) -> Upgrade | Refusal | None:
    """The consumer group a non-empty classic group becomes when `member_id` joins it with
    the consumer protocol; a `Refusal` with Kafka's message, or None for Kafka's plain
    "not a consumer group" (the policy, the protocol type or the size forbid it)."""
    config = fx.config
    if (
        not config.upgrade_enabled()
        or classic.protocol_type != CONSUMER_PROTOCOL_TYPE
        or len(classic.members) > config.consumer_max_size
    ):
        return None
    gid, generation = classic.group_id, classic.generation
    # transactional offsets stay pending across the conversion, like the offsets
    group = taking_over(gid, classic.cgp_id, classic)
    group.state_timestamp_ms = fx.now
    converted = Effects(fx.now, config, topics=fx.topics, apply=fx.apply)
    converted.write(
        group,
        ConsumerGroupMetadataRecord(
            gid,
            classic.cgp_id,
            generation,
            0,
            f"upgraded from a classic group: member {member_id} joined with the consumer protocol",
            fx.now,
        ),
    )
    converted.write(group, ConsumerTargetMetadataRecord(gid, generation, 0))
    for old in classic.members.values():
        try:
            assignment = decode_assignment(old.assignment) if old.assignment else None
            metadata = old.metadata(classic.protocol_name) or (
                old.protocols[0][1] if old.protocols else b""
            )
            subscription = decode_subscription(metadata)
        except MalformedEmbedded:
            return Refusal(
                ErrorCode.group_id_not_found,
                f"Cannot upgrade classic group {gid} to consumer group because the embedded "
                "consumer protocol is malformed.",
            )
        if assignment is not None and assignment.user_data:
            return Refusal(
                ErrorCode.group_id_not_found,
                f"Cannot upgrade classic group {gid} to consumer group because an unsupported "
                "custom assignor is in use. Please refer to the documentation or switch to a "
                "default assignor before re-attempting the upgrade.",
            )
        assigned = by_id(assignment.partitions if assignment else (), fx.topics)
        member = store_member(
            group,
            old.member_id,
            Subscription(
                instance_id=old.instance_id,
                rack_id=subscription.rack_id,
                client_id=old.client_id,
                client_host=old.client_host,
                topic_names=tuple(sorted(set(subscription.topics))),
                rebalance_timeout_ms=old.rebalance_timeout_ms,
            ),
            ClassicMembership(old.session_timeout_ms, old.protocols),
            converted,
        )
        member.session_deadline = fx.now + old.session_timeout_ms
        converted.write(group, ConsumerTargetMemberRecord(gid, old.member_id, to_rows(assigned)))
        set_current(
            group, member, Reconciliation(generation, generation, assigned=assigned), converted
        )
        # what was parked in the classic rebalance learns that another one began
        if old.awaiting_join is not None:
            converted.reply(
                old.awaiting_join,
                JoinGroupOpResp(ErrorCode.rebalance_in_progress, member_id=old.member_id),
            )
        if old.awaiting_sync is not None:
            converted.reply(old.awaiting_sync, SyncGroupOpResp(ErrorCode.rebalance_in_progress))
    return Upgrade(group, converted.records, converted.replies)


def by_id(partitions: tuple[tuple[str, tuple[int, ...]], ...], image: TopicImage) -> dict:
    """An assignment by topic name, by topic id (topics not in the image are left out)."""
    result: dict = {}
    for topic, parts in partitions:
        info = image.by_name.get(topic)
        if info is not None:
            valid = frozenset(p for p in parts if 0 <= p < info.partitions)
            result[info.topic_id] = result.get(info.topic_id, frozenset()) | valid
    return {topic_id: parts for topic_id, parts in result.items() if parts}


def downgrade_due(fx: Effects) -> list[tuple[str, str]]:
    """(member id, why it went) of the consumer-protocol members whose going in this step
    left only classic members behind, so that the group must become a classic group
    (consumer_group/membership.py decided it, and did not bump the epoch); empty if none."""
    return [
        (e.member_id, e.reason.removeprefix(f"member {e.member_id} "))
        for e in fx.events
        if isinstance(e, MemberFenced) and e.downgrade
    ]


def downgrade_for_static_join(group: ConsumerGroup, op: JoinGroupOp, fx: Effects) -> bool:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId: a classic static member taking the
    place of the group's last consumer-protocol member (same instance id). If so, that member
    is removed here and the caller downgrades the group, then lets the classic group take the
    JoinGroup (a static member's rejoin under a new id)."""
    if op.group_instance_id is None or op.member_id:
        return False
    static = group.static_member(op.group_instance_id)
    if static is None or static.classic is not None:
        return False
    config = fx.config
    others = len(group.members) - 1
    if not others or not config.downgrade_enabled() or others > config.max_size:
        return False
    if any(m.classic is None for m in group.members.values() if m is not static):
        return False
    fx.write(group, ConsumerMemberTombstone(group.group_id, static.member_id))
    fx.events.append(
        MemberFenced(
            group.group_id,
            static.member_id,
            f"member {static.member_id} replaced",
            group.group_epoch,
            True,
        )
    )
    return True


def downgrade(group: ConsumerGroup, gone: list[tuple[str, str]], fx: Effects) -> ClassicGroup:
    """The classic group a consumer group of classic members only becomes, rebalancing."""
    classic = ClassicGroup(
        group.group_id,
        group.cgp_id,
        state=GroupState.STABLE,
        previous_state=GroupState.COMPLETING_REBALANCE,
        state_timestamp_ms=fx.now,
        generation=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
    )
    classic.offsets = group.offsets
    classic.txn = group.txn  # transactional offsets stay pending across the conversion
    for member in group.members.values():
        meta = member.classic
        assert meta is not None
        target = group.target.get(member.member_id, {})
        version = version_of(meta.protocols[0][1]) if meta.protocols else 0
        new = Member(
            member.member_id,
            member.instance_id,
            member.subscription.client_id,
            member.subscription.client_host,
            member.subscription.rebalance_timeout_ms,
            meta.session_timeout_ms,
            CONSUMER_PROTOCOL_TYPE,
            meta.protocols,
            assignment=encode_assignment(named(target, fx.topics), version),
        )
        classic.add(new)
        reschedule_heartbeat(new, fx)
    classic.protocol_name = classic.select_protocol()
    for member_id, why in gone:  # the rebalance's story (pipeline/history.py) names them
        classic.depart(member_id, why)
    reason = (
        "downgraded from a consumer group: the last consumer-protocol member "
        f"{', '.join(m for m, _ in gone)} went"
    )
    fx.write(group, ConsumerStateTombstone(group.group_id))
    fx.write_snapshot(group_record(classic, reason))
    prepare_rebalance(classic, fx, reason)
    return classic

"""Rebuild a consumer group from its records: start-up, and the restart of a failed actor.

The records of a group come in any order that respects the log (the live view groups them
by key), so they are first collected and then assembled: the group record gives the epochs
and the metadata hash, the target-assignment metadata the assignment epoch, and each member's
three records its subscription, its target and its current assignment. As Kafka's `onLoaded`,
every member gets a fresh session deadline, and one that was revoking a fresh rebalance
deadline; offsets are added by the caller (coordinator/replay.py) like a classic group's.
"""

from __future__ import annotations

from collections.abc import Iterable

from .records import (
    ConsumerCurrentAssignmentRecord,
    ConsumerGroupMetadataRecord,
    ConsumerMemberMetadataRecord,
    ConsumerRecord,
    ConsumerTargetMemberRecord,
    ConsumerTargetMetadataRecord,
    from_rows,
)
from .state import (
    ClassicMembership,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Reconciliation,
    Subscription,
)


def assemble(
    head: ConsumerGroupMetadataRecord,
    records: Iterable[ConsumerRecord],
    now_ms: int,
    session_timeout_ms: int,
) -> ConsumerGroup:
    group = ConsumerGroup(
        head.group_id,
        head.cgp_id,
        group_epoch=head.epoch,
        metadata_hash=head.metadata_hash,
        state_timestamp_ms=now_ms,
    )
    subscriptions: dict[str, Subscription] = {}
    classics: dict[str, ClassicMembership] = {}
    currents: dict[str, Reconciliation] = {}
    for record in records:
        if isinstance(record, ConsumerTargetMetadataRecord):
            group.assignment_epoch = record.assignment_epoch
            group.assignment_timestamp_ms = record.assignment_timestamp_ms
        elif isinstance(record, ConsumerMemberMetadataRecord):
            subscriptions[record.member_id] = Subscription(
                record.instance_id,
                record.rack_id,
                record.client_id,
                record.client_host,
                record.topic_names,
                record.topic_regex,
                record.rebalance_timeout_ms,
                record.server_assignor,
            )
            if record.classic_session_timeout_ms >= 0:
                classics[record.member_id] = ClassicMembership(
                    record.classic_session_timeout_ms, record.classic_protocols
                )
        elif isinstance(record, ConsumerTargetMemberRecord):
            group.target[record.member_id] = from_rows(record.partitions)
        elif isinstance(record, ConsumerCurrentAssignmentRecord):
            currents[record.member_id] = Reconciliation(
                record.member_epoch,
                record.previous_member_epoch,
                _state(record.state),
                from_rows(record.assigned),
                from_rows(record.pending_revocation),
            )
    for member_id, subscription in subscriptions.items():
        member = ConsumerMember(member_id, subscription, currents.get(member_id, Reconciliation()))
        member.classic = classics.get(member_id)
        timeout = (
            session_timeout_ms if member.classic is None else member.classic.session_timeout_ms
        )
        member.session_deadline = now_ms + timeout
        if member.current.state is MemberState.UNREVOKED_PARTITIONS:
            member.rebalance_deadline = now_ms + max(subscription.rebalance_timeout_ms, 0)
            member.rebalance_epoch = member.member_epoch
        group.put(member)
    for member_id in [m for m in group.target if m not in group.members]:
        del group.target[member_id]  # a target slice whose member record was compacted away
    return group


def _state(value: int) -> MemberState:
    try:
        return MemberState(value)
    except ValueError:  # written by a newer broker: the member is reconciled afresh
        return MemberState.UNKNOWN

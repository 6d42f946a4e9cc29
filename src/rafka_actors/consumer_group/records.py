"""Coordinator records of a KIP-848 consumer group (design note 003, "Consumer-group records").

A consumer group spreads its state over small records so that a change to one member rewrites
only that member's records, never the whole group:

- `ConsumerGroupMetadataRecord`: the group epoch and the subscribed topics' metadata hash
  (it takes the place of a classic group's record: one group record per group);
- `ConsumerTargetMetadataRecord`: the assignment epoch and when the assignor last ran;
- per member: `ConsumerMemberMetadataRecord` (its subscription), `ConsumerTargetMemberRecord`
  (its slice of the target assignment) and `ConsumerCurrentAssignmentRecord` (its epochs,
  reconciliation state, assigned partitions and partitions pending revocation);
- `ConsumerMemberTombstone` deletes a member's three records; `ConsumerStateTombstone` deletes
  everything consumer-specific (when an empty consumer group becomes a classic group).

Topic ids are stored as their 16 bytes. Offsets use the classic OffsetCommit records.

`apply` is each record's change to the group, the only way the handlers change what these
records hold (`Effects.write`) and the way start-up rebuilds it (coordinator/apply.py), as
Kafka's coordinator replays every consumer-group record it writes. A member's records may
come before the group record (a new group's first member), and a member's assignment before
its subscription: as Kafka's replay does, what a record needs is made if it is missing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..group_common.committed import OffsetHolder
from ..group_common.records import Record
from .state import (
    Assignment,
    ClassicMembership,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Reconciliation,
    Subscription,
)

# ((topic id bytes, (partition, ...)), ...), sorted, so equal assignments encode equally
PartitionRows = tuple[tuple[bytes, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataRecord(Record):
    group_id: str
    cgp_id: str
    epoch: int
    metadata_hash: int
    reason: str = ""  # why the epoch moved: kept for the rebalance-history pipeline
    timestamp_ms: int = 0  # when it moved


@dataclass(frozen=True, slots=True)
class ConsumerMemberMetadataRecord(Record):
    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # version 1: a member using the classic protocol (Kafka's ClassicMemberMetadata): its
    # session timeout (-1: a consumer-protocol member) and its JoinGroup protocols
    classic_session_timeout_ms: int = -1
    classic_protocols: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerTargetMetadataRecord(Record):
    group_id: str
    assignment_epoch: int
    assignment_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerTargetMemberRecord(Record):
    group_id: str
    member_id: str
    partitions: PartitionRows


@dataclass(frozen=True, slots=True)
class ConsumerCurrentAssignmentRecord(Record):
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: PartitionRows
    pending_revocation: PartitionRows


@dataclass(frozen=True, slots=True)
class ConsumerMemberTombstone(Record):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerStateTombstone(Record):
    group_id: str


ConsumerRecord = (
    ConsumerGroupMetadataRecord
    | ConsumerMemberMetadataRecord
    | ConsumerTargetMetadataRecord
    | ConsumerTargetMemberRecord
    | ConsumerCurrentAssignmentRecord
    | ConsumerMemberTombstone
    | ConsumerStateTombstone
)
MEMBER_RECORDS = (
    ConsumerMemberMetadataRecord,
    ConsumerTargetMemberRecord,
    ConsumerCurrentAssignmentRecord,
)


def to_rows(assignment: Assignment) -> PartitionRows:
    return tuple(
        (topic_id.bytes, tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items())
        if partitions
    )


def from_rows(rows: PartitionRows) -> Assignment:
    return {_topic_id(topic_id): frozenset(partitions) for topic_id, partitions in rows}


_TOPIC_IDS: dict[bytes, uuid.UUID] = {}


def _topic_id(raw: bytes) -> uuid.UUID:
    """The topic id of its 16 bytes, made once per topic: a UUID costs a microsecond to
    build, and a 1 000-member group's records name the same few topics thousands of times
    (40% of rebuilding it). Topics are few; the table holds deleted ones too (16 bytes and
    a UUID each)."""
    topic_id = _TOPIC_IDS.get(raw)
    if topic_id is None:
        topic_id = _TOPIC_IDS[raw] = uuid.UUID(bytes=raw)
    return topic_id


# -- what each record changes: live (Effects.write) and at start-up ---------------------------
def taking_over(group_id: str, cgp_id: str, previous: OffsetHolder | None) -> ConsumerGroup:
    """The consumer group that takes the place of `previous` (a group of another type, or
    None), with its offsets and its `cgp_` id."""
    group = ConsumerGroup(group_id, cgp_id)
    if previous is not None:
        group.offsets, group.txn = previous.offsets, previous.txn
    return group


def apply(group: ConsumerGroup, record: Record) -> None:
    _APPLY[type(record)](group, record)


def _group(group: ConsumerGroup, record: ConsumerGroupMetadataRecord) -> None:
    group.cgp_id = record.cgp_id
    group.group_epoch = record.epoch
    group.metadata_hash = record.metadata_hash


def _subscription(group: ConsumerGroup, r: ConsumerMemberMetadataRecord) -> None:
    subscription = Subscription(
        r.instance_id,
        r.rack_id,
        r.client_id,
        r.client_host,
        r.topic_names,
        r.topic_regex,
        r.rebalance_timeout_ms,
        r.server_assignor,
    )
    classic = None
    if r.classic_session_timeout_ms >= 0:
        classic = ClassicMembership(r.classic_session_timeout_ms, r.classic_protocols)
    member = group.members.get(r.member_id)
    if member is None:
        member = ConsumerMember(r.member_id, subscription)
    member.subscription, member.classic = subscription, classic
    group.put(member)


def _target_epoch(group: ConsumerGroup, record: ConsumerTargetMetadataRecord) -> None:
    group.assignment_epoch = record.assignment_epoch
    group.assignment_timestamp_ms = record.assignment_timestamp_ms


def _target(group: ConsumerGroup, record: ConsumerTargetMemberRecord) -> None:
    group.target[record.member_id] = from_rows(record.partitions)


def _current(group: ConsumerGroup, r: ConsumerCurrentAssignmentRecord) -> None:
    member = group.members.get(r.member_id)
    if member is None:  # before its subscription: Kafka's getOrMaybeCreateMember
        member = ConsumerMember(r.member_id, Subscription())
        group.put(member)
    current = Reconciliation(
        r.member_epoch,
        r.previous_member_epoch,
        _state(r.state),
        from_rows(r.assigned),
        from_rows(r.pending_revocation),
    )
    group.set_current(member, current)


def _state(value: int) -> MemberState:
    # a state written by a newer broker is UNKNOWN: the member is reconciled afresh (a dict,
    # not MemberState(value): an enum call costs ten times as much)
    return _MEMBER_STATES.get(value, MemberState.UNKNOWN)


_MEMBER_STATES = {int(state): state for state in MemberState}


def _member_gone(group: ConsumerGroup, record: ConsumerMemberTombstone) -> None:
    group.remove(record.member_id)


def _consumer_state_gone(group: ConsumerGroup, record: ConsumerStateTombstone) -> None:
    """Everything consumer-specific goes (the group becomes a classic group next)."""
    group.members.clear()
    group.static_members.clear()
    group.target.clear()
    group.owners.clear()
    group.assignment_epoch = group.assignment_timestamp_ms = 0


_APPLY: dict[type, Callable[[ConsumerGroup, Any], None]] = {
    ConsumerGroupMetadataRecord: _group,
    ConsumerMemberMetadataRecord: _subscription,
    ConsumerTargetMetadataRecord: _target_epoch,
    ConsumerTargetMemberRecord: _target,
    ConsumerCurrentAssignmentRecord: _current,
    ConsumerMemberTombstone: _member_gone,
    ConsumerStateTombstone: _consumer_state_gone,
}
CONSUMER_RECORDS = tuple(_APPLY)  # every record type `apply` takes

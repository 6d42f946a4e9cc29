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
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..group_common.records import Record
from .state import Assignment

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
    return {uuid.UUID(bytes=topic_id): frozenset(partitions) for topic_id, partitions in rows}

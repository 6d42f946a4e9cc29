"""Coordinator records: what a group actor hands to the coordinator log.

The shapes follow Kafka's `__consumer_offsets` records (design note 003, "Persistent record
layouts"): one GroupMetadata record holds a whole classic group (written when a generation's
assignment is settled, when a group becomes Empty, and when a static member is replaced), one
OffsetCommit record per committed partition, and tombstones for deleted offsets and groups.
Replaying them (replay.py) rebuilds what a restarted coordinator needs: members, generation,
leader, assignments and offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..consumer_group.records import ConsumerRecord

# (member id, instance id, client id, client host, rebalance timeout, session timeout,
#  subscription metadata of the chosen protocol, assignment)
MemberRow = tuple[str, str | None, str, str, int, int, bytes, bytes]


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    group_id: str
    cgp_id: str
    protocol_type: str | None
    generation: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[MemberRow, ...]
    reason: str = ""  # why the group changed: kept for the rebalance-history pipeline
    # version 1: when the rebalance this record settles began (-1: none), and the members
    # that went away since the previous record, with why ("left", "session timeout", ...)
    rebalance_started_ms: int = -1
    departed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class OffsetTombstone:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupTombstone:
    group_id: str


ClassicRecord = GroupMetadataRecord | OffsetCommitRecord | OffsetTombstone | GroupTombstone
Record = ClassicRecord | ConsumerRecord

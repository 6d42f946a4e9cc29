"""Rebuild a group from its records: start-up, and the restart of a failed actor.

This is a coordinator failover in Kafka's sense: the last GroupMetadata record gives the
members, generation, leader, protocol and assignments; later OffsetCommit records and
tombstones give the offsets. A group with members comes back Stable (its members carry on
heartbeating with their generation) and every member gets a fresh session deadline; parked
requests are not part of the log (their clients retry).
"""

from __future__ import annotations

from collections.abc import Iterable

from .records import (
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from .state import ClassicGroup, CommittedOffset, GroupState, Member


def replay(
    records: Iterable[Record], now_ms: int, group: ClassicGroup | None = None
) -> ClassicGroup | None:
    for record in records:
        group = apply(group, record, now_ms)
    return group


def apply(group: ClassicGroup | None, record: Record, now_ms: int) -> ClassicGroup | None:
    if isinstance(record, GroupMetadataRecord):
        offsets = group.offsets if group is not None else {}
        group = from_metadata(record, now_ms)
        group.offsets = offsets
    elif isinstance(record, OffsetCommitRecord):
        if group is None:  # an offset of a simple group written before its group record
            group = ClassicGroup(record.group_id, "", state_timestamp_ms=now_ms)
        group.offsets[(record.topic, record.partition)] = CommittedOffset(
            record.offset, record.leader_epoch, record.metadata, record.commit_timestamp_ms
        )
    elif isinstance(record, OffsetTombstone):
        if group is not None:
            group.offsets.pop((record.topic, record.partition), None)
    elif isinstance(record, GroupTombstone):
        group = None
    return group


def from_metadata(record: GroupMetadataRecord, now_ms: int) -> ClassicGroup:
    group = ClassicGroup(
        record.group_id,
        record.cgp_id,
        state=GroupState.STABLE if record.members else GroupState.EMPTY,
        state_timestamp_ms=record.state_timestamp_ms,
        generation=record.generation,
        protocol_type=record.protocol_type,
        protocol_name=record.protocol_name,
    )
    for row in record.members:
        member_id, instance_id, client_id, host, rebalance_ms, session_ms, meta, assignment = row
        group.add(
            Member(
                member_id=member_id,
                instance_id=instance_id,
                client_id=client_id,
                client_host=host,
                rebalance_timeout_ms=rebalance_ms,
                session_timeout_ms=session_ms,
                protocol_type=record.protocol_type or "",
                protocols=((record.protocol_name or "", meta),),
                assignment=assignment,
                heartbeat_deadline=now_ms + session_ms,
            )
        )
    group.leader_id = record.leader_id if record.members else None
    return group

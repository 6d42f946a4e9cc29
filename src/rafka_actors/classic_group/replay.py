"""Rebuild a classic group from its group record: start-up, and the restart of a failed actor.

This is a coordinator failover in Kafka's sense. The last GroupMetadata record gives the
members, generation, leader, protocol and assignments (coordinator/replay.py folds a group's
records and adds the offsets). A group with members comes back Stable (its members carry on
heartbeating with their generation) and every member gets a fresh session deadline; parked
requests are not part of the log (their clients retry).
"""

from __future__ import annotations

from .records import GroupMetadataRecord
from .state import ClassicGroup, GroupState, Member


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

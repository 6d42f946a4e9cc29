"""Rebuild a group from its records: start-up, and the restart of a failed actor.

This is a coordinator failover in Kafka's sense. The records are folded into the live view
(latest.py) first, so a replay of the whole history and of a compacted log agree. For a
classic group the last GroupMetadata record gives the members, generation, leader, protocol
and assignments; a consumer group is assembled by consumer_group/replay.py; OffsetCommit
records and tombstones give the offsets of either. A classic group with members comes back
Stable (its members carry on heartbeating with their generation) and every member gets a
fresh session deadline; parked requests are not part of the log (their clients retry).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from ..consumer_group.records import ConsumerGroupMetadataRecord, ConsumerRecord
from ..consumer_group.replay import assemble
from ..consumer_group.state import ConsumerGroup
from .latest import GroupRecords
from .records import GroupMetadataRecord, OffsetCommitRecord, Record
from .state import ClassicGroup, CommittedOffset, GroupState, Member

CONSUMER_SESSION_TIMEOUT_MS = 45_000  # group.consumer.session.timeout.ms's default


def replay(
    records: Iterable[Record],
    now_ms: int,
    *,
    consumer_session_timeout_ms: int = CONSUMER_SESSION_TIMEOUT_MS,
) -> ClassicGroup | ConsumerGroup | None:
    """The group its records describe (in log order; the live view's order is one)."""
    latest: GroupRecords[Record] = GroupRecords()
    latest.apply(list(records))
    head = latest.group
    group: ClassicGroup | ConsumerGroup
    if isinstance(head, ConsumerGroupMetadataRecord):
        consumer: list[ConsumerRecord] = list(latest.consumer.values())  # type: ignore[arg-type]
        group = assemble(head, consumer, now_ms, consumer_session_timeout_ms)
    elif isinstance(head, GroupMetadataRecord):
        group = from_metadata(head, now_ms)
    elif latest.offsets:  # offsets of a simple group, written before any group record
        first = next(iter(latest.offsets.values()))
        group = ClassicGroup(first.group_id, "", state_timestamp_ms=now_ms)
    else:
        return None
    offsets = cast(dict[tuple[str, int], OffsetCommitRecord], latest.offsets)
    group.offsets = {
        tp: CommittedOffset(r.offset, r.leader_epoch, r.metadata, r.commit_timestamp_ms)
        for tp, r in offsets.items()
    }
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

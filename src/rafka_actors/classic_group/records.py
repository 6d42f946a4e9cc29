"""The classic group's coordinator record, and how a group becomes one.

One GroupMetadata record holds a whole classic group (Kafka's `__consumer_offsets` layout,
design note 003, "Persistent record layouts"): written when a generation's assignment is
settled, when a group becomes Empty, and when a static member is replaced. Offsets and
tombstones are records every group type writes (group_common/records.py).

The record is a snapshot of a group whose live state is richer (members' protocols, parked
JoinGroups and SyncGroups, a rebalance under way): the classic handlers change the group in
place and store its record when it settles (`Effects.write_snapshot`), as Kafka's classic
group does (its results are not replayed). `group_of` is the record's apply, at start-up
(coordinator/apply.py): a group with members comes back Stable (its members carry on
heartbeating with their generation); parked requests are not part of the log (their clients
retry).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..group_common.committed import OffsetHolder
from ..group_common.effects import Effects
from ..group_common.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone, Record
from .state import ClassicGroup, GroupState, Member

# (member id, instance id, client id, client host, rebalance timeout, session timeout,
#  subscription metadata of the chosen protocol, assignment)
MemberRow = tuple[str, str | None, str, str, int, int, bytes, bytes]


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord(Record):
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


ClassicRecord = GroupMetadataRecord | OffsetCommitRecord | OffsetTombstone | GroupTombstone


def store_group(fx: Effects, group: ClassicGroup, reason: str) -> None:
    """Write the group's record; the record told this rebalance's story, so the next one
    starts afresh."""
    fx.write_snapshot(group_record(group, reason))
    group.departed = None
    group.rebalance_started_ms = -1


def group_record(group: ClassicGroup, reason: str = "") -> GroupMetadataRecord:
    return GroupMetadataRecord(
        group_id=group.group_id,
        cgp_id=group.cgp_id,
        protocol_type=group.protocol_type,
        generation=group.generation,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id,
        state_timestamp_ms=group.state_timestamp_ms,
        members=tuple(
            (
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name),
                m.assignment,
            )
            for m in group.members.values()
        ),
        reason=reason,
        rebalance_started_ms=group.rebalance_started_ms,
        departed=tuple(group.departed or ()),
    )


def group_of(record: GroupMetadataRecord, previous: OffsetHolder | None) -> ClassicGroup:
    """The group its record describes, with the offsets of the group it replaces (of any
    type: a group keeps its offsets when it changes type)."""
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
            )
        )
    group.leader_id = record.leader_id if record.members else None
    if previous is not None:
        group.offsets, group.txn = previous.offsets, previous.txn
    return group

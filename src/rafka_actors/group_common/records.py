"""Coordinator records every group type writes, and the base class of all records.

The shapes follow Kafka's `__consumer_offsets` records (design note 003, "Persistent record
layouts"): one OffsetCommit record per committed partition, and tombstones for deleted
offsets and groups, whatever the group's protocol. The records of one protocol live with it:
the classic group record in classic_group/records.py, the KIP-848 records in
consumer_group/records.py, the transactional offsets in txn_offsets.py;
each subclasses `Record`. storage/coordinator_records.py encodes every one of them.

Each record's `apply_*` is the change it makes to a group of any type, live (a handler's
`Effects.write`) and at start-up (coordinator/apply.py folds the log through the same).
"""

from __future__ import annotations

from dataclasses import dataclass

from .committed import CommittedOffset, OffsetHolder
from .partition_keys import partition_key


class Record:
    """Any coordinator record: what a step appends to `Effects.records` and the log stores.

    Records are frozen, slotted dataclasses of plain values whose fields, in declaration
    order, are what an entry stores; every one names its group first. This base holds no
    state and adds no field."""

    __slots__ = ()
    group_id: str  # declared for type checkers; each record's dataclass defines the field


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord(Record):
    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class OffsetTombstone(Record):
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupTombstone(Record):
    group_id: str


def apply_offset_commit(group: OffsetHolder, record: OffsetCommitRecord) -> None:
    tp = partition_key(record.topic, record.partition)  # shared by every group
    at = record.commit_timestamp_ms
    group.offsets[tp] = CommittedOffset(record.offset, record.leader_epoch, record.metadata, at)
    if group.txn is not None:
        group.txn.supersede(tp, at)


def apply_offset_tombstone(group: OffsetHolder, record: OffsetTombstone) -> None:
    group.offsets.pop((record.topic, record.partition), None)

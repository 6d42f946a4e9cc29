"""Coordinator records every group type writes, and the base class of all records.

The shapes follow Kafka's `__consumer_offsets` records (design note 003, "Persistent record
layouts"): one OffsetCommit record per committed partition, and tombstones for deleted
offsets and groups, whatever the group's protocol. The records of one protocol live with it:
the classic group record in group/records.py, the KIP-848 records in consumer_group/records.py;
each subclasses `Record`. storage/coordinator_records.py encodes every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass


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

"""A share group's coordinator records (RecordType 30-32 in storage/coordinator_records.py).

Kafka keeps a share group's metadata in `__consumer_offsets` and its share-partition state as
snapshots and updates in `__share_group_state`; we write both to the coordinator log:

- `ShareGroupMetadataRecord`: the group exists, with its `cgp_` id and group epoch (the
  group record of the group: one per group, like a classic or consumer group's);
- `SharePartitionRecord`: one share partition's whole state, its start offset and the runs
  of its in-flight records (first, last, state, delivery count); a later one replaces it;
- `SharePartitionTombstone`: the share partition's state is gone (DeleteShareGroupOffsets).

Members are not stored: after a restart a member's next heartbeat is UNKNOWN_MEMBER_ID and
it joins again, and the locks of its acquired records are gone with it (their delivery
counts are stored, so those records are delivered again with their counts carried on).
A GroupTombstone deletes the group and all of its share partitions.

`apply` is each record's change to the group. The group record and the partition tombstone
are the handlers' only way to make their change (`Effects.write`); a partition's record is a
snapshot of a partition whose live state is richer (who holds what, until when), stored as it
is (`Effects.write_snapshot`) and applied at start-up only (coordinator/apply.py), where
`on_loaded` then releases what was acquired.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..group_common.records import Record
from .partition import SharePartition, StateBatch
from .state import ShareGroup


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataRecord(Record):
    group_id: str
    cgp_id: str
    group_epoch: int


@dataclass(frozen=True, slots=True)
class SharePartitionRecord(Record):
    group_id: str
    topic: str
    partition: int
    start_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class SharePartitionTombstone(Record):
    group_id: str
    topic: str
    partition: int


SHARE_PARTITION_TAIL = 1  # key tails (1, topic, partition), below the group (coordinator/latest.py)


def apply(group: ShareGroup, record: Record) -> None:
    _APPLY[type(record)](group, record)


def _group(group: ShareGroup, record: ShareGroupMetadataRecord) -> None:
    group.cgp_id = record.cgp_id
    group.group_epoch = record.group_epoch


def _partition(group: ShareGroup, record: SharePartitionRecord) -> None:
    key = (record.topic, record.partition)
    group.partitions[key] = SharePartition.of_snapshot(record.start_offset, record.batches)


def _partition_gone(group: ShareGroup, record: SharePartitionTombstone) -> None:
    group.partitions.pop((record.topic, record.partition), None)


_APPLY: dict[type, Callable[[ShareGroup, Any], None]] = {
    ShareGroupMetadataRecord: _group,
    SharePartitionRecord: _partition,
    SharePartitionTombstone: _partition_gone,
}
SHARE_RECORDS = tuple(_APPLY)  # every record type `apply` takes


def on_loaded(group: ShareGroup, delivery_count_limit: int) -> None:
    """A group rebuilt from its records: no member survives a restart (members are not
    stored), and the locks of what they acquired are gone with them."""
    for partition in group.partitions.values():
        partition.release_locks(delivery_count_limit)

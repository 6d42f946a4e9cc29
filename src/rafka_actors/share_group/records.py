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
"""

from __future__ import annotations

from dataclasses import dataclass

from ..group_common.records import Record
from .partition import StateBatch


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

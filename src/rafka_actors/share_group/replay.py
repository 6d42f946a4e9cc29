"""A share group from its stored records: the group record and its partitions' snapshots."""

from __future__ import annotations

from collections.abc import Iterable

from .partition import SharePartition
from .records import ShareGroupMetadataRecord, SharePartitionRecord
from .state import ShareGroup


def assemble(
    head: ShareGroupMetadataRecord, records: Iterable[object], delivery_count_limit: int
) -> ShareGroup:
    """No member survives a restart (members are not stored); every share partition comes
    back unlocked, with its delivery counts (partition.py `restore`)."""
    group = ShareGroup(head.group_id, head.cgp_id, head.group_epoch)
    for record in records:
        if isinstance(record, SharePartitionRecord):
            group.partitions[(record.topic, record.partition)] = SharePartition.restore(
                record.start_offset, record.batches, delivery_count_limit
            )
    return group

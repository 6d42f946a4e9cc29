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
from .hot_values import GroupMetadataRecord as GroupMetadataRecord  # made per new group
from .hot_values import MemberRow as MemberRow
from .hot_values import OffsetCommitRecord as OffsetCommitRecord  # made per commit

# GroupMetadataRecord (a new group's first commit and every membership change write one) and
# OffsetCommitRecord (one per committed partition): in hot_values.py (imported above).


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

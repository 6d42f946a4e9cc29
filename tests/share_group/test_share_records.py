"""A share group's coordinator records: encoded and decoded exactly, with the compaction keys
the live view uses (a partition's newer state replaces the older; its tombstone and the group's
delete it), and malformed state batches refused."""

from __future__ import annotations

import cbor2
import pytest

from rafka_actors.coordinator.latest import GroupRecords
from rafka_actors.group_common.records import GroupTombstone
from rafka_actors.ids import GroupKey
from rafka_actors.share_group.records import (
    ShareGroupMetadataRecord,
    SharePartitionRecord,
    SharePartitionTombstone,
)
from rafka_actors.storage.coordinator_records import (
    CoordinatorRecordError,
    RecordType,
    compaction_key,
    decode_entry,
    encode_entry,
    entry_compaction_key,
)

KEY = GroupKey(3, "jobs")
RECORDS = [
    ShareGroupMetadataRecord("jobs", "cgp_1", 4),
    SharePartitionRecord("jobs", "t", 1, 10, ((10, 12, 1, 2), (13, 13, 4, 5))),
    SharePartitionTombstone("jobs", "t", 1),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip_and_compaction_keys(record: object) -> None:
    payload = encode_entry(KEY, record)  # type: ignore[arg-type]
    assert cbor2.loads(payload)[0] in range(30, 40)  # share's record types
    assert decode_entry(payload) == (KEY, record)
    assert entry_compaction_key(payload) == compaction_key(KEY, record)  # type: ignore[arg-type]


def test_the_live_view_keeps_the_latest_state_per_partition() -> None:
    latest: GroupRecords[object] = GroupRecords()
    newer = SharePartitionRecord("jobs", "t", 1, 13, ())
    other = SharePartitionRecord("jobs", "t", 0, 0, ())
    latest.apply([*RECORDS[:2], newer, other])  # type: ignore[list-item]
    assert latest.records() == [RECORDS[0], newer, other]
    latest.apply([SharePartitionTombstone("jobs", "t", 1)])
    assert latest.records() == [RECORDS[0], other]
    latest.apply([GroupTombstone("jobs")])
    assert latest.is_empty()


def test_malformed_state_batches_are_refused() -> None:
    bad = cbor2.dumps(
        [RecordType.SHARE_PARTITION_STATE, 0, 3, "jobs", "jobs", "t", 1, 10, [[10, 12, 1]]]
    )
    with pytest.raises(CoordinatorRecordError):
        decode_entry(bad)

"""An OffsetCommit entry written without cbor2 is byte for byte the entry cbor2 writes."""

from __future__ import annotations

import cbor2
from hypothesis import given
from hypothesis import strategies as st

from rafka_actors.group.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey
from rafka_actors.storage import commit_entry
from rafka_actors.storage.coordinator_records import RecordType, decode_entry, encode_entry

# every length class of CBOR's integer heads, both signs, and beyond 64 bits (a bignum)
edges = [0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1, 2**64]
ints = st.sampled_from([*edges, *(-1 - n for n in edges)]) | st.integers()
texts = st.text() | st.sampled_from(["", "x" * 23, "x" * 24, "é" * 200, "\U0001f600" * 70000])


def cbor2_entry(key: GroupKey, record: OffsetCommitRecord) -> bytes:
    fields = (record.group_id, record.topic, record.partition, record.offset)
    rest = (record.leader_epoch, record.metadata, record.commit_timestamp_ms)
    return cbor2.dumps((int(RecordType.OFFSET_COMMIT), 0, key.org_id, key.group_id, *fields, *rest))


@given(
    org=ints,
    group=texts,
    key_group=st.none() | texts,
    topic=texts,
    partition=ints,
    offset=ints,
    epoch=ints,
    metadata=st.none() | texts,
    stamp=ints,
)
def test_an_offset_commit_entry_is_the_bytes_cbor2_writes(
    org: int,
    group: str,
    key_group: str | None,
    topic: str,
    partition: int,
    offset: int,
    epoch: int,
    metadata: str | None,
    stamp: int,
) -> None:
    key = GroupKey(org, group if key_group is None else key_group)
    record = OffsetCommitRecord(group, topic, partition, offset, epoch, metadata, stamp)
    assert encode_entry(key, record) == cbor2_entry(key, record)


def test_the_hand_written_path_is_the_one_taken_for_a_plain_commit() -> None:
    key = GroupKey(7, "orders")
    record = OffsetCommitRecord("orders", "events", 3, 2**40, -1, "", 1_764_170_000_000)
    written = commit_entry.offset_commit_entry(1, 0, 7, "orders", record)
    assert written is not None and written == cbor2_entry(key, record)
    assert decode_entry(written) == (key, record)


def test_values_cbor2_writes_otherwise_fall_back_to_cbor2() -> None:
    key = GroupKey(0, "g")
    for bignum in (2**64, -(2**64) - 1):
        record = OffsetCommitRecord("g", "t", 0, bignum, -1, None, 0)
        assert commit_entry.offset_commit_entry(1, 0, 0, "g", record) is None
        assert encode_entry(key, record) == cbor2_entry(key, record)
    # CBOR's true where the pure build keeps a bool (the compiled record stores an int 1)
    flag = OffsetCommitRecord("g", "t", 0, True, -1, None, 0)
    assert encode_entry(key, flag) == cbor2_entry(key, flag)
    lone_surrogate = OffsetCommitRecord("g", "\ud800", 0, 1, -1, None, 0)
    assert commit_entry.offset_commit_entry(1, 0, 0, "g", lone_surrogate) is None

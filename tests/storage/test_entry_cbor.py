"""A coordinator entry written without cbor2 is byte for byte the entry cbor2 writes."""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rafka_actors.group.records import GroupMetadataRecord, OffsetCommitRecord, Record
from rafka_actors.ids import GroupKey
from rafka_actors.storage import entry_cbor
from rafka_actors.storage.coordinator_records import (
    _ENCODING,
    RecordType,
    decode_entry,
    encode_entry,
)

from .test_consumer_group_records import RECORDS as CONSUMER_RECORDS
from .test_coordinator_log_records import keys, records

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
    written = entry_cbor.offset_commit_entry(1, 0, 7, "orders", record)
    assert written is not None and written == cbor2_entry(key, record)
    assert decode_entry(written) == (key, record)


def test_values_cbor2_writes_otherwise_fall_back_to_cbor2() -> None:
    key = GroupKey(0, "g")
    for bignum in (2**64, -(2**64) - 1):
        record = OffsetCommitRecord("g", "t", 0, bignum, -1, None, 0)
        assert entry_cbor.offset_commit_entry(1, 0, 0, "g", record) is None
        assert encode_entry(key, record) == cbor2_entry(key, record)
    # CBOR's true where the pure build keeps a bool (the compiled record stores an int 1)
    flag = OffsetCommitRecord("g", "t", 0, True, -1, None, 0)
    assert encode_entry(key, flag) == cbor2_entry(key, flag)
    lone_surrogate = OffsetCommitRecord("g", "\ud800", 0, 1, -1, None, 0)
    assert entry_cbor.offset_commit_entry(1, 0, 0, "g", lone_surrogate) is None


# The kinds plain_array writes (tuples and lists both are CBOR arrays), nested
plain = st.recursive(
    st.none() | ints | texts | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.lists(inner, max_size=5).map(tuple),
    max_leaves=30,
)


@settings(max_examples=300)
@given(items=st.lists(plain, max_size=12).map(tuple))
def test_a_plain_array_is_the_bytes_cbor2_writes(items: tuple[object, ...]) -> None:
    written = entry_cbor.plain_array(items)
    if any(_not_plain(item) for item in items):  # a bignum, a lone surrogate: cbor2 writes it
        assert written is None
    else:
        assert written == cbor2.dumps(items)


def _not_plain(item: object) -> bool:
    if isinstance(item, (list, tuple)):
        return any(_not_plain(inner) for inner in item)
    if isinstance(item, int):
        return not -(2**64) <= item < 2**64
    if isinstance(item, str):
        try:
            item.encode()
        except UnicodeEncodeError:
            return True
    return False


def cbor2_of(key: GroupKey, record: Record) -> bytes:
    """What cbor2 writes for the entry: encode_entry's fallback."""
    tag, version, fields = _ENCODING[type(record)]
    return cbor2.dumps((tag, version, key.org_id, key.group_id, *fields(record)))


@settings(max_examples=300)
@given(keys, records)
def test_every_classic_record_is_the_entry_cbor2_writes(key: GroupKey, record: Record) -> None:
    assert encode_entry(key, record) == cbor2_of(key, record)


def test_every_consumer_group_record_is_the_entry_cbor2_writes() -> None:
    key = GroupKey(3, "fooup")
    for record in CONSUMER_RECORDS:
        assert encode_entry(key, record) == cbor2_of(key, record)


def test_a_new_group_record_takes_the_hand_written_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # a new group's first commit writes this record (group/offsets.py commit)
    record = GroupMetadataRecord("orders", "cgp_1", None, 0, None, None, 2**40, (), "simple group")
    key = GroupKey(7, "orders")
    expected = cbor2_of(key, record)

    def no_cbor2(_value: object) -> bytes:
        raise AssertionError("cbor2 wrote a plain entry")

    monkeypatch.setattr(cbor2, "dumps", no_cbor2)
    assert encode_entry(key, record) == expected
    assert decode_entry(expected) == (key, record)


def test_other_values_fall_back_to_cbor2() -> None:
    for odd in (True, 2**64, -(2**64) - 1, 1.5, {"a": 1}, "\ud800", (1, (2, False))):
        assert entry_cbor.plain_array((1, odd)) is None
    member = ("m", None, "c", "/h", 30_000, 10_000, b"\x00", b"")
    record = GroupMetadataRecord("g", "c", "consumer", True, "range", "m", 0, (member,))
    key = GroupKey(0, "g")
    assert encode_entry(key, record) == cbor2_of(key, record)  # (a bool generation: cbor2's)

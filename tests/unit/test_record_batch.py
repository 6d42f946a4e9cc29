"""Tests for rafka_actors.storage.record_batch."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rafka_actors.storage.record_batch import (
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    InvalidRecordError,
    assign_offsets,
    parse_header,
    split_batches,
)
from tests.batch_builder import build_batch, decode_batches, fix_crc

RECORDS = [(b"k1", b"v1"), (None, b"value-2"), (b"k3", None)]


def _patch(batch: bytes, fmt: str, pos: int, value: int, *, crc: bool = False) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, pos, value)
    return fix_crc(bytes(out)) if crc else bytes(out)


def test_parse_header_fields() -> None:
    batch = build_batch(
        RECORDS, base_offset=5, timestamps=[10, 30, 20], base_timestamp=10,
        producer_id=42, producer_epoch=3, base_sequence=7, attributes=0x10,
    )  # fmt: skip
    h = parse_header(batch)
    assert isinstance(h, BatchHeader)
    assert (h.base_offset, h.magic, h.records_count, h.last_offset_delta) == (5, 2, 3, 2)
    assert (h.base_timestamp, h.max_timestamp) == (10, 30)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 7)
    assert h.last_offset == 7
    assert h.size == len(batch)
    assert h.is_transactional and not h.is_control
    assert parse_header(build_batch(RECORDS, attributes=0x20)).is_control


def test_parse_header_at_position_and_truncated() -> None:
    batch = build_batch(RECORDS, base_offset=9)
    assert parse_header(b"xx" + batch, 2).base_offset == 9
    with pytest.raises(InvalidRecordError) as info:
        parse_header(batch[: HEADER_SIZE - 1])
    assert info.value.corrupt


def test_split_empty_blob() -> None:
    assert split_batches(b"") == []


def test_split_several_batches_zero_copy() -> None:
    batches = [build_batch(RECORDS), build_batch([(b"a", b"b")]), build_batch(RECORDS * 10)]
    blob = b"".join(batches)
    views = split_batches(blob)
    assert [bytes(v) for v in views] == batches
    assert all(v.obj is blob for v in views)


def test_split_accepts_memoryview_slice() -> None:
    batch = build_batch(RECORDS)
    backing = memoryview(b"junk" + batch + b"junk")
    assert [bytes(v) for v in split_batches(backing[4:-4])] == [batch]


def test_minimum_batch_length_constant() -> None:
    assert MIN_BATCH_LENGTH == 49
    assert len(build_batch([(None, None)])) > HEADER_SIZE


@given(
    st.data(),
    st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=50)), min_size=1, max_size=5),
)
def test_any_bit_flip_in_crc_covered_area_is_corrupt(data: st.DataObject, records: list) -> None:
    batch = build_batch(records)
    pos = data.draw(st.integers(min_value=17, max_value=len(batch) - 1), label="byte")
    bit = data.draw(st.integers(min_value=0, max_value=7), label="bit")
    flipped = bytearray(batch)
    flipped[pos] ^= 1 << bit
    with pytest.raises(InvalidRecordError) as info:
        split_batches(bytes(flipped))
    assert info.value.corrupt


def test_bit_flip_in_second_batch_rejects_whole_blob() -> None:
    first, second = build_batch(RECORDS), bytearray(build_batch(RECORDS))
    second[-1] ^= 0x01
    with pytest.raises(InvalidRecordError, match="CRC") as info:
        split_batches(first + bytes(second))
    assert info.value.corrupt


def test_every_truncation_is_corrupt() -> None:
    blob = build_batch(RECORDS) + build_batch([(b"x", b"y")])
    for cut in range(1, len(blob)):
        if cut == len(build_batch(RECORDS)):
            continue  # a whole first batch alone is a valid blob
        with pytest.raises(InvalidRecordError) as info:
            split_batches(blob[:cut])
        assert info.value.corrupt, cut


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_wrong_magic_is_invalid_not_corrupt(magic: int) -> None:
    with pytest.raises(InvalidRecordError, match="magic") as info:
        split_batches(build_batch(RECORDS, magic=magic))
    assert not info.value.corrupt


def test_batch_length_below_minimum_is_corrupt() -> None:
    batch = _patch(build_batch(RECORDS), ">i", 8, MIN_BATCH_LENGTH - 1)
    with pytest.raises(InvalidRecordError, match="batchLength") as info:
        split_batches(batch)
    assert info.value.corrupt


def test_negative_records_count_is_corrupt() -> None:
    batch = _patch(build_batch(RECORDS), ">i", 57, -1, crc=True)
    with pytest.raises(InvalidRecordError, match="recordsCount") as info:
        split_batches(batch)
    assert info.value.corrupt


@pytest.mark.parametrize("delta", [-1, 0, 1, 3, 100])
def test_last_offset_delta_must_match_count(delta: int) -> None:
    with pytest.raises(InvalidRecordError, match="lastOffsetDelta") as info:
        split_batches(build_batch(RECORDS, last_offset_delta=delta))
    assert not info.value.corrupt


def test_assign_offsets_rewrites_only_crc_free_fields() -> None:
    batch = build_batch(RECORDS, partition_leader_epoch=17)
    stamped = assign_offsets(memoryview(batch), 1234)
    h = parse_header(stamped)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 0)
    assert stamped[16:] == batch[16:] and stamped[8:12] == batch[8:12]
    assert [bytes(v) for v in split_batches(stamped)] == [stamped]  # CRC still valid
    assert [r.offset for r in decode_batches(stamped)] == [1234, 1235, 1236]
    assert parse_header(batch).base_offset == 0  # input untouched


@given(
    st.lists(
        st.lists(
            st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=300)),
            min_size=1,
            max_size=8,
        ),
        max_size=6,
    )
)
def test_split_round_trips_random_batches(batches: list) -> None:
    built = [build_batch(records) for records in batches]
    views = split_batches(b"".join(built))
    assert [bytes(v) for v in views] == built
    decoded = [(r.key, r.value) for r in decode_batches(b"".join(built))]
    assert decoded == [kv for records in batches for kv in records]

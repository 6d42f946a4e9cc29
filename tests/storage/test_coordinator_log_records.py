"""Coordinator entries: CBOR round trip, strict decoding, compaction keys and the live view."""

from __future__ import annotations

import cbor2
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.group_common.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from rafka_actors.group_common.txn_offsets import (
    TxnMarkerRecord,
    TxnOffsetCommitRecord,
    TxnOffsetTombstone,
    TxnProducerEpochRecord,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.coordinator_records import (
    CoordinatorRecordError,
    LatestRecords,
    RecordType,
    UnsupportedRecordError,
    compaction_key,
    decode_entry,
    encode_entry,
    entry_compaction_key,
)

text = st.text(max_size=12)
opt_text = st.none() | text
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
member_rows = st.tuples(
    text, opt_text, text, text, int32, int32, st.binary(max_size=20), st.binary(max_size=20)
)
group_records = st.builds(
    GroupMetadataRecord,
    group_id=text,
    cgp_id=text,
    protocol_type=opt_text,
    generation=int32,
    protocol_name=opt_text,
    leader_id=opt_text,
    state_timestamp_ms=int64,
    members=st.lists(member_rows, max_size=4).map(tuple),
    reason=text,
)
offset_records = st.builds(
    OffsetCommitRecord,
    group_id=text,
    topic=text,
    partition=int32,
    offset=int64,
    leader_epoch=int32,
    metadata=opt_text,
    commit_timestamp_ms=int64,
)
records: st.SearchStrategy[Record] = st.one_of(
    group_records,
    offset_records,
    st.builds(OffsetTombstone, group_id=text, topic=text, partition=int32),
    st.builds(GroupTombstone, group_id=text),
    st.builds(
        TxnOffsetCommitRecord,
        group_id=text,
        producer_id=int64,
        producer_epoch=int32,
        topic=text,
        partition=int32,
        offset=int64,
        leader_epoch=int32,
        metadata=opt_text,
        commit_timestamp_ms=int64,
    ),
    st.builds(
        TxnMarkerRecord,
        group_id=text,
        producer_id=int64,
        producer_epoch=int32,
        committed=st.booleans(),
    ),
    st.builds(TxnOffsetTombstone, group_id=text, producer_id=int64, topic=text, partition=int32),
    st.builds(TxnProducerEpochRecord, group_id=text, producer_id=int64, producer_epoch=int32),
)
keys = st.builds(GroupKey, org_id=int64, group_id=text)


@settings(max_examples=400)
@given(keys, records)
def test_round_trip_gives_the_identical_record(key: GroupKey, record: Record) -> None:
    payload = encode_entry(key, record)
    decoded_key, decoded = decode_entry(payload)
    assert (decoded_key, decoded) == (key, record)
    assert entry_compaction_key(payload) == compaction_key(key, record)
    assert type(decoded) is type(record)
    if isinstance(decoded, GroupMetadataRecord):  # tuples, not lists, all the way down
        assert isinstance(decoded.members, tuple)
        assert all(isinstance(row, tuple) for row in decoded.members)


def test_layout_is_type_version_org_group_fields() -> None:
    record = OffsetCommitRecord("g", "t", 3, 42, 7, None, 1000)
    assert cbor2.loads(encode_entry(GroupKey(5, "g"), record)) == [
        1,
        0,
        5,
        "g",
        "g",
        "t",
        3,
        42,
        7,
        None,
        1000,
    ]
    tags = {
        OffsetCommitRecord: RecordType.OFFSET_COMMIT,
        GroupMetadataRecord: RecordType.GROUP_METADATA,
        OffsetTombstone: RecordType.OFFSET_TOMBSTONE,
        GroupTombstone: RecordType.GROUP_TOMBSTONE,
    }
    assert [int(tags[c]) for c in tags] == [1, 2, 3, 4]
    assert cbor2.loads(encode_entry(GroupKey(1, "x"), GroupTombstone("x")))[:2] == [4, 0]


def test_entries_are_written_byte_for_byte_as_logs_already_hold_them() -> None:
    # Bytes of entries as brokers have written them (cbor2's canonical shortest forms): a
    # change here would make a new log differ from an old one, even if both still decode.
    key = GroupKey(7, "orders")
    member = ("m-1", "i-1", "client", "/10.0.0.1", 300_000, 45_000, b"\x00\x01", b"\x02")
    written = {
        OffsetCommitRecord("orders", "events", 3, 2**40, -1, "", 1_764_170_000_000): (
            "8b010007666f7264657273666f7264657273666576656e7473031b000001000000000020601b00"
            "00019ac0b9e680"
        ),
        OffsetCommitRecord("orders", "événements", 70000, -5, 2, None, 1_764_170_000_001): (
            "8b010007666f7264657273666f72646572736cc3a976c3a96e656d656e74731a00011170240"
            "2f61b0000019ac0b9e681"
        ),
        GroupMetadataRecord(
            "orders",
            "cgp_1",
            "consumer",
            4,
            "range",
            "m-1",
            1_764_170_000_000,
            (member,),
            "rebalance",
            1_764_169_999_000,
            (("m-0", "left"),),
        ): (
            "8f020107666f7264657273666f7264657273656367705f3168636f6e73756d6572046572616e67"
            "65636d2d311b0000019ac0b9e6808188636d2d3163692d3166636c69656e74692f31302e302e30"
            "2e311a000493e019afc8420001410269726562616c616e63651b0000019ac0b9e2988182636d2d"
            "30646c656674"
        ),
        OffsetTombstone(
            "orders", "events", 3
        ): "87030007666f7264657273666f7264657273666576656e747303",
        GroupTombstone("orders"): "85040007666f7264657273666f7264657273",
    }
    for record, hex_bytes in written.items():
        assert encode_entry(key, record).hex() == hex_bytes
        assert decode_entry(bytes.fromhex(hex_bytes)) == (key, record)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ([99, 0, 1, "g", "g"], "unknown coordinator record type 99"),
        (["1", 0, 1, "g", "g"], "unknown coordinator record type '1'"),
        ([4, 1, 1, "g", "g"], "unknown version 1 of GroupTombstone"),
    ],
)
def test_unknown_type_or_version_is_a_clear_error(entry: list[object], message: str) -> None:
    with pytest.raises(UnsupportedRecordError, match=message):
        decode_entry(cbor2.dumps(entry))


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xff\xfe",
        cbor2.dumps({"not": "an array"}),
        cbor2.dumps([1, 0, 1]),
        cbor2.dumps([4, 0, "org", "g", "g"]),
        cbor2.dumps([4, 0, 1, "g"]),  # a field missing
        cbor2.dumps([4, 0, 1, "g", "g", "extra"]),
        cbor2.dumps([3, 0, 1, "g", "g", "t", "0"]),  # partition not an int
        cbor2.dumps([3, 0, 1, "g", "g", "t", True]),
        cbor2.dumps([4, 0, 1, "g", "g"]) + b"\x00",  # trailing bytes
        cbor2.dumps([2, 0, 1, "g", "g", "c", None, 1, None, None, 0, [["m"]], ""]),
    ],
)
def test_malformed_payloads_raise_value_errors(payload: bytes) -> None:
    with pytest.raises(CoordinatorRecordError) as info:
        decode_entry(payload)
    assert isinstance(info.value, ValueError)  # what the segment reader treats as damage


def test_compaction_keys_nest_offsets_under_their_group() -> None:
    key = GroupKey(7, "g")
    assert compaction_key(key, OffsetCommitRecord("g", "t", 1, 5, -1, "", 0)) == (
        (7, "g", "t", 1),
        False,
    )
    assert compaction_key(key, OffsetTombstone("g", "t", 1)) == ((7, "g", "t", 1), True)
    assert compaction_key(key, GroupTombstone("g")) == ((7, "g"), True)
    meta = GroupMetadataRecord("g", "cgp", "consumer", 1, "range", None, 0, ())
    assert entry_compaction_key(encode_entry(key, meta)) == ((7, "g"), False)


def _normalised(records: list[Record]) -> tuple[list[Record], dict[tuple[str, int], Record]]:
    """(group records, live offsets): what replay makes of a records_of answer."""
    groups: list[Record] = [r for r in records if isinstance(r, GroupMetadataRecord)]
    offsets: dict[tuple[str, int], Record] = {}
    for r in records:
        if isinstance(r, OffsetCommitRecord):
            offsets[(r.topic, r.partition)] = r
        elif isinstance(r, OffsetTombstone):
            offsets.pop((r.topic, r.partition), None)
    return groups, offsets


small_ops = st.lists(
    st.tuples(
        st.sampled_from([GroupKey(1, "a"), GroupKey(1, "b"), GroupKey(2, "a")]),
        st.one_of(
            st.builds(
                lambda t, p, o: OffsetCommitRecord("x", t, p, o, -1, None, 0),
                st.sampled_from("tu"),
                st.integers(0, 2),
                st.integers(0, 99),
            ),
            st.builds(
                lambda t, p: OffsetTombstone("x", t, p), st.sampled_from("tu"), st.integers(0, 2)
            ),
            st.builds(
                lambda g: GroupMetadataRecord("x", "c", None, g, None, None, 0, ()),
                st.integers(0, 5),
            ),
            st.just(GroupTombstone("x")),
        ),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(small_ops)
def test_latest_records_matches_the_memory_log(ops: list[tuple[GroupKey, Record]]) -> None:
    view, memory = LatestRecords(), MemoryCoordinatorLog()

    async def feed() -> None:
        for key, record in ops:
            await memory.append(key, [record])

    trio.run(feed)
    for key, record in ops:
        view.apply(key, [record])
    for key in {k for k, _ in ops}:
        ours = view.records_of(key)
        assert _normalised(ours) == _normalised(memory.records_of(key))
        assert not any(isinstance(r, OffsetTombstone | GroupTombstone) for r in ours)
        groups = [r for r in ours if isinstance(r, GroupMetadataRecord)]
        assert len(groups) <= 1
        assert ours[: len(groups)] == groups  # the group record comes first
    assert set(view.keys()) == {
        k
        for k in {k for k, _ in ops}
        if memory.records_of(k) and _normalised(memory.records_of(k)) != ([], {})
    }


def test_group_metadata_v0_entries_still_decode_with_the_new_fields_defaulted() -> None:
    """Logs written before version 1 (no rebalance start, no departures) stay readable."""
    key = GroupKey(1, "g")
    v0 = cbor2.dumps([2, 0, 1, "g", "g", "cgp", "consumer", 3, "range", "m", 7, [], "why"])
    _, record = decode_entry(v0)
    assert record == GroupMetadataRecord("g", "cgp", "consumer", 3, "range", "m", 7, (), "why")
    assert (record.rebalance_started_ms, record.departed) == (-1, ())
    v1 = GroupMetadataRecord(
        "g",
        "cgp",
        "consumer",
        4,
        "range",
        "m",
        9,
        (),
        "member x session timeout",
        8,
        (("x", "session timeout"),),
    )
    payload = encode_entry(key, v1)
    assert cbor2.loads(payload)[:2] == [2, 1]
    assert decode_entry(payload) == (key, v1)
    newer = cbor2.loads(payload)
    newer[1] = 2
    with pytest.raises(UnsupportedRecordError, match="unknown version 2"):
        decode_entry(cbor2.dumps(newer))

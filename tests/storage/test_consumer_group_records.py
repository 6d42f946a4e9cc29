"""KIP-848 records in the coordinator log: strict encoding, compaction keys, and a real
workload's records surviving compaction and a reopen (the group rebuilt is the group)."""

from __future__ import annotations

import uuid
from pathlib import Path

import cbor2
import pytest

from rafka_actors.consumer_group.records import (
    ConsumerCurrentAssignmentRecord,
    ConsumerGroupMetadataRecord,
    ConsumerMemberMetadataRecord,
    ConsumerMemberTombstone,
    ConsumerStateTombstone,
    ConsumerTargetMemberRecord,
    ConsumerTargetMetadataRecord,
)
from rafka_actors.coordinator.apply import replay
from rafka_actors.group_common.records import Record
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_records import (
    CoordinatorRecordError,
    compaction_key,
    decode_entry,
    encode_entry,
    entry_compaction_key,
)

from ..consumer_group.harness import ConsumerHarness, durable_view
from .test_coordinator_log_compaction import open_view

KEY = GroupKey(3, "fooup")
TOPIC = uuid.UUID(int=5).bytes
RECORDS: list[Record] = [
    ConsumerGroupMetadataRecord("fooup", "cgp_1", 4, 2**62, "member m joined"),
    ConsumerMemberMetadataRecord("fooup", "m", "i", None, "c", "/h", ("a", "b"), "x.*", 30, None),
    ConsumerTargetMetadataRecord("fooup", 4, 1_800_000_000_000),
    ConsumerTargetMemberRecord("fooup", "m", ((TOPIC, (0, 1, 5)),)),
    ConsumerCurrentAssignmentRecord("fooup", "m", 4, 3, 1, ((TOPIC, (0,)),), ((TOPIC, (1,)),)),
    ConsumerMemberTombstone("fooup", "m"),
    ConsumerStateTombstone("fooup"),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_consumer_records_round_trip_with_their_compaction_keys(record: Record) -> None:
    payload = encode_entry(KEY, record)
    assert decode_entry(payload) == (KEY, record)
    assert entry_compaction_key(payload) == compaction_key(KEY, record)


def test_member_keys_nest_under_their_tombstones() -> None:
    member_key, _ = compaction_key(KEY, RECORDS[1])
    tomb_key, is_tomb = compaction_key(KEY, RECORDS[5])
    state_key, _ = compaction_key(KEY, RECORDS[6])
    assert is_tomb and member_key[: len(tomb_key)] == tomb_key
    assert member_key[: len(state_key)] == state_key
    # ...and never under an offset's key, whatever the topic is called
    offset_key = (3, "fooup", "0", 1)
    assert offset_key[: len(state_key)] != state_key


@pytest.mark.parametrize(
    "rows",
    [
        [[b"short", [0]]],
        [[TOPIC, [0, "1"]]],
        [[TOPIC]],
        "not rows",
    ],
)
def test_malformed_partition_rows_are_damage(rows: object) -> None:
    good = cbor2.loads(encode_entry(KEY, RECORDS[3]))
    good[-1] = rows
    with pytest.raises(CoordinatorRecordError):
        decode_entry(cbor2.dumps(good))


def _workload() -> ConsumerHarness:
    """Joins, a settle, a static member stepping out and being replaced, a leave, commits."""
    h = ConsumerHarness()
    h.create_topic("foo", 6)
    owned: dict[str, dict[str, set[int]]] = {}
    for member_id, instance in (("m1", None), ("m2", "i2"), ("m3", None)):
        owned[member_id] = h.named(h.join(member_id, instance_id=instance).assignment) or {}
    for _ in range(3):
        for member_id in list(owned):
            member = h.consumer.members[member_id]
            resp = h.heartbeat(member_id, member.member_epoch, owned=owned[member_id])
            if resp.assignment is not None:
                owned[member_id] = h.named(resp.assignment) or {}
    h.heartbeat("m2", -2, instance_id="i2")
    h.join("m2-new", instance_id="i2")
    h.heartbeat("m3", -1)
    return h


def test_a_workload_survives_compaction_and_reopen(tmp_path: Path) -> None:
    h = _workload()
    log, _ = open_view(tmp_path, segment_bytes=1)  # one segment per record
    for record in h.records:
        log.append([encode_entry(KEY, record)])
    log.append([])  # seal the last one
    log.compact_sealed(entry_compaction_key, now_ms=2**62, tombstone_retention_ms=0)
    log.close()
    reopened, view = open_view(tmp_path)
    try:
        rebuilt = replay(view.records_of(KEY), h.now)
    finally:
        reopened.close()
    assert durable_view(rebuilt) == durable_view(h.consumer)
    assert len(list(tmp_path.glob("*.log"))) < len(h.records)


def test_classic_member_metadata_round_trips_and_version_0_still_decodes() -> None:
    """Version 1 of the member metadata adds a classic member's session timeout and
    protocols (online migration); an entry written at version 0 reads as a consumer-protocol
    member."""
    classic = ConsumerMemberMetadataRecord(
        "fooup", "c", None, None, "c", "/h", ("a",), None, 30, None, 10_000, (("range", b"\0"),)
    )
    payload = encode_entry(KEY, classic)
    assert decode_entry(payload) == (KEY, classic)
    v0 = cbor2.loads(encode_entry(KEY, RECORDS[1]))[:-2]
    v0[1] = 0
    assert decode_entry(cbor2.dumps(v0)) == (KEY, RECORDS[1])
    bad = cbor2.loads(payload)
    bad[-1] = [["range", "not bytes"]]
    with pytest.raises(CoordinatorRecordError):
        decode_entry(cbor2.dumps(bad))

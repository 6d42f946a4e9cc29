"""Bulk replay of the coordinator log (storage/entry_replay.py, `Bulk` in the segments) gives
exactly what the entry-by-entry replay gives: the same view, the same damage handling."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.consumer_group.records import (
    ConsumerGroupMetadataRecord,
    ConsumerMemberMetadataRecord,
    ConsumerMemberTombstone,
    ConsumerStateTombstone,
)
from rafka_actors.coordinator.latest import LatestRecords
from rafka_actors.group_common.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage import coordinator_segments
from rafka_actors.storage.coordinator_records import (
    OFFSET_ENTRY_PATTERN,
    decode_entry,
    decode_stored,
    decode_trusted,
    encode_entry,
    offset_key_bytes,
)
from rafka_actors.storage.coordinator_segments import CoordinatorSegments, CorruptCoordinatorLog
from rafka_actors.storage.entry_replay import AmbiguousKeys, EntryReplay

GROUPS = [GroupKey(1, "a"), GroupKey(1, "b" * 30), GroupKey(2, "a"), GroupKey(0, "grüppe")]
topics = st.sampled_from(["t", "u" * 40, "ü", "v" * 300])
partitions = st.sampled_from([0, 1, 30, 70_000, -2])
metadata = st.sampled_from([None, "", "m", "é" * 3, "x" * 30])
members = st.tuples(
    st.just("m"),
    st.none(),
    st.just("c"),
    st.just("/h"),
    st.just(1),
    st.just(2),
    st.binary(max_size=3),
    st.binary(max_size=3),
)


def _record(group_id: str, draw: st.DrawFn) -> Record:
    kind = draw(st.integers(0, 9))
    if kind <= 4:
        return OffsetCommitRecord(
            group_id,
            draw(topics),
            draw(partitions),
            draw(st.integers(-1, 2**63 - 1)),
            draw(st.sampled_from([-1, 5])),
            draw(metadata),
            draw(st.integers(0, 2**45)),
        )
    if kind == 5:
        return OffsetTombstone(group_id, draw(topics), draw(partitions))
    if kind == 6:
        rows = tuple(draw(st.lists(members, max_size=40)))
        return GroupMetadataRecord(
            group_id, "cgp", "consumer", draw(st.integers(0, 9)), "r", None, 0, rows
        )
    if kind == 7:
        return GroupTombstone(group_id)
    if kind == 8:
        return ConsumerMemberMetadataRecord(
            group_id, draw(st.sampled_from("mn")), None, None, "c", "/h", ("t",), None, 1, None
        )
    return draw(
        st.sampled_from(
            [
                ConsumerMemberTombstone(group_id, "m"),
                ConsumerStateTombstone(group_id),
                ConsumerGroupMetadataRecord(group_id, "cgp", 3, 7),
            ]
        )
    )


@st.composite
def entries(draw: st.DrawFn) -> list[tuple[GroupKey, Record]]:
    out = []
    for _ in range(draw(st.integers(0, 120))):
        key = draw(st.sampled_from(GROUPS))
        out.append((key, _record(key.group_id, draw)))
    return out


def _write(directory: Path, ops: list[tuple[GroupKey, Record]], segment_bytes: int) -> None:
    segments = CoordinatorSegments.open(
        directory, decode_entry, lambda _: None, segment_bytes=segment_bytes
    )
    for i in range(0, len(ops), 7):
        segments.append([encode_entry(k, r) for k, r in ops[i : i + 7]])
    segments.close()


def _replay(directory: Path, *, bulk: bool, **kw: bool) -> dict[GroupKey, list[Record]]:
    view: LatestRecords[bytes] = LatestRecords()
    replay = EntryReplay(view, bulk=bulk)
    segments = CoordinatorSegments.open(
        directory, decode_stored, replay.apply_entry, bulk=replay.bulk, **kw
    )
    segments.close()
    replay.settle()
    return {key: sorted(decode_trusted(view.records_of(key)), key=repr) for key in view.keys()}  # noqa: SIM118 (a method, not a dict)


def _oracle(ops: list[tuple[GroupKey, Record]]) -> dict[GroupKey, list[Record]]:
    view: LatestRecords[Record] = LatestRecords()
    for key, record in ops:
        view.apply(key, [record])
    return {key: sorted(view.records_of(key), key=repr) for key in view.keys()}  # noqa: SIM118 (a method, not a dict)


@pytest.fixture(params=[64, 4 << 20], ids=["tiny-chunks", "one-chunk"])
def chunk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Tiny chunks cut frames (big group records included) at every chunk boundary."""
    monkeypatch.setattr(coordinator_segments, "_CHUNK", request.param)
    return int(request.param)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=entries(), segment_bytes=st.sampled_from([300, 1 << 20]))
def test_bulk_replay_equals_the_records_applied_in_order(
    tmp_path_factory: pytest.TempPathFactory,
    chunk: int,
    ops: list[tuple[GroupKey, Record]],
    segment_bytes: int,
) -> None:
    directory = tmp_path_factory.mktemp("log")
    _write(directory, ops, segment_bytes)
    assert _replay(directory, bulk=True) == _oracle(ops) == _replay(directory, bulk=False)


def _log_with(directory: Path, payloads: list[bytes]) -> Path:
    segments = CoordinatorSegments.open(directory, decode_entry, lambda _: None)
    segments.append(payloads)
    segments.close()
    return next(directory.glob("*.log"))


def _commits(n: int) -> list[bytes]:
    return [
        encode_entry(
            GROUPS[i % 2], OffsetCommitRecord(GROUPS[i % 2].group_id, "t", i % 3, i, -1, "", 0)
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("cut", [1, 5, 30])
def test_a_torn_tail_is_cut_at_the_same_byte_as_without_bulk(
    tmp_path: Path, cut: int, chunk: int
) -> None:
    results = []
    for bulk in (True, False):
        directory = tmp_path / str(bulk)
        path = _log_with(directory, _commits(50))
        data = path.read_bytes()
        path.write_bytes(data[:-cut])
        results.append((_replay(directory, bulk=bulk), path.stat().st_size))
    assert results[0] == results[1]
    assert results[0][1] < len(data) - cut


@pytest.mark.parametrize("zeros", [1, 4096, 1 << 20])
def test_unwritten_space_after_the_frames_is_dropped_as_without_bulk(
    tmp_path: Path, zeros: int, chunk: int
) -> None:
    """What a crash leaves of the active segment's preallocated space: zeros after the last
    frame, cut off by either replay."""
    results = []
    for bulk in (True, False):
        directory = tmp_path / str(bulk)
        path = _log_with(directory, _commits(50))
        data = path.read_bytes()
        path.write_bytes(data + bytes(zeros))
        results.append((_replay(directory, bulk=bulk), path.stat().st_size))
    assert results[0] == results[1]
    assert results[0][1] == len(data)


def test_damage_before_good_frames_is_reported_or_skipped_as_without_bulk(
    tmp_path: Path, chunk: int
) -> None:
    outcomes = []
    for bulk in (True, False):
        directory = tmp_path / str(bulk)
        path = _log_with(directory, _commits(50))
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(CorruptCoordinatorLog) as raised:
            _replay(directory, bulk=bulk)
        outcomes.append(
            (raised.value.position, _replay(directory, bulk=bulk, skip_corruption=True))
        )
    assert outcomes[0] == outcomes[1]


def test_one_key_written_in_two_ways_is_ambiguous_and_replays_strictly(tmp_path: Path) -> None:
    key = GroupKey(1, "a")
    canonical = encode_entry(key, OffsetCommitRecord("a", "t", 5, 1, -1, "", 0))
    longhand = canonical.replace(b"\x61t\x05", b"\x61t\x18\x05")  # partition 5 in two bytes
    assert decode_entry(longhand) == (key, OffsetCommitRecord("a", "t", 5, 1, -1, "", 0))
    later = encode_entry(key, OffsetCommitRecord("a", "t", 5, 2, -1, "", 0))
    _log_with(tmp_path, [canonical, longhand])
    with pytest.raises(AmbiguousKeys):
        _replay(tmp_path, bulk=True)
    assert _replay(tmp_path, bulk=False) == {key: [decode_entry(longhand)[1]]}
    _log_with(tmp_path, [later])
    assert _replay(tmp_path, bulk=False) == {key: [decode_entry(later)[1]]}


@settings(max_examples=300)
@given(
    st.builds(GroupKey, st.integers(-(2**63), 2**63 - 1), st.text(max_size=40)),
    st.text(max_size=300),
    st.integers(-(2**63), 2**63 - 1),
    st.one_of(st.none(), st.text(max_size=30)),
)
def test_the_pattern_takes_only_what_decodes_and_keys_it_as_encoded(
    key: GroupKey, topic: str, partition: int, meta: str | None
) -> None:
    pattern = re.compile(b"(?s)" + OFFSET_ENTRY_PATTERN)
    for record in (
        OffsetCommitRecord(key.group_id, topic, partition, partition, -1, meta, 0),
        OffsetTombstone(key.group_id, topic, partition),
    ):
        payload = encode_entry(key, record)
        match = pattern.fullmatch(payload)
        texts = [key.group_id, topic] + [meta or ""] * isinstance(record, OffsetCommitRecord)
        simple = all(s.isascii() and len(s.encode()) < 256 for s in texts)
        assert (match is not None) == simple
        if match:
            assert match["key"] == offset_key_bytes(key, record)
            assert (match["tombstone"] is not None) == isinstance(record, OffsetTombstone)
    for broken in (payload[:-1], payload + b"\x00", cbor2.dumps([3, 0, 1, "a", "a", "t", True])):
        assert pattern.fullmatch(broken) is None


def test_offset_entries_are_taken_in_runs_not_decoded_one_by_one(tmp_path: Path) -> None:
    _log_with(tmp_path, _commits(500))
    decoded: list[bytes] = []
    runs: list[int] = []
    view: LatestRecords[bytes] = LatestRecords()
    replay = EntryReplay(view)
    assert replay.bulk is not None
    bulk = coordinator_segments.Bulk(
        replay.bulk.pattern, lambda k, p: (runs.append(len(k)), replay.apply_run(k, p))[1]
    )
    CoordinatorSegments.open(
        tmp_path, lambda p: (decoded.append(p), decode_stored(p))[1], replay.apply_entry, bulk=bulk
    ).close()
    replay.settle()
    assert (decoded, runs) == ([], [500])
    assert len(view.records_of(GROUPS[0])) == 3


def test_a_long_run_of_other_records_is_one_pass_not_a_chunk_split_per_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment of KIP-848 member records (no offset among them) longer than a chunk: the
    bulk walk hands each chunk's worth of them to the ordinary decoding at once. Splitting a
    whole chunk again for every single frame made a 4.4 MB segment take minutes to open."""
    monkeypatch.setattr(coordinator_segments, "_CHUNK", 1024)
    key = GroupKey(1, "a")
    ops: list[tuple[GroupKey, Record]] = [
        (
            key,
            ConsumerMemberMetadataRecord(
                "a", f"m{i}", None, None, "c", "/h", ("t",), None, 1, None
            ),
        )
        for i in range(400)
    ]
    ops.append((key, OffsetCommitRecord("a", "t", 0, 7, -1, None, 1)))
    _write(tmp_path, ops, 1 << 20)
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    splits = 0
    real_chunk = coordinator_segments._BulkWalk._chunk

    def counting(self: Any, chunk: bytes, last: bool) -> int:
        nonlocal splits
        splits += 1
        return real_chunk(self, chunk, last)

    monkeypatch.setattr(coordinator_segments._BulkWalk, "_chunk", counting)
    assert _replay(tmp_path, bulk=True) == _oracle(ops)
    assert splits <= 2 * (size // 1024 + 1)  # about one per chunk, not one per frame (401)

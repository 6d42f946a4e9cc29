"""Synthetic data dirs for the pipeline's tests, written with the broker's own writers.

`DataDir` writes the coordinator log with `CoordinatorSegments` + `encode_entry` (one append per
record, so small ``coordinator_segment_bytes`` roll segments predictably) and the partition
logs with `TopicStore.create` + `PartitionLog.append` of real v2 batches (tests/batch_builder)
whose max timestamp is chosen, so that every time and offset the pipeline sees is known.

`burrow_scenario` lays out one consumer per Burrow status, with the exact lags it must yield.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.consumer_group.records import ConsumerGroupMetadataRecord
from rafka_actors.group_common.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_records import decode_entry, encode_entry
from rafka_actors.storage.coordinator_segments import CoordinatorSegments
from rafka_actors.storage.topics import TopicStore

from ..batch_builder import build_batch

T0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
STEP = 10_000  # a commit every 10 s


class DataDir:
    """A data dir being written: topics with batches, and a coordinator log."""

    def __init__(
        self,
        root: Path,
        *,
        coordinator_segment_bytes: int = 64 << 20,
        partition_segment_bytes: int = 1 << 30,
    ) -> None:
        self.root = root
        self.topics = TopicStore.open(root, segment_bytes=partition_segment_bytes)
        self.log = CoordinatorSegments.open(
            root / "coordinator",
            decode_entry,
            lambda _: None,
            segment_bytes=coordinator_segment_bytes,
        )

    def topic(self, name: str, partitions: int) -> None:
        self.topics.create(name, partitions)

    def produce(self, topic: str, partition: int, records: int, at_ms: int) -> int:
        """One batch of ``records`` records whose max timestamp is ``at_ms``; the new log end."""
        return self.produce_batches(topic, partition, [(records, at_ms)])

    def produce_batches(self, topic: str, partition: int, batches: list[tuple[int, int]]) -> int:
        """Batches of (records, max timestamp) in ONE append (one segment unless it rolls)."""
        found = self.topics.by_name(topic)
        assert found is not None
        log = found.partitions[partition]
        log.append([_batch(records, at_ms) for records, at_ms in batches])
        return log.log_end_offset

    def record(self, group: str, *records: Record, org: int = 0) -> None:
        """Records of one group in ONE append (a segment of their own if segment_bytes is 1)."""
        self.log.append([encode_entry(GroupKey(org, group), r) for r in records])

    def commit(
        self, group: str, topic: str, partition: int, offset: int, at_ms: int, org: int = 0
    ) -> None:
        record = OffsetCommitRecord(group, topic, partition, offset, -1, None, at_ms)
        self.record(group, record, org=org)

    def delete_offset(self, group: str, topic: str, partition: int, org: int = 0) -> None:
        self.record(group, OffsetTombstone(group, topic, partition), org=org)

    def close(self) -> None:
        self.log.close()
        self.topics.close()


def _batch(records: int, at_ms: int) -> bytes:
    """A batch of ``records`` records, the last stamped ``at_ms`` (the batch's max timestamp)."""
    stamps = [at_ms - 1] * (records - 1) + [at_ms]
    return build_batch([(None, b"x")] * records, base_timestamp=at_ms - 1, timestamps=stamps)


@dataclass
class Scenario:
    """What the lag job must find in `burrow_scenario`'s data dir."""

    now_ms: int
    # (group, topic, partition) -> [(commit time ms, offset, log end, lag)] in log order
    lag: dict[tuple[str, str, int], list[tuple[int, int, int, int]]] = field(default_factory=dict)
    partition_status: dict[tuple[str, str, int], str] = field(default_factory=dict)
    current_lag: dict[tuple[str, str, int], int] = field(default_factory=dict)
    group_status: dict[str, str] = field(default_factory=dict)


def burrow_scenario(root: Path) -> Scenario:
    """One topic, ``events``, 5 partitions, each fed a 10-record batch every 10 s.

    Batch k of every partition has max timestamp T0 + k*STEP - 5 s (k = 0..10), so the log end
    at commit time T0 + i*STEP is 10*(i+1), and 110 at the end. "Now" is the last batch's time,
    T0 + 95 s. Commits at T0 + i*STEP, i = 0..9:

    - ``ok`` on p0 commits the log end: lag 0.                               OK
    - ``slow`` on p1 commits 5*(i+1): lag 5*(i+1) grows while offsets move.  WARN
    - ``stuck`` on p2 commits 7 every time: lag grows, offset never moves.   STALL
    - ``quit`` on p3 commits log end - 2 for i = 0..3, then nothing: the last
      commit (30 s) is 65 s old, longer than the window's 30 s.             STOP
    - ``rewound`` on p4 commits log end - 3 for i = 0..5, then 5, 15, 25.    REWIND
    - ``mixed`` on p0 like ``ok`` and on p1 like ``slow``: group WARN.
    - ``revived`` on p0 commits 50, 60 (i = 4, 5), has that offset deleted,
      then commits 30, 40 (i = 8, 9): judged on the last two only (lags 60,
      60: WARN), not as a rewind.
    - ``gone`` commits on p0 once, then the group is deleted: lag rows, no status.
    """
    data = DataDir(root)
    data.topic("events", 5)
    for k in range(11):
        for p in range(5):
            data.produce("events", p, 10, T0 + k * STEP - 5_000)
    scenario = Scenario(now_ms=T0 + 10 * STEP - 5_000)

    def commit(group: str, p: int, i: int, offset: int) -> None:
        at_ms, log_end = T0 + i * STEP, 10 * (i + 1)
        data.commit(group, "events", p, offset, at_ms)
        lag = max(0, log_end - offset)
        scenario.lag.setdefault((group, "events", p), []).append((at_ms, offset, log_end, lag))

    for i in range(10):
        commit("ok", 0, i, 10 * (i + 1))
        commit("slow", 1, i, 5 * (i + 1))
        commit("stuck", 2, i, 7)
        if i <= 3:
            commit("quit", 3, i, 10 * (i + 1) - 2)
        commit("rewound", 4, i, 10 * (i + 1) - 3 if i <= 5 else 5 + 10 * (i - 6))
        commit("mixed", 0, i, 10 * (i + 1))
        commit("mixed", 1, i, 5 * (i + 1))
        if i in (4, 5):
            commit("revived", 0, i, 10 * (i + 1))
        if i == 5:
            data.delete_offset("revived", "events", 0)
        if i in (8, 9):
            commit("revived", 0, i, 10 * (i - 5))
        if i == 2:
            commit("gone", 0, i, 10)
            data.record("gone", GroupTombstone("gone"))
    data.close()

    scenario.partition_status = {
        ("ok", "events", 0): "OK",
        ("slow", "events", 1): "WARN",
        ("stuck", "events", 2): "STALL",
        ("quit", "events", 3): "STOP",
        ("rewound", "events", 4): "REWIND",
        ("mixed", "events", 0): "OK",
        ("mixed", "events", 1): "WARN",
        ("revived", "events", 0): "WARN",
    }
    last_offsets = {key: rows[-1][1] for key, rows in scenario.lag.items()}
    scenario.current_lag = {key: 110 - last_offsets[key] for key in scenario.partition_status}
    scenario.group_status = {
        "ok": "OK",
        "slow": "WARN",
        "stuck": "ERR",
        "quit": "ERR",
        "rewound": "ERR",
        "mixed": "WARN",
        "revived": "WARN",
    }
    return scenario


# -- a small data dir for the data sources ---------------------------------------------------

SEGMENT_0, SEGMENT_3, SEGMENT_5 = (f"{n:020d}.log" for n in (0, 3, 5))
MEMBERS = (
    ("m1", None, "client-1", "/127.0.0.1", 30_000, 10_000, b"sub", b"assignment"),
    ("m2", "static-2", "client-2", "/127.0.0.1", 30_000, 10_000, b"sub", b""),
)


@dataclass
class Small:
    """A three-segment coordinator log with a torn tail, and two partitions in three segments."""

    root: Path
    coordinator_files: list[Path]
    partition_files: list[Path]
    # rows as the pure readers give them (times as epoch ms, structs as dicts)
    commits: list[tuple[object, ...]]
    groups: list[tuple[object, ...]]
    index: list[tuple[object, ...]]


def small_data_dir(root: Path) -> Small:
    data = DataDir(root, coordinator_segment_bytes=1, partition_segment_bytes=1)
    g1 = [
        OffsetCommitRecord("g1", "t", 0, 5, 3, "meta", T0),
        OffsetCommitRecord("g1", "t", 1, 7, -1, None, T0 + 1),
        GroupMetadataRecord(
            "g1", "cgp_1", "consumer", 2, "range", "m1", T0 + 2, MEMBERS,
            "member m2 joined", T0 - 500, (("m0", "session timeout"),),
        ),
    ]  # fmt: skip
    data.record("g1", *g1)  # segment 0
    data.record("g1", OffsetTombstone("g1", "t", 1), GroupTombstone("g1"))  # segment 3
    g2 = [
        ConsumerGroupMetadataRecord("g2", "cgp_2", 4, 99, "member c1 joined", T0 + 3),
        OffsetCommitRecord("g2", "t", 0, 6, 1, "", T0 + 4),
    ]
    data.record("g2", *g2, org=7)  # segment 5
    data.topic("t", 2)
    data.produce_batches("t", 0, [(3, T0), (2, T0 + 10)])  # segment 0: offsets 0-2, 3-4
    data.produce_batches("t", 0, [(1, T0 + 20)])  # segment 5
    data.produce_batches("t", 1, [(4, T0 + 5)])
    data.close()

    coordinator = sorted((root / "coordinator").glob("*.log"))
    assert [p.name for p in coordinator] == [SEGMENT_0, SEGMENT_3, SEGMENT_5]
    pos = _positions(coordinator)
    with coordinator[-1].open("ab") as f:  # a torn tail: a frame header promising more
        f.write(struct.pack(">II", 500, 0) + b"half")
    p0 = sorted((root / "topics" / "t" / "0").glob("*.log"))
    p1 = sorted((root / "topics" / "t" / "1").glob("*.log"))
    with p1[0].open("ab") as f:  # a torn tail: half a batch
        f.write(_batch(2, T0 + 30)[:40])
    _spoil_first_record(p0[0])  # bodies are never read: a bad CRC goes unnoticed
    (root / "topics" / "half-created" / "0").mkdir(parents=True)  # no topic.json: ignored
    (root / "topics" / "old.0123.deleted" / "0").mkdir(parents=True)

    departed = [{"member_id": "m0", "why": "session timeout"}]
    classic = (
        0, "g1", "classic", 2, "range", "m1", ["m1", "m2"], "member m2 joined", T0 + 2, T0 - 500,
        departed, False, SEGMENT_0, pos[2],
    )  # fmt: skip
    consumer = (
        7, "g2", "consumer", 4, None, None, [], "member c1 joined", T0 + 3, None, [], False,
        SEGMENT_5, pos[5],
    )  # fmt: skip
    return Small(
        root,
        coordinator,
        [*p0, *p1],
        commits=[
            (0, "g1", "t", 0, 5, 3, "meta", T0, SEGMENT_0, pos[0]),
            (0, "g1", "t", 1, 7, -1, None, T0 + 1, SEGMENT_0, pos[1]),
            (0, "g1", "t", 1, None, None, None, None, SEGMENT_3, pos[3]),
            (0, "g1", None, None, None, None, None, None, SEGMENT_3, pos[4]),
            (7, "g2", "t", 0, 6, 1, "", T0 + 4, SEGMENT_5, pos[6]),
        ],
        groups=[classic, (0, "g1", *(None,) * 9, True, SEGMENT_3, pos[4]), consumer],
        index=[
            ("t", 0, 0, 2, T0, p0[0].name),
            ("t", 0, 3, 4, T0 + 10, p0[0].name),
            ("t", 0, 5, 5, T0 + 20, p0[1].name),
            ("t", 1, 0, 3, T0 + 5, p1[0].name),
        ],
    )


def _positions(files: list[Path]) -> list[int]:
    """The byte position of every frame, in log order (frames: u32 length, u32 CRC, payload)."""
    found = []
    for path in files:
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            found.append(pos)
            pos += 8 + struct.unpack_from(">I", data, pos)[0]
    return found


def _spoil_first_record(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records (its header is 61 bytes)
    path.write_bytes(bytes(data))


def plain(value: Any) -> Any:
    """Rows with times as epoch ms and structs (Spark Rows) as dicts, to compare with `Small`.

    Spark hands timestamps back as naive datetimes in this machine's zone, the readers as aware
    UTC ones: ``timestamp()`` reads both right.
    """
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value

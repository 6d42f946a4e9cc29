"""The coordinator log as rows: offset commits and group changes, one segment file at a time.

Pure Python (no Spark): the `rafka-coordinator-log` data source (sources.py) runs these in its
executors, one task per segment file, and tests call them directly.

Where the rows come from
------------------------
``<data_dir>/coordinator/*.log`` are the coordinator log's segments (storage/
coordinator_segments.py): frames of ``length | CRC-32C | CBOR entry``, each entry one record of
one group, decoded by `decode_entry`. A segment is read whole and read-only with `read_segment`:
a torn tail (a frame half-written by a crash, or still being written by a running broker) ends
the segment; nothing is ever truncated. The pair (``segment``, ``position``), the file name and
the frame's byte offset, orders every row as the log does: file names are zero-padded first
sequence numbers, so they sort as the log's history.

Two views
---------
``commits`` (the default): one row per OffsetCommit record, and one per deletion: an
OffsetTombstone (offset deleted by retention or OffsetDelete) has a null ``offset``, and a
GroupTombstone (the whole group deleted, with all its offsets) has a null ``offset``, ``topic``
and ``partition``. Tombstones carry no time; only their place in the log says when.

``groups``: one row per change of a group: a classic group's GroupMetadataRecord (written when a
rebalance settles, when the group becomes Empty, when a static member is replaced), a KIP-848
group's ConsumerGroupMetadataRecord (each new group epoch; its members are not in it, so
``members`` is empty), and a GroupTombstone (``deleted``; every other field but the key is
null). ``generation`` is the
classic generation or the consumer group epoch.

All ``*_ms`` of the records are wall-clock epoch milliseconds; rows carry them as UTC
timestamps (`at`).

Caveat: compaction rewrites sealed segments keeping only the newest commit per partition, so
the history is as long as the uncompacted part of the log. And a compaction that runs while a
live broker's log is being read can make a read miss or repeat entries: read a copy, or a
stopped broker's data dir, for exact numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..classic_group.records import GroupMetadataRecord
from ..consumer_group.records import ConsumerGroupMetadataRecord
from ..group_common.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone
from ..storage.coordinator_records import decode_entry
from ..storage.coordinator_segments import read_segment

__all__ = [
    "COMMITS",
    "COMMITS_SCHEMA",
    "GROUPS",
    "GROUPS_SCHEMA",
    "VIEWS",
    "at",
    "commit_rows",
    "coordinator_segments",
    "group_rows",
    "rows_of",
]

log = logging.getLogger(__name__)

COMMITS, GROUPS = "commits", "groups"
VIEWS = (COMMITS, GROUPS)

COMMITS_SCHEMA = (
    "org_id int, group_id string, topic string, partition int, offset long, leader_epoch int, "
    "metadata string, commit_time timestamp, segment string, position long"
)
GROUPS_SCHEMA = (
    "org_id int, group_id string, group_type string, generation int, protocol string, "
    "leader string, members array<string>, reason string, time timestamp, "
    "rebalance_started timestamp, departed array<struct<member_id: string, why: string>>, "
    "deleted boolean, segment string, position long"
)
SEGMENT_SUFFIX = ".log"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Row = tuple[Any, ...]


def at(ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime (exact: no float on the way)."""
    return _EPOCH + timedelta(milliseconds=ms)


def coordinator_segments(data_dir: str | Path) -> list[Path]:
    """The coordinator log's segment files, oldest first (none if there is no log)."""
    directory = Path(data_dir) / "coordinator"
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.name.endswith(SEGMENT_SUFFIX) and p.name[: -len(SEGMENT_SUFFIX)].isdigit()
    )


def rows_of(view: str, path: Path) -> Iterator[Row]:
    """The rows of one view (`COMMITS` or `GROUPS`) of one segment file."""
    if view == COMMITS:
        return commit_rows(path)
    if view == GROUPS:
        return group_rows(path)
    raise ValueError(f"unknown view {view!r}: expected one of {', '.join(VIEWS)}")


def _entries(path: Path) -> Iterator[tuple[int, int, str, Any]]:
    """(position, org, group, record) of each entry; a segment gone meanwhile has none."""
    try:
        for position, (key, record) in read_segment(path, decode_entry):
            yield position, key.org_id, key.group_id, record
    except FileNotFoundError:
        log.warning("%s: gone (compacted away?) before it could be read", path)


def commit_rows(path: Path) -> Iterator[Row]:
    """`COMMITS_SCHEMA` rows: commits, offset tombstones and group tombstones, in log order."""
    segment = path.name
    for position, org, group, record in _entries(path):
        if isinstance(record, OffsetCommitRecord):
            yield (
                org,
                group,
                record.topic,
                record.partition,
                record.offset,
                record.leader_epoch,
                record.metadata,
                at(record.commit_timestamp_ms),
                segment,
                position,
            )
        elif isinstance(record, OffsetTombstone):
            yield (org, group, record.topic, record.partition, *(None,) * 4, segment, position)
        elif isinstance(record, GroupTombstone):
            yield (org, group, *(None,) * 6, segment, position)


def group_rows(path: Path) -> Iterator[Row]:
    """`GROUPS_SCHEMA` rows: classic and consumer group changes and deletions, in log order."""
    segment = path.name
    for position, org, group, record in _entries(path):
        if isinstance(record, GroupMetadataRecord):
            started = record.rebalance_started_ms
            yield (
                org,
                group,
                "classic",
                record.generation,
                record.protocol_name,
                record.leader_id,
                [member[0] for member in record.members],
                record.reason,
                at(record.state_timestamp_ms),
                at(started) if started >= 0 else None,
                [{"member_id": m, "why": why} for m, why in record.departed],
                False,
                segment,
                position,
            )
        elif isinstance(record, ConsumerGroupMetadataRecord):
            yield (
                org,
                group,
                "consumer",
                record.epoch,
                None,
                None,
                [],
                record.reason,
                at(record.timestamp_ms),
                None,
                [],
                False,
                segment,
                position,
            )
        elif isinstance(record, GroupTombstone):
            yield (org, group, *(None,) * 9, True, segment, position)

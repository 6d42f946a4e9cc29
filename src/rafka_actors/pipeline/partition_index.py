"""The partition logs' batch index: one row per record batch, read from headers alone.

Pure Python (no Spark): the `rafka-partition-index` data source (sources.py) runs these in its
executors, one task per segment file.

Layout (storage/topics.py, storage/partition_log.py): ``<data_dir>/topics/<name>/topic.json``
gives the topic's partition count, and ``<data_dir>/topics/<name>/<partition>/*.log`` are the
partition's segments, each a plain run of Kafka v2 record batches with their offsets, named by
the base offset of their first batch. That is org 0; org N's topics are the same under
``<data_dir>/orgs/<N>/``. Each org has its own topics, so a partition is known by (org, topic,
partition): `org_partition_segments` lists every org's, `partition_segments` one org's.

A batch's 61-byte header (storage/record_batch.py) says where the next one starts
(``batchLength + 12`` bytes on), so the reader hops from header to header with ``pread`` and
never reads a record body: the cost is one small read per batch.

What "append time" means: batches are stored as the producer sent them, so the header's max
timestamp is the producer's CreateTime of the batch's newest record (Kafka's default
``message.timestamp.type``), not the moment the broker wrote it. Under normal clocks the two
are milliseconds apart; a producer with a skewed clock skews its batches' append times. A batch
without a timestamp (-1) has a null append time.

A segment ends at the first header that does not check out (fewer than 61 bytes left, magic not
2, an impossible length, a batch running past the end of the file, a base offset below the end
of the previous batch): a torn tail, or a batch a running broker is still writing. A base offset
above it is a gap the log cleaner left in a compacted topic. CRCs
are not checked (they cover the bodies); the broker's recovery does that on start-up.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..storage.partition_log import read_log_start
from ..storage.record_batch import HEADER_SIZE, MAGIC, MIN_BATCH_LENGTH, parse_header
from ..storage.topics import stored_orgs, topics_dir
from .coordinator_rows import SEGMENT_SUFFIX, at

__all__ = [
    "INDEX_SCHEMA",
    "LOG_START_SCHEMA",
    "ORG_INDEX_SCHEMA",
    "batch_rows",
    "log_start_floors",
    "org_partition_segments",
    "partition_segments",
]

log = logging.getLogger(__name__)

INDEX_SCHEMA = (
    "topic string, partition int, base_offset long, last_offset long, "
    "append_time timestamp, segment string"
)
ORG_INDEX_SCHEMA = "org_id int, " + INDEX_SCHEMA  # every org's batches (sources.py)
LOG_START_SCHEMA = "org_id int, topic string, partition int, log_start_floor long"
_DELETED_SUFFIX = ".deleted"

Row = tuple[Any, ...]


def org_partition_segments(data_dir: str | Path) -> list[tuple[int, str, int, Path]]:
    """(org, topic, partition, segment file) of every org's partition logs, in that order."""
    data_dir = Path(data_dir)
    return [
        (org_id, *found)
        for org_id in (0, *stored_orgs(data_dir))
        for found in partition_segments(data_dir, org_id)
    ]


def log_start_floors(data_dir: str | Path) -> list[tuple[int, str, int, int]]:
    """`LOG_START_SCHEMA` rows: every partition whose log start DeleteRecords moved, with it.

    DeleteRecords may move the start inside the first segment, which the batches alone do not
    show; the partition keeps it in a file of its own (storage/partition_log.py)."""
    data_dir = Path(data_dir)
    segments = org_partition_segments(data_dir)
    seen = {(org, topic, p, path.parent) for org, topic, p, path in segments}
    floors = ((org, topic, p, read_log_start(directory)) for org, topic, p, directory in seen)
    return sorted(row for row in floors if row[3] > 0)


def partition_segments(data_dir: str | Path, org_id: int = 0) -> list[tuple[str, int, Path]]:
    """(topic, partition, segment file) of an org's partition logs, by topic, partition, offset.

    Topics are the directories with a ``topic.json`` (others are half-created or being
    deleted); partitions are those it counts.
    """
    root = topics_dir(Path(data_dir), org_id)
    if not root.is_dir():
        return []
    found: list[tuple[str, int, Path]] = []
    for topic_dir in sorted(root.iterdir()):
        meta = topic_dir / "topic.json"
        if topic_dir.name.endswith(_DELETED_SUFFIX) or not meta.is_file():
            continue
        partitions = int(json.loads(meta.read_text())["partitions"])
        for partition in range(partitions):
            directory = topic_dir / str(partition)
            if directory.is_dir():
                found += [(topic_dir.name, partition, p) for p in _segments(directory)]
    return found


def _segments(directory: Path) -> list[Path]:
    return sorted(
        p
        for p in directory.iterdir()
        if p.name.endswith(SEGMENT_SUFFIX) and p.name[: -len(SEGMENT_SUFFIX)].isdigit()
    )


def batch_rows(topic: str, partition: int, path: Path) -> Iterator[Row]:
    """`INDEX_SCHEMA` rows of one segment file, hopping from batch header to batch header."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        log.warning("%s: gone before it could be read", path)
        return
    try:
        size = os.fstat(fd).st_size
        pos, expected = 0, int(path.name[: -len(SEGMENT_SUFFIX)])
        while pos + HEADER_SIZE <= size:
            header = parse_header(os.pread(fd, HEADER_SIZE, pos))
            end = pos + header.size
            if (
                header.magic != MAGIC
                or header.batch_length < MIN_BATCH_LENGTH
                or end > size
                or header.base_offset < expected
                or header.last_offset_delta < 0
            ):
                return
            last = header.base_offset + header.last_offset_delta
            stamp = header.max_timestamp
            append_time = at(stamp) if stamp >= 0 else None
            yield (topic, partition, header.base_offset, last, append_time, path.name)
            pos, expected = end, last + 1
    finally:
        os.close(fd)

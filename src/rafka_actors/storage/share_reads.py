"""What a ShareFetch reads of its partitions' logs, and what it sends of it.

The share group's actor reads in the turn that acquires (`read_for_share`,
actors/share_fetch.py): each partition of the session from its first Available record, as
the machine's session step said. A share group reads as its `share.isolation.level` says.
read_uncommitted reads up to the log's end. read_committed reads below the last stable
offset, and names the records of aborted transactions among what was read: the share group
archives them instead of handing them out, as Kafka's SharePartition does (a ShareFetch
response has no aborted-transactions field, so a share consumer could not drop them itself).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .data_plane import DataPlane
from .producer_state import AbortedTxn
from .record_batch import BATCH_OVERHEAD, HEADER_SIZE, BatchHeader, parse_header
from .topics import Topic

# What a ShareFetch reads of one partition's log at most (whole batches; at least one). A
# fetch acquires at most max.poll.records records: reading the request's max bytes (librdkafka:
# 50 MiB) from a deep backlog for that would cost far more than it hands out.
READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class PartitionRead:
    data: bytes = b""
    first: int = 0  # the first and last offsets of what was read (first > last: nothing)
    last: int = -1
    aborted: tuple[tuple[int, int], ...] = ()  # (first, last) runs of aborted records


@dataclass(frozen=True, slots=True)
class ShareReads:
    """What a ShareFetch read, shaped for `ShareAcquireOp` and the answer."""

    # (topic, partition, log start, log end, first offset read, last offset read)
    reads: tuple[tuple[str, int, int, int, int, int], ...] = ()
    aborted: tuple[tuple[str, int, int, int], ...] = ()  # (topic, partition, first, last)
    records: tuple[tuple[str, int, bytes], ...] = ()  # (topic, partition, whole batches)


# (topic, partition, where to read (-1: not initialised)) of a session
ReadFrom = tuple[tuple[str, int, int], ...]


def read_for_share(
    data_plane: DataPlane, org_id: int, read_from: ReadFrom, max_bytes: int, committed: bool
) -> ShareReads:
    """Each partition of `read_from` that exists, from its offset, `max_bytes` in all. A
    partition not initialised yet (-1) reads nothing: the acquisition initialises it."""
    store = data_plane.topics_for(org_id)
    budget = max_bytes
    reads, aborted, records = [], [], []
    for name, index, offset in read_from:
        topic = store.by_name(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            continue
        log = topic.partitions[index]
        read = read_partition(data_plane, topic, index, offset, budget, committed)
        budget -= len(read.data)
        records.append((name, index, read.data))
        start, end = log.log_start_offset, log.log_end_offset
        reads.append((name, index, start, end, max(read.first, offset), read.last))
        aborted += [(name, index, first, last) for first, last in read.aborted]
    return ShareReads(tuple(reads), tuple(aborted), tuple(records))


def read_partition(
    data_plane: DataPlane, topic: Topic, index: int, offset: int, budget: int, committed: bool
) -> PartitionRead:
    """Whole batches from `offset` (up to `budget` bytes), below the LSO when `committed`."""
    log = topic.partitions[index]
    end = data_plane.last_stable_offset(topic, index) if committed else log.log_end_offset
    if not 0 <= offset < end or budget <= 0:
        return PartitionRead()
    offset, limit = max(offset, log.log_start_offset), min(budget, READ_BYTES)
    if not committed:
        data = log.read(offset, limit)
        return PartitionRead(data, *offsets_of(data))
    data, txns, _ = data_plane.read_committed(topic, index, offset, limit)
    return PartitionRead(data, *offsets_of(data), tuple(aborted_runs(data, txns)))


def aborted_runs(data: bytes, txns: Sequence[AbortedTxn]) -> Iterator[tuple[int, int]]:
    """The offsets of the data batches in `data` that belong to one of the aborted
    transactions `txns`: a transactional batch of the same producer between the
    transaction's first offset and its ABORT marker."""
    if not txns:
        return
    for header in _headers(data):
        if not header.is_transactional or header.is_control:
            continue
        if any(
            t.producer_id == header.producer_id
            and t.first_offset <= header.base_offset <= t.last_offset
            for t in txns
        ):
            yield header.base_offset, header.last_offset


def trimmed(data: bytes, runs: Any) -> bytes:
    """The whole batches of `data` that hold an acquired record: the rest of what was read
    is not this member's to see (and need not cross the wire)."""
    if not runs:
        return b""
    first, last = runs[0][0], runs[-1][1]
    view = memoryview(data)
    pos, begin, end = 0, -1, 0
    while len(view) - pos >= HEADER_SIZE:
        header = parse_header(view, pos)
        size = header.batch_length + BATCH_OVERHEAD
        if header.last_offset >= first and begin < 0:
            begin = pos
        if header.base_offset > last:
            break
        pos += size
        end = pos
    return bytes(view[max(begin, 0) : end])


def offsets_of(data: bytes) -> tuple[int, int]:
    """The first and last offsets of the whole batches in `data` (0, -1 if none)."""
    first, last = 0, -1
    for number, header in enumerate(_headers(data)):
        if number == 0:
            first = header.base_offset
        last = header.last_offset
    return first, last


def _headers(data: bytes) -> Iterator[BatchHeader]:
    view = memoryview(data)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = parse_header(view, pos)
        yield header
        pos += header.batch_length + BATCH_OVERHEAD

"""What the log cleaner keeps of one batch: Kafka's rules, batch by batch. Pure.

Records (LogCleaner.shouldRetainRecord): a record past the offset map's reach is kept; a record
without a key is dropped; a record is kept only if it is the latest of its key (the map holds
each key's latest offset), and a tombstone (no value) only until its batch's delete horizon.

Batches (LogCleaner.cleanInto, MemoryRecords.filterTo):

- A batch of an aborted transaction loses its records (`TxnTracker`, Kafka's
  CleanedTransactionMetadata, tells). A transaction marker goes only once no batch of its
  transaction is left, and then only after its delete horizon, as a tombstone.
- The last batch of each producer still known (its last data batch, or its last marker when it
  has none) is kept even when empty, so its sequence and epoch survive a restart; so is the
  round's last batch, so the offset after it does.
- A batch with all its records and no horizon to set is copied as it is; otherwise it is
  written again with the records kept, same offsets and codec. A batch newly holding a
  tombstone or an empty transaction's marker gets its delete horizon: now plus
  `delete.retention.ms`, stored as Kafka stores it (base timestamp, attribute bit 0x40).
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from .control_batches import ABORT, COMMIT
from .keyed_records import DELETE_HORIZON_BIT, Record, build_batch, empty_batch, records_of
from .record_batch import BatchHeader

__all__ = ["FilterContext", "TxnTracker", "clean_batch"]

_CONTROL_KEY = struct.Struct(">hh")  # version, type


class TxnTracker:
    """The transactions met while walking the log in offset order: which batches belong to
    an aborted one, and which markers are left with no batch of theirs."""

    def __init__(self, aborted: list[tuple[int, int, int]]) -> None:
        self._pending = sorted((first, pid) for pid, first, _last in aborted)
        heapq.heapify(self._pending)
        self._aborted: dict[int, bool] = {}  # producer id -> a batch of it was seen
        self._committed: set[int] = set()

    def _start_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            _first, pid = heapq.heappop(self._pending)
            self._aborted.setdefault(pid, False)

    def on_data(self, header: BatchHeader) -> bool:
        """A data batch was read; True if it belongs to an aborted transaction."""
        self._start_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        if header.producer_id in self._aborted:
            self._aborted[header.producer_id] = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, records: list[Record]) -> bool:
        """A control batch was read; True if no batch of its transaction is left."""
        self._start_up_to(header.last_offset)
        if not records or records[0].key is None or len(records[0].key) < 4:
            return True  # cleaned empty already
        _version, kind = _CONTROL_KEY.unpack_from(records[0].key)
        pid = header.producer_id
        if kind == ABORT:
            return not self._aborted.pop(pid, False)
        if kind == COMMIT:
            found = pid in self._committed
            self._committed.discard(pid)
            return not found
        return False


@dataclass(slots=True)
class FilterContext:
    """What the cleaning of a round knows besides the batch itself."""

    latest: Mapping[bytes, int]  # key -> its latest offset in the mapped range
    map_end: int  # the offset after the mapped range (records at or past it are kept)
    upper_bound: int  # the round's first uncleanable offset
    now_ms: int
    delete_retention_ms: int
    last_batches: Mapping[int, tuple[int, int]]  # producer id -> (last data offset, epoch)
    txns: TxnTracker
    kept: int = 0  # records kept, and read
    read: int = 0


def clean_batch(batch: bytes | memoryview, ctx: FilterContext) -> bytes | memoryview | None:
    """The batch as the cleaned segment holds it (itself when unchanged), or None if it goes."""
    header, records = records_of(batch)
    ctx.read += len(records)
    if header.is_control:
        discard = ctx.txns.on_marker(header, records)
        horizon = _horizon(header)
        drop_records = discard and horizon is not None and horizon <= ctx.now_ms
    else:
        discard = drop_records = ctx.txns.on_data(header)
    keep_empty = _last_of_producer(header, ctx) or header.last_offset + 1 == ctx.upper_bound
    if drop_records and not keep_empty:
        return None
    if drop_records:
        kept: list[Record] = []
    elif header.is_control:
        kept = records
    else:
        kept = [r for r in records if _keep(header, r, ctx)]
    ctx.kept += len(kept)
    if not kept:
        return empty_batch(header) if keep_empty else None
    tombstones = any(not r.has_value for r in kept)
    set_horizon = (tombstones or (discard and header.is_control)) and _horizon(header) is None
    if len(kept) == len(records) and not set_horizon:
        return batch
    if set_horizon:
        base = ctx.now_ms + ctx.delete_retention_ms
        return build_batch(
            header, kept, base_timestamp=base, attributes=header.attributes | DELETE_HORIZON_BIT
        )
    return build_batch(
        header, kept, base_timestamp=header.base_timestamp, attributes=header.attributes
    )


def _keep(header: BatchHeader, record: Record, ctx: FilterContext) -> bool:
    offset = header.base_offset + record.offset_delta
    if offset >= ctx.map_end:
        return True
    if record.key is None:
        return False  # (a compacted topic refuses these; older ones go)
    if offset < ctx.latest.get(record.key, -1):
        return False
    if record.has_value:
        return True
    horizon = _horizon(header)
    return horizon is None or ctx.now_ms < horizon


def _horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), if the cleaner set one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def _last_of_producer(header: BatchHeader, ctx: FilterContext) -> bool:
    """The last batch of a producer still known, kept for its sequence and epoch."""
    if header.producer_id < 0:
        return False
    last = ctx.last_batches.get(header.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset >= 0:
        return header.last_offset == last_data_offset
    return header.is_control and header.producer_epoch == epoch

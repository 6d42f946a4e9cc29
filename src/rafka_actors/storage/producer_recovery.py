"""A partition's producer state at start-up: a snapshot from the last clean shutdown, then
the log's producer batches after it.

The log is the state's only record (producer_state.py says why). Replaying a whole log costs
about as much again as the index scan every partition log does at open. So a clean shutdown
leaves a snapshot beside the segments, `producer-state.snapshot`: a CRC-32C, then the state
as CBOR rows, with the offset it covers up to and the CRC of the log's batch that ends there.

At open, the snapshot is used only if that batch is still in the log with that CRC, and the
log's producer batches after it are then replayed (none after a clean shutdown). Anything
else means a full replay: no snapshot, a damaged one, or a log cut below it (a torn tail
after power loss). Such a snapshot is deleted (at start-up, once the broker may write:
startup_writes.py), so new appends can never make it look valid again.

A snapshot is written without fsync: a torn or missing one only costs a full replay.
"""

from __future__ import annotations

import logging
import os
import struct

import cbor2
import crc32c

from .control_batches import CONTROL_PREFIX, read_marker
from .partition_log import PartitionLog
from .producer_state import PartitionProducers
from .startup_writes import StartupWrites

log = logging.getLogger(__name__)

SNAPSHOT_NAME = "producer-state.snapshot"
_VERSION = 1
_CRC = struct.Struct(">I")
_TRANSACTIONAL_BIT, _CONTROL_BIT = 0x10, 0x20


def rebuild_producers(
    partition: PartitionLog, writes: StartupWrites | None = None
) -> tuple[PartitionProducers, int]:
    """The partition's producer state and the offset its snapshot covered (0 if none); a
    snapshot that does not fit the log is deleted by `writes` (at once if None)."""
    producers, start = _load_snapshot(partition, writes or StartupWrites.now())
    replay = producers.replay_batch
    for raw, records in partition.producer_batches(CONTROL_PREFIX, start):
        # raw: the header's fields, in record_batch.BatchHeader's order
        if raw[5] & _CONTROL_BIT:
            marker = read_marker(records)
            if marker is not None:
                producers.marker_written(raw[9], raw[10], marker[1], marker[0], raw[0], raw[8])
        else:
            txn = bool(raw[5] & _TRANSACTIONAL_BIT)
            replay(raw[9], raw[10], raw[11], raw[6], raw[0], txn, raw[8])
    producers.forget_below(partition.log_start_offset)
    return producers, start


def write_snapshot(partition: PartitionLog, producers: PartitionProducers) -> None:
    """Leave the state for the next start-up (at a clean shutdown, the log flushed)."""
    end = partition.log_end_offset
    crc = partition.crc_of_batch_ending_at(end)
    if crc is None:
        return
    body = cbor2.dumps([_VERSION, end, crc, producers.to_rows()])
    path = partition.directory / SNAPSHOT_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(_CRC.pack(crc32c.crc32c(body)) + body)
    os.replace(tmp, path)


def _load_snapshot(
    partition: PartitionLog, writes: StartupWrites
) -> tuple[PartitionProducers, int]:
    path = partition.directory / SNAPSHOT_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return PartitionProducers(), 0
    try:
        return _decode(partition, raw)
    except ValueError as exc:
        log.warning("%s: not used, the log is replayed instead: %s", path, exc)
    writes.add(lambda: path.unlink(missing_ok=True))
    return PartitionProducers(), 0


def _decode(partition: PartitionLog, raw: bytes) -> tuple[PartitionProducers, int]:
    if len(raw) < _CRC.size or _CRC.unpack_from(raw)[0] != crc32c.crc32c(raw[_CRC.size :]):
        raise ValueError("damaged (CRC)")
    try:
        version, end, crc, rows = cbor2.loads(raw[_CRC.size :])
    except (TypeError, cbor2.CBORDecodeError) as exc:
        raise ValueError(f"undecodable: {exc}") from None
    if version != _VERSION:
        raise ValueError(f"unknown version {version!r}")
    if partition.crc_of_batch_ending_at(end) != crc:
        raise ValueError(f"the log no longer holds the batch ending at offset {end}")
    try:
        return PartitionProducers.from_rows(rows), end
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"bad rows: {exc}") from None

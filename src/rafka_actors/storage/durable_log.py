"""The durable coordinator log: group commit of every group's records into one segment log.

Group actors call `append(key, records)` and send their replies only when it returns; with this
log, "returned" means "as durable as ``coordinator.log.fsync`` promises" (design note 003: a
response is released only once its records are committed). Records are encoded by
`storage.coordinator_records` and framed into ``<data_dir>/coordinator/`` by
`storage.coordinator_segments`.

Group commit
------------
Under ``always`` an append encodes its records, queues them and waits. One flusher task takes
*everything* queued, from all groups, writes it with one ``write`` (to the page cache, on the
event loop: microseconds) and has it fsynced by the log's own thread (fsync_thread.py), then
applies the records to the in-memory view and wakes every appender of the batch. While the
disk flushes, the loop goes on serving and the next batch gathers, so one fsync is shared by
every group that appended meanwhile: throughput grows with the number of groups instead of
falling, and a slow disk delays only the groups that write, never the event loop.

Under ``interval`` and ``never`` an append writes to the page cache itself, without waiting
(a few microseconds, less than a hop to the flusher), unless a batch is queued ahead of it;
rolling a segment then fsyncs on the event loop, once per segment.

A batch that cannot be written (or synced) wakes its appenders with `CoordinatorLogError`, so
the actors acknowledge nothing; a failed fsync also refuses every later append (after one, the
kernel may have dropped the dirty pages, so nothing more can be promised). An appender
cancelled while waiting does not withdraw its records: they may still be written.

Fsync policies (``coordinator.log.fsync``)
------------------------------------------
- ``always`` (default): each batch is fsynced before any of it is acknowledged. An acknowledged
  commit survives a power loss or a kernel crash.
- ``interval``: a batch is written (to the page cache) before it is acknowledged and fsynced at
  most ``coordinator.log.fsync.interval.ms`` later. It survives the death of the broker process
  (SIGKILL, OOM kill): the kernel still writes the pages. A power loss can lose the last interval.
- ``never``: written before acknowledged, fsynced only when a segment is sealed and on close.
  Survives a process crash; a power loss can lose everything not yet in a sealed segment.

The view, start-up and compaction
---------------------------------
`open` replays the segments into a `LatestRecords` view (latest group record and latest offset
per partition of every group), which is what `records_of` and `keys` answer from; records join it
only once written, so a restarted actor sees exactly what was acknowledged. The view keeps each
record as its encoded entry and `records_of` decodes them; offset entries are replayed in bulk
(storage/entry_replay.py), which is what makes start-up fast. Compaction runs in a child
process (`CoordinatorSegments.compact_sealed_in_child`, storage/compaction_child.py) every
``coordinator.log.compaction.interval.ms`` if there is anything to do, and as soon as sealed
segments nobody has compacted reach ``compaction_dirty_bytes`` (default: half a segment, so after
every roll); tombstones are dropped ``coordinator.log.tombstone.retention.ms`` after their
segment was sealed (Kafka's ``log.cleaner.delete.retention.ms``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from pathlib import Path
from time import perf_counter

import trio

from ..coordinator.latest import LatestRecords
from ..group_common.records import OffsetCommitRecord, Record
from ..ids import GroupKey, LogKey
from .coordinator_records import (
    decode_stored,
    decode_trusted,
    encode_entry,
    entry_compaction_key,
)
from .coordinator_segments import (
    DEFAULT_PREALLOCATE_BYTES,
    DEFAULT_SEGMENT_BYTES,
    CompactionStats,
    CoordinatorLogError,
    CoordinatorSegments,
)
from .entry_replay import AmbiguousKeys, EntryReplay
from .failures import STORAGE_LOG, reason
from .fsync_thread import FsyncThread
from .startup_writes import StartupWrites

__all__ = ["CoordinatorLogError", "DurableCoordinatorLog", "FsyncPolicy", "LogStats"]

log = logging.getLogger(__name__)

DEFAULT_TOMBSTONE_RETENTION_MS = 86_400_000  # Kafka's log.cleaner.delete.retention.ms
DEFAULT_COMPACTION_INTERVAL_MS = 60_000


class FsyncPolicy(StrEnum):
    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


@dataclass(slots=True)
class LogStats:
    appends: int = 0  # append calls acknowledged
    records: int = 0
    batches: int = 0  # writes (group commits)
    failed_batches: int = 0
    compactions: int = 0
    last_compaction: CompactionStats | None = None


@dataclass(slots=True, eq=False)
class _Pending:
    """One append waiting for its batch to be written."""

    key: LogKey
    records: tuple[Record, ...]
    payloads: list[bytes]
    done: trio.Event = field(default_factory=trio.Event)
    error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


def _replay(
    directory: Path,
    segment_bytes: int,
    preallocate_bytes: int,
    skip_corruption: bool,
    *,
    bulk: bool,
    writes: StartupWrites,
) -> tuple[CoordinatorSegments, LatestRecords[bytes]]:
    view: LatestRecords[bytes] = LatestRecords()
    replay = EntryReplay(view, bulk=bulk)
    recovery = StartupWrites()  # handed on only if the replay settles (else it is done again)
    segments = CoordinatorSegments.open(
        directory,
        decode_stored,
        replay.apply_entry,
        segment_bytes=segment_bytes,
        preallocate_bytes=preallocate_bytes,
        skip_corruption=skip_corruption,
        bulk=replay.bulk,
        describe=_describe_entry,
        writes=recovery,
    )
    try:
        replay.settle()
    except BaseException:
        segments.close()
        raise
    writes.add(recovery.apply)
    return segments, view


def _describe_entry(entry: tuple[GroupKey, Record, bytes]) -> str:
    """What a skipped entry held: its group, and the offset for a commit."""
    key, record, _ = entry
    group = f"group {key.group_id!r}" + (f" of org {key.org_id}" if key.org_id else "")
    if isinstance(record, OffsetCommitRecord):
        return f"{group} offset {record.topic}-{record.partition}={record.offset}"
    return f"{group} {type(record).__name__}"


def _wall_ms() -> int:
    # Tombstone ages come from segment mtimes, which are wall-clock.
    return time.time_ns() // 1_000_000


class DurableCoordinatorLog:
    """A `CoordinatorLog` whose appends are group-committed to segment files."""

    def __init__(
        self,
        segments: CoordinatorSegments,
        view: LatestRecords[bytes],
        *,
        fsync_policy: FsyncPolicy,
        fsync_interval_ms: int,
        compaction_interval_ms: int,
        compaction_dirty_bytes: int,
        tombstone_retention_ms: int,
    ) -> None:
        self._segments = segments
        self._view = view
        self._policy = fsync_policy
        self._page_cache_writes = fsync_policy is not FsyncPolicy.ALWAYS  # acknowledged unsynced
        self._fsync_interval = max(fsync_interval_ms, 0) / 1000
        self._compaction_interval = max(compaction_interval_ms, 1) / 1000
        self._dirty_limit = compaction_dirty_bytes
        self._retention_ms = tombstone_retention_ms
        self._queue: list[_Pending] = []
        self._wakeup = trio.Event()
        self._compaction_wanted = trio.Event()
        self._rolls_seen = -1  # the first write looks at what start-up found
        self._sync_deadline = math.inf  # when unsynced writes must be fsynced (interval)
        self._closed = False
        self._fsyncer = FsyncThread(f"{segments.directory.name} log fsync")
        self.stats = LogStats()
        # told (append seconds, fsync seconds) of each write, either None if not done
        self.timed: Callable[[float | None, float | None], None] | None = None

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        fsync_policy: FsyncPolicy | str = FsyncPolicy.ALWAYS,
        fsync_interval_ms: int = 1000,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        preallocate_bytes: int = DEFAULT_PREALLOCATE_BYTES,
        compaction_interval_ms: int = DEFAULT_COMPACTION_INTERVAL_MS,
        compaction_dirty_bytes: int | None = None,
        tombstone_retention_ms: int = DEFAULT_TOMBSTONE_RETENTION_MS,
        skip_corruption: bool = False,
        name: str = "coordinator",
        bulk: bool = True,
        writes: StartupWrites | None = None,
    ) -> DurableCoordinatorLog:
        """Open ``<data_dir>/<name>`` and replay it (blocking file I/O: call at start-up).
        ``name``: "coordinator" for groups, "transactions" for the transaction log; ``bulk``:
        recognise offset entries in bulk (the transaction log has none, and a run of frames
        the bulk pattern does not match is walked one frame per split of its chunk). Reads
        only: recovery's writes go to ``writes`` (made at once if None), and the log takes
        appends once they are made (startup_writes.py)."""
        directory = data_dir / name
        writes = writes or StartupWrites.now()
        try:
            segments, view = _replay(
                directory,
                segment_bytes,
                preallocate_bytes,
                skip_corruption,
                bulk=bulk,
                writes=writes,
            )
        except AmbiguousKeys as exc:
            log.warning("%s log: %s; replaying it entry by entry", name, exc)
            segments, view = _replay(
                directory,
                segment_bytes,
                preallocate_bytes,
                skip_corruption,
                bulk=False,
                writes=writes,
            )
        what = "groups" if name == "coordinator" else "transactional ids"
        log.info("%s log replayed: %d %s", name, len(view), what)
        return cls(
            segments,
            view,
            fsync_policy=FsyncPolicy(fsync_policy),
            fsync_interval_ms=fsync_interval_ms,
            compaction_interval_ms=compaction_interval_ms,
            compaction_dirty_bytes=compaction_dirty_bytes or max(segment_bytes // 2, 1),
            tombstone_retention_ms=tombstone_retention_ms,
        )

    # -- the CoordinatorLog interface -----------------------------------------------------

    async def append(self, key: LogKey, records: Sequence[Record]) -> None:
        """Return once ``records`` are written as the fsync policy promises; raise
        CoordinatorLogError if not."""
        if self._closed:
            raise CoordinatorLogError("the coordinator log is closed")
        if not records:
            await trio.lowlevel.checkpoint()
            return
        pending = _Pending(key, tuple(records), [encode_entry(key, r) for r in records])
        if self._page_cache_writes and not self._queue:
            # Nothing ahead of it (order is kept), and a page-cache write costs less than a
            # turn of the scheduler: no checkpoint (the actor yields at its mailbox).
            self._write_batch([pending])
        else:
            self._queue.append(pending)
            self._wakeup.set()
            await pending.done.wait()
        if pending.error is not None:
            raise CoordinatorLogError(
                f"{key[1]}: {len(pending.records)} records not stored"
            ) from pending.error

    def records_of(self, key: LogKey) -> list[Record]:
        return decode_trusted(self._view.records_of(key))

    def membership_of(self, key: LogKey) -> list[Record]:
        return decode_trusted(self._view.membership_of(key))

    def keys(self) -> list[GroupKey]:
        """Every group with stored state (for ListGroups and start-up)."""
        return self._view.keys()

    def stores(self, key: LogKey) -> bool:
        return key in self._view

    @property
    def fsyncs(self) -> int:
        return self._segments.fsyncs

    @property
    def segments(self) -> CoordinatorSegments:
        return self._segments

    # -- background work ------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Flush and compact until cancelled; then fail what is still queued and close."""
        self._fsyncer.start()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._flush_forever)
                nursery.start_soon(self._compact_forever)
                task_status.started()
        finally:
            self._fsyncer.stop()
            self.close()

    async def _flush_forever(self) -> None:
        while True:
            await self._work_or_deadline()
            if self._queue:
                batch, self._queue = self._queue, []
                if self._policy is FsyncPolicy.ALWAYS:
                    await self._write_and_sync(batch)
                else:
                    self._write_batch(batch)
            elif trio.current_time() >= self._sync_deadline:
                await self._sync()

    async def _work_or_deadline(self) -> None:
        while not self._queue and trio.current_time() < self._sync_deadline:
            self._wakeup = trio.Event()
            with trio.move_on_at(self._sync_deadline):
                await self._wakeup.wait()

    async def _write_and_sync(self, batch: list[_Pending]) -> None:
        """Write a batch on the loop (to the page cache) and fsync it in a worker thread."""
        try:
            started = perf_counter()
            self._segments.append([payload for pending in batch for payload in pending.payloads])
            written = perf_counter()
            await self._fsyncer.run_sync(self._segments.fsync)
            if self.timed is not None:
                self.timed(written - started, perf_counter() - written)
        except BaseException as exc:
            self._failed(batch, exc)
            return
        self._written(batch)

    def _write_batch(self, batch: list[_Pending]) -> None:
        """Write to the page cache (fsync policies interval and never), synchronously."""
        try:
            started = perf_counter()
            self._segments.append([payload for pending in batch for payload in pending.payloads])
            if self.timed is not None:
                self.timed(perf_counter() - started, None)
        except BaseException as exc:
            self._failed(batch, exc)
            return
        self._written(batch)

    def _failed(self, batch: list[_Pending], exc: BaseException) -> None:
        self.stats.failed_batches += 1
        known = isinstance(exc, CoordinatorLogError)
        # kept by every appender: made without a traceback, which would hold this frame,
        # the batch and so the error itself in a cycle (storage/failures.py)
        error = CoordinatorLogError(str(exc) if known else f"batch not written: {exc!r}")
        for pending in batch:
            pending.fail(error)
        if not known:
            raise exc
        records = sum(len(pending.payloads) for pending in batch)
        STORAGE_LOG.log("coordinator log: a batch of %d records failed: %s", records, exc)

    def _written(self, batch: list[_Pending]) -> None:
        for pending in batch:
            self._view.apply(pending.key, pending.records, pending.payloads)
            pending.done.set()
        self.stats.appends += len(batch)
        self.stats.records += sum(len(pending.payloads) for pending in batch)
        self.stats.batches += 1
        if self._policy is FsyncPolicy.INTERVAL and self._sync_deadline == math.inf:
            self._sync_deadline = trio.current_time() + self._fsync_interval
            self._wakeup.set()  # the flusher must learn of the new sync deadline
        if self._segments.rolls != self._rolls_seen:  # only a roll adds dirty bytes
            self._rolls_seen = self._segments.rolls
            if self._segments.dirty_bytes >= self._dirty_limit:
                self._compaction_wanted.set()

    async def _sync(self) -> None:
        self._sync_deadline = math.inf
        try:
            started = perf_counter()
            await self._fsyncer.run_sync(self._segments.fsync)
            if self.timed is not None:
                self.timed(None, perf_counter() - started)
        except CoordinatorLogError as exc:
            # Acknowledged records may not be durable; the log now refuses every append.
            log.error("coordinator log: periodic fsync failed: %s", reason(exc.__cause__ or exc))

    async def _compact_forever(self) -> None:
        while True:
            with trio.move_on_after(self._compaction_interval):
                await self._compaction_wanted.wait()
            self._compaction_wanted = trio.Event()
            if not self._segments.needs_compaction(_wall_ms(), self._retention_ms):
                continue
            try:
                await self.compact()
            except (CoordinatorLogError, OSError) as exc:
                STORAGE_LOG.log(
                    "coordinator log: compaction failed (the log is unchanged): %s", exc
                )

    async def compact(self, now_ms: int | None = None) -> CompactionStats:
        """Compact the sealed segments now, in a child process (a worker thread waits for it):
        in a thread of ours, compaction would hold the GIL for seconds (compaction_child.py)."""
        stats = await trio.to_thread.run_sync(
            partial(
                self._segments.compact_sealed_in_child,
                entry_compaction_key,
                now_ms=_wall_ms() if now_ms is None else now_ms,
                tombstone_retention_ms=self._retention_ms,
            )
        )
        self.stats.compactions += 1
        self.stats.last_compaction = stats
        log.info(
            "coordinator log compacted: %d -> %d bytes, %d -> %d sealed segments",
            stats.bytes_before,
            stats.bytes_after,
            stats.segments_before,
            stats.segments_after,
        )
        return stats

    def close(self) -> None:
        """Fail what is queued, fsync and close. Idempotent; `run` calls it when it ends."""
        if self._closed:
            return
        self._closed = True
        queued, self._queue = self._queue, []
        for pending in queued:
            pending.fail(CoordinatorLogError("the coordinator log closed first"))
        try:
            self._segments.close()
        except CoordinatorLogError:
            log.exception("coordinator log: final fsync failed")

"""The durable coordinator log: group commit of every group's records into one segment log.

Group actors call `append(key, records)` and send their replies only when it returns; with this
log, "returned" means "as durable as ``coordinator.log.fsync`` promises" (design note 003: a
response is released only once its records are committed). Records are encoded by
`storage.coordinator_records` and framed into ``<data_dir>/coordinator/`` by
`storage.coordinator_segments`.

Group commit
------------
`append` encodes its records, queues them and waits. One flusher task takes *everything*
queued, from all groups, writes it with one ``write`` and (policy ``always``) one ``fsync``, then
applies the records to the in-memory view and wakes every appender of the batch. Under ``always``
a batch from several appenders is written on the event loop (to the page cache) and fsynced by
the fsync worker, a child process (actors/fsync_process.py), and while it is on disk the loop
goes on serving and the next batch gathers, so an fsync is shared by every group that committed
meanwhile and throughput grows with the number of groups instead of falling. Without the worker
(it could not start, or it died) such a batch goes to a worker thread, which has to win the GIL
back from the busy loop after the fsync (on a small VM that took longer than the fsync). A
batch of one append (a lone committer) is written and fsynced on the event loop: a round trip
to the worker or the thread costs more than the fsync itself, and requests that arrive
meanwhile wait in their sockets and form the next, larger batch (the loop is held for one
fsync at most, on a slow disk some milliseconds).

Under the other policies the write (to the page cache: a few microseconds, less than a hop to a
thread) is made by the appender itself (`append_now`), like the partition logs' appends, and a
group's actor may make it without a task switch (GroupActor.answer_inline); rolling a segment
then fsyncs on the event loop, once per segment.

The gateway's reactor answers the commits of many sockets in one pass (gateway/reactor.py):
between `hold_appends` and `write_held` their records are kept, and at the end of the pass
written with one ``write`` (and under ``always`` one ``fsync``, on the event loop, as for a
lone appender) before any of their replies goes out. That is group commit without a task
switch: 16 committing clients under ``always`` got about 1.5 times the commits/s they got
through the flusher and the worker. Every other request waits out that fsync, so under
``always`` appends are held only while the fsyncs timed on the loop (a pass's, a lone
appender's) average under LOOP_FSYNC_LIMIT_S, a millisecond; on a slower disk commits go to
the flusher as before.

A batch that cannot be written (or synced) wakes its appenders with `CoordinatorLogError`,
so the actors acknowledge nothing; a failed fsync also refuses every later append (after
one, the kernel may have dropped the dirty pages, so nothing more can be promised). An
appender cancelled while waiting does not withdraw its records: they may still be written.

Fsync policies (``coordinator.log.fsync``)
------------------------------------------
- ``always`` (default): each batch is fsynced before any of it is acknowledged. An acknowledged
  commit survives a power loss or a kernel crash.
- ``interval``: a batch is written (to the page cache) before it is acknowledged and fsynced at
  most ``coordinator.log.fsync.interval.ms`` later. It survives the death of the broker process
  (SIGKILL, OOM kill): the kernel still writes the pages. A power loss can lose the last interval.
- ``never``: written before acknowledged, fsynced only when a segment is sealed and on close.
  Survives a process crash; a power loss can lose everything not yet in a sealed segment.

Acknowledged one-record appends per second, N groups each appending in a loop (the slow test
``tests/storage/test_coordinator_log_bench.py``; session 10, 2-vCPU VM, write+fsync of 4 KiB
0.24-0.29 ms)::

    groups        1        10       100      1000
    always     3,744    17,804    64,440    66,280   (one fsync per batch)
    interval 113,235   113,488   114,177   108,578
    never    113,825   112,256   109,871   113,820

With the thread instead of the fsync worker the ``always`` row read 3,829 / 16,774 / 59,469 /
64,912 in the same session: with no sockets to serve, the loop rarely holds the GIL when the
thread wants it back. Through real clients it does: 16 committing clients 4,756-5,348/s with
the thread, 6,013-6,214/s with the worker (actors/fsync_process.py). ``always`` is the default:
one group commits in ~0.4 ms (consumers commit every few seconds), and with many groups the
trio loop's CPU, not the disk, is the ceiling. On a disk with a 5-10 ms fsync a lone group gets
100-200 commits/s but group commit still scales with the number of groups.

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
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from pathlib import Path

import trio

from ..coordinator.latest import LatestRecords
from ..group_common.records import Record
from ..ids import GroupKey
from ..storage.coordinator_records import (
    decode_stored,
    decode_trusted,
    encode_entry,
    entry_compaction_key,
)
from ..storage.coordinator_segments import (
    DEFAULT_PREALLOCATE_BYTES,
    DEFAULT_SEGMENT_BYTES,
    CompactionStats,
    CoordinatorLogError,
    CoordinatorSegments,
)
from ..storage.entry_replay import AmbiguousKeys, EntryReplay
from .coordinator_log import log_checkpoint
from .fsync_process import FsyncProcess, FsyncProcessGone

__all__ = ["CoordinatorLogError", "DurableCoordinatorLog", "FsyncPolicy", "LogStats"]

log = logging.getLogger(__name__)

# Under `always` a reactor pass's batch is fsynced on the event loop, where every other
# request waits it out: only while the disk's fsyncs average less than this. Slower, commits
# go to the flusher, whose worker fsyncs beside the loop.
LOOP_FSYNC_LIMIT_S = 0.001
# Above it, a pass is still held this long after the last timed fsync: the average must be
# able to come down (one slow fsync, the first of a new segment, must not end holding).
LOOP_FSYNC_PROBE_S = 1.0

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


def _refuse_cancel(_raise_cancel: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


@dataclass(slots=True, eq=False)
class _Pending:
    """One append waiting for its batch. Its appender is parked and rescheduled directly
    (no Event, no ParkingLot: under ``always`` every commit waits here)."""

    key: GroupKey
    records: tuple[Record, ...]
    payloads: list[bytes]
    error: BaseException | None = None
    task: trio.lowlevel.Task | None = None  # the appender, while it waits

    def finish(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.finish()

    async def wait(self, *, shielded: bool) -> None:
        """Until `finish`; ``shielded``: not even a cancellation ends the wait (it is raised
        at the appender's next checkpoint instead), as under a shielded cancel scope. Called
        right after queueing, with no checkpoint between: the batch cannot have finished yet."""
        self.task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(_refuse_cancel if shielded else self._abort)

    def _abort(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        self.task = None  # cancelled: the records may still be written, nobody is told
        return trio.lowlevel.Abort.SUCCEEDED


def _replay(
    data_dir: Path, segment_bytes: int, preallocate_bytes: int, skip_corruption: bool, *, bulk: bool
) -> tuple[CoordinatorSegments, LatestRecords[bytes]]:
    view: LatestRecords[bytes] = LatestRecords()
    replay = EntryReplay(view, bulk=bulk)
    segments = CoordinatorSegments.open(
        data_dir / "coordinator",
        decode_stored,
        replay.apply_entry,
        segment_bytes=segment_bytes,
        preallocate_bytes=preallocate_bytes,
        skip_corruption=skip_corruption,
        bulk=replay.bulk,
    )
    try:
        replay.settle()
    except BaseException:
        segments.close()
        raise
    return segments, view


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
        self._fsync_process: FsyncProcess | None = None  # started by run() under `always`
        # append_now's records from hold_appends() to write_held(): (key, records, payloads)
        self._held: list[tuple[GroupKey, Sequence[Record], list[bytes]]] | None = None
        self._held_keys: set[GroupKey] = set()  # their groups (a pass may answer thousands)
        self._unstored: list[GroupKey] = []  # groups of held records that failed to write
        self._fsync_s = 0.0  # a moving average of the disk's fsyncs (hold_appends)
        self._fsync_timed_at = 0.0  # time.monotonic() of the latest fsync timed
        self.stats = LogStats()

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
    ) -> DurableCoordinatorLog:
        """Open ``<data_dir>/coordinator`` and replay it (blocking file I/O: call at start-up)."""
        try:
            segments, view = _replay(
                data_dir, segment_bytes, preallocate_bytes, skip_corruption, bulk=True
            )
        except AmbiguousKeys as exc:
            log.warning("coordinator log: %s; replaying it entry by entry", exc)
            segments, view = _replay(
                data_dir, segment_bytes, preallocate_bytes, skip_corruption, bulk=False
            )
        log.info("coordinator log replayed: %d groups", len(view))
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

    async def append(
        self, key: GroupKey, records: Sequence[Record], *, shielded: bool = False
    ) -> None:
        """Return once ``records`` are written as the fsync policy promises; raise if not.
        ``shielded``: a cancellation does not end the wait (see CoordinatorLog.append)."""
        if self._closed:
            raise CoordinatorLogError("the coordinator log is closed")
        if not records:
            await log_checkpoint(shielded=shielded)
            return
        if self.writable_now():
            # No checkpoint: the actor yields at its mailbox before every step anyway; only
            # when compaction is due, so that a caller appending in a loop lets it start.
            self.append_now(key, records)
            if self._compaction_wanted.is_set():
                await log_checkpoint(shielded=shielded)
            return
        pending = _Pending(key, tuple(records), [encode_entry(key, r) for r in records])
        self._queue.append(pending)
        self._wakeup.set()
        await pending.wait(shielded=shielded)
        self._raise_if_failed(pending)

    def writable_now(self) -> bool:
        """Whether `append_now` may be called: a page-cache write (fsync policies interval and
        never) costs microseconds, less than waking the flusher task for it, and with nothing
        queued ahead the order of appends is kept. Between `hold_appends` and `write_held`
        under any policy: a group with records queued is held by its actor meanwhile
        (GroupActor.answer_durably), so what is kept cannot overtake its own records."""
        if self._closed:
            return False
        return self._held is not None or (self._page_cache_writes and not self._queue)

    def append_now(self, key: GroupKey, records: Sequence[Record]) -> None:
        """Write ``records`` as the fsync policy promises before returning, without a
        checkpoint (only while `writable_now()`); raise CoordinatorLogError if not stored.
        Between `hold_appends` and `write_held` they are kept, and stored by `write_held`."""
        assert self.writable_now(), "append_now while a write must wait"
        payloads = [encode_entry(key, r) for r in records]
        if self._held is not None:
            self._held.append((key, records, payloads))
            self._held_keys.add(key)
            return
        try:
            self._segments.append(payloads)
        except BaseException as exc:  # as a batch of one: counted, logged, raised
            pending = _Pending(key, tuple(records), payloads)
            self._failed([pending], exc)
            self._raise_if_failed(pending)
            raise
        # No _Pending and no Event to set: nobody waits for this append but the caller.
        self._view.apply(key, records, payloads)
        self._count_written(1, len(payloads))

    def hold_appends(self) -> None:
        """Until `write_held`, `append_now` may be called under any policy and keeps its
        records instead of writing them, so that one write (and under ``always`` one fsync)
        stores them all. The caller must let out no reply that rests on them before
        `write_held`, and must not checkpoint meanwhile. A read of a group they belong to (an
        actor spawned again in the same pass), or of the keys, stores them first. Under
        ``always`` only while fsyncs are fast (LOOP_FSYNC_LIMIT_S, or once a second to time
        them again); else nothing is held, and `writable_now` stays False."""
        if (
            self._page_cache_writes
            or self._fsync_s < LOOP_FSYNC_LIMIT_S
            or time.monotonic() - self._fsync_timed_at > LOOP_FSYNC_PROBE_S
        ):
            self._held = []

    def write_held(self) -> list[GroupKey]:
        """Store what `append_now` kept since `hold_appends` as the policy promises; the
        groups whose records could not be stored (nothing of them is in the view; their
        actors must forget them)."""
        self._write_kept()
        self._held = None
        unstored, self._unstored = self._unstored, []
        return unstored

    def holds(self, key: GroupKey) -> bool:
        """Records that a read's early `_write_kept` failed to store count as held too, until
        `write_held` reports them."""
        return key in self._held_keys or key in self._unstored

    def _write_kept(self) -> None:
        held = self._held
        if not held:
            return
        self._held = []
        self._held_keys.clear()
        payloads = [payload for _key, _records, kept in held for payload in kept]
        try:
            self._segments.append(payloads)
            if not self._page_cache_writes:
                self._timed_fsync()  # on the loop: a pass's batch is not worth a hop
        except BaseException as exc:
            self.stats.failed_batches += 1
            self._unstored += [key for key, _records, _kept in held]
            if not isinstance(exc, Exception):
                raise
            log.error("coordinator log: %d held records not stored: %s", len(payloads), exc)
            return
        for key, records, kept in held:
            self._view.apply(key, records, kept)
        self._count_written(len(held), len(payloads))

    @staticmethod
    def _raise_if_failed(pending: _Pending) -> None:
        if pending.error is not None:
            raise CoordinatorLogError(
                f"group {pending.key.group_id}: {len(pending.records)} records not stored"
            ) from pending.error

    def records_of(self, key: GroupKey) -> list[Record]:
        if key in self._held_keys:
            self._write_kept()
        return decode_trusted(self._view.records_of(key))

    def membership_of(self, key: GroupKey) -> list[Record]:
        if key in self._held_keys:
            self._write_kept()
        return decode_trusted(self._view.membership_of(key))

    def keys(self) -> list[GroupKey]:
        """Every group with stored state (for ListGroups and start-up)."""
        if self._held:
            self._write_kept()
        return self._view.keys()

    @property
    def fsyncs(self) -> int:
        return self._segments.fsyncs

    @property
    def fsync_worker_pid(self) -> int | None:
        """The fsync worker's process id, or None: fsyncs go to a thread or the loop."""
        return None if self._fsync_process is None else self._fsync_process.pid

    @property
    def segments(self) -> CoordinatorSegments:
        return self._segments

    # -- background work ------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Flush and compact until cancelled; then fail what is still queued and close."""
        if self._policy is FsyncPolicy.ALWAYS and self._fsync_process is None:
            self._fsync_process = self._start_fsync_process()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._flush_forever)
                nursery.start_soon(self._compact_forever)
                task_status.started()
        finally:
            self.close()

    async def _flush_forever(self) -> None:
        while True:
            await self._work_or_deadline()
            if self._queue:
                batch, self._queue = self._queue, []
                await self._write(batch)
            elif trio.current_time() >= self._sync_deadline:
                await self._sync()

    async def _work_or_deadline(self) -> None:
        while not self._queue and trio.current_time() < self._sync_deadline:
            self._wakeup = trio.Event()
            if self._sync_deadline == math.inf:  # no sync due (always, never): no cancel scope
                await self._wakeup.wait()
                continue
            with trio.move_on_at(self._sync_deadline):
                await self._wakeup.wait()

    async def _write(self, batch: list[_Pending]) -> None:
        if self._policy is FsyncPolicy.ALWAYS:
            payloads = [payload for pending in batch for payload in pending.payloads]
            try:
                if len(batch) == 1:  # a lone appender: on the loop (see "Group commit")
                    self._write_and_sync(payloads)
                elif self._fsync_process is not None:
                    self._segments.append(payloads)
                    await self._fsync_in_process()
                else:
                    await trio.to_thread.run_sync(self._write_and_sync, payloads)
            except BaseException as exc:
                self._failed(batch, exc)
                return
            self._written(batch)
        else:
            self._write_batch(batch)

    async def _fsync_in_process(self) -> None:
        """fsync what is written through the fsync worker; in a thread if it is gone."""
        assert self._fsync_process is not None
        try:
            error = await self._fsync_process.fsync(self._segments.fd_to_sync())
        except FsyncProcessGone as exc:
            log.warning("coordinator log: %s; fsyncing in a thread from now on", exc)
            self._stop_fsync_process()
            await trio.to_thread.run_sync(self._segments.fsync)
        else:
            self._segments.fsynced(error)

    @staticmethod
    def _start_fsync_process() -> FsyncProcess | None:
        try:
            return FsyncProcess.start()
        except OSError as exc:
            log.warning("coordinator log: no fsync worker (%s); fsyncing in a thread", exc)
            return None

    def _stop_fsync_process(self) -> None:
        process, self._fsync_process = self._fsync_process, None
        if process is not None:
            process.close()

    def _write_batch(self, batch: list[_Pending]) -> None:
        """Write to the page cache (fsync policies interval and never), synchronously."""
        try:
            self._segments.append([payload for pending in batch for payload in pending.payloads])
        except BaseException as exc:
            self._failed(batch, exc)
            return
        self._written(batch)

    def _failed(self, batch: list[_Pending], exc: BaseException) -> None:
        self.stats.failed_batches += 1
        known = isinstance(exc, CoordinatorLogError)
        error = exc if known else CoordinatorLogError(f"batch not written: {exc!r}")
        for pending in batch:
            pending.fail(error)
        if not known:
            raise exc
        records = sum(len(pending.payloads) for pending in batch)
        log.error("coordinator log: a batch of %d records failed: %s", records, exc)

    def _written(self, batch: list[_Pending]) -> None:
        for pending in batch:
            self._view.apply(pending.key, pending.records, pending.payloads)
            pending.finish()
        self._count_written(len(batch), sum(len(pending.payloads) for pending in batch))

    def _count_written(self, appends: int, records: int) -> None:
        """One batch of `appends` is written: count it, and start what it makes due."""
        self.stats.appends += appends
        self.stats.records += records
        self.stats.batches += 1
        if self._policy is FsyncPolicy.INTERVAL and self._sync_deadline == math.inf:
            self._sync_deadline = trio.current_time() + self._fsync_interval
            self._wakeup.set()  # the flusher must learn of the new sync deadline
        if self._segments.rolls != self._rolls_seen:  # only a roll adds dirty bytes
            self._rolls_seen = self._segments.rolls
            if self._segments.dirty_bytes >= self._dirty_limit:
                self._compaction_wanted.set()

    def _write_and_sync(self, payloads: list[bytes]) -> None:
        self._segments.append(payloads)
        self._timed_fsync()

    def _timed_fsync(self) -> None:
        start = time.perf_counter()
        self._segments.fsync()
        self._fsync_took(time.perf_counter() - start)

    def _fsync_took(self, seconds: float) -> None:
        self._fsync_s += (seconds - self._fsync_s) / 4
        self._fsync_timed_at = time.monotonic()

    async def _sync(self) -> None:
        self._sync_deadline = math.inf
        try:
            await trio.to_thread.run_sync(self._segments.fsync)
        except CoordinatorLogError:
            # Acknowledged records may not be durable; the log now refuses every append.
            log.exception("coordinator log: periodic fsync failed")

    async def _compact_forever(self) -> None:
        while True:
            with trio.move_on_after(self._compaction_interval):
                await self._compaction_wanted.wait()
            self._compaction_wanted = trio.Event()
            if not self._segments.needs_compaction(_wall_ms(), self._retention_ms):
                continue
            try:
                await self.compact()
            except (CoordinatorLogError, OSError):
                log.exception("coordinator log: compaction failed; the log is unchanged")

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
        self._stop_fsync_process()
        try:
            self._segments.close()
        except CoordinatorLogError:
            log.exception("coordinator log: final fsync failed")

"""The data plane: topics, appends and the wake-ups that long-polling fetches wait for.

Topics are per organisation: `topics_for(org_id)` is that org's `TopicStore` (storage/topics.py
has the layout), a dict lookup per request. Start-up opens every org's store found on disk; an
org seen for the first time gets an empty store in memory, written to disk at its first topic.
Topic ids are random UUIDs, so the keys below (topic id, partition) never collide across orgs.

Partition logs are plain synchronous files (writes land in the OS page cache and cost
microseconds), so appends run inline on the trio thread, in the order requests arrive. What
needs trio is the Fetch long poll: a fetch that found too little data parks one `trio.Event`
in the watch set of every partition it reads; an append sets and clears the watchers of its
partition. No polling loop; a fetch wakes on the first append that concerns it, or at its
deadline.

Producers and transactions: every partition has its producer state (producer_state.py:
epochs, the last five batches per producer, open and aborted transactions). A producer's
batch is checked against it as Kafka checks it (INVALID_PRODUCER_EPOCH,
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE); a retried batch gets its original offset
instead of being appended twice. A transactional batch whose transaction is not yet open in
the partition is verified with the transaction coordinator first (KIP-890): the gateway
takes a guard from `start_verification`, asks the coordinator, and appends presenting it.
The transaction coordinator ends a transaction with `write_txn_markers`, which appends
COMMIT/ABORT control batches (control_batches.py). The state is rebuilt at start-up from
the partition logs' producer batches (after the snapshot a clean shutdown leaves,
producer_recovery.py), so duplicate detection, sequence checks, the last stable offset and
the aborted transactions hold across a restart or a SIGKILL exactly as far as the log does.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import trio
from kio.schema.errors import ErrorCode

from ..group_common.topic_image import TopicImage
from .append_rules import AppendRules, RecordError, prepare
from .control_batches import ABORT, COMMIT, marker_batch
from .failures import STORAGE_LOG, StorageError, reason
from .partition_log import PartitionLog
from .producer_ids import ProducerIdAllocator
from .producer_recovery import rebuild_producers, write_snapshot
from .producer_state import AbortedTxn, PartitionProducers, ProducerEntry
from .record_batch import BatchHeader, parse_header
from .startup_writes import StartupWrites
from .topic_configs import KAFKA_DEFAULTS
from .topics import Topic, TopicStore, stored_orgs, topics_dir

log = logging.getLogger(__name__)

PartitionKey = tuple[uuid.UUID, int]


class AppendResult(NamedTuple):
    error: ErrorCode
    base_offset: int  # -1 unless appended (or a duplicate of a batch appended before)
    message: str = ""
    record_errors: tuple[RecordError, ...] = ()  # (index in the batch, why), KIP-467
    log_append_time: int = -1  # the time stamped on the batch (LogAppendTime topics)


def _fsync_all(handles: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], OSError]:
    """fsync and close each descriptor (-1: none); the errors. Runs in a worker thread."""
    errors: dict[tuple[str, int], OSError] = {}
    for tp, fd in handles.items():
        if fd < 0:
            continue
        try:
            os.fsync(fd)
        except OSError as exc:
            errors[tp] = exc
        finally:
            os.close(fd)
    return errors


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class DataPlane:
    def __init__(
        self,
        data_dir: Path,
        stores: Mapping[int, TopicStore],
        producer_ids: ProducerIdAllocator,
        *,
        segment_bytes: int,
        topic_defaults: Mapping[str, str] = KAFKA_DEFAULTS,
        writes: StartupWrites | None = None,
    ) -> None:
        self._data_dir = data_dir
        self._segment_bytes = segment_bytes
        # Each topic config's broker-wide default (topic_configs.topic_defaults), and each
        # topic's append rules, made again when its configs change (alter_configs replaces
        # the dict).
        self.topic_defaults = dict(topic_defaults)
        self._rules: dict[uuid.UUID, tuple[Mapping[str, str], AppendRules]] = {}
        self._stores = dict(stores)
        self.topics = self.topics_for(0)  # org 0's: a listener without SASL sees only these
        self.producer_ids = producer_ids
        # Markers are fsynced before they are answered, to be as durable as the coordinator's
        # Complete record: off only where that record is not fsynced either
        # (`coordinator.log.fsync` interval or never, set by the server).
        self.fsync_markers = True
        self._watchers: dict[PartitionKey, set[trio.Event]] = {}
        self._dirty: set[PartitionLog] = set()
        # Producer state per partition (producer_state.py), rebuilt from the logs
        # (producer_recovery.py); the offset each partition's snapshot on disk covers.
        self._producers: dict[PartitionKey, PartitionProducers] = {}
        self._snapshot_ends: dict[PartitionKey, int] = {}
        started, replayed = time.perf_counter(), 0
        for org_id in list(self._stores):
            for topic in self._stores[org_id]:
                for index, partition in enumerate(topic.partitions):
                    key = (topic.topic_id, index)
                    self._producers[key], self._snapshot_ends[key] = rebuild_producers(
                        partition, writes
                    )
                    replayed += self._snapshot_ends[key] < partition.log_end_offset
        if self._producers:
            log.info(
                "producer state of %d partitions rebuilt in %.3f s (%d replayed from the log)",
                len(self._producers),
                time.perf_counter() - started,
                replayed,
            )

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        segment_bytes: int,
        topic_defaults: Mapping[str, str] = KAFKA_DEFAULTS,
        writes: StartupWrites | None = None,
    ) -> DataPlane:
        """Every org's topics and their producer state, as stored. Reads only: recovery's
        writes go to ``writes`` (made at once if None: startup_writes.py)."""
        stores = {
            org_id: TopicStore.open(
                data_dir, segment_bytes=segment_bytes, org_id=org_id, writes=writes
            )
            for org_id in (0, *stored_orgs(data_dir))
        }
        allocator = ProducerIdAllocator(data_dir / "producer-ids")
        return cls(
            data_dir,
            stores,
            allocator,
            segment_bytes=segment_bytes,
            topic_defaults=topic_defaults,
            writes=writes,
        )

    # -- topics ---------------------------------------------------------------------------
    def topics_for(self, org_id: int) -> TopicStore:
        """Org `org_id`'s topics; an org without any gets an empty store (no disk access)."""
        store = self._stores.get(org_id)
        if store is None:
            root = topics_dir(self._data_dir, org_id)
            store = TopicStore(root, segment_bytes=self._segment_bytes, org_id=org_id)
            self._stores[org_id] = store
        return store

    def image_of(self, org_id: int) -> TopicImage:
        """What org `org_id`'s KIP-848 groups may see (the group actors' topic provider)."""
        return self.topics_for(org_id).image()

    def orgs(self) -> Iterator[int]:
        return iter(sorted(self._stores))

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        org_id: int = 0,
    ) -> Topic:
        """A new topic; StorageError if the disk refuses it (nothing of it is left)."""
        try:
            return self.topics_for(org_id).create(name, partitions, configs)
        except OSError as exc:
            STORAGE_LOG.log("creating topic %s failed: %s", name, reason(exc))
            raise StorageError(reason(exc)) from None

    def delete_topic(self, name: str, *, org_id: int = 0) -> Topic | None:
        topic = self.topics_for(org_id).delete(name)
        if topic is not None:
            self._rules.pop(topic.topic_id, None)
            for index, partition in enumerate(topic.partitions):
                self._dirty.discard(partition)
                self._producers.pop((topic.topic_id, index), None)
                self._snapshot_ends.pop((topic.topic_id, index), None)
                self._wake((topic.topic_id, index))
        return topic

    # -- appends --------------------------------------------------------------------------
    def start_verification(
        self, topic: Topic, index: int, header: BatchHeader, epoch_bump: bool
    ) -> tuple[ErrorCode, int]:
        """Before the transaction coordinator is asked about a transactional batch: see
        PartitionProducers.start_verification (an error, or the guard for `append`)."""
        key = (topic.topic_id, index)
        producers = self._producers_of(key, topic.partitions[index])
        return producers.start_verification(header, epoch_bump, _now_ms())

    def append(
        self,
        topic: Topic,
        index: int,
        batches: list[memoryview],
        guard: int | None = None,
        headers: list[BatchHeader] | None = None,
    ) -> AppendResult:
        """Append a Produce request's validated batches to one partition.

        Batches of a producer (id >= 0) are checked against the partition's producer state
        first; such a request must hold exactly one batch, as Kafka demands from Produce v3.
        Then the topic's configs apply (append_rules.py: timestamps, LogAppendTime, the
        codec). `guard`: `start_verification`'s, when a transactional batch must have been
        verified (None: it need not be). `headers`: the batches' parsed headers, if the caller
        has them. A write the disk refuses raises StorageError (nothing of it was stored), with
        one budgeted log line (storage/failures.py).
        """
        key = (topic.topic_id, index)
        partition = topic.partitions[index]
        if headers is None:
            headers = [parse_header(batch) for batch in batches]
        header = headers[0]
        if len(batches) > 1 and any(h.producer_id >= 0 or h.is_transactional for h in headers):
            return AppendResult(ErrorCode.invalid_record, -1, "one producer batch per partition")
        producers = None
        if header.producer_id >= 0:
            producers = self._producers_of(key, partition)
            verdict = producers.check(header, guard)
            if verdict.duplicate_of is not None:
                log.info(
                    "duplicate batch from producer %d seq %d: answered with offset %d",
                    header.producer_id,
                    header.base_sequence,
                    verdict.duplicate_of,
                )
                return AppendResult(ErrorCode.none, verdict.duplicate_of)
            if verdict.error is not ErrorCode.none:
                return AppendResult(verdict.error, -1, verdict.message)
        elif header.is_transactional:
            return AppendResult(ErrorCode.invalid_record, -1, "transactional batch, no producer")
        prepared = prepare(batches, self.rules_of(topic), _now_ms())
        if prepared.error is not ErrorCode.none:
            return AppendResult(prepared.error, -1, prepared.message, prepared.record_errors)
        base_offset = self._append_to_log(topic, index, prepared.batches)
        if producers is not None:  # (as stored: a LogAppendTime batch has the broker's time)
            stored = prepared.batches[0]
            producers.appended(
                header if stored is batches[0] else parse_header(stored), base_offset
            )
        self._dirty.add(partition)
        self._wake(key)
        if prepared.log_append_time < 0:
            return AppendResult(ErrorCode.none, base_offset)  # (positional: the hot path)
        return AppendResult(ErrorCode.none, base_offset, "", (), prepared.log_append_time)

    def rules_of(self, topic: Topic) -> AppendRules:
        """The topic's append rules under its current configs."""
        cached = self._rules.get(topic.topic_id)
        if cached is not None and cached[0] is topic.configs:
            return cached[1]
        rules = AppendRules.of(topic.configs, self.topic_defaults)
        self._rules[topic.topic_id] = (topic.configs, rules)
        return rules

    async def write_txn_markers(
        self,
        org_id: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        partitions: Iterable[tuple[str, int]],
        coordinator_epoch: int = 0,
        transaction_version: int = 0,
    ) -> dict[tuple[str, int], int]:
        """End producer `producer_id`'s transaction in each of org `org_id`'s `partitions`
        with one COMMIT or ABORT marker; a Kafka error code per (topic, partition). A marker
        of transaction version 2 must carry an epoch above its transaction's (KIP-1228).

        A marker is fsynced before this answers NONE for it (if `fsync_markers`), whatever
        `log.flush.interval.ms` says: the coordinator records the transaction complete (an
        fsynced record) on that answer and never sends the marker again, so a marker lost to
        a power cut would leave the partition's transaction open, its last stable offset
        stuck, for good. Kafka's coordinator likewise completes only after the partition
        leaders wrote the markers (durable there by replication; we have one copy, so by
        fsync). Idempotent: a
        repeated marker of a transaction already ended here, at the same epoch, writes nothing
        (but is fsynced). UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist (for
        instance a topic deleted since it joined the transaction): nothing is left to end.
        KAFKA_STORAGE_ERROR (retriable) where the disk refused the marker or its fsync.
        """
        kind = COMMIT if committed else ABORT
        store = self.topics_for(org_id)
        answers: dict[tuple[str, int], int] = {}
        ended: dict[tuple[str, int], PartitionLog] = {}
        for name, index in partitions:
            topic = store.by_name(name)
            if topic is None or not 0 <= index < len(topic.partitions):
                answers[(name, index)] = ErrorCode.unknown_topic_or_partition.value
                continue
            code = self._write_marker(
                topic, index, (producer_id, producer_epoch, transaction_version), kind,
                coordinator_epoch,
            )  # fmt: skip
            answers[(name, index)] = code.value
            if code is ErrorCode.none and self.fsync_markers:  # written now or before (a retry)
                ended[(name, index)] = topic.partitions[index]
        for tp in await self._fsync(ended):
            answers[tp] = ErrorCode.kafka_storage_error.value
        return answers

    async def _fsync(self, partitions: dict[tuple[str, int], PartitionLog]) -> set[tuple[str, int]]:
        """fsync `partitions` in one worker thread, the event loop serving meanwhile (each on
        a duplicate descriptor: see PartitionLog.flush_handle); the ones not fsynced."""
        handles: dict[tuple[str, int], int] = {}
        unsynced: set[tuple[str, int]] = set()
        for tp, partition in partitions.items():
            try:
                handles[tp] = partition.flush_handle()
            except OSError as exc:  # out of descriptors: retriable, the log is fine
                STORAGE_LOG.log("fsync of %s failed: %s", partition.directory, reason(exc))
                unsynced.add(tp)
        if not handles:  # nothing to fsync (fsync_markers off, or no partition ended)
            await trio.lowlevel.checkpoint()
            return unsynced
        errors = await trio.to_thread.run_sync(_fsync_all, handles)
        for tp, error in errors.items():
            STORAGE_LOG.log("fsync of %s failed: %s", partitions[tp].directory, reason(error))
            partitions[tp].fsync_failed(error)
        return unsynced | {tp for tp, fd in handles.items() if fd < 0 or tp in errors}

    def _write_marker(
        self,
        topic: Topic,
        index: int,
        producer: tuple[int, int, int],  # (producer id, epoch, transaction version)
        kind: int,
        coordinator_epoch: int,
    ) -> ErrorCode:
        key = (topic.topic_id, index)
        partition = topic.partitions[index]
        producers = self._producers_of(key, partition)
        producer_id, epoch, version = producer
        code = producers.check_marker(producer_id, epoch, coordinator_epoch, version)
        if code is not ErrorCode.none or producers.marker_changes_nothing(producer_id, epoch):
            return code
        now = _now_ms()
        batch = marker_batch(producer_id, epoch, kind == COMMIT, coordinator_epoch, now)
        try:
            offset = self._append_to_log(topic, index, [batch])
        except StorageError:
            return ErrorCode.kafka_storage_error  # retriable: the coordinator sends it again
        producers.marker_written(producer_id, epoch, coordinator_epoch, kind, offset, now)
        self._dirty.add(partition)
        self._wake(key)
        return ErrorCode.none

    def _append_to_log(
        self, topic: Topic, index: int, batches: Sequence[bytes | memoryview]
    ) -> int:
        try:
            return topic.partitions[index].append(batches)
        except OSError as exc:
            STORAGE_LOG.log("append to %s-%d failed: %s", topic.name, index, reason(exc))
            raise StorageError(reason(exc)) from None  # (no cycle: see failures.py)

    # -- transactions' view of a partition -------------------------------------------------
    def _producers_of(self, key: PartitionKey, partition: PartitionLog) -> PartitionProducers:
        producers = self._producers.get(key)
        if producers is None:
            producers, self._snapshot_ends[key] = rebuild_producers(partition)
            self._producers[key] = producers
        return producers

    def last_stable_offset(self, topic: Topic, index: int) -> int:
        """The first offset of the earliest open transaction, or the high watermark; never
        below the log start (DeleteRecords may pass an open transaction's start, as in
        Kafka, whose LSO is then the log start)."""
        partition = topic.partitions[index]
        producers = self._producers.get((topic.topic_id, index))
        if producers is None:
            return partition.log_end_offset
        lso = producers.last_stable_offset(partition.log_end_offset)
        return max(lso, partition.log_start_offset)

    def read_committed(
        self, topic: Topic, index: int, offset: int, max_bytes: int, *, min_one: bool = True
    ) -> tuple[bytes, list[AbortedTxn], int]:
        """Whole batches from `offset` below the last stable offset (as PartitionLog.read),
        the aborted transactions that overlap what was read (Kafka's read_committed), and
        the offset after the last batch read (`offset` if none was)."""
        partition = topic.partitions[index]
        producers = self._producers.get((topic.topic_id, index))
        if producers is None:
            end_offset = partition.log_end_offset
            records, end = partition.read_until(offset, max_bytes, end_offset, min_one=min_one)
            return records, [], end
        lso = self.last_stable_offset(topic, index)
        records, end = partition.read_until(offset, max_bytes, lso, min_one=min_one)
        return records, producers.aborted_between(offset, end) if records else [], end

    def cleaner_facts(
        self, topic: Topic, index: int, end: int
    ) -> tuple[int, list[tuple[int, int, int]], dict[int, tuple[int, int]]]:
        """What the log cleaner needs of a partition's transactions: its last stable offset,
        the aborted transactions below `end` (producer id, first offset, marker offset) and
        each producer's last batch (PartitionProducers.last_batches)."""
        partition = topic.partitions[index]
        producers = self._producers_of((topic.topic_id, index), partition)
        aborted = producers.aborted_between(partition.log_start_offset, end)
        return (
            self.last_stable_offset(topic, index),
            [(t.producer_id, t.first_offset, t.last_offset) for t in aborted],
            producers.last_batches(),
        )

    def producers(self, topic: Topic, index: int) -> list[tuple[int, ProducerEntry]]:
        """(producer id, its state) of each producer known in this partition (DescribeProducers);
        the entries are live: read them, never change them."""
        return self._producers_of((topic.topic_id, index), topic.partitions[index]).describe()

    def open_transactions(self, topic: Topic, index: int) -> dict[int, int]:
        """Producer id -> first offset of each transaction open in this partition."""
        producers = self._producers.get((topic.topic_id, index))
        return {} if producers is None else producers.open_transactions()

    def expire_producers(self, expiration_ms: int) -> int:
        """Forget, in every partition, the producers idle for `expiration_ms` without an open
        transaction (`producer.id.expiration.ms`); how many were forgotten."""
        cutoff = _now_ms() - expiration_ms
        return sum(producers.expire(cutoff) for producers in self._producers.values())

    async def expire_producers_periodically(self, expiration_ms: int, interval_ms: int) -> None:
        """`expire_producers` at start-up, then every `interval_ms`."""
        while True:
            expired = self.expire_producers(expiration_ms)
            if expired:
                log.info("forgot %d idle producers (producer.id.expiration.ms)", expired)
            await trio.sleep(max(interval_ms, 1) / 1000)

    def flush(self) -> None:
        """fsync every partition written since the last flush."""
        dirty, self._dirty = self._dirty, set()
        for partition in dirty:
            try:
                partition.flush()
            except OSError as exc:  # the partition refuses appends from now on
                STORAGE_LOG.log("fsync of %s failed: %s", partition.directory, reason(exc))

    def close(self, *, snapshots: bool = True) -> None:
        """Snapshot the producer state that changed (the next start-up replays nothing;
        not after a refused start, which writes nothing), then flush and close every
        partition log."""
        for store in self._stores.values() if snapshots else ():
            for topic in store:
                for index, partition in enumerate(topic.partitions):
                    self._snapshot(topic, index, partition)
        for store in self._stores.values():
            store.close()

    def _snapshot(self, topic: Topic, index: int, partition: PartitionLog) -> None:
        key = (topic.topic_id, index)
        producers = self._producers.get(key)
        if not producers or not producers.entries:
            return
        if self._snapshot_ends.get(key) == partition.log_end_offset:
            return
        try:
            write_snapshot(partition, producers)
        except (OSError, ValueError) as exc:  # the next start-up replays the log instead
            log.warning("%s: producer-state snapshot not written: %s", partition.directory, exc)
        else:
            self._snapshot_ends[key] = partition.log_end_offset

    # -- long-poll wake-ups ---------------------------------------------------------------
    def _wake(self, key: PartitionKey) -> None:
        waiters = self._watchers.pop(key, None)
        if waiters:
            for event in waiters:
                event.set()

    def wake_readers(self, keys: Iterable[PartitionKey]) -> None:
        """Wake the long polls waiting on `keys` as an append would (share groups: records
        acknowledged or released may let a waiting ShareFetch acquire)."""
        for key in keys:
            self._wake(key)

    async def wait_for_append(self, keys: Iterable[PartitionKey], deadline: float) -> None:
        """Return at the first append to any of `keys`, or at `deadline` (trio time)."""
        event = trio.Event()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            for key in keys:
                waiters = self._watchers.get(key)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._watchers[key]

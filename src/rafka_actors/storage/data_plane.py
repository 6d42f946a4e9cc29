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

Idempotent producers: the last few batches per (producer id, partition) are remembered, so a
retried batch (same producer epoch and base sequence) gets its original offset instead of
being appended twice. This memory is not rebuilt at start-up (Kafka rebuilds it from producer
snapshots); a retry that straddles a restart can duplicate.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import trio

from ..group_common.topic_image import TopicImage
from .failures import STORAGE_LOG, StorageError, reason
from .partition_log import PartitionLog
from .producer_ids import ProducerIdAllocator
from .record_batch import BatchHeader, parse_header
from .topics import Topic, TopicStore, stored_orgs, topics_dir

log = logging.getLogger(__name__)

PartitionKey = tuple[uuid.UUID, int]
_DEDUP_DEPTH = 5  # Kafka keeps the last five batches per producer


class DataPlane:
    def __init__(
        self,
        data_dir: Path,
        stores: Mapping[int, TopicStore],
        producer_ids: ProducerIdAllocator,
        *,
        segment_bytes: int,
    ) -> None:
        self._data_dir = data_dir
        self._segment_bytes = segment_bytes
        self._stores = dict(stores)
        self.topics = self.topics_for(0)  # org 0's: a listener without SASL sees only these
        self.producer_ids = producer_ids
        self._watchers: dict[PartitionKey, set[trio.Event]] = {}
        self._recent: dict[tuple[int, PartitionKey], deque[tuple[int, int, int]]] = {}
        self._dirty: set[PartitionLog] = set()

    @classmethod
    def open(cls, data_dir: Path, *, segment_bytes: int) -> DataPlane:
        stores = {
            org_id: TopicStore.open(data_dir, segment_bytes=segment_bytes, org_id=org_id)
            for org_id in (0, *stored_orgs(data_dir))
        }
        allocator = ProducerIdAllocator(data_dir / "producer-ids")
        return cls(data_dir, stores, allocator, segment_bytes=segment_bytes)

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
            for index, partition in enumerate(topic.partitions):
                self._dirty.discard(partition)
                self._wake((topic.topic_id, index))
        return topic

    # -- appends --------------------------------------------------------------------------
    def append(self, topic: Topic, index: int, batches: list[memoryview]) -> int:
        """Append validated batches; returns the base offset of the first one. A write the
        disk refuses raises StorageError (nothing of it was stored), with one budgeted log
        line (storage/failures.py)."""
        key = (topic.topic_id, index)
        partition = topic.partitions[index]
        header = parse_header(batches[0]) if len(batches) == 1 else None
        if header is not None and header.producer_id >= 0:
            duplicate = self._duplicate_of(header, key)
            if duplicate is not None:
                return duplicate
        try:
            base_offset = partition.append(batches)
        except OSError as exc:
            STORAGE_LOG.log("append to %s-%d failed: %s", topic.name, index, reason(exc))
            raise StorageError(reason(exc)) from None  # (no cycle: see failures.py)
        if header is not None and header.producer_id >= 0:
            self._remember(header, key, base_offset)
        self._dirty.add(partition)
        self._wake(key)
        return base_offset

    def _duplicate_of(self, header: BatchHeader, key: PartitionKey) -> int | None:
        for epoch, sequence, offset in self._recent.get((header.producer_id, key), ()):
            if epoch == header.producer_epoch and sequence == header.base_sequence:
                log.info("duplicate batch from producer %d seq %d", header.producer_id, sequence)
                return offset
        return None

    def _remember(self, header: BatchHeader, key: PartitionKey, base_offset: int) -> None:
        recent = self._recent.setdefault((header.producer_id, key), deque(maxlen=_DEDUP_DEPTH))
        recent.append((header.producer_epoch, header.base_sequence, base_offset))

    def flush(self) -> None:
        """fsync every partition written since the last flush."""
        dirty, self._dirty = self._dirty, set()
        for partition in dirty:
            try:
                partition.flush()
            except OSError as exc:  # the partition refuses appends from now on
                STORAGE_LOG.log("fsync of %s failed: %s", partition.directory, reason(exc))

    def close(self) -> None:
        for store in self._stores.values():
            store.close()

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

"""The live view of a group's records: what a fully compacted coordinator log holds for it.

Every record has a hierarchical key below its group (`key_tail`): ``()`` for the group record
(classic or consumer: one per group), ``(topic, partition)`` for an offset, ``(0, 0)`` for a
consumer group's target-assignment metadata, ``(0, 1, member, kind)`` for its member records,
``(20, producer, topic, partition)`` for a pending transactional offset, whose transaction's
marker is the tombstone ``(20, producer)``, and ``(23, producer)`` for the latest epoch of a
producer's markers (group_common/txn_offsets.py).
A later record replaces an earlier one with the same key, and a tombstone deletes every record
whose key starts with its own: a group tombstone everything, a member tombstone
``(0, 1, member)`` that member's three records, a consumer-state tombstone ``(0,)`` every
consumer-group record. A share group's partition states have tails ``(1, topic, partition)``
(kept with the consumer-group records: neither is an offset) and its group record ``()``.

`GroupRecords` takes records in log order and hands them back in a canonical order (group
record, consumer-group records, offsets, transactional offsets): the durable log keeps one
per group (`LatestRecords`), hands them to start-up, which folds them through the same
`apply` the live steps use (apply.py), and its compaction uses the same keys, so a compacted
log and the full history rebuild the same group. This is a view of records by key, not of a
group's state: what is kept for a record is the record itself, or what the caller stores in
its place (the durable log: its encoded entry).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, TypeVar, cast

from ..classic_group.records import GroupMetadataRecord
from ..consumer_group.records import (
    MEMBER_RECORDS,
    ConsumerGroupMetadataRecord,
    ConsumerMemberTombstone,
    ConsumerStateTombstone,
    ConsumerTargetMetadataRecord,
)
from ..group_common.partition_keys import partition_key
from ..group_common.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone, Record
from ..group_common.txn_offsets import (
    TxnMarkerRecord,
    TxnOffsetCommitRecord,
    TxnOffsetTombstone,
    TxnProducerEpochRecord,
)
from ..ids import GroupKey
from ..share_group.records import (
    SHARE_PARTITION_TAIL,
    ShareGroupMetadataRecord,
    SharePartitionRecord,
    SharePartitionTombstone,
)

CompactionKey = tuple[Hashable, ...]
MEMBER_KIND = {cls: kind for kind, cls in enumerate(MEMBER_RECORDS)}
TARGET_METADATA_TAIL: CompactionKey = (0, 0)
# Heads of the transactional offsets' keys (their record types' numbers: share groups have 1):
PENDING_TXN = 20  # a pending offset's (20, producer, topic, partition), its marker's (20, producer)
PRODUCER_EPOCH = 23  # a producer's latest marker epoch: (23, producer)
_TOMBSTONES = (
    GroupTombstone,
    OffsetTombstone,
    ConsumerMemberTombstone,
    ConsumerStateTombstone,
    TxnMarkerRecord,
    TxnOffsetTombstone,
    SharePartitionTombstone,
)
V = TypeVar("V")
KT = TypeVar("KT")
# What a group without consumer-group or transactional records holds for them: one shared
# empty mapping, not three empty dicts (192 bytes) for each of 100 000 simple groups; held
# for every stored group, passivated or not (docs/performance.md, "Memory for 100 000 groups").
_NONE: Mapping[Any, Any] = MappingProxyType({})


def _own(held: Mapping[KT, V]) -> dict[KT, V]:
    """`held` to change in place, or a new dict in place of the shared empty one."""
    return held if type(held) is dict else {}


def key_tail(record: Record) -> CompactionKey:
    """The key of a record below its group's ``(org, group)``."""
    cls = type(record)
    if cls is OffsetCommitRecord or cls is OffsetTombstone:
        return (record.topic, record.partition)  # type: ignore[attr-defined]
    if cls in MEMBER_KIND:
        return (0, 1, record.member_id, MEMBER_KIND[cls])  # type: ignore[attr-defined]
    if cls is ConsumerMemberTombstone:
        return (0, 1, record.member_id)  # type: ignore[attr-defined]
    if cls is ConsumerTargetMetadataRecord:
        return TARGET_METADATA_TAIL
    if cls is ConsumerStateTombstone:
        return (0,)
    if cls is TxnOffsetCommitRecord or cls is TxnOffsetTombstone:
        r = record
        return (PENDING_TXN, r.producer_id, r.topic, r.partition)  # type: ignore[attr-defined]
    if cls is TxnMarkerRecord:
        return (PENDING_TXN, record.producer_id)  # type: ignore[attr-defined]
    if cls is TxnProducerEpochRecord:
        return (PRODUCER_EPOCH, record.producer_id)  # type: ignore[attr-defined]
    if cls is SharePartitionRecord or cls is SharePartitionTombstone:
        return (SHARE_PARTITION_TAIL, record.topic, record.partition)  # type: ignore[attr-defined]
    return ()  # the group record (classic or consumer) and the group tombstone


def is_tombstone(record: Record) -> bool:
    return isinstance(record, _TOMBSTONES)


class GroupRecords(Generic[V]):
    """The latest group record, consumer-group records, offsets and pending transactional
    offsets of one group."""

    __slots__ = ("consumer", "group", "offsets", "pending", "producers")

    def __init__(self) -> None:
        self.group: V | None = None
        self.consumer: Mapping[CompactionKey, V] = _NONE  # by key tail
        self.offsets: dict[tuple[str, int], V] = {}
        self.pending: Mapping[tuple[int, str, int], V] = _NONE  # by (producer, topic, partition)
        self.producers: Mapping[int, V] = _NONE  # latest marker epochs, by producer id

    def apply(self, records: Sequence[Record], stored: Sequence[V] | None = None) -> None:
        """Apply ``records`` in order, keeping ``stored[i]`` for ``records[i]`` (default: it)."""
        kept = cast(Sequence[V], records) if stored is None else stored
        for record, value in zip(records, kept, strict=True):
            cls = type(record)
            if cls is OffsetCommitRecord:
                tp = partition_key(record.topic, record.partition)  # type: ignore[attr-defined]
                self.offsets[tp] = value
            elif cls is OffsetTombstone:
                tp = (record.topic, record.partition)  # type: ignore[attr-defined]
                if tp in self.offsets:
                    del self.offsets[tp]
            elif cls is GroupTombstone:
                self.group = None
                self.consumer = self.pending = self.producers = _NONE
                self.offsets.clear()
            elif cls is TxnOffsetCommitRecord:
                r = record
                pending = self.pending = _own(self.pending)
                pending[(r.producer_id, r.topic, r.partition)] = value  # type: ignore[attr-defined]
            elif cls is TxnOffsetTombstone:
                pending_key = cast(tuple[int, str, int], key_tail(record)[1:])
                if pending_key in self.pending:
                    del _own(self.pending)[pending_key]
            elif cls is TxnProducerEpochRecord:
                producers = self.producers = _own(self.producers)
                producers[record.producer_id] = value  # type: ignore[attr-defined]
            elif cls is TxnMarkerRecord:
                producer_id = record.producer_id  # type: ignore[attr-defined]
                for done in [k for k in self.pending if k[0] == producer_id]:
                    del _own(self.pending)[done]
            elif (
                cls is GroupMetadataRecord
                or cls is ConsumerGroupMetadataRecord
                or cls is ShareGroupMetadataRecord
            ):
                self.group = value
            elif (
                cls is ConsumerMemberTombstone
                or cls is ConsumerStateTombstone
                or cls is SharePartitionTombstone
            ):
                tail = key_tail(record)
                n = len(tail)
                for stale in [k for k in self.consumer if k[:n] == tail]:
                    del _own(self.consumer)[stale]
            else:
                consumer = self.consumer = _own(self.consumer)
                consumer[key_tail(record)] = value

    def is_empty(self) -> bool:
        return (
            self.group is None
            and not self.offsets
            and not self.consumer
            and not self.pending
            and not self.producers
        )

    def records(self) -> list[V]:
        transactional = [*self.pending.values(), *self.producers.values()]
        return self.membership() + list(self.offsets.values()) + transactional

    def membership(self) -> list[V]:
        """The group record and the KIP-848 records: all but the offsets."""
        head: list[V] = [self.group] if self.group is not None else []
        return head + list(self.consumer.values())


OffsetRow = tuple[int, str, str, int, V | None]  # (org, group, topic, partition, kept or None)


class LatestRecords(Generic[V]):
    """`GroupRecords` of every group: the durable log's in-memory view."""

    def __init__(self) -> None:
        # GroupKey is a NamedTuple: plain (org, group) tuples find the same entries.
        self._groups: dict[tuple[int, str], GroupRecords[V]] = {}

    def apply(
        self, key: tuple[int, str], records: Sequence[Record], stored: Sequence[V] | None = None
    ) -> None:
        latest = self._groups.get(key) or GroupRecords()
        latest.apply(records, stored)
        if latest.is_empty():
            self._groups.pop(key, None)
        else:
            self._groups[key] = latest

    def put_offsets(self, rows: Iterable[OffsetRow[V]]) -> None:
        """Set each (org, group, topic, partition) offset to what is kept for it, or delete it
        (None): what `apply` does for offset records, for many at once."""
        groups = self._groups
        for org_id, group_id, topic, partition, value in rows:
            latest = groups.get((org_id, group_id))
            if value is not None:
                if latest is None:
                    latest = groups[GroupKey(org_id, group_id)] = GroupRecords()
                latest.offsets[partition_key(topic, partition)] = value
            elif latest is not None:
                latest.offsets.pop((topic, partition), None)
                if latest.is_empty():
                    del groups[(org_id, group_id)]

    def records_of(self, key: tuple[int, str]) -> list[V]:
        latest = self._groups.get(key)
        return [] if latest is None else latest.records()

    def membership_of(self, key: tuple[int, str]) -> list[V]:
        latest = self._groups.get(key)
        return [] if latest is None else latest.membership()

    def keys(self) -> list[GroupKey]:
        return cast(list[GroupKey], list(self._groups))

    def __contains__(self, key: object) -> bool:
        return key in self._groups

    def __len__(self) -> int:
        return len(self._groups)

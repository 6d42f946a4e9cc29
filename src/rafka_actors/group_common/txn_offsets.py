"""Transactional offsets (KIP-98, KIP-447): pending per producer until the transaction ends.

A TxnOffsetCommit that its group's protocol has validated (classic_group/offsets.py for
classic and simple groups, consumer_group/offsets.py for KIP-848 groups) stores its offsets
here, in the group's `txn.pending`, keyed by producer id, and writes one
`TxnOffsetCommitRecord` each. They are not committed offsets: OffsetFetch does not see them,
and with `require_stable` it answers UNSTABLE_OFFSET_COMMIT for their partitions. The
transaction coordinator's end marker (`TxnMarkerOp`) merges them into the committed offsets
or discards them, like Kafka's `OffsetMetadataManager.replayEndTransactionMarker` (design
note 003, "In-memory structure").
Retention never expires an offset with a pending transactional commit. OffsetDelete removes
a partition's pending offsets with its committed one, as Kafka's offset tombstone does
(`TxnOffsetTombstone`, key ``(20, producer id, topic, partition)``).

Records. A merge writes an OffsetCommitRecord for every offset it commits, then a
`TxnMarkerRecord`, which deletes the producer's pending records (it is a tombstone of key
``(20, producer id)``; a pending record's key is ``(20, producer id, topic, partition)``). So a
compacted log and a replay of the whole history agree without the marker having to be
re-interpreted, and a torn batch (offsets written, marker lost) only leaves the offsets pending
until the coordinator, which retries its markers, sends the marker again.

Zombies. As on Kafka's `__consumer_offsets` partition, whose producer state remembers each
producer's latest epoch (a marker's too), a TxnOffsetCommit whose epoch is older than one the
group has seen from its producer, in a pending offset or in a marker, is a fenced zombie's:
INVALID_PRODUCER_EPOCH (fatal to the clients). Otherwise a zombie's late commit, arriving after
the marker that aborted its transaction, would wait pending for the next commit marker of the
producer id and be merged with it. The group keeps that epoch per producer (`txn.epochs`) and
writes it as a `TxnProducerEpochRecord` (key ``(23, producer id)``), so a restart keeps it.

A group holds all this in `txn` (committed.TxnOffsets), None until its first transactional op.

Order. Kafka keeps, at a commit marker, the most recent of a pending offset and the offset
in place (a regular commit, or one an earlier marker merged), by log position. Applying the
records in log order (a step's, or the whole history) marks a pending offset superseded when
an offset of its partition committed no later than it is applied after it
(`TxnOffsets.supersede`: the commit time stands in for the position, and a tie goes to the
offset applied later). A compacted log holds the offsets before the pending ones: there a
pending offset is superseded by an offset in place committed strictly later than it.

Every record here changes the group through its `apply_*`, live (`Effects.write`) and at
start-up alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from kio.schema.errors import ErrorCode

from .committed import CommittedOffset, OffsetHolder, PendingTxn, TxnOffsets
from .effects import Effects
from .ops import TxnMarkerOp, TxnMarkerOpResp, TxnOffsetCommitOp, TxnOffsetCommitOpResp
from .records import OffsetCommitRecord, Record

TopicPartition = tuple[str, int]
_OK = int(ErrorCode.none)


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRecord(Record):
    """One pending transactional offset of a producer (Kafka writes an OffsetCommit record
    inside the producer's transaction; ours names the producer instead)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class TxnOffsetTombstone(Record):
    """A producer's pending offset of one partition was deleted (OffsetDelete): Kafka's
    offset tombstone removes the pending offsets of its partition too."""

    group_id: str
    producer_id: int
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class TxnMarkerRecord(Record):
    """A producer's transaction ended for this group: its pending offsets are gone (the
    OffsetCommit records before it hold those a commit merged)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True, slots=True)
class TxnProducerEpochRecord(Record):
    """The latest epoch a marker of this producer carried: offsets of an older epoch are a
    fenced zombie's."""

    group_id: str
    producer_id: int
    producer_epoch: int


NO_PENDING: Mapping[int, PendingTxn] = MappingProxyType({})
NO_EPOCHS: Mapping[int, int] = MappingProxyType({})
# One empty set for every group without pending offsets: `frozenset()` is a new 216-byte object
# on each call (no singleton since Python 3.10), and every published snapshot kept one.
NOTHING_PENDING: frozenset[TopicPartition] = frozenset()


def pending_of(group: OffsetHolder | None) -> Mapping[int, PendingTxn]:
    """The group's pending transactional offsets, by producer id (read only)."""
    txn = group.txn if group is not None else None
    return NO_PENDING if txn is None else txn.pending


def epochs_of(group: OffsetHolder | None) -> Mapping[int, int]:
    """The latest epoch of each producer's markers the group got (read only)."""
    txn = group.txn if group is not None else None
    return NO_EPOCHS if txn is None else txn.epochs


def _txn_of(group: OffsetHolder) -> TxnOffsets:
    if group.txn is None:
        group.txn = TxnOffsets()
    return group.txn


def pending_partitions(group: OffsetHolder | None) -> frozenset[TopicPartition]:
    """Every partition with a pending transactional offset (OffsetFetch's unstable ones)."""
    pending = pending_of(group)
    if not pending:
        return NOTHING_PENDING
    return frozenset(tp for txn in pending.values() for tp in txn.offsets)


def fenced_epoch(group: OffsetHolder, producer_id: int, epoch: int) -> bool:
    """An epoch older than the producer's latest the group has seen is a fenced zombie's."""
    txn = pending_of(group).get(producer_id)
    if txn is not None and epoch < txn.producer_epoch:
        return True
    return epoch < epochs_of(group).get(producer_id, epoch)


def store_pending(group: OffsetHolder, op: TxnOffsetCommitOp, waiter: int, fx: Effects) -> None:
    """Keep a validated TxnOffsetCommit's offsets pending, each within the metadata limit."""
    if fenced_epoch(group, op.producer_id, op.producer_epoch):
        fx.reply(waiter, op.error_reply(ErrorCode.invalid_producer_epoch))
        return
    group_id, results = group.group_id, []
    for topic, partition, offset, epoch, metadata in op.offsets:
        if metadata is not None and len(metadata.encode()) > fx.config.offset_metadata_max_bytes:
            results.append((topic, partition, int(ErrorCode.offset_metadata_too_large)))
            continue
        record = TxnOffsetCommitRecord(
            group_id,
            op.producer_id,
            op.producer_epoch,
            topic,
            partition,
            offset,
            epoch,
            metadata or "",
            fx.now,
        )
        fx.write(group, record)
        results.append((topic, partition, _OK))
    fx.reply(waiter, TxnOffsetCommitOpResp(tuple(results)))


def drop_pending(group: OffsetHolder, tp: TopicPartition, fx: Effects) -> bool:
    """Delete every producer's pending offset of `tp` (OffsetDelete); whether there was one."""
    holding = [pid for pid, txn in pending_of(group).items() if tp in txn.offsets]
    for producer_id in holding:
        fx.write(group, TxnOffsetTombstone(group.group_id, producer_id, *tp))
    return bool(holding)


GroupT = TypeVar("GroupT", bound="OffsetHolder | None")


def apply_marker(group: GroupT, op: TxnMarkerOp, waiter: int, fx: Effects) -> GroupT:
    """The end marker sent to a group of either type (or to none: nothing is pending)."""
    if group is None:
        fx.reply(waiter, TxnMarkerOpResp(ErrorCode.none))
    else:
        end_transaction(group, op, waiter, fx)
    return group


def end_transaction(group: OffsetHolder, op: TxnMarkerOp, waiter: int, fx: Effects) -> None:
    """Merge (commit) or discard (abort) the producer's pending offsets, and remember the
    marker's epoch (see "Zombies"). A marker for a producer with nothing pending is answered
    OK: the coordinator may send a marker again after a crash. A marker older than the pending
    offsets' epoch is refused (INVALID_PRODUCER_EPOCH) and changes nothing."""
    group_id = group.group_id
    txn = pending_of(group).get(op.producer_id)
    if txn is not None and op.producer_epoch < txn.producer_epoch:
        fx.reply(waiter, TxnMarkerOpResp(ErrorCode.invalid_producer_epoch))
        return
    if op.producer_epoch > epochs_of(group).get(op.producer_id, -1):  # (before the marker,
        # which stays the last record of the step)
        fx.write(group, TxnProducerEpochRecord(group_id, op.producer_id, op.producer_epoch))
    if txn is None:
        fx.reply(waiter, TxnMarkerOpResp(ErrorCode.none))
        return
    merged = [
        (tp, committed)
        for tp, committed in sorted(txn.offsets.items())
        if op.committed and tp not in txn.superseded
    ]
    for (topic, partition), committed in merged:
        fx.write(
            group,
            OffsetCommitRecord(
                group_id,
                topic,
                partition,
                committed.offset,
                committed.leader_epoch,
                committed.metadata,
                committed.commit_timestamp_ms,
            ),
        )
    fx.write(group, TxnMarkerRecord(group_id, op.producer_id, op.producer_epoch, op.committed))
    fx.reply(waiter, TxnMarkerOpResp(ErrorCode.none))


# -- what each record changes: live (Effects.write) and at start-up ---------------------------
def apply_txn_offset(group: OffsetHolder, record: TxnOffsetCommitRecord) -> None:
    """A producer's pending offset; superseded at once by a later offset in place (a
    compacted log applies the offsets first: see "Order")."""
    pending = _txn_of(group).pending
    txn = pending.get(record.producer_id)
    if txn is None:
        txn = pending[record.producer_id] = PendingTxn(record.producer_epoch)
    txn.producer_epoch = max(txn.producer_epoch, record.producer_epoch)
    tp, at = (record.topic, record.partition), record.commit_timestamp_ms
    txn.offsets[tp] = CommittedOffset(record.offset, record.leader_epoch, record.metadata, at)
    in_place = group.offsets.get(tp)
    if in_place is not None and in_place.commit_timestamp_ms > at:
        txn.superseded.add(tp)
    else:
        txn.superseded.discard(tp)


def apply_txn_offset_tombstone(group: OffsetHolder, record: TxnOffsetTombstone) -> None:
    pending = pending_of(group)
    txn = pending.get(record.producer_id)
    tp = (record.topic, record.partition)
    if txn is None or txn.offsets.pop(tp, None) is None:
        return
    txn.superseded.discard(tp)
    if not txn.offsets:
        del _txn_of(group).pending[record.producer_id]


def apply_txn_marker(group: OffsetHolder, record: TxnMarkerRecord) -> None:
    """The producer's transaction ended: its pending offsets go (a commit's merged ones
    were applied from the OffsetCommit records before the marker)."""
    if group.txn is not None:
        group.txn.pending.pop(record.producer_id, None)


def apply_producer_epoch(group: OffsetHolder, record: TxnProducerEpochRecord) -> None:
    _txn_of(group).epochs[record.producer_id] = record.producer_epoch

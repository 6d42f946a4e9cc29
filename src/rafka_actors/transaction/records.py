"""The transaction log's one record: a transactional id's whole state after a change.

As Kafka's `__transaction_state` (TransactionLogValue), every change writes the complete state,
so the latest record is the state; compaction keeps only the latest per transactional id (its
compaction key is the id's ``(org, id)``, as a group record's). `apply` is the one way a
record becomes the state: the machine's step returns the state its record applies to (as
Kafka's coordinator completes a transition from the metadata it wrote), and `replay` folds the
stored records through it.
Stored by storage/coordinator_records.py as record type 25, in the transaction log
(``<data dir>/transactions``): a log of its own, as Kafka keeps transactions apart from
``__consumer_offsets``, so a transactional id and a group of the same name never share a key.
Version 1 of the record added what transactions v2 need (KIP-890), as Kafka's
TransactionLogValue v1 did: the client's transaction version and the previous and next
producer ids; a version-0 record reads as a v1 client's, with neither id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..group_common.records import GroupTombstone, Record
from .state import NO_PRODUCER_ID, TV_LEGACY, Transaction, TxnState


@dataclass(frozen=True, slots=True)
class TransactionRecord(Record):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: str
    partitions: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions), sorted
    groups: tuple[str, ...]  # sorted
    start_ms: int
    update_ms: int
    client_version: int = TV_LEGACY  # (version 1 on)
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID


# An expired transactional id is deleted with the coordinator log's tombstone of a key
# (type 4: every record stored under the key goes); in the transaction log the key is the id.
TransactionTombstone = GroupTombstone


def record_of(txn: Transaction) -> TransactionRecord:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return TransactionRecord(
        txn.transactional_id,
        txn.producer_id,
        txn.producer_epoch,
        txn.last_producer_epoch,
        txn.timeout_ms,
        txn.state.value,
        tuple((topic, tuple(parts)) for topic, parts in by_topic.items()),
        tuple(sorted(txn.groups)),
        txn.start_ms,
        txn.update_ms,
        txn.client_version,
        txn.prev_producer_id,
        txn.next_producer_id,
    )


def transaction_of(record: TransactionRecord) -> Transaction:
    return Transaction(
        record.transactional_id,
        record.producer_id,
        record.producer_epoch,
        record.last_producer_epoch,
        record.timeout_ms,
        TxnState(record.state),
        frozenset([(topic, p) for topic, parts in record.partitions for p in parts]),
        frozenset(record.groups),
        record.start_ms,
        record.update_ms,
        record.client_version,
        record.prev_producer_id,
        record.next_producer_id,
    )


def apply(txn: Transaction | None, record: Record) -> Transaction | None:
    """The transaction `record` leaves: the state it holds, or none after a tombstone."""
    if type(record) is TransactionRecord:
        return transaction_of(record)
    if type(record) is TransactionTombstone:
        return None
    raise TypeError(f"not a transaction record: {type(record).__name__}")


def replay(records: Iterable[Record]) -> Transaction | None:
    """The transaction its stored records say, folded through `apply`."""
    txn = None
    for record in records:
        txn = apply(txn, record)
    return txn

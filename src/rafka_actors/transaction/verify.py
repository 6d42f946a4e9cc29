"""Is this partition, or this group, in the producer's open transaction? (KIP-890 part 1)

Before a v1 client's first transactional batch is appended to a partition, or its
TxnOffsetCommit reaches a group, the broker asks the transaction coordinator whether the
transaction holds that partition or group (Kafka's AddPartitionsToTxn v4 with VerifyOnly,
answered by TransactionCoordinator.handleVerifyPartitionsInTransaction). A batch the
coordinator does not know of would otherwise open a transaction no marker ever ends: a
hanging transaction, which holds the partition's read_committed readers back for good.

A pure read of the state the transactional id's actor last published (after its records
were stored): what a producer was told it added is in that state, so nothing needs the
actor's mailbox. Kafka's answers: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
CONCURRENT_TRANSACTIONS while the markers are written, and per partition NONE or
TRANSACTION_ABORTABLE (not in the transaction).
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from .state import PREPARED, TopicPartition, Transaction


def _producer_error(txn: Transaction | None, producer_id: int, producer_epoch: int) -> int:
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if txn.producer_epoch != producer_epoch:
        return ErrorCode.producer_fenced
    if txn.state in PREPARED:
        return ErrorCode.concurrent_transactions
    return ErrorCode.none


def verify_partitions(
    txn: Transaction | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, int]:
    """Each partition's answer: NONE if the transaction holds it."""
    code = _producer_error(txn, producer_id, producer_epoch)
    if code != ErrorCode.none or txn is None:
        return dict.fromkeys(partitions, code)
    return {
        tp: ErrorCode.none if tp in txn.partitions else ErrorCode.transaction_abortable
        for tp in partitions
    }


def verify_group(
    txn: Transaction | None, producer_id: int, producer_epoch: int, group_id: str
) -> int:
    """NONE if the transaction holds the group's offsets (AddOffsetsToTxn added it)."""
    code = _producer_error(txn, producer_id, producer_epoch)
    if code != ErrorCode.none or txn is None:
        return code
    return ErrorCode.none if group_id in txn.groups else ErrorCode.transaction_abortable

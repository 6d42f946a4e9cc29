"""One transactional id's state, as Kafka's TransactionMetadata keeps it (transactions v1).

A `Transaction` is immutable: the machine returns a new one for every change, so the actor can
publish it for readers (DescribeTransactions, ListTransactions) as it is.

States, as Kafka names them (DescribeTransactions and ListTransactions report these names):
Empty (a producer is initialised, no transaction open), Ongoing (partitions or groups were
added), PrepareCommit / PrepareAbort (the decision is durable; markers are being written),
CompleteCommit / CompleteAbort (every marker is written).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
# Kafka's TransactionMetadata.isEpochExhausted: the last epochs are kept for fencing.
MAX_EPOCH: Final = 32767
DEFAULT_MAX_TIMEOUT_MS: Final = 900_000  # transaction.max.timeout.ms


class TxnState(StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


PREPARED: Final = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETED: Final = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS  # transaction.max.timeout.ms


@dataclass(frozen=True, slots=True)
class Transaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    # the epoch before the last bump by this producer (-1 after a fence): a retried
    # InitProducerId that lost its answer gets the current epoch back (KIP-360)
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    groups: frozenset[str] = frozenset()  # groups whose offsets are in the transaction
    start_ms: int = -1  # when the open transaction began (its timeout runs from here)
    update_ms: int = -1

    @property
    def open(self) -> bool:
        """Has a transaction that is not yet complete (Ongoing or Prepare*)."""
        return self.state is TxnState.ONGOING or self.state in PREPARED


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class Markers:
    """The end markers a prepared transaction still has to write."""

    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]
    groups: frozenset[str]


def markers_of(txn: Transaction | None) -> Markers | None:
    """The markers to write for a transaction in PrepareCommit or PrepareAbort, else None."""
    if txn is None or txn.state not in PREPARED:
        return None
    return Markers(
        txn.producer_id,
        txn.producer_epoch,
        txn.state is TxnState.PREPARE_COMMIT,
        txn.partitions,
        txn.groups,
    )

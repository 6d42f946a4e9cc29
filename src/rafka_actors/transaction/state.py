"""One transactional id's state, as Kafka's TransactionMetadata keeps it (transactions v1 and v2).

A `Transaction` is immutable: the machine returns a new one for every change, so the actor can
publish it for readers (DescribeTransactions, ListTransactions) as it is.

States, as Kafka names them (DescribeTransactions and ListTransactions report these names):
Empty (a producer is initialised, no transaction open), Ongoing (partitions or groups were
added), PrepareCommit / PrepareAbort (the decision is durable; markers are being written),
CompleteCommit / CompleteAbort (every marker is written).

Transaction versions (KIP-890, Kafka's `transaction.version` feature): a client that speaks v2
(EndTxn v5, Produce v12, TxnOffsetCommit v5) gets its producer epoch bumped at every EndTxn
and its partitions and groups added by its Produce and TxnOffsetCommit; an older client keeps
its epoch across transactions and adds them itself. `client_version` records which one ended
or extended the transaction, as Kafka's `clientTransactionVersion` does.
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
# Kafka's TransactionVersion levels: 0 and 1 keep the epoch across transactions (1 only
# changes Kafka's log format), 2 bumps it at every EndTxn (KIP-890 part 2).
TV_LEGACY: Final = 0
TV_2: Final = 2


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
    # the finalized transaction.version: the version of the coordinator's own aborts
    # (timeouts, and fences by a new producer), as Kafka uses its finalized level for them
    transaction_version: int = TV_2


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
    client_version: int = TV_LEGACY  # the transaction version of its last change (KIP-890)
    # the producer id before the last change (a producer that missed the answer of a change
    # to a new id names it), and the id a prepared v2 transaction moves to once complete
    # (its epoch was exhausted: the EndTxn answer already named it)
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID

    @property
    def open(self) -> bool:
        """Has a transaction that is not yet complete (Ongoing or Prepare*)."""
        return self.state is TxnState.ONGOING or self.state in PREPARED


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


def supports_epoch_bump(version: int) -> bool:
    """Transactions v2: the epoch is bumped at every EndTxn."""
    return version >= TV_2


@dataclass(frozen=True, slots=True)
class Markers:
    """The end markers a prepared transaction still has to write."""

    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]
    groups: frozenset[str]
    # v2 markers carry an epoch above the transaction's (KIP-1228: partitions check it)
    transaction_version: int = TV_LEGACY


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
        txn.client_version,
    )

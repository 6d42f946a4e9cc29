"""The transaction coordinator's state machine for one transactional id (Kafka's
TransactionCoordinator and TransactionMetadata, transactions v1 and v2; how a transaction
ends, and the epoch bump of v2, are in ending.py).

`handle(txn, op, now)` returns the new state, the record to store (None: nothing changed) and
the answer, which goes out only once the record is stored. The answers and their error codes
follow Kafka's coordinator:

- InitProducerId bumps the epoch (a new id when it is exhausted), which fences every older
  producer of the transactional id. An open transaction is first aborted with its epoch
  fenced, and the caller told CONCURRENT_TRANSACTIONS: it retries and gets the next epoch.
- AddPartitions/AddOffsets open or extend a transaction (a v2 client's Produce and
  TxnOffsetCommit ask them on its behalf); EndTxn prepares its end. A wrong producer id is
  INVALID_PRODUCER_ID_MAPPING, a wrong epoch PRODUCER_FENCED, anything while markers are
  written CONCURRENT_TRANSACTIONS, an EndTxn that does not fit INVALID_TXN_STATE.
- An Ongoing transaction past `start + timeout` is aborted and its producer fenced (the epoch
  is bumped), as Kafka's abortTimedOutTransactions does, in the coordinator's transaction
  version (`TxnConfig.transaction_version`).
- Prepare* is the decision: once its record is stored the actor writes the markers
  (`state.markers_of`) and steps `MarkersWritten`, which completes it.
- A transactional id with no open transaction that has not changed for
  transactional.id.expiration.ms is forgotten (`ExpireTxnOp`, Kafka's expiry): a tombstone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.errors import ErrorCode

from ..group_common.records import Record
from .ending import complete, end_txn, fence_and_abort
from .ops import (
    AddOffsetsOp,
    AddPartitionsOp,
    EndTxnOp,
    ExpireTxnOp,
    ExpireTxnResp,
    InitProducerIdOp,
    InitProducerIdResp,
    MarkersWritten,
    TxnResp,
    TxnTimerFired,
)
from .records import TransactionTombstone, apply, record_of
from .state import (
    COMPLETED,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    Transaction,
    TxnConfig,
    TxnState,
    epoch_exhausted,
)


@dataclass(frozen=True, slots=True)
class Result:
    txn: Transaction | None
    record: Record | None  # stored before the answer goes out
    reply: Any  # None for the actor's own ops


def handle(
    txn: Transaction | None,
    op: Any,
    now: int,
    *,
    transactional_id: str,
    config: TxnConfig,
    new_producer_id: Callable[[], int],
) -> Result:
    """`new_producer_id()` hands out a fresh producer id; called only when one is needed."""
    match op:
        case InitProducerIdOp():
            return _init_producer_id(txn, op, now, transactional_id, config, new_producer_id)
        case AddPartitionsOp():
            return _add(txn, op, op.partitions, frozenset(), now)
        case AddOffsetsOp():
            return _add(txn, op, frozenset(), frozenset({op.group_id}), now)
        case EndTxnOp():
            ended, reply = end_txn(txn, op, now, new_producer_id)
            if ended is None or txn is None:
                return Result(txn, None, reply)
            return _changed(txn, ended, reply)
        case ExpireTxnOp():
            if txn is None or txn.open or now - txn.update_ms < op.expiration_ms:
                return Result(txn, None, ExpireTxnResp(False))
            return _written(txn, TransactionTombstone(txn.transactional_id), ExpireTxnResp(True))
        case TxnTimerFired():
            if txn is None or not _expired(txn, now):
                return Result(txn, None, None)
            aborting = fence_and_abort(txn, config.transaction_version, now, new_producer_id)
            return _changed(txn, aborting, None)
        case MarkersWritten():
            if (
                txn is None
                or txn.state not in PREPARED
                or (txn.producer_id, txn.producer_epoch) != (op.producer_id, op.producer_epoch)
            ):
                return Result(txn, None, None)  # stale: the transaction moved on
            return _changed(txn, complete(txn, now), None)
    raise TypeError(f"not a transaction op: {type(op).__name__}")


def next_deadline(txn: Transaction | None) -> int | None:
    """When an Ongoing transaction times out; None otherwise."""
    if txn is None or txn.state is not TxnState.ONGOING:
        return None
    return txn.start_ms + txn.timeout_ms


def _expired(txn: Transaction, now: int) -> bool:
    deadline = next_deadline(txn)
    return deadline is not None and now >= deadline


def _changed(before: Transaction, after: Transaction, reply: Any) -> Result:
    """A stored change, the state its record applies to; as Kafka's, it remembers the
    producer id it changed from."""
    after = replace(after, prev_producer_id=before.producer_id)
    return _written(after, record_of(after), reply)


def _written(txn: Transaction, record: Record, reply: Any) -> Result:
    return Result(apply(txn, record), record, reply)


def _init_producer_id(
    txn: Transaction | None,
    op: InitProducerIdOp,
    now: int,
    transactional_id: str,
    config: TxnConfig,
    new_producer_id: Callable[[], int],
) -> Result:
    if not 0 < op.timeout_ms <= config.max_timeout_ms:
        return Result(txn, None, InitProducerIdResp(ErrorCode.invalid_transaction_timeout))
    if txn is None:  # stored only with its first epoch, below
        txn = Transaction(
            transactional_id,
            new_producer_id(),
            NO_PRODUCER_EPOCH,
            NO_PRODUCER_EPOCH,
            op.timeout_ms,
            TxnState.EMPTY,
            update_ms=now,
        )
    expected = op.producer_id != NO_PRODUCER_ID
    if expected and not (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or op.producer_id == txn.producer_id
        # a retry across a move to a new id (an exhausted epoch) whose answer was lost
        or (op.producer_id == txn.prev_producer_id and epoch_exhausted(op.producer_epoch))
    ):
        return _init_failed(txn, ErrorCode.producer_fenced)
    if txn.state in PREPARED:
        return _init_failed(txn, ErrorCode.concurrent_transactions)
    if txn.state is TxnState.ONGOING:
        # Abort the open transaction under a fenced epoch, never returned: the caller retries
        # once the abort is complete and gets the epoch after it.
        aborting = fence_and_abort(txn, config.transaction_version, now, new_producer_id)
        return _changed(txn, aborting, _init_error(ErrorCode.concurrent_transactions))
    if epoch_exhausted(txn.producer_epoch) and (
        not expected or op.producer_epoch == txn.producer_epoch
    ):
        last = txn.producer_epoch if expected else NO_PRODUCER_EPOCH
        producer_id, epoch = new_producer_id(), 0
    elif not expected or txn.producer_epoch in (NO_PRODUCER_EPOCH, op.producer_epoch):
        producer_id, epoch = txn.producer_id, txn.producer_epoch + 1
        last = txn.producer_epoch if expected else NO_PRODUCER_EPOCH
    elif op.producer_epoch == txn.last_producer_epoch:  # a retry that lost its answer
        producer_id, epoch, last = txn.producer_id, txn.producer_epoch, txn.last_producer_epoch
    else:
        return _init_failed(txn, ErrorCode.producer_fenced)
    ready = replace(
        txn,
        producer_id=producer_id,
        producer_epoch=epoch,
        last_producer_epoch=last,
        timeout_ms=op.timeout_ms,
        state=TxnState.EMPTY,
        partitions=frozenset(),
        groups=frozenset(),
        start_ms=-1,
        update_ms=now,
    )
    return _changed(txn, ready, InitProducerIdResp(ErrorCode.none, producer_id, epoch))


def _init_error(code: int) -> InitProducerIdResp:
    return InitProducerIdResp(code)


def _init_failed(txn: Transaction, code: int) -> Result:
    # A transactional id first seen here is not kept: nothing was stored for it.
    kept = None if txn.producer_epoch == NO_PRODUCER_EPOCH else txn
    return Result(kept, None, _init_error(code))


def _checked(txn: Transaction | None, producer_id: int, epoch: int) -> int:
    """The error of a client op naming this producer id and epoch, or NONE."""
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if txn.producer_epoch != epoch:
        return ErrorCode.producer_fenced
    return ErrorCode.none


def _add(
    txn: Transaction | None,
    op: AddPartitionsOp | AddOffsetsOp,
    partitions: frozenset[tuple[str, int]],
    groups: frozenset[str],
    now: int,
) -> Result:
    code = _checked(txn, op.producer_id, op.producer_epoch)
    if code != ErrorCode.none or txn is None:
        return Result(txn, None, TxnResp(code))
    if txn.state in PREPARED:
        return Result(txn, None, TxnResp(ErrorCode.concurrent_transactions))
    if txn.state is TxnState.ONGOING and partitions <= txn.partitions and groups <= txn.groups:
        return Result(txn, None, TxnResp(ErrorCode.none))  # nothing new: nothing to store
    opening = txn.state is TxnState.EMPTY or txn.state in COMPLETED
    ongoing = replace(
        txn,
        state=TxnState.ONGOING,
        partitions=txn.partitions | partitions,
        groups=txn.groups | groups,
        start_ms=now if opening else txn.start_ms,
        update_ms=now,
        client_version=op.version,
    )
    return _changed(txn, ongoing, TxnResp(ErrorCode.none))

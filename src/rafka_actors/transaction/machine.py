"""The transaction coordinator's state machine for one transactional id (Kafka's
TransactionCoordinator and TransactionMetadata, transactions v1: no epoch bump per commit).

`handle(txn, op, now)` returns the new state, the record to store (None: nothing changed) and
the answer, which goes out only once the record is stored. The answers and their error codes
follow Kafka's coordinator:

- InitProducerId bumps the epoch (a new id when it is exhausted), which fences every older
  producer of the transactional id. An open transaction is first aborted with its epoch
  fenced, and the caller told CONCURRENT_TRANSACTIONS: it retries and gets the next epoch.
- AddPartitions/AddOffsets open or extend a transaction; EndTxn prepares its end. A wrong
  producer id is INVALID_PRODUCER_ID_MAPPING, a wrong epoch PRODUCER_FENCED, anything while
  markers are written CONCURRENT_TRANSACTIONS, an EndTxn that does not fit INVALID_TXN_STATE.
- An Ongoing transaction past `start + timeout` is aborted and its producer fenced (the epoch
  is bumped), as Kafka's abortTimedOutTransactions does.
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
            return _add(txn, op.producer_id, op.producer_epoch, op.partitions, frozenset(), now)
        case AddOffsetsOp():
            groups = frozenset({op.group_id})
            return _add(txn, op.producer_id, op.producer_epoch, frozenset(), groups, now)
        case EndTxnOp():
            return _end_txn(txn, op, now)
        case ExpireTxnOp():
            if txn is None or txn.open or now - txn.update_ms < op.expiration_ms:
                return Result(txn, None, ExpireTxnResp(False))
            return _written(txn, TransactionTombstone(txn.transactional_id), ExpireTxnResp(True))
        case TxnTimerFired():
            if txn is None or not _expired(txn, now):
                return Result(txn, None, None)
            return _changed(_fence_and_abort(txn, now), None)
        case MarkersWritten():
            if (
                txn is None
                or txn.state not in PREPARED
                or (txn.producer_id, txn.producer_epoch) != (op.producer_id, op.producer_epoch)
            ):
                return Result(txn, None, None)  # stale: the transaction moved on
            done = (
                TxnState.COMPLETE_COMMIT
                if txn.state is TxnState.PREPARE_COMMIT
                else TxnState.COMPLETE_ABORT
            )
            completed = replace(
                txn, state=done, partitions=frozenset(), groups=frozenset(), update_ms=now
            )
            return _changed(completed, None)
    raise TypeError(f"not a transaction op: {type(op).__name__}")


def next_deadline(txn: Transaction | None) -> int | None:
    """When an Ongoing transaction times out; None otherwise."""
    if txn is None or txn.state is not TxnState.ONGOING:
        return None
    return txn.start_ms + txn.timeout_ms


def _expired(txn: Transaction, now: int) -> bool:
    deadline = next_deadline(txn)
    return deadline is not None and now >= deadline


def _changed(txn: Transaction, reply: Any) -> Result:
    """The step's new state, stored: the record of `txn` and the state it applies to."""
    return _written(txn, record_of(txn), reply)


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
        txn.producer_epoch == NO_PRODUCER_EPOCH or op.producer_id == txn.producer_id
    ):
        return _init_failed(txn, ErrorCode.producer_fenced)
    if txn.state in PREPARED:
        return _init_failed(txn, ErrorCode.concurrent_transactions)
    if txn.state is TxnState.ONGOING:
        # Abort the open transaction under a fenced epoch, never returned: the caller retries
        # once the abort is complete and gets the epoch after it.
        aborting = _fence_and_abort(txn, now)
        return _changed(aborting, _init_error(ErrorCode.concurrent_transactions))
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
    return _changed(ready, InitProducerIdResp(ErrorCode.none, producer_id, epoch))


def _init_error(code: int) -> InitProducerIdResp:
    return InitProducerIdResp(code)


def _init_failed(txn: Transaction, code: int) -> Result:
    # A transactional id first seen here is not kept: nothing was stored for it.
    kept = None if txn.producer_epoch == NO_PRODUCER_EPOCH else txn
    return Result(kept, None, _init_error(code))


def _fence_and_abort(txn: Transaction, now: int) -> Transaction:
    """Bump the epoch (so the open transaction's producer is fenced) and prepare the abort."""
    return replace(
        txn,
        producer_epoch=txn.producer_epoch + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        state=TxnState.PREPARE_ABORT,
        update_ms=now,
    )


def _checked(txn: Transaction | None, producer_id: int, epoch: int) -> int:
    """The error of a client op naming this producer id and epoch, or NONE."""
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if txn.producer_epoch != epoch:
        return ErrorCode.producer_fenced
    return ErrorCode.none


def _add(
    txn: Transaction | None,
    producer_id: int,
    epoch: int,
    partitions: frozenset[tuple[str, int]],
    groups: frozenset[str],
    now: int,
) -> Result:
    code = _checked(txn, producer_id, epoch)
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
    )
    return _changed(ongoing, TxnResp(ErrorCode.none))


def _end_txn(txn: Transaction | None, op: EndTxnOp, now: int) -> Result:
    code = _checked(txn, op.producer_id, op.producer_epoch)
    if code != ErrorCode.none or txn is None:
        return Result(txn, None, TxnResp(code))
    wanted = TxnState.PREPARE_COMMIT if op.committed else TxnState.PREPARE_ABORT
    done = TxnState.COMPLETE_COMMIT if op.committed else TxnState.COMPLETE_ABORT
    if txn.state is TxnState.ONGOING:
        return _changed(replace(txn, state=wanted, update_ms=now), TxnResp(ErrorCode.none))
    if txn.state is done:
        return Result(txn, None, TxnResp(ErrorCode.none))  # a retry of an EndTxn that ended it
    if txn.state is wanted:
        return Result(txn, None, TxnResp(ErrorCode.concurrent_transactions))
    return Result(txn, None, TxnResp(ErrorCode.invalid_txn_state))

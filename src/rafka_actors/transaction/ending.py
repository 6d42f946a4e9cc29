"""How a transaction ends: EndTxn in either transaction version, the coordinator's own aborts,
and the completion once the markers are written (Kafka's TransactionCoordinator.endTransaction
and TransactionMetadata.prepareAbortOrCommit / prepareComplete).

Transactions v1 keep the producer epoch: the markers carry the transaction's epoch, and an
EndTxn must name exactly the current epoch. Transactions v2 (KIP-890) bump it at every end:
Prepare* holds epoch + 1 (the markers carry it, so a partition can tell this transaction's
markers from any later one's), and the EndTxn answer names it, so the client starts its next
transaction at the new epoch without an InitProducerId. An exhausted epoch moves the producer
to a new id instead (chosen at Prepare*, taken at Complete*). A v2 EndTxn that lost its answer
is retried with the old epoch, which the bumped state recognises (`retry`); a v2 client may
also abort when nothing is open (its abort then fences whatever it might have sent).

Pure, like machine.py: the functions return the new state (None: unchanged) and the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kio.schema.errors import ErrorCode

from .ops import EndTxnOp, TxnResp
from .state import (
    COMPLETED,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TV_LEGACY,
    Transaction,
    TxnState,
    epoch_exhausted,
    supports_epoch_bump,
)

Ending = tuple[Transaction | None, TxnResp]  # (the new state, None if unchanged; the answer)


def end_txn(
    txn: Transaction | None, op: EndTxnOp, now: int, new_producer_id: Callable[[], int]
) -> Ending:
    if txn is None:
        return None, TxnResp(ErrorCode.invalid_producer_id_mapping)
    if supports_epoch_bump(op.version):
        return _end_txn_v2(txn, op, now, new_producer_id)
    return _end_txn_v1(txn, op, now)


def _end_txn_v1(txn: Transaction, op: EndTxnOp, now: int) -> Ending:
    if txn.producer_id != op.producer_id:
        return None, TxnResp(ErrorCode.invalid_producer_id_mapping)
    if txn.producer_epoch != op.producer_epoch:
        return None, TxnResp(ErrorCode.producer_fenced)
    wanted, done = _states(op.committed)
    if txn.state is TxnState.ONGOING:
        prepared = replace(txn, state=wanted, update_ms=now, client_version=TV_LEGACY)
        return prepared, TxnResp(ErrorCode.none)
    if txn.state is done:
        return None, TxnResp(ErrorCode.none)  # a retry of an EndTxn that ended it
    if txn.state is wanted:
        return None, TxnResp(ErrorCode.concurrent_transactions)
    return None, TxnResp(ErrorCode.invalid_txn_state)


def _end_txn_v2(
    txn: Transaction, op: EndTxnOp, now: int, new_producer_id: Callable[[], int]
) -> Ending:
    # A retry whose answer was lost names the epoch before the bump (or, past an exhausted
    # epoch, the previous producer id at its last epoch).
    retry_on_bump = txn.producer_epoch == op.producer_epoch + 1
    retry_on_overflow = (
        txn.prev_producer_id == op.producer_id
        and op.producer_epoch == MAX_EPOCH - 1
        and txn.producer_epoch == 0
    )
    retry = retry_on_bump or retry_on_overflow
    if txn.state in PREPARED:
        valid_epoch = retry_on_bump
    elif txn.state in COMPLETED:
        valid_epoch = retry or op.producer_epoch == txn.producer_epoch
    else:
        valid_epoch = op.producer_epoch == txn.producer_epoch
    if txn.producer_id != op.producer_id and not retry_on_overflow:
        return None, TxnResp(ErrorCode.invalid_producer_id_mapping)
    if not valid_epoch:
        return None, TxnResp(ErrorCode.producer_fenced)
    wanted, done = _states(op.committed)
    if txn.state is TxnState.ONGOING:
        return _prepared_reply(prepare_end(txn, wanted, op.version, now, new_producer_id))
    if txn.state is wanted:
        return None, TxnResp(ErrorCode.concurrent_transactions)
    if txn.state is done and retry:
        return None, TxnResp(ErrorCode.none, txn.producer_id, txn.producer_epoch)
    aborting = not op.committed and not retry
    if aborting and (txn.state is TxnState.EMPTY or txn.state in COMPLETED):
        # nothing open: the abort still bumps the epoch (fencing anything the client sent)
        prepared = prepare_end(txn, wanted, op.version, now, new_producer_id, nothing_added=True)
        return _prepared_reply(prepared)
    return None, TxnResp(ErrorCode.invalid_txn_state)


def _states(committed: bool) -> tuple[TxnState, TxnState]:
    if committed:
        return TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT
    return TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT


def _prepared_reply(prepared: Transaction) -> Ending:
    producer_id, epoch = next_identity(prepared)
    return prepared, TxnResp(ErrorCode.none, producer_id, epoch)


def prepare_end(
    txn: Transaction,
    state: TxnState,
    version: int,
    now: int,
    new_producer_id: Callable[[], int],
    *,
    nothing_added: bool = False,
) -> Transaction:
    """The transaction in Prepare* (`state`): the decision the markers will carry."""
    if not supports_epoch_bump(version):
        return replace(txn, state=state, update_ms=now, client_version=version)
    next_id = new_producer_id() if epoch_exhausted(txn.producer_epoch) else NO_PRODUCER_ID
    at_max = txn.producer_epoch == MAX_EPOCH and state is TxnState.PREPARE_ABORT
    return replace(
        txn,
        producer_epoch=txn.producer_epoch if at_max else txn.producer_epoch + 1,
        last_producer_epoch=txn.producer_epoch,
        state=state,
        start_ms=now if nothing_added else txn.start_ms,
        update_ms=now,
        client_version=version,
        next_producer_id=next_id,
    )


def fence_and_abort(
    txn: Transaction, version: int, now: int, new_producer_id: Callable[[], int]
) -> Transaction:
    """The coordinator's own abort of an open transaction (its timeout ran out, or a new
    producer of the id arrived), in the coordinator's transaction version: the epoch is
    bumped, so the producer of the open transaction is fenced."""
    if supports_epoch_bump(version):
        return prepare_end(txn, TxnState.PREPARE_ABORT, version, now, new_producer_id)
    return replace(
        txn,
        producer_epoch=txn.producer_epoch + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        state=TxnState.PREPARE_ABORT,
        update_ms=now,
        client_version=version,
    )


def next_identity(prepared: Transaction) -> tuple[int, int]:
    """The producer id and epoch a prepared transaction has once complete."""
    if supports_epoch_bump(prepared.client_version) and prepared.next_producer_id >= 0:
        return prepared.next_producer_id, 0
    return prepared.producer_id, prepared.producer_epoch


def complete(prepared: Transaction, now: int) -> Transaction:
    """Every marker of the prepared transaction is written: Complete*."""
    done = (
        TxnState.COMPLETE_COMMIT
        if prepared.state is TxnState.PREPARE_COMMIT
        else TxnState.COMPLETE_ABORT
    )
    producer_id, epoch = next_identity(prepared)
    return replace(
        prepared,
        producer_id=producer_id,
        producer_epoch=epoch,
        state=done,
        partitions=frozenset(),
        groups=frozenset(),
        update_ms=now,
        next_producer_id=NO_PRODUCER_ID,
    )

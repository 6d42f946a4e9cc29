"""Transactions v2 (KIP-890) in the pure machine, the cases the property test cannot reach in
its few steps: an exhausted epoch moves the producer to a new id at the end of a transaction
(named in the EndTxn answer, taken at Complete*), the retries across that move, and the
verification reads of partitions and groups."""

from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from rafka_actors.transaction import machine
from rafka_actors.transaction.ops import (
    AddPartitionsOp,
    EndTxnOp,
    InitProducerIdOp,
    MarkersWritten,
    TxnTimerFired,
)
from rafka_actors.transaction.records import replay
from rafka_actors.transaction.state import (
    MAX_EPOCH,
    TV_2,
    Transaction,
    TxnConfig,
    TxnState,
    markers_of,
)
from rafka_actors.transaction.verify import verify_group, verify_partitions

CONFIG = TxnConfig(max_timeout_ms=60_000)
NOW = 1_000_000
NEW_ID = 77


def step(txn: Transaction | None, op: object, now: int = NOW) -> machine.Result:
    return machine.handle(
        txn, op, now, transactional_id="t", config=CONFIG, new_producer_id=lambda: NEW_ID
    )


def ongoing(epoch: int, pid: int = 5) -> Transaction:
    return Transaction(
        "t", pid, epoch, epoch - 1, 30_000, TxnState.ONGOING, frozenset({("out", 0)}),
        frozenset({"g"}), start_ms=NOW - 10, update_ms=NOW - 10, client_version=TV_2,
    )  # fmt: skip


def test_each_v2_end_bumps_the_epoch_and_names_it() -> None:
    prepared = step(ongoing(3), EndTxnOp(5, 3, True, TV_2))
    assert prepared.txn is not None and prepared.txn.state is TxnState.PREPARE_COMMIT
    assert (prepared.reply.error_code, prepared.reply.producer_epoch) == (0, 4)
    markers = markers_of(prepared.txn)  # the markers carry the bumped epoch, marked v2
    assert markers is not None and (markers.producer_epoch, markers.transaction_version) == (4, 2)
    done = step(prepared.txn, MarkersWritten(5, 4))
    assert done.txn is not None
    assert (done.txn.state, done.txn.producer_epoch, done.txn.last_producer_epoch) == (
        TxnState.COMPLETE_COMMIT,
        4,
        3,
    )
    # the retry of an EndTxn whose answer was lost names the epoch before the bump
    again = step(done.txn, EndTxnOp(5, 3, True, TV_2))
    assert (again.record, again.reply.error_code, again.reply.producer_epoch) == (None, 0, 4)
    # the next transaction starts at the new epoch; the old one is fenced
    added = step(done.txn, AddPartitionsOp(5, 4, frozenset({("out", 1)}), TV_2))
    assert added.reply.error_code == 0
    fenced = step(done.txn, AddPartitionsOp(5, 3, frozenset({("out", 1)}), TV_2))
    assert fenced.reply.error_code == ErrorCode.producer_fenced


def test_an_exhausted_epoch_moves_the_producer_to_a_new_id_at_complete() -> None:
    last = MAX_EPOCH - 2  # 32765: its bump, 32766, is exhausted
    prepared = step(ongoing(last + 1), EndTxnOp(5, last + 1, False, TV_2))
    txn = prepared.txn
    assert txn is not None
    assert (txn.producer_id, txn.producer_epoch, txn.next_producer_id) == (5, MAX_EPOCH, NEW_ID)
    # the answer already names the new id: the producer's next transaction uses it
    assert (prepared.reply.producer_id, prepared.reply.producer_epoch) == (NEW_ID, 0)
    done = step(txn, MarkersWritten(5, MAX_EPOCH)).txn
    assert done is not None
    assert (done.producer_id, done.producer_epoch, done.prev_producer_id) == (NEW_ID, 0, 5)
    assert done.next_producer_id == -1 and done.last_producer_epoch == MAX_EPOCH - 1
    assert replay([step(txn, MarkersWritten(5, MAX_EPOCH)).record]) == done  # (stored so)
    # a retry from before the move (old id, its last epoch) gets the same answer
    retry = step(done, EndTxnOp(5, MAX_EPOCH - 1, False, TV_2))
    assert (retry.reply.error_code, retry.reply.producer_id, retry.reply.producer_epoch) == (
        0,
        NEW_ID,
        0,
    )
    # and so does a KIP-360 InitProducerId naming the old id at its exhausted epoch
    init = step(done, InitProducerIdOp(30_000, 5, MAX_EPOCH - 1))
    assert init.reply.error_code == ErrorCode.none and init.reply.producer_id == NEW_ID


def test_a_timeout_under_a_v2_coordinator_keeps_the_fenced_epoch_as_the_last() -> None:
    txn = replace(ongoing(2), start_ms=NOW - 40_000)
    aborted = step(txn, TxnTimerFired())
    assert aborted.txn is not None
    assert (aborted.txn.state, aborted.txn.producer_epoch, aborted.txn.last_producer_epoch) == (
        TxnState.PREPARE_ABORT,
        3,
        2,
    )
    done = step(aborted.txn, MarkersWritten(5, 3)).txn
    # the timed-out v2 producer aborts: its EndTxn (epoch 2) is the retry of the abort
    end = step(done, EndTxnOp(5, 2, False, TV_2))
    assert (end.reply.error_code, end.reply.producer_epoch) == (0, 3)
    # a v1 producer's EndTxn at the old epoch is fenced, as Kafka's v1 path answers
    assert step(done, EndTxnOp(5, 2, True)).reply.error_code == ErrorCode.producer_fenced
    v1 = TxnConfig(max_timeout_ms=60_000, transaction_version=1)
    old = machine.handle(
        txn, TxnTimerFired(), NOW, transactional_id="t", config=v1, new_producer_id=lambda: 0
    )
    assert old.txn is not None and old.txn.last_producer_epoch == -1


def test_verification_reads_the_published_state() -> None:
    txn = ongoing(3)
    assert verify_partitions(txn, 5, 3, [("out", 0), ("out", 1)]) == {
        ("out", 0): ErrorCode.none,
        ("out", 1): ErrorCode.transaction_abortable,
    }
    assert verify_partitions(txn, 6, 3, [("out", 0)]) == {
        ("out", 0): ErrorCode.invalid_producer_id_mapping
    }
    assert verify_partitions(None, 5, 3, [("out", 0)])[("out", 0)] == (
        ErrorCode.invalid_producer_id_mapping
    )
    assert verify_group(txn, 5, 2, "g") == ErrorCode.producer_fenced
    assert verify_group(txn, 5, 3, "g") == ErrorCode.none
    assert verify_group(txn, 5, 3, "other") == ErrorCode.transaction_abortable
    prepared = replace(txn, state=TxnState.PREPARE_COMMIT)
    assert verify_group(prepared, 5, 3, "g") == ErrorCode.concurrent_transactions

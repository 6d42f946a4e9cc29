"""The pure producer state of one partition: Kafka's checks of producer batches, markers,
the last stable offset and the aborted-transactions index."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from rafka_actors.storage.control_batches import ABORT, COMMIT
from rafka_actors.storage.producer_state import AbortedTxn, PartitionProducers
from rafka_actors.storage.record_batch import parse_header

from ..batch_builder import build_batch

TXN = 0x10


def header(pid: int, epoch: int, seq: int, count: int = 1, *, txn: bool = False):  # type: ignore[no-untyped-def]
    records = [(None, b"v")] * count
    attributes = TXN if txn else 0
    return parse_header(
        build_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            attributes=attributes,
        )
    )


def test_sequences_follow_on_and_a_retry_gets_its_original_offset() -> None:
    state = PartitionProducers()
    first = header(7, 0, 0, 3)
    assert state.check(first).error is ErrorCode.none
    state.appended(first, 100)
    second = header(7, 0, 3, 2)
    assert state.check(second).error is ErrorCode.none
    state.appended(second, 103)
    retry = state.check(header(7, 0, 0, 3))
    assert retry.error is ErrorCode.none and retry.duplicate_of == 100
    assert state.check(header(7, 0, 3, 2)).duplicate_of == 103
    gap = state.check(header(7, 0, 6))
    assert gap.error is ErrorCode.out_of_order_sequence_number and gap.duplicate_of is None
    assert state.check(header(7, 0, 5)).error is ErrorCode.none


def test_only_the_last_five_batches_are_remembered() -> None:
    state = PartitionProducers()
    for seq in range(7):
        state.appended(header(1, 0, seq), 10 + seq)
    assert state.check(header(1, 0, 2)).duplicate_of == 12
    assert state.check(header(1, 0, 1)).error is ErrorCode.out_of_order_sequence_number


def test_epochs_fence_older_producers_and_a_new_epoch_starts_at_zero() -> None:
    state = PartitionProducers()
    state.appended(header(1, 3, 0), 0)
    assert state.check(header(1, 2, 1)).error is ErrorCode.invalid_producer_epoch
    assert state.check(header(1, 4, 5)).error is ErrorCode.out_of_order_sequence_number
    assert state.check(header(1, 4, 0)).error is ErrorCode.none
    # An unknown producer may start anywhere (its state may have gone with the log's start).
    assert state.check(header(2, 0, 42)).error is ErrorCode.none


def test_sequence_wraps_after_int32_max() -> None:
    state = PartitionProducers()
    state.appended(header(1, 0, 2**31 - 2, 2), 0)  # sequences 2**31-2 and 2**31-1
    assert state.check(header(1, 0, 0)).error is ErrorCode.none


def test_a_batch_without_a_sequence_is_refused() -> None:
    assert PartitionProducers().check(header(1, 0, -1)).error is ErrorCode.invalid_record


def test_lso_is_the_first_offset_of_the_earliest_open_transaction() -> None:
    state = PartitionProducers()
    assert state.last_stable_offset(50) == 50
    state.appended(header(1, 0, 0, txn=True), 10)
    state.appended(header(2, 0, 0, txn=True), 11)
    state.appended(header(1, 0, 1, txn=True), 12)
    assert state.last_stable_offset(13) == 10
    assert state.open_transactions() == {1: 10, 2: 11}
    state.marker_written(1, 0, 0, COMMIT, 13)
    assert state.last_stable_offset(14) == 11
    state.marker_written(2, 0, 0, ABORT, 14)
    assert state.last_stable_offset(15) == 15
    assert state.aborted_between(0, 15) == [AbortedTxn(2, 11, 14, 15)]


def test_non_transactional_batch_inside_a_transaction_is_refused() -> None:
    state = PartitionProducers()
    state.appended(header(1, 0, 0, txn=True), 0)
    assert state.check(header(1, 0, 1)).error is ErrorCode.invalid_txn_state
    assert state.check(header(1, 0, 1, txn=True)).error is ErrorCode.none


def test_markers_check_epochs_and_repeats_change_nothing() -> None:
    state = PartitionProducers()
    state.appended(header(1, 2, 0, txn=True), 0)
    assert state.check_marker(1, 1, 0) is ErrorCode.invalid_producer_epoch
    assert state.check_marker(1, 2, 0) is ErrorCode.none
    assert not state.marker_changes_nothing(1, 2)
    state.marker_written(1, 2, 5, COMMIT, 1)
    assert state.marker_changes_nothing(1, 2)  # a repeat: nothing open, same epoch
    assert not state.marker_changes_nothing(1, 3)  # a bumped epoch fences the old producer
    assert state.check_marker(1, 2, 4) is ErrorCode.transaction_coordinator_fenced
    assert state.check_marker(99, 0, 0) is ErrorCode.none
    assert state.aborted_between(0, 10) == []


def test_an_abort_with_a_bumped_epoch_fences_the_old_epochs_batches() -> None:
    state = PartitionProducers()
    state.appended(header(1, 0, 0, txn=True), 0)
    state.marker_written(1, 1, 0, ABORT, 1)
    assert state.check(header(1, 0, 1, txn=True)).error is ErrorCode.invalid_producer_epoch
    assert state.check(header(1, 1, 0, txn=True)).error is ErrorCode.none


def test_aborted_between_returns_the_overlapping_transactions_only() -> None:
    state = PartitionProducers()
    # pid 1: [0, 2] aborted; pid 2: [3, 5] committed; pid 3: [6, 8] aborted
    for pid, first, end, kind in ((1, 0, 2, ABORT), (2, 3, 5, COMMIT), (3, 6, 8, ABORT)):
        state.appended(header(pid, 0, 0, txn=True), first)
        state.marker_written(pid, 0, 0, kind, end)
    one, three = AbortedTxn(1, 0, 2, 3), AbortedTxn(3, 6, 8, 9)
    assert state.aborted_between(0, 9) == [one, three]
    assert state.aborted_between(2, 4) == [one]
    assert state.aborted_between(3, 6) == []
    assert state.aborted_between(3, 7) == [three]
    assert state.aborted_between(9, 20) == []
    state.forget_below(3)
    assert state.aborted_between(0, 9) == [three]


def test_idle_producers_without_an_open_transaction_expire() -> None:
    state = PartitionProducers()
    state.replay_batch(1, 0, 0, 0, 0, False, 1_000)  # idle since 1 000
    state.replay_batch(2, 0, 0, 0, 1, True, 1_000)  # idle too, but its transaction is open
    state.replay_batch(3, 0, 0, 0, 2, False, 5_000)
    state.marker_written(4, 0, 0, COMMIT, 3, 5_000)  # known from a marker only
    assert state.expire(2_000) == 1
    assert sorted(state.entries) == [2, 3, 4]
    assert state.check(header(1, 0, 9)).error is ErrorCode.none  # unknown again: any sequence
    state.marker_written(2, 0, 0, ABORT, 4, 1_500)
    assert state.expire(2_000) == 1 and sorted(state.entries) == [3, 4]

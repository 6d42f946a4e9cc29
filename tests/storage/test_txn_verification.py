"""The partition side of KIP-890's verification (producer_state.py): a transactional batch
whose transaction is not open here must present the guard `start_verification` gave, and a
marker written while the coordinator was asked refuses it (Kafka's VerificationGuard: the
batch would otherwise open a transaction no marker ends); a v2 transaction's marker carries
an epoch above its records' (KIP-1228)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from rafka_actors.storage.control_batches import ABORT, COMMIT
from rafka_actors.storage.producer_state import PartitionProducers
from rafka_actors.storage.verification import NO_GUARD

from .test_producer_state import header

NOW = 1_000


def test_a_verified_batch_opens_its_transaction_and_later_ones_need_no_guard() -> None:
    state = PartitionProducers()
    first = header(7, 0, 0, txn=True)
    assert state.check(first, guard=NO_GUARD).error is ErrorCode.invalid_txn_state  # unverified
    code, guard = state.start_verification(first, epoch_bump=False, now_ms=NOW)
    assert code is ErrorCode.none and guard != NO_GUARD
    assert state.check(first, guard=guard + 1).error is ErrorCode.invalid_txn_state  # not its own
    assert state.check(first, guard=guard).error is ErrorCode.none
    state.appended(first, 0)
    second = header(7, 0, 1, txn=True)
    assert state.start_verification(second, False, NOW) == (ErrorCode.none, NO_GUARD)  # open
    assert state.check(second, guard=NO_GUARD).error is ErrorCode.none


def test_a_marker_written_while_the_coordinator_was_asked_refuses_the_batch() -> None:
    state = PartitionProducers()
    state.appended(header(7, 0, 0, txn=True), 0)
    state.marker_written(7, 0, 0, COMMIT, 1)
    late = header(7, 0, 1, txn=True)  # the next transaction's first batch (v1: same epoch)
    _, guard = state.start_verification(late, False, NOW)
    state.marker_written(7, 0, 0, ABORT, 2)  # (the coordinator ended it meanwhile)
    refused = state.check(late, guard=guard)
    assert refused.error is ErrorCode.invalid_txn_state
    assert refused.message == "Record was not part of an ongoing transaction"
    assert state.check(late, guard=None).error is ErrorCode.none  # (unverified: let through)


def test_verification_refuses_a_stale_epoch_at_once() -> None:
    state = PartitionProducers()
    state.appended(header(7, 3, 0, txn=True), 0)
    stale = header(7, 2, 0, txn=True)
    assert state.start_verification(stale, False, NOW) == (ErrorCode.invalid_producer_epoch, 0)


def test_a_v2_producer_new_here_starts_at_sequence_zero_and_waits_for_a_lower_one() -> None:
    state = PartitionProducers()
    late = header(9, 0, 4, txn=True)
    _, guard = state.start_verification(late, epoch_bump=True, now_ms=NOW)
    assert state.check(late, guard=guard).error is ErrorCode.out_of_order_sequence_number
    state = PartitionProducers()
    first, second = header(9, 0, 0, txn=True), header(9, 0, 1, txn=True)
    _, guard = state.start_verification(second, epoch_bump=False, now_ms=NOW)
    assert state.start_verification(first, False, NOW)[1] == guard  # one verification
    assert state.check(second, guard=guard).error is ErrorCode.out_of_order_sequence_number
    assert state.check(first, guard=guard).error is ErrorCode.none


def test_a_v2_marker_must_carry_a_bumped_epoch_unless_it_repeats_one() -> None:
    state = PartitionProducers()
    state.appended(header(5, 1, 0, txn=True), 0)
    assert state.check_marker(5, 1, 0, transaction_version=2) is ErrorCode.invalid_producer_epoch
    assert state.check_marker(5, 1, 0, transaction_version=0) is ErrorCode.none  # (v1's rule)
    assert state.check_marker(5, 2, 0, transaction_version=2) is ErrorCode.none
    state.marker_written(5, 2, 0, COMMIT, 1)
    assert state.check_marker(5, 2, 0, transaction_version=2) is ErrorCode.none  # a repeat
    # a v2 producer's next transaction may be verified at the new epoch before the marker
    # of the last lands: that marker (the same epoch) leaves its verification in place
    state.appended(header(6, 0, 0, txn=True), 2)
    nxt = header(6, 1, 0, txn=True)
    _, guard = state.start_verification(nxt, epoch_bump=True, now_ms=NOW)
    state.marker_written(6, 1, 0, COMMIT, 3)
    assert state.check(nxt, guard=guard).error is ErrorCode.none


def test_verifications_are_forgotten_with_idle_producers() -> None:
    state = PartitionProducers()
    _, guard = state.start_verification(header(4, 0, 0, txn=True), False, now_ms=NOW)
    state.expire(idle_before_ms=NOW + 1)
    assert state.check(header(4, 0, 0, txn=True), guard=guard).error is ErrorCode.invalid_txn_state

"""One partition's producer state: epochs, sequences, open transactions, aborted ones.

Per producer id that ever wrote to the partition (idempotent or transactional) we keep what
Kafka's ProducerStateManager keeps: its current epoch, the last five batches it appended
(sequence range and offsets, to answer a retried batch with its original offset), the
coordinator epoch of its last marker, and the first offset of its open transaction, if any.

While a transactional batch waits for the transaction coordinator to confirm (or, for a v2
client, to add) its partition (KIP-890), the producer has a `Verification` here: a guard the
append must present. A marker written meanwhile ends the verification, so a batch verified
for a transaction that ended before it could be appended is refused instead of opening a
transaction nobody will end (Kafka's VerificationGuard). Verifications live in memory only:
after a restart the retried batch is verified again.

From these follow:
- the *last stable offset*: the first offset of the earliest open transaction, or the high
  watermark when none is open (read_committed readers stop there);
- the *aborted transactions* (producer id, first offset, marker offset, and the LSO once the
  marker was written), in marker order: a read_committed fetch returns those overlapping the
  range it read, so the client can drop their records.

Durable form: the partition log itself. Every fact above is in the batch headers (producer id,
epoch, sequences, the transactional bit) and in the markers' control records, so the state is
rebuilt at start-up by replaying the log's producer batches in order (producer_recovery.py),
from a snapshot written at the last clean shutdown when there is a valid one. Markers are
appended like any batch, so a marker acknowledged to the transaction coordinator is in the
log (and so in the rebuilt state) exactly when the log keeps it.

Pure: no I/O, no trio. Error answers are Kafka's, decided as its ProducerAppendInfo does.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from .control_batches import ABORT, COMMIT
from .record_batch import BatchHeader
from .verification import NO_GUARD, Verification

DEDUP_DEPTH = 5  # Kafka remembers the last five batches per producer (max.in.flight <= 5)
_MAX_SEQUENCE = 2**31 - 1
_MAX_EPOCH = 2**15 - 1


# A remembered batch: (first sequence, last sequence, first offset). A plain tuple: the
# start-up replay makes one per producer batch of the log.
BatchMeta = tuple[int, int, int]


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO just after the marker (non-decreasing)


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=DEDUP_DEPTH))
    coordinator_epoch: int = -1
    txn_first_offset: int = -1  # -1: no open transaction
    last_timestamp: int = -1  # max timestamp of its last batch (DescribeProducers shows it)

    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()  # sequences restart at 0 with a new epoch


class AppendVerdict(NamedTuple):
    """`error` NONE and `duplicate_of` None: append it. `duplicate_of`: a retry of a batch
    already in the log at that offset (answer it, write nothing). Else refuse with `error`."""

    error: ErrorCode
    duplicate_of: int | None = None
    message: str = ""


ACCEPT = AppendVerdict(ErrorCode.none)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_SEQUENCE)


def _last_seq_of(header: BatchHeader) -> int:
    last = header.base_sequence + header.last_offset_delta
    return last - _MAX_SEQUENCE - 1 if last > _MAX_SEQUENCE else last  # sequences wrap


class PartitionProducers:
    """The producer state of one partition (see the module docstring)."""

    __slots__ = ("_aborted", "_aborted_ends", "_open", "_verifying", "entries")

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._aborted: list[AbortedTxn] = []
        self._aborted_ends: list[int] = []  # their last offsets, for bisect
        self._verifying: dict[int, Verification] = {}  # producer id -> (see the docstring)

    # -- reads --------------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction, None if none is open."""
        return min(self._open.values()) if self._open else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def describe(self) -> list[tuple[int, ProducerEntry]]:
        """(producer id, entry) of every producer known here, by producer id (read only)."""
        return sorted(self.entries.items())

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction (a copy)."""
        return dict(self._open)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that overlap offsets [start, end), in marker order (as Kafka's
        TransactionIndex.collectAbortedTxns: last offset >= start, first offset < end)."""
        found = []
        for txn in self._aborted[bisect_left(self._aborted_ends, start) :]:
            if txn.first_offset < end:
                found.append(txn)
            if txn.last_stable_offset >= end:
                break  # every later transaction began at or after this LSO
        return found

    def last_batches(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (last offset of its last data batch, -1 if it has none since its
        epoch began; its epoch): the batches the log cleaner keeps (Kafka's
        lastRecordsOfActiveProducers)."""
        found = {}
        for pid, entry in self.entries.items():
            last = -1
            if entry.batches:
                first_seq, last_seq, first_offset = entry.batches[-1]
                last = first_offset + (last_seq - first_seq) % (_MAX_SEQUENCE + 1)
            found[pid] = (last, entry.epoch)
        return found

    # -- produce ------------------------------------------------------------------------------
    def check(self, header: BatchHeader, guard: int | None = None) -> AppendVerdict:
        """Kafka's checks of a client's batch from producer `header.producer_id` (>= 0).
        `guard`: the one `start_verification` gave, when transactional batches must have
        been verified (None: they need not be)."""
        entry = self.entries.get(header.producer_id)
        if header.base_sequence < 0:
            return AppendVerdict(ErrorCode.invalid_record, message="producer batch, no sequence")
        first, last = header.base_sequence, _last_seq_of(header)
        if entry is not None and header.producer_epoch == entry.epoch:
            for first_seq, last_seq, first_offset in entry.batches:
                if first_seq == first and last_seq == last:
                    return AppendVerdict(ErrorCode.none, duplicate_of=first_offset)
        if header.is_transactional and guard is not None:
            unverified = self._unverified(header, guard)
            if unverified is not None:
                return unverified
        if entry is not None and header.producer_epoch < entry.epoch:
            return AppendVerdict(
                ErrorCode.invalid_producer_epoch,
                message=f"epoch {header.producer_epoch} is older than {entry.epoch}",
            )
        verifying = self._verifying.get(header.producer_id)
        if verifying is not None:
            why = verifying.out_of_order(first, entry is None or not entry.batches)
            if why is not None:
                return AppendVerdict(ErrorCode.out_of_order_sequence_number, message=why)
        if entry is None:
            return ACCEPT  # unknown producer (or state gone with the log): any sequence goes
        if header.producer_epoch > entry.epoch:
            if first != 0:
                return AppendVerdict(
                    ErrorCode.out_of_order_sequence_number,
                    message=f"sequence {first} for new epoch {header.producer_epoch}, expected 0",
                )
        elif not _in_sequence(entry.last_seq(), first):
            return AppendVerdict(
                ErrorCode.out_of_order_sequence_number,
                message=f"sequence {first}, expected {entry.last_seq() + 1}",
            )
        if not header.is_transactional and entry.txn_first_offset >= 0:
            return AppendVerdict(
                ErrorCode.invalid_txn_state, message="non-transactional batch inside a transaction"
            )
        return ACCEPT

    def _unverified(self, header: BatchHeader, guard: int) -> AppendVerdict | None:
        """Why a transactional batch whose transaction is not open here may not open it:
        unverified, or verified for a transaction a marker has ended since (Kafka's
        VerificationGuard); None if it may."""
        if self.has_ongoing(header.producer_id, header.producer_epoch):
            return None
        entry = self.entries.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.epoch:
            return None  # refused below, for its epoch
        verifying = self._verifying.get(header.producer_id)
        if guard == NO_GUARD or verifying is None or verifying.guard != guard:
            return AppendVerdict(
                ErrorCode.invalid_txn_state, message="Record was not part of an ongoing transaction"
            )
        return None

    # -- verification (KIP-890) ---------------------------------------------------------------
    def has_ongoing(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer's transaction at this epoch is open here."""
        entry = self.entries.get(producer_id)
        return entry is not None and entry.txn_first_offset >= 0 and entry.epoch == epoch

    def start_verification(
        self, header: BatchHeader, epoch_bump: bool, now_ms: int
    ) -> tuple[ErrorCode, int]:
        """Before a transactional batch is verified: (INVALID_PRODUCER_EPOCH, 0) for a stale
        epoch, (NONE, NO_GUARD) when its transaction is already open here (nothing to
        verify), else (NONE, the guard its append must present)."""
        pid, epoch = header.producer_id, header.producer_epoch
        entry = self.entries.get(pid)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch, NO_GUARD
        if self.has_ongoing(pid, epoch):
            return ErrorCode.none, NO_GUARD
        verifying = self._verifying.get(pid)
        if verifying is None:
            verifying = Verification.start(epoch, header.base_sequence, epoch_bump, now_ms)
            self._verifying[pid] = verifying
        else:
            verifying.saw(epoch, header.base_sequence)
        return ErrorCode.none, verifying.guard

    def appended(self, header: BatchHeader, base_offset: int) -> None:
        """Record a producer batch now in the log at `base_offset`."""
        if header.is_transactional:
            self._verifying.pop(header.producer_id, None)  # its transaction is open here now
        self.replay_batch(
            header.producer_id, header.producer_epoch, header.base_sequence,
            header.last_offset_delta, base_offset, header.is_transactional, header.max_timestamp,
        )  # fmt: skip

    def replay_batch(
        self, pid: int, epoch: int, first_seq: int, delta: int, offset: int, txn: bool, ts: int
    ) -> None:
        """`appended`, from a batch header's fields (the start-up replay's hot loop)."""
        entry = self.entries.get(pid)
        if entry is None:
            entry = self.entries[pid] = ProducerEntry(epoch)
        elif epoch != entry.epoch:
            entry.set_epoch(epoch)
        last = first_seq + delta
        if last > _MAX_SEQUENCE:
            last -= _MAX_SEQUENCE + 1
        entry.batches.append((first_seq, last, offset))
        entry.last_timestamp = ts
        if txn and entry.txn_first_offset < 0:
            entry.txn_first_offset = offset
            self._open[pid] = offset

    # -- markers ------------------------------------------------------------------------------
    def check_marker(
        self, producer_id: int, epoch: int, coordinator_epoch: int, transaction_version: int = 0
    ) -> ErrorCode:
        """Kafka's checks of a marker: a v2 transaction's marker carries an epoch above its
        records' (KIP-1228), so an equal one is late, unless nothing is open (a repeat)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return ErrorCode.none
        if epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch
        repeat = entry.txn_first_offset < 0 or epoch == _MAX_EPOCH
        if transaction_version >= 2 and epoch == entry.epoch and not repeat:
            return ErrorCode.invalid_producer_epoch
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.transaction_coordinator_fenced
        return ErrorCode.none

    def marker_changes_nothing(self, producer_id: int, epoch: int) -> bool:
        """A marker for a producer with no open transaction here, at the epoch we already
        know, would end nothing and fence nobody: a repeat of one already written."""
        entry = self.entries.get(producer_id)
        return entry is not None and entry.txn_first_offset < 0 and entry.epoch == epoch

    def marker_written(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        kind: int,
        offset: int,
        timestamp: int = -1,
    ) -> None:
        """Record a COMMIT/ABORT marker now in the log at `offset`, written at `timestamp`
        (also used by replay)."""
        verifying = self._verifying.get(producer_id)
        if not (verifying and verifying.epoch_bump and verifying.epoch == epoch):
            self._verifying.pop(producer_id, None)  # (a v2 producer's next one may go on)
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(epoch)
        else:
            entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        first = entry.txn_first_offset
        if first < 0 or kind not in (ABORT, COMMIT):
            return
        entry.txn_first_offset = -1
        del self._open[producer_id]
        if kind == ABORT:
            stable = self.first_unstable_offset()
            lso = offset + 1 if stable is None else stable
            self._aborted.append(AbortedTxn(producer_id, first, offset, lso))
            self._aborted_ends.append(offset)

    # -- snapshot form (producer_recovery.py stores it) -----------------------------------
    def to_rows(self) -> list[list[int]]:
        """The whole state as rows of ints: one per producer, then one per aborted
        transaction (after a row [-1])."""
        rows: list[list[int]] = []
        for pid, e in self.entries.items():
            row = [pid, e.epoch, e.coordinator_epoch, e.txn_first_offset, e.last_timestamp]
            for meta in e.batches:
                row.extend(meta)
            rows.append(row)
        rows.append([-1])
        rows.extend(list(t) for t in self._aborted)
        return rows

    @classmethod
    def from_rows(cls, rows: list[list[int]]) -> PartitionProducers:
        """The state `to_rows` gave (ValueError if the rows are not such a state)."""
        state = cls()
        split = rows.index([-1])
        for row in rows[:split]:
            pid, epoch, coordinator_epoch, txn_first, last_ts, *flat = row
            if len(flat) % 3 or len(flat) > 3 * DEDUP_DEPTH:
                raise ValueError(f"producer row {row!r}")
            entry = state.entries[pid] = ProducerEntry(epoch)
            entry.coordinator_epoch, entry.last_timestamp = coordinator_epoch, last_ts
            entry.batches.extend(zip(flat[0::3], flat[1::3], flat[2::3], strict=True))
            if txn_first >= 0:
                entry.txn_first_offset = state._open[pid] = txn_first
        for producer_id, first, last, lso in rows[split + 1 :]:
            state._aborted.append(AbortedTxn(producer_id, first, last, lso))
            state._aborted_ends.append(last)
        return state

    def expire(self, idle_before_ms: int) -> int:
        """Forget producers whose last batch or marker is older than `idle_before_ms` and
        that have no open transaction (Kafka's producer.id.expiration.ms); how many."""
        idle = [
            pid
            for pid, e in self.entries.items()
            if e.txn_first_offset < 0 and e.last_timestamp < idle_before_ms
        ]
        for pid in idle:
            del self.entries[pid]
        stale = [pid for pid, v in self._verifying.items() if v.started_ms < idle_before_ms]
        for pid in stale:  # (Kafka expires them with the same setting)
            del self._verifying[pid]
        return len(idle)

    def forget_below(self, log_start_offset: int) -> None:
        """Drop aborted transactions wholly below the log start (their records are gone)."""
        cut = bisect_left(self._aborted_ends, log_start_offset)
        if cut:
            del self._aborted[:cut]
            del self._aborted_ends[:cut]

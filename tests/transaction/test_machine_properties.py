"""Stateful property test of the transaction coordinator's pure core (transaction/machine.py).

Hypothesis drives three producer handles of one transactional id through InitProducerId
(with and without their current id and epoch, with valid and invalid timeouts),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (each as a transactions-v1 client or as a v2
one, whose EndTxn bumps the epoch and names it), the expiry sweep and the passing of time,
in any order, under a coordinator whose own aborts follow transactions v2 (Kafka 4's default)
and under one whose aborts follow v1; the actor's duties (firing a due timeout, completing
a prepared transaction's markers) are rules too, so they interleave with everything else.
Every answer is checked against a model written from Kafka's TransactionCoordinator rules,
and after every step:

* replaying every record stored so far (through the coordinator log's CBOR encoding) gives
  exactly the machine's state: what survives a restart is what the actor holds;
* a record is returned exactly when the state changed;
* partitions and groups are held only by an open transaction, and only an Ongoing one has a
  deadline;
* the producer epoch of a producer id never goes back;
* every Prepare* record is a decision someone made: an accepted EndTxn of that kind, or an
  abort (a fence or a timeout); CompleteCommit follows only PrepareCommit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kio.schema.errors import ErrorCode

from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_records import decode_entry, encode_entry
from rafka_actors.transaction import machine
from rafka_actors.transaction.ops import (
    AddOffsetsOp,
    AddPartitionsOp,
    EndTxnOp,
    ExpireTxnOp,
    InitProducerIdOp,
    MarkersWritten,
    TxnTimerFired,
)
from rafka_actors.transaction.records import TransactionRecord, replay
from rafka_actors.transaction.state import (
    TV_2,
    TV_LEGACY,
    Transaction,
    TxnConfig,
    TxnState,
    markers_of,
)

TXN_ID = "txn-a"
KEY = GroupKey(7, TXN_ID)
CONFIG = TxnConfig(max_timeout_ms=60_000)
HANDLES = st.integers(0, 2)
TIMEOUTS = st.sampled_from((0, 1_000, 5_000, 60_000, 60_001))
PARTITIONS = st.frozensets(st.tuples(st.sampled_from(("in", "out")), st.integers(0, 2)), min_size=1)
GROUPS = st.sampled_from(("g1", "g2"))
SLEEPS = st.sampled_from((1, 900, 2_000, 6_000))


@dataclass
class Model:
    """What Kafka's coordinator would hold, kept independently."""

    exists: bool = False
    producer_id: int = -1
    epoch: int = -1
    last_epoch: int = -1
    state: str = "Empty"
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    start: int = -1
    timeout: int = 0


class TransactionMachine(RuleBasedStateMachine):
    config = CONFIG  # the coordinator's transaction version is that of its own aborts

    def __init__(self) -> None:
        super().__init__()
        self.txn: Transaction | None = None
        self.model = Model()
        self.now = 1_000_000
        self.next_id = 100
        self.handles: list[tuple[int, int]] = [(-1, -1)] * 3  # (producer id, epoch) each holds
        self.stored: list[TransactionRecord] = []
        self.decisions: list[tuple[int, int, str]] = []  # (pid, epoch, Prepare*) allowed
        self.epochs: dict[int, int] = {}
        self.updated = 0  # when the last record was stored

    # -- the machine under test ---------------------------------------------------------------

    def _fresh_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def step(self, op: object) -> object:
        before = self.txn
        result = machine.handle(
            self.txn,
            op,
            self.now,
            transactional_id=TXN_ID,
            config=self.config,
            new_producer_id=self._fresh_id,
        )
        if result.record is not None:
            # stored through the log's encoding, as the actor stores it
            _, decoded = decode_entry(encode_entry(KEY, result.record))
            assert decoded == result.record
            self.stored.append(decoded)
            self.updated = self.now
            if isinstance(decoded, TransactionRecord):
                assert result.txn is not None and result.txn != before
            else:  # the expiry's tombstone
                assert result.txn is None and before is not None
        else:
            assert result.txn == before or before is None  # a refused first init keeps nothing
        self.txn = result.txn
        return result.reply

    # -- the model ----------------------------------------------------------------------------

    def _check_producer(self, handle: int) -> int:
        pid, epoch = self.handles[handle]
        m = self.model
        if not m.exists or pid != m.producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch != m.epoch:
            return ErrorCode.producer_fenced
        return ErrorCode.none

    def _fence_abort(self) -> None:
        """The coordinator's own abort: the epoch bumped; under v2 the last epoch is the
        fenced one (its producer may retry its EndTxn), under v1 it is forgotten."""
        m = self.model
        v2 = self.config.transaction_version >= TV_2
        m.last_epoch = m.epoch if v2 else -1
        m.epoch += 1
        m.state = "PrepareAbort"
        self.decisions.append((m.producer_id, m.epoch, "PrepareAbort"))

    # -- rules --------------------------------------------------------------------------------

    @rule(handle=HANDLES, timeout=TIMEOUTS, with_current=st.booleans())
    def init_producer_id(self, handle: int, timeout: int, with_current: bool) -> None:
        pid, epoch = self.handles[handle] if with_current else (-1, -1)
        answer = self.step(InitProducerIdOp(timeout, pid, epoch))
        m = self.model
        if not 0 < timeout <= CONFIG.max_timeout_ms:
            assert answer.error_code == ErrorCode.invalid_transaction_timeout
            return
        if not m.exists:
            m.exists, m.producer_id, m.epoch = True, self.next_id, -1
        expected = pid != -1
        if expected and not (m.epoch == -1 or pid == m.producer_id):
            assert answer.error_code == ErrorCode.producer_fenced
            m.exists = self.txn is not None
            return
        if m.state in ("PrepareCommit", "PrepareAbort"):
            assert answer.error_code == ErrorCode.concurrent_transactions
            return
        if m.state == "Ongoing":
            assert answer.error_code == ErrorCode.concurrent_transactions
            self._fence_abort()
            return
        if not expected or m.epoch in (-1, epoch):
            m.last_epoch = m.epoch if expected else -1
            m.epoch += 1
        elif epoch == m.last_epoch:
            pass  # a retry whose answer was lost: the same epoch again
        else:
            assert answer.error_code == ErrorCode.producer_fenced
            return
        assert answer.error_code == ErrorCode.none, answer
        assert (answer.producer_id, answer.producer_epoch) == (m.producer_id, m.epoch)
        m.state, m.partitions, m.groups, m.start, m.timeout = "Empty", set(), set(), -1, timeout
        self.handles[handle] = (answer.producer_id, answer.producer_epoch)

    def _add(
        self, handle: int, parts: frozenset[tuple[str, int]], groups: set[str], v2: bool
    ) -> None:
        pid, epoch = self.handles[handle]
        version = TV_2 if v2 else TV_LEGACY  # v2: the broker adds for Produce/TxnOffsetCommit
        if groups:
            answer = self.step(AddOffsetsOp(pid, epoch, next(iter(groups)), version))
        else:
            answer = self.step(AddPartitionsOp(pid, epoch, parts, version))
        m = self.model
        code = self._check_producer(handle)
        if code == ErrorCode.none and m.state in ("PrepareCommit", "PrepareAbort"):
            code = ErrorCode.concurrent_transactions
        assert answer.error_code == code, (answer, m)
        if code != ErrorCode.none:
            return
        if m.state != "Ongoing":
            m.start = self.now
        m.state = "Ongoing"
        m.partitions |= parts
        m.groups |= groups

    @rule(handle=HANDLES, parts=PARTITIONS, v2=st.booleans())
    def add_partitions(self, handle: int, parts: frozenset[tuple[str, int]], v2: bool) -> None:
        self._add(handle, parts, set(), v2)

    @rule(handle=HANDLES, group=GROUPS, v2=st.booleans())
    def add_offsets(self, handle: int, group: str, v2: bool) -> None:
        self._add(handle, frozenset(), {group}, v2)

    @rule(handle=HANDLES, commit=st.booleans(), retry=st.booleans())
    def end_txn_v2(self, handle: int, commit: bool, retry: bool) -> None:
        """EndTxn v5; `retry`: the handle sends it again with the epoch before its last
        bump, as a client whose answer was lost does."""
        pid, epoch = self.handles[handle]
        if retry and epoch > 0:
            epoch -= 1
        answer = self.step(EndTxnOp(pid, epoch, commit, TV_2))
        m = self.model
        wanted, done = (
            ("PrepareCommit", "CompleteCommit") if commit else ("PrepareAbort", "CompleteAbort")
        )
        is_retry = m.epoch == epoch + 1
        if not m.exists or pid != m.producer_id:
            code = ErrorCode.invalid_producer_id_mapping
        elif m.state in ("PrepareCommit", "PrepareAbort"):
            code = ErrorCode.none if is_retry else ErrorCode.producer_fenced
        elif m.state in ("CompleteCommit", "CompleteAbort"):
            code = ErrorCode.none if is_retry or epoch == m.epoch else ErrorCode.producer_fenced
        else:
            code = ErrorCode.none if epoch == m.epoch else ErrorCode.producer_fenced
        bumped = False
        if code == ErrorCode.none:
            if m.state == "Ongoing":
                bumped = True
            elif m.state == wanted:
                code = ErrorCode.concurrent_transactions
            elif m.state == done and is_retry:
                pass  # the retry of the EndTxn that ended it: its answer again
            elif not commit and not is_retry and m.state in ("Empty", done, "CompleteCommit"):
                bumped = True  # v2 may abort with nothing open: the epoch moves on anyway
                m.start = self.now
            else:
                code = ErrorCode.invalid_txn_state
        assert answer.error_code == code, (answer, m, commit, epoch)
        if code != ErrorCode.none:
            assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
            return
        if bumped:
            m.last_epoch = m.epoch
            m.epoch += 1
            m.state = wanted
            self.decisions.append((m.producer_id, m.epoch, wanted))
        # the answer names the producer's next transaction's id and epoch, which it adopts
        assert (answer.producer_id, answer.producer_epoch) == (m.producer_id, m.epoch)
        self.handles[handle] = (answer.producer_id, answer.producer_epoch)

    @rule(handle=HANDLES, commit=st.booleans())
    def end_txn(self, handle: int, commit: bool) -> None:
        pid, epoch = self.handles[handle]
        answer = self.step(EndTxnOp(pid, epoch, commit))
        m = self.model
        code = self._check_producer(handle)
        wanted, done = (
            ("PrepareCommit", "CompleteCommit") if commit else ("PrepareAbort", "CompleteAbort")
        )
        if code == ErrorCode.none:
            if m.state == "Ongoing":
                m.state = wanted
                self.decisions.append((m.producer_id, m.epoch, wanted))
            elif m.state == wanted:
                code = ErrorCode.concurrent_transactions
            elif m.state != done:
                code = ErrorCode.invalid_txn_state
        assert answer.error_code == code, (answer, m, commit)

    @rule(expiration=st.sampled_from((1_000, 5_000)))
    def expiry_sweep(self, expiration: int) -> None:
        unchanged_for = self.now - self.updated  # (before the step stores its tombstone)
        answer = self.step(ExpireTxnOp(expiration))
        m, txn = self.model, self.txn
        idle = (
            m.exists
            and m.epoch >= 0
            and m.state not in ("Ongoing", "PrepareCommit", "PrepareAbort")
        )
        if idle and unchanged_for >= expiration:
            assert answer.expired and txn is None
            self.model = Model()
            self.handles = [(-1, -1)] * 3
        else:
            assert not answer.expired

    @rule(ms=SLEEPS)
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule()
    def actor_fires_due_timer(self) -> None:
        deadline = machine.next_deadline(self.txn)
        self.step(TxnTimerFired())
        m = self.model
        if m.state == "Ongoing" and self.now >= m.start + m.timeout:
            assert deadline is not None and self.now >= deadline
            self._fence_abort()

    @rule(stale=st.booleans())
    def actor_completes_markers(self, stale: bool) -> None:
        markers = markers_of(self.txn)
        m = self.model
        if markers is None:
            assert m.state not in ("PrepareCommit", "PrepareAbort")
            self.step(MarkersWritten(m.producer_id, m.epoch))
            return
        assert markers.committed == (m.state == "PrepareCommit")
        # the producer's latest epoch: after a fence (timeout, InitProducerId) the bumped one,
        # so the groups' TxnMarkerOp and the partitions' markers fence the old producer too
        assert (markers.producer_id, markers.producer_epoch) == (m.producer_id, m.epoch)
        assert markers.partitions == frozenset(m.partitions)
        assert markers.groups == frozenset(m.groups)
        if stale:  # a writer of an older decision reports late: nothing happens
            self.step(MarkersWritten(markers.producer_id, markers.producer_epoch - 1))
            return
        self.step(MarkersWritten(markers.producer_id, markers.producer_epoch))
        m.state = "CompleteCommit" if m.state == "PrepareCommit" else "CompleteAbort"
        m.partitions, m.groups = set(), set()

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        m, txn = self.model, self.txn
        if txn is None:
            assert not m.exists or m.epoch == -1
            return
        assert (txn.producer_id, txn.producer_epoch) == (m.producer_id, m.epoch)
        assert txn.last_producer_epoch == m.last_epoch
        assert txn.state.value == m.state
        assert txn.partitions == frozenset(m.partitions)
        assert txn.groups == frozenset(m.groups)

    @invariant()
    def replay_gives_the_state(self) -> None:
        assert replay(self.stored) == (self.txn if self.stored else None)

    @invariant()
    def only_open_transactions_hold_partitions(self) -> None:
        txn = self.txn
        if txn is not None and not txn.open:
            assert not txn.partitions and not txn.groups
        has_deadline = machine.next_deadline(txn) is not None
        assert has_deadline == (txn is not None and txn.state is TxnState.ONGOING)

    @invariant()
    def epochs_never_go_back(self) -> None:
        txn = self.txn
        if txn is not None and txn.producer_epoch >= 0:
            assert txn.producer_epoch >= self.epochs.get(txn.producer_id, -1)
            self.epochs[txn.producer_id] = txn.producer_epoch

    @invariant()
    def every_decision_was_made(self) -> None:
        previous = None
        for record in self.stored:
            if not isinstance(record, TransactionRecord):
                previous = None  # the id expired: what follows starts afresh
                continue
            if record.state in ("PrepareCommit", "PrepareAbort"):
                assert (record.producer_id, record.producer_epoch, record.state) in self.decisions
            if record.state == "CompleteCommit":
                assert previous is not None and previous.state == "PrepareCommit"
            previous = record


class TransactionMachineV1Coordinator(TransactionMachine):
    """The same clients under a coordinator whose transaction.version is 1: its own aborts
    keep v1's rules (the fenced epoch is forgotten)."""

    config = TxnConfig(max_timeout_ms=60_000, transaction_version=1)


SETTINGS = settings(
    max_examples=75,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TransactionMachine.TestCase.settings = SETTINGS
TransactionMachineV1Coordinator.TestCase.settings = SETTINGS
TestTransactionMachine = TransactionMachine.TestCase
TestTransactionMachineV1Coordinator = TransactionMachineV1Coordinator.TestCase

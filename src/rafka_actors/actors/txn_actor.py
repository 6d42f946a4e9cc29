"""One trio actor per transactional id: the only owner of that id's transaction state.

The same shape as the group actor (group_actor.py): a bounded mailbox of `Envelope`s; each
batch is stepped through the pure machine (transaction/machine.py) in arrival order, its
records stored with one append to the transaction log, and only then answered and published
(the registry keeps the published `Transaction` for DescribeTransactions and
ListTransactions). The transaction timeout is a deadline the machine computes from the state
(`machine.next_deadline`), waited for with `trio.move_on_at` and stepped as `TxnTimerFired`.

Crash safety: a Prepare* record is the commit or abort decision. Markers are written only
after it is stored (`_settle` starts them), by a task in the actor's own nursery, so the
actor keeps answering meanwhile (CONCURRENT_TRANSACTIONS, as Kafka's coordinator does while
its marker channel works). When every marker is written, the task posts `MarkersWritten` to
the mailbox and the machine completes the transaction. An actor started in Prepare* (after a
restart) writes its markers first thing; one started in Ongoing runs its timeout.

Faults stay inside, as for groups: a step that raises, or records that cannot be stored, get
every held request answered COORDINATOR_NOT_AVAILABLE (retriable) and the state rebuilt from
the log. Whatever ends the actor, everything held or queued is answered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import trio
from kio.schema.errors import ErrorCode

from .. import telemetry
from ..group_common.records import Record
from ..ids import GroupKey
from ..storage.coordinator_log import CoordinatorLog
from ..storage.coordinator_segments import CoordinatorLogError
from ..transaction import machine
from ..transaction.ops import (
    ExpireTxnOp,
    ExpireTxnResp,
    InitProducerIdOp,
    InitProducerIdResp,
    MarkersWritten,
    TxnResp,
    TxnTimerFired,
)
from ..transaction.records import replay
from ..transaction.state import PREPARED, Markers, Transaction, TxnConfig, markers_of
from .clock import now_ms, trio_time
from .group_actor import BATCH_LIMIT, Envelope, StoreTimedOut, answer_queued_and_close
from .txn_markers import MarkerSink

log = logging.getLogger(__name__)

# (org id, transactional id): the key the transaction log stores a transactional id under
TxnKey = GroupKey

MARKER_RETRY_MAX_S: Final = 1.0  # markers that fail are retried, backing off up to this


class _NoReply:
    """The reply slot of the actor's own ops: nobody waits for them."""

    def send_nowait(self, value: Any, /) -> None:
        pass


NO_REPLY: Final = _NoReply()


def error_answer(op: Any, code: int) -> Any:
    """An error answer of the right shape for any transaction op."""
    if isinstance(op, InitProducerIdOp):
        return InitProducerIdResp(code)
    if isinstance(op, ExpireTxnOp):
        return ExpireTxnResp(False)
    return TxnResp(code)


class TransactionActor:
    def __init__(
        self,
        key: TxnKey,
        config: TxnConfig,
        txn_log: CoordinatorLog,
        markers: MarkerSink,
        new_producer_id: Callable[[], int],
        *,
        txn: Transaction | None = None,
        publish: Callable[[TxnKey, Transaction | None], None] = lambda _key, _txn: None,
        mailbox_size: int = 256,
        commit_timeout_s: float = 5.0,
        on_stop: Callable[[], None] = lambda: None,
    ) -> None:
        """`on_stop()` is called the moment the actor decides to stop, before it yields again:
        the registry then sends new requests to a fresh actor, not to this closed mailbox."""
        self.key = key
        self.config = config
        self.log = txn_log
        self.txn = txn
        self.mailbox, self._inbox = trio.open_memory_channel[Envelope](mailbox_size)
        self._markers = markers
        self._new_producer_id = new_producer_id
        self._publish = publish
        self._on_stop = on_stop
        self._commit_timeout_s = commit_timeout_s
        self._held: list[tuple[Envelope, Any]] = []  # (envelope, answer) of the batch
        self._writing: Markers | None = None  # markers a task is writing now
        self._nursery: trio.Nursery | None = None

    @property
    def idle(self) -> bool:
        """Nothing to stay for: no open transaction (no timeout to run, no markers due)."""
        return self._writing is None and (self.txn is None or not self.txn.open)

    async def run(self) -> Transaction | None:
        """Serve the mailbox until idle with nothing queued; return the state then."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._write_markers_if_due()  # started in Prepare*: finish the decision
                while True:
                    batch = await self._next_batch()
                    if batch is None:
                        break
                    await self._step_batch(*batch)
                nursery.cancel_scope.cancel()
        finally:
            self._drain()
        return self.txn

    async def _next_batch(self) -> tuple[bool, list[Envelope]] | None:
        envelopes: list[Envelope] = []
        deadline = machine.next_deadline(self.txn)
        if self._due(deadline):
            await trio.lowlevel.checkpoint()
        elif self.idle:
            try:
                envelopes.append(self._inbox.receive_nowait())
            except trio.WouldBlock:
                self._inbox.close()  # (no checkpoint since it was found empty)
                self._on_stop()
                return None
        elif deadline is None:
            envelopes.append(await self._inbox.receive())
        else:
            with trio.move_on_at(trio_time(deadline)):
                envelopes.append(await self._inbox.receive())
        while len(envelopes) < BATCH_LIMIT:
            try:
                envelopes.append(self._inbox.receive_nowait())
            except trio.WouldBlock:
                break
        return self._due(machine.next_deadline(self.txn)), envelopes

    @staticmethod
    def _due(deadline: int | None) -> bool:
        return deadline is not None and trio.current_time() >= trio_time(deadline)

    async def _step_batch(self, timer_due: bool, envelopes: list[Envelope]) -> None:
        self._held = [(envelope, None) for envelope in envelopes]
        now = now_ms()
        txn = self.txn
        records: list[Record] = []
        op: Any = None
        try:
            if timer_due:
                op = TxnTimerFired()
                txn = self._fire_timer(txn, max(now, machine.next_deadline(txn) or now), records)
            for i, envelope in enumerate(envelopes):
                op = envelope.op
                result = self._step(txn, op, now)
                txn = result.txn
                if result.record is not None:
                    records.append(result.record)
                self._held[i] = (envelope, result.reply)
            if records:
                await self._store(records)
        except (CoordinatorLogError, StoreTimedOut) as exc:
            log.error("transactional id %s: %s; restarting from its log", self._name(), exc)
            self._recover()
            return
        except Exception:
            log.exception(
                "transactional id %s: failed on %s; restarting from its log",
                self._name(),
                type(op).__name__,
            )
            self._recover()
            return
        self._settle(txn, bool(records))

    def _step(self, txn: Transaction | None, op: Any, now: int) -> machine.Result:
        return machine.handle(
            txn,
            op,
            now,
            transactional_id=self.key.group_id,
            config=self.config,
            new_producer_id=self._new_producer_id,
        )

    def _fire_timer(
        self, txn: Transaction | None, now: int, records: list[Record]
    ) -> Transaction | None:
        """The open transaction's timeout: it is aborted, its producer fenced."""
        result = self._step(txn, TxnTimerFired(), now)
        if result.record is not None and result.txn is not None:
            records.append(result.record)
            log.info(
                "transactional id %s: transaction timed out after %d ms; aborting it",
                self._name(),
                result.txn.timeout_ms,
            )
        return result.txn

    async def _store(self, records: list[Record]) -> None:
        with trio.move_on_after(self._commit_timeout_s) as scope:
            await self.log.append(self.key, records)
        if scope.cancelled_caught:
            raise StoreTimedOut(f"transaction log append took over {self._commit_timeout_s:g}s")

    def _settle(self, txn: Transaction | None, stored: bool) -> None:
        """The batch's records are stored: take the state, publish it, answer, and start
        the markers of a decision just made."""
        before = self.txn
        self.txn = txn
        if stored or before is not txn:
            self._publish(self.key, txn)
        held, self._held = self._held, []
        for envelope, answer in held:
            if answer is not None:
                envelope.reply.send_nowait(answer)
        if txn is not None and txn.state in PREPARED and (before is None or before != txn):
            log.info(
                "transactional id %s: %s of producer %d epoch %d is durable; writing markers",
                self._name(),
                txn.state.value,
                txn.producer_id,
                txn.producer_epoch,
            )
        self._write_markers_if_due()

    def _write_markers_if_due(self) -> None:
        markers = markers_of(self.txn)
        if markers is None or self._writing is not None or self._nursery is None:
            return
        self._writing = markers
        self._nursery.start_soon(self._write_markers, markers)

    async def _write_markers(self, markers: Markers) -> None:
        """Write the markers until every one is written, then tell the actor."""
        delay = 0.05
        while True:
            try:
                # the markers' spans start their own traces: this task's context is a copy of
                # whichever request started the actor
                with telemetry.detached():
                    failed = await self._markers.write(self.key.org_id, markers)
            except Exception as exc:  # a bug or a closed log: retried like a marker error
                log.exception("transactional id %s: writing markers failed", self._name())
                failed = [repr(exc)]
            if not failed:
                break
            log.warning(
                "transactional id %s: markers not written (%s); retrying",
                self._name(),
                "; ".join(failed),
            )
            await trio.sleep(delay)
            delay = min(delay * 2, MARKER_RETRY_MAX_S)
        self._writing = None
        done = MarkersWritten(markers.producer_id, markers.producer_epoch)
        await self.mailbox.send(Envelope(done, NO_REPLY))

    def _recover(self) -> None:
        self._fail_held()
        self.txn = replay(self.log.records_of(self.key))
        self._publish(self.key, self.txn)
        self._write_markers_if_due()

    def _fail_held(self) -> None:
        held, self._held = self._held, []
        for envelope, _ in held:
            envelope.reply.send_nowait(
                error_answer(envelope.op, ErrorCode.coordinator_not_available)
            )

    def _drain(self) -> None:
        self._fail_held()
        answer_queued_and_close(
            self._inbox, lambda op: error_answer(op, ErrorCode.coordinator_not_available)
        )

    def _name(self) -> str:
        return f"{self.key.group_id} (org {self.key.org_id})"

"""A transactional id's actor: the mailbox actor (mailbox_actor.py) over transaction/machine.py.

`TxnMachine` wires the pure transaction machine to one `(org_id, transactional id)`: each op's
record is stored with the turn's one append to the transaction log before its answer goes out,
and the settled `Transaction` (immutable) is published for DescribeTransactions and
ListTransactions. The transaction timeout is the state's deadline, stepped as `TxnTimerFired`.

Crash safety: a Prepare* record is the commit or abort decision. Its markers are the state's
follow-up: written only once the decision is stored, by a task in the actor's own nursery, so
the actor keeps answering meanwhile (CONCURRENT_TRANSACTIONS, as Kafka's coordinator does while
its marker channel works). Markers that fail are retried, backing off; once every one is
written, `MarkersWritten` comes back through the mailbox and the machine completes the
transaction. An actor started in Prepare* (after a restart, or rebuilt from the log) writes its
markers first thing; one started in Ongoing runs its timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import trio
from opentelemetry.context import Context

from .. import telemetry
from ..ids import TxnKey
from ..storage.coordinator_log import CoordinatorLog
from ..transaction import machine
from ..transaction.ops import MarkersWritten, TxnTimerFired
from ..transaction.records import replay
from ..transaction.state import PREPARED, Markers, Transaction, TxnConfig, markers_of
from .mailbox_actor import DEFAULT_COMMIT_TIMEOUT_S, Batch, FollowUp, MailboxActor
from .txn_markers import MarkerSink

log = logging.getLogger(__name__)

MARKER_RETRY_MAX_S: Final = 1.0  # markers that fail are retried, backing off up to this

Txn = Transaction | None


@dataclass(frozen=True, slots=True)
class TxnSettings:
    """What the actors of a registry's transactional ids share."""

    config: TxnConfig
    log: CoordinatorLog
    markers: MarkerSink  # writes a prepared transaction's markers
    new_producer_id: Callable[[], int]
    publish: Callable[[TxnKey, Txn], None]  # each settled state, for reads
    commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S
    mailbox_size: int = 256


class TxnMachine:
    """transaction/machine.py, wired to one transactional id."""

    __slots__ = ("_settings", "key")

    timer_op: Final = TxnTimerFired()
    follows_up: Final = True

    def __init__(self, key: TxnKey, settings: TxnSettings) -> None:
        self.key = key
        self._settings = settings

    def describe(self, txn: Txn) -> str:
        return f"transactional id {self.key.transactional_id} (org {self.key.org_id})"

    def step(
        self, txn: Txn, op: Any, waiter: int, now: int, batch: Batch, cause: Context | None
    ) -> Txn:
        result = machine.handle(
            txn,
            op,
            now,
            transactional_id=self.key.transactional_id,
            config=self._settings.config,
            new_producer_id=self._settings.new_producer_id,
        )
        if result.record is not None:
            batch.records.append(result.record)
            if type(op) is TxnTimerFired and result.txn is not None:
                log.info(
                    "%s: transaction timed out after %d ms; aborting it",
                    self.describe(txn),
                    result.txn.timeout_ms,
                )
        batch.replies.append((waiter, result.reply))  # (None for the actor's own ops)
        batch.deadline = machine.next_deadline(result.txn)
        return result.txn

    def next_deadline(self, txn: Txn) -> int | None:
        return machine.next_deadline(txn)

    def span_attributes(self, txn: Txn) -> Mapping[str, Any]:
        return {"transactional_id": self.key.transactional_id, "org_id": self.key.org_id}

    def idle(self, txn: Txn) -> bool:
        """No open transaction: no timeout to run, no markers due."""
        return txn is None or not txn.open

    def rebuild(self, now: int) -> Txn:
        return replay(self._settings.log.records_of(self.key))

    def settled(self, before: Txn, after: Txn, batch: Batch) -> None:
        if batch.records or before is not after:
            self._settings.publish(self.key, after)
        if after is not None and after.state in PREPARED and before != after:
            log.info(
                "%s: %s of producer %d epoch %d is durable; writing markers",
                self.describe(after),
                after.state.value,
                after.producer_id,
                after.producer_epoch,
            )

    def rebuilt(self, txn: Txn) -> None:
        self._settings.publish(self.key, txn)

    def follow_up(self, txn: Txn) -> FollowUp | None:
        """A prepared transaction's markers."""
        markers = markers_of(txn)
        return None if markers is None else partial(self._write_markers, markers)

    async def _write_markers(self, markers: Markers) -> MarkersWritten:
        """Write the markers until every one is written."""
        delay = 0.05
        while True:
            try:
                # the markers' spans start their own traces: this task's context is a copy of
                # whichever request started the actor
                with telemetry.detached():
                    failed = await self._settings.markers.write(self.key.org_id, markers)
            except Exception as exc:  # a bug or a closed log: retried like a marker error
                log.exception("%s: writing markers failed", self.describe(None))
                failed = [repr(exc)]
            if not failed:
                return MarkersWritten(markers.producer_id, markers.producer_epoch)
            log.warning(
                "%s: markers not written (%s); retrying", self.describe(None), "; ".join(failed)
            )
            await trio.sleep(delay)
            delay = min(delay * 2, MARKER_RETRY_MAX_S)


def new_txn_actor(key: TxnKey, settings: TxnSettings, txn: Txn) -> MailboxActor[TxnKey, Txn]:
    """The actor of one transactional id, starting from `txn`."""
    return MailboxActor(
        key,
        TxnMachine(key, settings),
        txn,
        settings.log,
        mailbox_size=settings.mailbox_size,
        commit_timeout_s=settings.commit_timeout_s,
    )

"""The transaction registry: finds or starts the actor of an `(org_id, transactional.id)`.

A sibling of the group registry (registry.py), simpler: Kafka's coordinator keeps every
transactional id's metadata in memory, and so does this registry, as the immutable
`Transaction` each actor last published (read from the transaction log at start-up). That
is what DescribeTransactions and ListTransactions read, and what a new actor starts from: no
replay after start-up. An actor runs while its transaction is open (its timeout and its
markers need it) or while it has mail; an actor that dies stays dead alone, and the next
request starts a fresh one from the log.

`resume` starts, after a restart, the actors of open transactions: a Prepare* one completes
its markers, an Ongoing one gets its timeout back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import trio

from .. import telemetry
from ..storage.coordinator_log import CoordinatorLog
from ..transaction.ops import ExpireTxnOp
from ..transaction.records import replay
from ..transaction.state import Transaction, TxnConfig
from .clock import now_ms
from .group_actor import Envelope
from .reply import ReplySlot
from .txn_actor import TransactionActor, TxnKey
from .txn_markers import MarkerSink

log = logging.getLogger(__name__)


class TransactionRegistry:
    def __init__(
        self,
        nursery: trio.Nursery,
        config: TxnConfig,
        txn_log: CoordinatorLog,
        markers: MarkerSink,
        new_producer_id: Callable[[], int],
        *,
        commit_timeout_s: float = 5.0,
    ) -> None:
        self._nursery = nursery
        self._config = config
        self._log = txn_log
        self._markers = markers
        self._new_producer_id = new_producer_id
        self._commit_timeout_s = commit_timeout_s
        self._running: dict[TxnKey, TransactionActor] = {}
        self._known: dict[TxnKey, Transaction] = {}
        for key in list(txn_log.keys()):  # (a log, not a dict)
            txn = replay(txn_log.records_of(key))
            if txn is not None:
                self._known[key] = txn

    async def ask(self, key: TxnKey, op: Any) -> Any:
        """The answer of the transactional id's actor to `op`."""
        reply = ReplySlot()
        envelope = Envelope(op, reply, telemetry.current_context())
        while True:
            actor = self._running.get(key) or self._start(key)
            try:
                try:
                    actor.mailbox.send_nowait(envelope)
                except trio.WouldBlock:
                    await actor.mailbox.send(envelope)
                break
            except trio.BrokenResourceError:  # it stopped while we waited for room
                continue
        return await reply.receive()

    def _start(self, key: TxnKey) -> TransactionActor:
        actor = TransactionActor(
            key,
            self._config,
            self._log,
            self._markers,
            self._new_producer_id,
            txn=self._known.get(key),
            publish=self._publish,
            commit_timeout_s=self._commit_timeout_s,
            on_stop=lambda: self._stopped(key, actor),
        )
        self._running[key] = actor
        self._nursery.start_soon(self._supervise, actor)
        return actor

    def _stopped(self, key: TxnKey, actor: TransactionActor) -> None:
        if self._running.get(key) is actor:
            del self._running[key]

    def _publish(self, key: TxnKey, txn: Transaction | None) -> None:
        if txn is None:
            self._known.pop(key, None)
        else:
            self._known[key] = txn

    async def _supervise(self, actor: TransactionActor) -> None:
        key = actor.key
        try:
            await actor.run()
        except Exception:
            log.exception(
                "transactional id %s: actor died; it restarts on the next request", key.group_id
            )
            txn = replay(self._log.records_of(key))  # what was published may be stale
            self._publish(key, txn)
        finally:
            self._stopped(key, actor)

    async def expire_periodically(self, interval_ms: int, expiration_ms: int) -> None:
        """Kafka's transactional id expiry: every interval, forget the ids with no open
        transaction that have not changed for `expiration_ms`."""
        while True:
            await trio.sleep(interval_ms / 1000)
            await self.expire(expiration_ms)

    async def expire(self, expiration_ms: int) -> int:
        """One sweep; how many transactional ids were forgotten (each actor decides its own,
        on its state when it gets the op)."""
        now = now_ms()
        due = [
            key
            for key, txn in list(self._known.items())
            if not txn.open and now - txn.update_ms >= expiration_ms
        ]
        expired = 0
        for key in due:
            if (await self.ask(key, ExpireTxnOp(expiration_ms))).expired:
                expired += 1
                log.info("transactional id %s of org %d expired", key.group_id, key.org_id)
        return expired

    def resume(self) -> int:
        """Start the actors of open transactions (after a restart); how many."""
        resumed = 0
        for key, txn in list(self._known.items()):
            if txn.open and key not in self._running:
                self._start(key)
                resumed += 1
        return resumed

    # -- reads ----------------------------------------------------------------------------

    def get(self, key: TxnKey) -> Transaction | None:
        return self._known.get(key)

    def get_in(self, org_id: int, transactional_id: str) -> Transaction | None:
        return self._known.get(TxnKey(org_id, transactional_id))

    @staticmethod
    def now_ms() -> int:
        """The clock the transactions' timestamps are on."""
        return now_ms()

    def transactions(self, org_id: int) -> Iterator[Transaction]:
        """Every transactional id of the organisation, as last published."""
        for key, txn in list(self._known.items()):
            if key.org_id == org_id:
                yield txn

    def running(self) -> int:
        return len(self._running)

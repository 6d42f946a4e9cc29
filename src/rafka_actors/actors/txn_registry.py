"""The transaction registry: the registry base (actor_registry.py) for `(org_id, transactional
id)` keys.

Kafka's coordinator keeps every transactional id's metadata in memory, and so does this
registry, as the immutable `Transaction` each actor last published (read from the transaction
log at start-up). That is what DescribeTransactions and ListTransactions read, and what a new
actor starts from: nothing rests, and nothing is replayed after start-up but for an actor that
died. An actor runs while its transaction is open (its timeout and its markers need it) or
while it has mail.

`resume` starts, after a restart, the actors of open transactions: a Prepare* one completes
its markers, an Ongoing one gets its timeout back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import trio

from ..ids import TxnKey
from ..storage.coordinator_log import CoordinatorLog
from ..transaction.ops import ExpireTxnOp
from ..transaction.records import replay
from ..transaction.state import Transaction, TxnConfig
from .actor_registry import ActorRegistry, Resting
from .clock import now_ms
from .mailbox_actor import DEFAULT_COMMIT_TIMEOUT_S, MailboxActor
from .txn_actor import Txn, TxnSettings, new_txn_actor
from .txn_markers import MarkerSink

log = logging.getLogger(__name__)


class TransactionRegistry(ActorRegistry[TxnKey, Txn]):
    def __init__(
        self,
        nursery: trio.Nursery,
        config: TxnConfig,
        txn_log: CoordinatorLog,
        markers: MarkerSink,
        new_producer_id: Callable[[], int],
        *,
        commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S,
    ) -> None:
        super().__init__(nursery)
        self._log = txn_log
        self._settings = TxnSettings(
            config, txn_log, markers, new_producer_id, self._publish, commit_timeout_s
        )
        self._known: dict[TxnKey, Transaction] = {}
        stored = txn_log.keys()  # (org id, transactional id) pairs
        for org_id, transactional_id in stored:
            key = TxnKey(org_id, transactional_id)
            self._publish(key, replay(txn_log.records_of(key)))

    def _new_actor(self, key: TxnKey, resting: Resting[Txn] | None) -> MailboxActor[TxnKey, Txn]:
        return new_txn_actor(key, self._settings, self._known.get(key))

    def _publish(self, key: TxnKey, txn: Txn) -> None:
        if txn is None:
            self._known.pop(key, None)
        else:
            self._known[key] = txn

    def _died(self, key: TxnKey) -> None:
        self._publish(key, replay(self._log.records_of(key)))  # what was published may be stale

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
                log.info("transactional id %s of org %d expired", key.transactional_id, key.org_id)
        return expired

    def resume(self) -> int:
        """Start the actors of open transactions (after a restart); how many."""
        return self._resume([key for key, txn in self._known.items() if txn.open])

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

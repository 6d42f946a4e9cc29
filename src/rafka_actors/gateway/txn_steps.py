"""The steps of the transaction APIs: an op in a transactional id's mailbox, its answer back.

The sibling of `steps.Ask` for the transaction registry (actors/txn_registry.py).
`AskTxn` with a `retry` asks again, after a pause, while the actor answers
CONCURRENT_TRANSACTIONS (its markers are being written), as Kafka's broker retries the add a
v2 client's Produce asks for (ReplicaManager: add.partitions.to.txn.retry.backoff.ms, for up
to add.partitions.to.txn.retry.backoff.max.ms): the client's next transaction may begin the
moment its EndTxn is answered, before the markers of the last one are written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import trio
from kio.schema.errors import ErrorCode

from ..ids import TxnKey
from .steps import Step

if TYPE_CHECKING:
    from .context import BrokerContext


class Retry(NamedTuple):
    backoff_s: float
    for_s: float  # retried until this long has passed since the first ask


@dataclass(frozen=True, slots=True)
class AskTxn(Step):
    """Ask the actor of `(org id, transactional id)` its op; `then` gets its answer."""

    key: TxnKey
    op: Any
    then: Callable[[Any], Any]
    retry: Retry | None = None

    async def take(self, ctx: BrokerContext) -> Any:
        registry = ctx.txn_registry()
        answer = await registry.ask(self.key, self.op)
        if self.retry is not None:
            until = trio.current_time() + self.retry.for_s
            while (
                answer.error_code == ErrorCode.concurrent_transactions
                and trio.current_time() + self.retry.backoff_s <= until
            ):
                await trio.sleep(self.retry.backoff_s)
                answer = await registry.ask(self.key, self.op)
        return self.then(answer)


def add_retry(ctx: BrokerContext) -> Retry:
    """How a v2 client's implicit add is retried (add.partitions.to.txn.retry.backoff.*)."""
    config = ctx.config
    return Retry(
        config.add_partitions_to_txn_retry_backoff_ms / 1000,
        config.add_partitions_to_txn_retry_backoff_max_ms / 1000,
    )


def ask_txn(
    org_id: int,
    transactional_id: str,
    op: Any,
    then: Callable[[Any], Any],
    retry: Retry | None = None,
) -> AskTxn:
    return AskTxn(TxnKey(org_id, transactional_id), op, then, retry)

"""The step of the transaction APIs: an op in a transactional id's mailbox, its answer back.

The sibling of `steps.Ask` for the transaction registry (actors/txn_registry.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ids import TxnKey
from .steps import Step

if TYPE_CHECKING:
    from .context import BrokerContext


@dataclass(frozen=True, slots=True)
class AskTxn(Step):
    """Ask the actor of `(org id, transactional id)` its op; `then` gets its answer."""

    key: TxnKey
    op: Any
    then: Callable[[Any], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        return self.then(await ctx.txn_registry().ask(self.key, self.op))


def ask_txn(org_id: int, transactional_id: str, op: Any, then: Callable[[Any], Any]) -> AskTxn:
    return AskTxn(TxnKey(org_id, transactional_id), op, then)

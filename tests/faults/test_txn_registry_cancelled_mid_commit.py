"""Fault: the transaction registry's nursery is cancelled mid-commit (the broker shuts down):
one transactional id's EndTxn waits for its decision to be stored, another's decision is
stored and its markers are being written.

Guarantee: every caller is answered (the EndTxn whose decision was not stored gets
COORDINATOR_NOT_AVAILABLE, retriable; so does a request queued behind it); the markers'
task ends with its actor, so shutdown completes and nothing runs on; and after a restart on
the same log nothing acknowledged is lost: the transaction whose commit was answered
completes (its markers are written by the resumed actor), and the one whose commit was not
is still open, so the producer's retried EndTxn commits it.

On the real clock: nothing here waits for a timer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from rafka_actors.actors.txn_registry import TransactionRegistry
from rafka_actors.ids import TxnKey
from rafka_actors.storage.coordinator_log import CoordinatorLog
from rafka_actors.transaction.ops import AddPartitionsOp, EndTxnOp, InitProducerIdOp
from rafka_actors.transaction.state import Markers, TxnConfig, TxnState

from .helpers import NOT_AVAILABLE, OK, HangingLog

DECIDED, UNDECIDED = TxnKey(0, "decided"), TxnKey(0, "undecided")


class HangingMarkers:
    """A marker sink: writes hang until `working` is set; `written` lists what got through,
    and `cancelled` counts the writes cancelled while hanging."""

    def __init__(self) -> None:
        self.working = trio.Event()
        self.writing = trio.Event()
        self.written: list[Markers] = []
        self.cancelled = 0

    async def write(self, org_id: int, markers: Markers) -> list[str]:
        self.writing.set()
        try:
            await self.working.wait()
        except trio.Cancelled:
            self.cancelled += 1
            raise
        self.written.append(markers)
        return []


@asynccontextmanager
async def registry(log: CoordinatorLog, sink: HangingMarkers) -> AsyncIterator[TransactionRegistry]:
    async with trio.open_nursery() as nursery:
        ids = iter(range(1000, 2000))
        yield TransactionRegistry(nursery, TxnConfig(), log, sink, lambda: next(ids))
        nursery.cancel_scope.cancel()


async def open_transaction(txns: TransactionRegistry, key: TxnKey) -> tuple[int, int]:
    init = await txns.ask(key, InitProducerIdOp(60_000))
    added = AddPartitionsOp(init.producer_id, init.producer_epoch, frozenset({("out", 0)}))
    assert (await txns.ask(key, added)).error_code == OK
    return init.producer_id, init.producer_epoch


def state_of(txns: TransactionRegistry, key: TxnKey) -> TxnState:
    txn = txns.get(key)
    assert txn is not None
    return txn.state


async def test_cancelled_mid_commit_every_caller_is_answered_and_a_restart_completes_it() -> None:
    log, sink = HangingLog(), HangingMarkers()
    answers: dict[str, Any] = {}
    shutdown = trio.CancelScope()

    async def ask(name: str, key: TxnKey, op: Any) -> None:
        answers[name] = await txns.ask(key, op)

    with trio.fail_after(10):
        async with trio.open_nursery() as callers:  # outside the registry's nursery
            with shutdown:
                async with registry(log, sink) as txns:
                    decided = await open_transaction(txns, DECIDED)
                    undecided = await open_transaction(txns, UNDECIDED)
                    assert (await txns.ask(DECIDED, EndTxnOp(*decided, True))).error_code == OK
                    await sink.writing.wait()  # its markers are being written
                    log.hang()
                    callers.start_soon(ask, "commit", UNDECIDED, EndTxnOp(*undecided, True))
                    await trio.testing.wait_all_tasks_blocked()
                    callers.start_soon(ask, "queued", UNDECIDED, EndTxnOp(*undecided, True))
                    await trio.testing.wait_all_tasks_blocked()
                    assert answers == {}
                    shutdown.cancel()
    # every caller answered, retriably; the markers' task was cancelled with its actor
    assert answers["commit"].error_code == answers["queued"].error_code == NOT_AVAILABLE
    assert sink.cancelled == 1 and sink.written == []

    log.stuck.clear()  # the hung write never reached the disk
    await log.recover()
    sink.working.set()
    with trio.fail_after(10):
        async with registry(log, sink) as restarted:  # the restart
            assert state_of(restarted, DECIDED) is TxnState.PREPARE_COMMIT
            assert state_of(restarted, UNDECIDED) is TxnState.ONGOING
            assert restarted.resume() == 2
            while state_of(restarted, DECIDED) is not TxnState.COMPLETE_COMMIT:  # noqa: ASYNC110
                await trio.sleep(0.01)  # (polls the published state)
            assert [m.producer_id for m in sink.written] == [decided[0]]
            retried = await restarted.ask(UNDECIDED, EndTxnOp(*undecided, True))
            assert retried.error_code == OK
            while state_of(restarted, UNDECIDED) is not TxnState.COMPLETE_COMMIT:  # noqa: ASYNC110
                await trio.sleep(0.01)

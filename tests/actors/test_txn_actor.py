"""Transaction actors on trio's MockClock, with the coordinator log in memory and a marker
sink that records what it is asked to write (and can fail): the commit decision is stored
before any marker, markers are retried until written, and a restart completes prepared
transactions and times out open ones."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from rafka_actors.actors.txn_registry import TransactionRegistry
from rafka_actors.group_common.records import Record
from rafka_actors.ids import TxnKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.durable_log import CoordinatorLogError
from rafka_actors.transaction import machine as txn_machine
from rafka_actors.transaction.ops import (
    AddOffsetsOp,
    AddPartitionsOp,
    EndTxnOp,
    InitProducerIdOp,
)
from rafka_actors.transaction.records import TransactionRecord, replay
from rafka_actors.transaction.state import Markers, TxnConfig, TxnState

KEY = TxnKey(3, "copier")
TIMEOUT_MS = 10_000


@dataclass
class RecordingSink:
    """Records each marker write with the state the log held when it was asked."""

    log: MemoryCoordinatorLog
    failures: int = 0  # fail this many writes first
    writes: list[tuple[Markers, str]] = field(default_factory=list)
    written: trio.Event = field(default_factory=trio.Event)

    async def write(self, org_id: int, markers: Markers) -> list[str]:
        await trio.lowlevel.checkpoint()
        stored = self.log.records_of(TxnKey(org_id, KEY.transactional_id))
        assert isinstance(stored[-1], TransactionRecord)
        self.writes.append((markers, stored[-1].state))
        if self.failures:
            self.failures -= 1
            return ["out-0: NOT_LEADER_OR_FOLLOWER"]
        self.written.set()
        return []


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    def __call__(self) -> int:
        self.next += 1
        return self.next


@pytest.fixture
def txn_log() -> MemoryCoordinatorLog:
    return MemoryCoordinatorLog()


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as nursery:
        yield nursery
        nursery.cancel_scope.cancel()


def registry_of(
    nursery: trio.Nursery, txn_log: MemoryCoordinatorLog, sink: RecordingSink
) -> TransactionRegistry:
    return TransactionRegistry(nursery, TxnConfig(max_timeout_ms=60_000), txn_log, sink, Ids())


async def wait_for_state(registry: TransactionRegistry, state: TxnState) -> None:
    """Poll the published state (on the mock clock: no real time passes)."""
    with trio.fail_after(60):
        for _ in range(100_000):
            txn = registry.get(KEY)
            if txn is not None and txn.state is state:
                return
            await trio.sleep(0.01)


async def test_commit_is_durable_before_its_markers(
    autojump_clock: trio.abc.Clock, nursery: trio.Nursery, txn_log: MemoryCoordinatorLog
) -> None:
    sink = RecordingSink(txn_log)
    registry = registry_of(nursery, txn_log, sink)
    init = await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))
    assert init.error_code == ErrorCode.none
    pid, epoch = init.producer_id, init.producer_epoch
    parts = frozenset({("out", 0), ("out", 1)})
    assert (await registry.ask(KEY, AddPartitionsOp(pid, epoch, parts))).error_code == 0
    assert (await registry.ask(KEY, AddOffsetsOp(pid, epoch, "grp"))).error_code == 0
    assert (await registry.ask(KEY, EndTxnOp(pid, epoch, True))).error_code == 0

    await wait_for_state(registry, TxnState.COMPLETE_COMMIT)
    [(markers, state_when_asked)] = sink.writes
    assert state_when_asked == "PrepareCommit"
    assert markers == Markers(pid, epoch, True, parts, frozenset({"grp"}))
    assert replay(txn_log.records_of(KEY)) == registry.get(KEY)
    # a retried EndTxn of the finished transaction is answered as done
    assert (await registry.ask(KEY, EndTxnOp(pid, epoch, True))).error_code == 0
    assert (await registry.ask(KEY, EndTxnOp(pid, epoch, False))).error_code == (
        ErrorCode.invalid_txn_state
    )


async def test_markers_are_retried_and_the_transaction_waits_for_them(
    autojump_clock: trio.abc.Clock, nursery: trio.Nursery, txn_log: MemoryCoordinatorLog
) -> None:
    sink = RecordingSink(txn_log, failures=3)
    registry = registry_of(nursery, txn_log, sink)
    init = await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))
    pid, epoch = init.producer_id, init.producer_epoch
    await registry.ask(KEY, AddPartitionsOp(pid, epoch, frozenset({("out", 0)})))
    assert (await registry.ask(KEY, EndTxnOp(pid, epoch, False))).error_code == 0
    # while the markers are not all written, the next transaction must wait
    answer = await registry.ask(KEY, AddPartitionsOp(pid, epoch, frozenset({("out", 0)})))
    assert answer.error_code == ErrorCode.concurrent_transactions
    await wait_for_state(registry, TxnState.COMPLETE_ABORT)
    assert len(sink.writes) == 4
    assert all(not m.committed and state == "PrepareAbort" for m, state in sink.writes)
    assert (await registry.ask(KEY, AddPartitionsOp(pid, epoch, frozenset({("out", 1)})))) == (
        type(answer)(ErrorCode.none)
    )


async def test_a_restart_completes_a_prepared_commit(
    autojump_clock: trio.abc.Clock, txn_log: MemoryCoordinatorLog
) -> None:
    stuck = RecordingSink(txn_log, failures=10**9)  # the broker dies before any marker
    async with trio.open_nursery() as first_life:
        registry = registry_of(first_life, txn_log, stuck)
        init = await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))
        pid, epoch = init.producer_id, init.producer_epoch
        assert (
            await registry.ask(KEY, AddPartitionsOp(pid, epoch, frozenset({("out", 2)})))
        ).error_code == 0
        assert (await registry.ask(KEY, EndTxnOp(pid, epoch, True))).error_code == 0
        first_life.cancel_scope.cancel()  # the crash: only the log survives
    assert replay(txn_log.records_of(KEY)).state is TxnState.PREPARE_COMMIT

    sink = RecordingSink(txn_log)
    async with trio.open_nursery() as second_life:
        registry = registry_of(second_life, txn_log, sink)
        assert registry.resume() == 1
        await wait_for_state(registry, TxnState.COMPLETE_COMMIT)
        second_life.cancel_scope.cancel()
    [(markers, _)] = sink.writes
    assert markers.committed and markers.partitions == {("out", 2)}


async def test_an_open_transaction_times_out_after_a_restart_and_its_producer_is_fenced(
    autojump_clock: trio.abc.Clock, txn_log: MemoryCoordinatorLog
) -> None:
    async with trio.open_nursery() as first_life:
        registry = registry_of(first_life, txn_log, RecordingSink(txn_log))
        init = await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))
        pid, epoch = init.producer_id, init.producer_epoch
        await registry.ask(KEY, AddPartitionsOp(pid, epoch, frozenset({("out", 0)})))
        first_life.cancel_scope.cancel()

    sink = RecordingSink(txn_log)
    async with trio.open_nursery() as second_life:
        registry = registry_of(second_life, txn_log, sink)
        assert registry.resume() == 1
        started = trio.current_time()
        await wait_for_state(registry, TxnState.COMPLETE_ABORT)
        assert trio.current_time() - started <= TIMEOUT_MS / 1000 + 1
        # the producer of the aborted transaction is fenced: its commit fails
        answer = await registry.ask(KEY, EndTxnOp(pid, epoch, True))
        assert answer.error_code == ErrorCode.producer_fenced
        second_life.cancel_scope.cancel()
    [(markers, state)] = sink.writes
    assert (markers.committed, markers.producer_epoch, state) == (False, epoch + 1, "PrepareAbort")


class FailingOnce(MemoryCoordinatorLog):
    """Fails the first append after `arm()`; stores the rest."""

    armed = False

    async def append(self, key: tuple[int, str], records: Sequence[Record]) -> None:
        if self.armed:
            self.armed = False
            await trio.lowlevel.checkpoint()
            raise CoordinatorLogError("disk full")
        await super().append(key, records)


async def test_a_failed_store_answers_retriably_and_the_state_is_what_the_log_has(
    autojump_clock: trio.abc.Clock, nursery: trio.Nursery
) -> None:
    txn_log = FailingOnce()
    registry = registry_of(nursery, txn_log, RecordingSink(txn_log))
    init = await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))
    pid, epoch = init.producer_id, init.producer_epoch
    await registry.ask(KEY, AddPartitionsOp(pid, epoch, frozenset({("out", 0)})))
    txn_log.armed = True
    answer = await registry.ask(KEY, EndTxnOp(pid, epoch, True))
    # Kafka's TransactionStateManager answers a refused append (KAFKA_STORAGE_ERROR) so
    assert answer.error_code == ErrorCode.not_coordinator  # retriable: find it again
    assert registry.get(KEY).state is TxnState.ONGOING  # the decision was not stored
    assert (await registry.ask(KEY, EndTxnOp(pid, epoch, True))).error_code == 0
    await wait_for_state(registry, TxnState.COMPLETE_COMMIT)


async def test_requests_racing_with_a_stopping_actor_all_get_answers(
    autojump_clock: trio.abc.Clock, nursery: trio.Nursery, txn_log: MemoryCoordinatorLog
) -> None:
    registry = registry_of(nursery, txn_log, RecordingSink(txn_log))
    answers: list[int] = []

    async def init_once() -> None:
        answers.append((await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))).error_code)

    for _ in range(20):  # each actor stops (Empty: idle) as soon as its mailbox is empty
        async with trio.open_nursery() as callers:
            for _ in range(5):
                callers.start_soon(init_once)
                await trio.lowlevel.checkpoint()
    assert answers == [ErrorCode.none] * 100
    assert registry.get(KEY).producer_epoch == 99


async def test_a_step_that_raises_is_contained_to_its_transactional_id(
    autojump_clock: trio.abc.Clock,
    nursery: trio.Nursery,
    txn_log: MemoryCoordinatorLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = registry_of(nursery, txn_log, RecordingSink(txn_log))
    other = TxnKey(3, "other")
    for key in (KEY, other):
        assert (await registry.ask(key, InitProducerIdOp(TIMEOUT_MS))).error_code == 0
    real_handle = txn_machine.handle

    def broken(txn: Any, op: Any, now: int, **kw: Any) -> Any:
        if kw["transactional_id"] == KEY.transactional_id:
            raise RuntimeError("a bug")
        return real_handle(txn, op, now, **kw)

    monkeypatch.setattr(txn_machine, "handle", broken)
    answer = await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))
    assert answer.error_code == ErrorCode.coordinator_not_available  # retriable
    assert registry.get(KEY).producer_epoch == 0  # what the log has
    assert (await registry.ask(other, InitProducerIdOp(TIMEOUT_MS))).producer_epoch == 1
    monkeypatch.setattr(txn_machine, "handle", real_handle)
    assert (await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))).producer_epoch == 1


async def test_idle_transactional_ids_expire_and_open_ones_stay(
    autojump_clock: trio.abc.Clock, nursery: trio.Nursery, txn_log: MemoryCoordinatorLog
) -> None:
    registry = registry_of(nursery, txn_log, RecordingSink(txn_log))
    busy = TxnKey(3, "busy")
    for key in (KEY, busy):
        assert (await registry.ask(key, InitProducerIdOp(50_000))).error_code == 0
    pid, epoch = registry.get(busy).producer_id, registry.get(busy).producer_epoch
    await registry.ask(busy, AddPartitionsOp(pid, epoch, frozenset({("out", 0)})))
    await trio.sleep(40)  # (the busy one's transaction does not time out meanwhile)
    assert await registry.expire(expiration_ms=30_000) == 1
    assert registry.get(KEY) is None and txn_log.records_of(KEY) == []
    assert registry.get(busy).state is TxnState.ONGOING
    assert registry_of(nursery, txn_log, RecordingSink(txn_log)).get(KEY) is None  # restart
    again = await registry.ask(KEY, InitProducerIdOp(TIMEOUT_MS))
    assert (again.error_code, again.producer_epoch) == (0, 0)  # a new producer id

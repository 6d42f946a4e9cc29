"""The transaction log on disk: a `DurableCoordinatorLog` in `<data dir>/transactions`, whose
latest record per transactional id is the id's state after a reopen and after compaction,
apart from the groups' log even for a group of the same name."""

from __future__ import annotations

from pathlib import Path

import trio

from rafka_actors.ids import GroupKey
from rafka_actors.storage.durable_log import DurableCoordinatorLog
from rafka_actors.transaction.records import TransactionTombstone, record_of, replay
from rafka_actors.transaction.state import Transaction, TxnState

KEY = GroupKey(4, "copier")


def state(epoch: int, txn_state: TxnState, partitions: frozenset[tuple[str, int]]) -> Transaction:
    return Transaction("copier", 1000, epoch, -1, 60_000, txn_state, partitions, frozenset({"g"}))


async def test_the_latest_record_survives_reopening_and_compaction(tmp_path: Path) -> None:
    ongoing = state(3, TxnState.ONGOING, frozenset({("out", 0), ("out", 2)}))
    prepared = state(3, TxnState.PREPARE_COMMIT, ongoing.partitions)
    log = DurableCoordinatorLog.open(tmp_path, name="transactions", segment_bytes=4096)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for epoch in range(3):  # enough superseded records to seal segments
            for _ in range(20):
                await log.append(KEY, [record_of(state(epoch, TxnState.EMPTY, frozenset()))])
        await log.append(KEY, [record_of(ongoing)])
        await log.append(KEY, [record_of(prepared)])
        await log.compact()
        nursery.cancel_scope.cancel()
    log.close()
    assert (tmp_path / "transactions").is_dir()
    reopened = DurableCoordinatorLog.open(tmp_path, name="transactions")
    assert reopened.keys() == [KEY]
    assert replay(reopened.records_of(KEY)) == prepared
    reopened.close()
    groups = DurableCoordinatorLog.open(tmp_path)  # the groups' log knows nothing of it
    assert groups.keys() == []
    groups.close()


async def test_an_expired_ids_tombstone_removes_it_from_the_reopened_log(tmp_path: Path) -> None:
    log = DurableCoordinatorLog.open(tmp_path, name="transactions", bulk=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.append(KEY, [record_of(state(0, TxnState.EMPTY, frozenset()))])
        await log.append(KEY, [TransactionTombstone("copier")])
        nursery.cancel_scope.cancel()
    log.close()
    reopened = DurableCoordinatorLog.open(tmp_path, name="transactions", bulk=False)
    assert reopened.keys() == [] and replay(reopened.records_of(KEY)) is None
    reopened.close()

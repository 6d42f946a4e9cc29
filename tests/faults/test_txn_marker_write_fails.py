"""Fault: a transaction's commit marker cannot be written (the partition's disk refuses it:
ENOSPC), after the commit decision (PrepareCommit) is stored and answered.

Guarantee: the decision stands and the transaction waits for its markers: it stays
PrepareCommit, the partition's last stable offset stays at the transaction's first record (a
read_committed consumer sees none of it), its producer's next requests are
CONCURRENT_TRANSACTIONS (retriable); the marker is retried, backing off (a few tries a second
at most, not a busy loop); other transactional ids commit meanwhile; and once the disk takes
writes again the marker is written within the backoff's cap, the transaction completes, the
partition's records become readable, and the group's offset of the transaction is committed.

Real parts: a DataPlane on a temp dir, the real MarkerWriter, a group registry for the
group's marker; the coordinator logs in memory; on trio's autojumping MockClock.
"""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.actors.txn_markers import MarkerWriter
from rafka_actors.actors.txn_registry import TransactionRegistry
from rafka_actors.group_common.ops import TxnOffsetCommitOp
from rafka_actors.ids import TxnKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.record_batch import split_batches
from rafka_actors.transaction.ops import (
    AddOffsetsOp,
    AddPartitionsOp,
    EndTxnOp,
    InitProducerIdOp,
)
from rafka_actors.transaction.state import TxnConfig, TxnState

from ..batch_builder import build_batch
from ..disk_faults import failing_write
from .helpers import OK, fetch_op, key, running_registry

TXN_ATTRIBUTE = 0x10
MARKER_RETRY_MAX_S = 1.0  # txn_actor.py's backoff cap


class CountingMarkers(MarkerWriter):
    """The real marker writer, counting its tries."""

    tries = 0

    async def write(self, org_id: int, markers: object) -> list[str]:  # type: ignore[override]
        self.tries += 1
        return await super().write(org_id, markers)  # type: ignore[arg-type]


@asynccontextmanager
async def broker(tmp_path: Path) -> AsyncIterator[tuple[DataPlane, TransactionRegistry, object]]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.fsync_markers = False  # (coordinator.log.fsync=never: no worker thread, mock clock)
    data.create_topic("full", 1)
    data.create_topic("fine", 1)
    try:
        async with (
            running_registry(MemoryCoordinatorLog()) as groups,
            trio.open_nursery() as nursery,
        ):
            markers = CountingMarkers(data, groups.ask)
            txns = TransactionRegistry(
                nursery, TxnConfig(), MemoryCoordinatorLog(), markers, data.producer_ids.allocate
            )
            yield data, txns, (groups, markers)
            nursery.cancel_scope.cancel()
    finally:
        data.close()


async def open_transaction(
    data: DataPlane, txns: TransactionRegistry, txn_id: str, topic: str
) -> tuple[TxnKey, int, int]:
    """InitProducerId, AddPartitions, and two records produced in the transaction."""
    key_ = TxnKey(0, txn_id)
    init = await txns.ask(key_, InitProducerIdOp(60_000))
    pid, epoch = init.producer_id, init.producer_epoch
    added = await txns.ask(key_, AddPartitionsOp(pid, epoch, frozenset({(topic, 0)})))
    assert added.error_code == OK
    batch = build_batch(
        [(None, b"a"), (None, b"b")],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        attributes=TXN_ATTRIBUTE,
    )
    stored = data.append(data.topics.by_name(topic), 0, split_batches(batch))  # type: ignore[arg-type]
    assert stored.base_offset == 0
    return key_, pid, epoch


def state_of(txns: TransactionRegistry, key_: TxnKey) -> TxnState:
    txn = txns.get(key_)
    assert txn is not None
    return txn.state


def stable(data: DataPlane, topic: str) -> int:
    return data.last_stable_offset(data.topics.by_name(topic), 0)  # type: ignore[arg-type]


async def test_a_marker_the_disk_refuses_is_retried_until_written_and_holds_the_txn_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    async with broker(tmp_path) as (data, txns, (groups, markers)):
        copier, pid, epoch = await open_transaction(data, txns, "copier", "full")
        assert (await txns.ask(copier, AddOffsetsOp(pid, epoch, "grp"))).error_code == OK
        offsets = (("full", 0, 2, -1, None),)
        pending = await groups.ask(key("grp"), TxnOffsetCommitOp("grp", pid, epoch, offsets))
        assert pending.results == (("full", 0, OK),)

        write = failing_write(errno.ENOSPC, under=str(tmp_path / "topics" / "full"))
        monkeypatch.setattr(os, "write", write)
        assert (await txns.ask(copier, EndTxnOp(pid, epoch, True))).error_code == OK
        started = trio.current_time()
        other, other_pid, other_epoch = await open_transaction(data, txns, "other", "fine")
        ended = await txns.ask(other, EndTxnOp(other_pid, other_epoch, True))
        assert ended.error_code == OK
        await trio.sleep(10)

        assert state_of(txns, copier) is TxnState.PREPARE_COMMIT
        assert stable(data, "full") == 0  # nothing of the transaction readable yet
        again = await txns.ask(copier, AddPartitionsOp(pid, epoch, frozenset({("full", 0)})))
        assert again.error_code == ErrorCode.concurrent_transactions
        assert 5 < markers.tries < 10 / 0.05  # retried, backing off to once a second
        assert state_of(txns, other) is TxnState.COMPLETE_COMMIT
        assert stable(data, "fine") == 3  # its records and its marker

        write.fail = False  # type: ignore[attr-defined]
        healed = trio.current_time()
        while state_of(txns, copier) is not TxnState.COMPLETE_COMMIT:  # noqa: ASYNC110
            await trio.sleep(0.01)  # (polls the published state)
        assert trio.current_time() - healed <= MARKER_RETRY_MAX_S
        assert trio.current_time() - started > 10
        assert stable(data, "full") == 3  # the records, then the commit marker
        fetched = await groups.ask(key("grp"), fetch_op("grp"))
        assert [o[:3] for o in fetched.offsets] == [("full", 0, 2)]  # committed by its marker

"""Transactional offsets through the registry and the durable coordinator log: TxnOffsetCommitOp
and TxnMarkerOp reach the group's actor, pending offsets are stored, replayed after a restart
(and after compaction), and merged or discarded by the marker, durably."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    OffsetCommitOp,
    OffsetFetchOp,
    TxnMarkerOp,
    TxnOffsetCommitOp,
)
from rafka_actors.ids import GroupKey
from rafka_actors.storage.durable_log import DurableCoordinatorLog

KEY = GroupKey(3, "txn-group")
A, B = ("t", 0), ("t", 1)
UNSTABLE = int(ErrorCode.unstable_offset_commit)


@asynccontextmanager
async def broker(data_dir: Path, **log_kw: Any) -> AsyncIterator[tuple[GroupRegistry, Any]]:
    """A registry over a durable log in `data_dir`: one run of a broker's coordinator."""
    log = DurableCoordinatorLog.open(data_dir, fsync_policy="never", **log_kw)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        async with trio.open_nursery() as services:
            yield GroupRegistry(services, GroupConfig(), log), log
            services.cancel_scope.cancel()
        nursery.cancel_scope.cancel()


async def txn_commit(registry: GroupRegistry, pid: int, offsets: dict[Any, int]) -> set[int]:
    rows = tuple((t, p, o, -1, None) for (t, p), o in offsets.items())
    resp = await registry.ask(KEY, TxnOffsetCommitOp(KEY.group_id, pid, 0, rows))
    return {int(e) for _, _, e in resp.results}


async def fetched(registry: GroupRegistry, *, stable: bool) -> dict[Any, tuple[int, int]]:
    resp = await registry.ask(KEY, OffsetFetchOp(KEY.group_id, (A, B), require_stable=stable))
    return {(t, p): (o, int(e)) for t, p, o, _, _, e in resp.offsets}


async def test_pending_offsets_survive_restarts_and_the_marker_decides(tmp_path: Path) -> None:
    async with broker(tmp_path) as (registry, _):
        commit = OffsetCommitOp(KEY.group_id, (("t", 0, 5, -1, None),))
        assert (await registry.ask(KEY, commit)).results == (("t", 0, 0),)
        assert await txn_commit(registry, 1, {A: 10}) == {0}
        assert await txn_commit(registry, 2, {B: 20}) == {0}
        assert await fetched(registry, stable=False) == {A: (5, 0), B: (-1, 0)}
        assert await fetched(registry, stable=True) == {A: (-1, UNSTABLE), B: (-1, UNSTABLE)}

    async with broker(tmp_path) as (registry, _):  # a restart: pending offsets replayed
        assert await fetched(registry, stable=True) == {A: (-1, UNSTABLE), B: (-1, UNSTABLE)}
        assert await fetched(registry, stable=False) == {A: (5, 0), B: (-1, 0)}
        done = await registry.ask(KEY, TxnMarkerOp(1, 0, True))
        assert done.error_code == ErrorCode.none
        aborted = await registry.ask(KEY, TxnMarkerOp(2, 1, False))  # producer 2 was fenced
        assert aborted.error_code == ErrorCode.none
        assert await fetched(registry, stable=True) == {A: (10, 0), B: (-1, 0)}

    async with broker(tmp_path) as (registry, _):  # the markers' outcome is durable
        assert await fetched(registry, stable=True) == {A: (10, 0), B: (-1, 0)}
        zombie = await registry.ask(
            KEY, TxnOffsetCommitOp(KEY.group_id, 2, 0, (("t", 1, 21, -1, None),))
        )
        assert zombie.results == (("t", 1, ErrorCode.invalid_producer_epoch),)  # so is its epoch
        # a marker sent again after a crash of the transaction coordinator is harmless
        again = await registry.ask(KEY, TxnMarkerOp(1, 0, True))
        assert again.error_code == ErrorCode.none
        assert await fetched(registry, stable=True) == {A: (10, 0), B: (-1, 0)}


async def test_compaction_keeps_open_transactions_and_drops_ended_ones(tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "segment_bytes": 2 << 10,
        "compaction_interval_ms": 3_600_000,
        "compaction_dirty_bytes": 1 << 30,  # compacted when the test says so
    }
    async with broker(tmp_path, **settings) as (registry, log):
        for round_ in range(20):  # ended transactions: committed for producer 1
            assert await txn_commit(registry, 1, {A: round_}) == {0}
            assert (await registry.ask(KEY, TxnMarkerOp(1, 0, True))).error_code == 0
        assert await txn_commit(registry, 2, {B: 99}) == {0}  # left open
        for round_ in range(20):  # enough to seal the segment the open one is in
            assert await txn_commit(registry, 3, {A: round_}) == {0}
            assert (await registry.ask(KEY, TxnMarkerOp(3, 0, False))).error_code == 0
        stats = await log.compact()
        assert stats.entries_after < stats.entries_before / 4, stats
        expected = sorted(log.records_of(KEY), key=repr)
    async with broker(tmp_path, **settings) as (registry, log):
        assert sorted(log.records_of(KEY), key=repr) == expected
        assert await fetched(registry, stable=True) == {A: (19, 0), B: (-1, UNSTABLE)}
        assert (await registry.ask(KEY, TxnMarkerOp(2, 0, True))).error_code == 0
        assert await fetched(registry, stable=True) == {A: (19, 0), B: (99, 0)}

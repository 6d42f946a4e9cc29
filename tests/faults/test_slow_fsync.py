"""Fault: an fsync is slow (the real DurableCoordinatorLog under `always`, whose `os.fsync`
first sleeps half a second in its worker thread).

Guarantee: a slow disk delays only the writes waiting for it. While the fsync runs, the event
loop serves: other groups' requests that write nothing (a fetch from the snapshot, a
heartbeat, a describe) are answered at once, and no read sees an offset before it is durable;
commits that arrive meanwhile queue up and share the next fsync; every commit is acknowledged,
and is there after the log is reopened.

On the real clock: a mock clock does not move while a worker thread sleeps, and would jump
past the fsync instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from rafka_actors.storage.durable_log import DurableCoordinatorLog

from .helpers import (
    OK,
    SlowFsync,
    commit_error,
    commit_op,
    describe_op,
    fetch_op,
    heartbeat_op,
    join_and_sync,
    key,
    member_ids,
    offsets_of,
    reread,
    running_registry,
)

FSYNC_S = 0.5


async def test_a_slow_fsync_delays_only_the_writes_and_is_shared_by_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers = [f"w{i}" for i in range(5)]
    reader = key("reader")
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="always")
    with trio.fail_after(10):
        async with trio.open_nursery() as storage:
            await storage.start(log.run)
            async with running_registry(log, passivate_after_s=10) as registry:
                r = await join_and_sync(registry, "reader", "r")
                assert commit_error(await registry.ask(reader, commit_op("reader", 0, 5, r))) == OK

                slow = SlowFsync(FSYNC_S)
                monkeypatch.setattr(os, "fsync", slow)
                fsyncs, batches = log.fsyncs, log.stats.batches
                acknowledged: dict[str, Any] = {}

                async def commit(group: str) -> None:
                    answer = await registry.ask(key(group), commit_op(group, 0, 1))
                    acknowledged[group] = commit_error(answer)

                async with trio.open_nursery() as clients:
                    clients.start_soon(commit, writers[0])
                    # until its batch is in the fsync (set by a worker thread: polled)
                    while not slow.calls:  # noqa: ASYNC110
                        await trio.sleep(0.001)
                    start = trio.current_time()
                    fetched = await registry.ask(reader, fetch_op("reader"))
                    beat = await registry.ask(reader, heartbeat_op("reader", r))
                    described = await registry.ask(reader, describe_op("reader"))
                    unsynced = await registry.ask(key(writers[0]), fetch_op(writers[0]))
                    assert slow.running, "not answered while the fsync ran"
                    assert trio.current_time() - start < FSYNC_S / 2
                    assert offsets_of(fetched) == {0: 5}
                    assert beat.error_code == OK
                    assert member_ids(described) == {"r"}
                    assert offsets_of(unsynced) == {}  # not before it is durable

                    for group in writers[1:]:  # they come while the first fsync runs ...
                        clients.start_soon(commit, group)
                    await trio.sleep(0.05)
                    assert slow.running and slow.calls == 1
                    assert acknowledged == {}  # ... and nobody is acknowledged before it ends
                monkeypatch.undo()  # the disk is fast again
                assert acknowledged == dict.fromkeys(writers, OK)
                # the first commit alone, then the four that came meanwhile: one fsync
                assert (log.fsyncs - fsyncs, log.stats.batches - batches) == (2, 2)
            storage.cancel_scope.cancel()
    reopened = DurableCoordinatorLog.open(tmp_path)
    try:
        for group in writers:
            assert await reread(reopened, group) == {0: 1}
        assert await reread(reopened, "reader") == {0: 5}
    finally:
        reopened.close()

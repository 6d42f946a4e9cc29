"""Fault: the coordinator log's disk refuses a write, seen from the clients' connections.

Guarantee: every request the group's actor held -- a commit, the leader's SyncGroup whose
records failed, and a follower's SyncGroup parked waiting for it -- is answered with its API's
retriable error (NOT_COORDINATOR, Kafka's answer when its coordinator's log write fails with
KAFKA_STORAGE_ERROR), and no connection is closed for it: each one's next request is answered.
Once the disk takes writes again, the same connections carry on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import ConnectionInfo

from ..gateway.serving import serving_groups
from ..gateway.test_group_apis import (
    HEARTBEAT,
    Client,
    commit_req,
    committed,
    join_and_sync,
    join_req,
    req,
    sync_req,
)
from .helpers import FailingLog

NOT_COORDINATOR = ErrorCode.not_coordinator


def heartbeat_req(joined: Any, generation: int) -> Any:
    return req(
        HEARTBEAT,
        4,
        group_id="g",
        generation_id=generation,
        member_id=joined.member_id,
        group_instance_id=None,
    )


async def test_every_waiter_gets_its_retriable_error_and_keeps_its_connection(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    log = FailingLog()
    async with (
        serving_groups(tmp_path, ((0, "t", 2),), log, passivate_after_s=10) as ctx,
        trio.open_nursery() as nursery,
    ):

        def connect() -> Client:
            client_end, server_end = trio.testing.memory_stream_pair()
            conn = ConnectionInfo("10.0.0.7", 4242)
            nursery.start_soon(serve_connection, server_end, ctx, API_TABLE, conn)
            return Client(client_end)

        leader, follower, committer = connect(), connect(), connect()
        a = await join_and_sync(leader)
        commit = commit_req(8, {"t": [(0, 5)]}, member=a.member_id, generation=1)
        assert committed(await committer.call(commit)) == {("t", 0): (0, -1)}

        log.failing = {"g"}  # the disk is full from now on
        commit = commit_req(8, {"t": [(0, 6)]}, member=a.member_id, generation=1)
        assert committed(await committer.call(commit)) == {("t", 0): (NOT_COORDINATOR, -1)}
        # a rebalance (nothing is stored before the leader's SyncGroup): b joins and parks,
        # a rejoins, generation 2
        await follower.send(join_req(0))
        await trio.testing.wait_all_tasks_blocked()
        rejoined = await leader.call(join_req(5, member=a.member_id))
        b = await follower.receive()
        assert rejoined.generation_id == b.generation_id == 2
        await follower.send(sync_req(3, b.member_id, 2))  # parks for the leader's assignment
        await trio.testing.wait_all_tasks_blocked()
        await leader.send(sync_req(3, a.member_id, 2))  # its records cannot be stored
        assert (await leader.receive()).error_code == NOT_COORDINATOR
        assert (await follower.receive()).error_code == NOT_COORDINATOR

        # every connection is still open and answered (generation 1 is what the log has)
        for client, member in ((leader, a), (follower, b), (committer, a)):
            answer = await client.call(heartbeat_req(member, 1))
            assert answer.error_code in (ErrorCode.none, ErrorCode.unknown_member_id)
        assert log.failures == 2

        log.failing = set()  # room again: the same connections carry on
        commit = commit_req(8, {"t": [(0, 7)]}, member=a.member_id, generation=1)
        assert committed(await committer.call(commit)) == {("t", 0): (0, -1)}
        nursery.cancel_scope.cancel()

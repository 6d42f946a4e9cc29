"""Fault: a member's connection drops while its JoinGroup is parked (through the real gateway:
Kafka frames over memory streams into `serve_connection`, a real registry behind it).

Guarantee: the other member still completes the rebalance -- at once if the dropped member's
parked JoinGroup is all the join waits for, after the dropped member's session or the
rebalance timeout at worst otherwise; nothing hangs: the broker's side of the dropped
connection ends once the answer it was waiting for finds nowhere to go; and the dropped
member's slot is cleaned up: the group ends Stable with the survivor alone, and its actor
holds no request.
"""

from __future__ import annotations

import datetime
import struct
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.protocol.messages import request_class, response_class
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.data_plane import DataPlane

from ..wire import parse_response, request_frame
from .helpers import PROTOCOLS, REBALANCE_MS, SESSION_MS, held_by_actor, running_registry

JOIN, HEARTBEAT, SYNC, DESCRIBE = 11, 12, 14, 15
INITIAL_DELAY_S = 3


@asynccontextmanager
async def serving(tmp_path: Path, in_flight: int) -> AsyncIterator[BrokerContext]:
    """The gateway's view of a broker: topic "t" and a registry with Kafka's default initial
    rebalance delay (3 s) on a MemoryCoordinatorLog; connections read `in_flight` requests
    ahead (`max.in.flight.requests.per.connection`; 1: none)."""
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("t", 2, org_id=0)
    config = GroupConfig(initial_rebalance_delay_ms=INITIAL_DELAY_S * 1000)
    try:
        async with running_registry(
            MemoryCoordinatorLog(), config, topics=data.image_of
        ) as registry:
            broker = BrokerConfig(
                data_dir=tmp_path,
                socket_request_max_bytes=1 << 20,
                max_in_flight_requests_per_connection=in_flight,
            )
            yield BrokerContext(broker, data, "127.0.0.1", 9092, API_TABLE, groups=registry)
    finally:
        data.close()


# -- a tiny client ------------------------------------------------------------------------
def request(key: int, version: int, **values: Any) -> Any:
    return make(request_class(key, version), **values)


def nested(key: int, version: int, cls_name: str, **values: Any) -> Any:
    return make(getattr(sys.modules[request_class(key, version).__module__], cls_name), **values)


class Client:
    """One connection, one request at a time (as the gateway serves them). `served` is set
    once the broker's side of the connection has ended."""

    def __init__(self, stream: trio.testing.MemoryStapledStream[Any]) -> None:
        self.stream = stream
        self.served = trio.Event()
        self._buffer = b""
        self._sent: list[Any] = []
        self.member_id = ""
        self.generation = -1

    async def send(self, body: Any) -> None:
        self._sent.append(body)
        await self.stream.send_all(request_frame(body, len(self._sent)))

    async def receive(self) -> Any:
        body = self._sent[-1]
        while (
            len(self._buffer) < 4
            or len(self._buffer) < 4 + struct.unpack_from(">i", self._buffer)[0]
        ):
            chunk = await self.stream.receive_some()
            assert chunk, "the broker closed the connection"
            self._buffer += chunk
        (length,) = struct.unpack_from(">i", self._buffer)
        frame, self._buffer = self._buffer[4 : 4 + length], self._buffer[4 + length :]
        cls = response_class(body.__api_key__, body.__version__)
        correlation_id, response = parse_response(frame, cls, 1 if body.__flexible__ else 0)
        assert correlation_id == len(self._sent)
        return response

    async def call(self, body: Any) -> Any:
        await self.send(body)
        return await self.receive()

    # -- the group protocol, as a consumer speaks it (JoinGroup v5, SyncGroup v3, ...)
    def join_request(self) -> Any:
        protocols = tuple(
            nested(JOIN, 5, "JoinGroupRequestProtocol", name=name, metadata=metadata)
            for name, metadata in PROTOCOLS
        )
        return request(
            JOIN,
            5,
            group_id="g",
            session_timeout=datetime.timedelta(milliseconds=SESSION_MS),
            rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_MS),
            member_id=self.member_id,
            protocol_type="consumer",
            protocols=protocols,
        )

    async def start_joining(self) -> None:
        """Get a member id (MEMBER_ID_REQUIRED), then send the JoinGroup that parks."""
        if not self.member_id:
            first = await self.call(self.join_request())
            assert first.error_code == ErrorCode.member_id_required
            self.member_id = first.member_id
        await self.send(self.join_request())

    async def joined(self) -> Any:
        """The answer to the JoinGroup sent by `start_joining`."""
        joined = await self.receive()
        assert joined.error_code == ErrorCode.none
        self.generation = joined.generation_id
        return joined

    async def sync(self, joined: Any) -> Any:
        """SyncGroup; a leader hands every member an assignment."""
        assignments = tuple(
            nested(SYNC, 3, "SyncGroupRequestAssignment", member_id=m.member_id, assignment=b"a")
            for m in joined.members
        )
        return await self.call(
            request(
                SYNC,
                3,
                group_id="g",
                generation_id=self.generation,
                member_id=self.member_id,
                assignments=assignments,
            )
        )

    async def rejoin(self) -> Any:
        await self.start_joining()
        joined = await self.joined()
        synced = await self.sync(joined)
        assert synced.error_code == ErrorCode.none
        return joined

    async def heartbeat(self) -> int:
        beat = await self.call(
            request(
                HEARTBEAT,
                3,
                group_id="g",
                generation_id=self.generation,
                member_id=self.member_id,
            )
        )
        return int(beat.error_code)

    async def describe(self) -> tuple[str, set[str]]:
        described = await self.call(
            request(DESCRIBE, 4, groups=("g",), include_authorized_operations=False)
        )
        (group,) = described.groups
        return group.group_state, {m.member_id for m in group.members}


async def connect(nursery: trio.Nursery, ctx: BrokerContext, port: int) -> Client:
    client_end, broker_end = trio.testing.memory_stream_pair()
    client = Client(client_end)

    async def serve() -> None:
        try:
            await serve_connection(broker_end, ctx, API_TABLE, ConnectionInfo("10.0.0.7", port))
        finally:
            client.served.set()

    nursery.start_soon(serve)
    return client


# -- the tests ------------------------------------------------------------------------------
# Each with the connection answering one request at a time, and reading 5 ahead (its reader
# then sees the drop while the JoinGroup is still parked).
IN_FLIGHT = pytest.mark.parametrize("in_flight", [1, 5], ids=["one-at-a-time", "read-ahead"])


@IN_FLIGHT
async def test_a_member_dropped_in_the_initial_delay_holds_the_other_only_until_it_expires(
    in_flight: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # (b's arrival extends the initial delay once, as Kafka's InitialDelayedJoin does)
    delay = 2 * INITIAL_DELAY_S
    with trio.fail_after(delay + REBALANCE_MS / 1000 + 10):
        async with serving(tmp_path, in_flight) as ctx, trio.open_nursery() as nursery:
            a, b = await connect(nursery, ctx, 1001), await connect(nursery, ctx, 1002)
            start = trio.current_time()
            await a.start_joining()  # the first to join: the leader-to-be
            await b.start_joining()
            await trio.sleep(1)
            await a.stream.aclose()  # a's connection drops, its JoinGroup parked

            joined = await b.joined()  # the delay ends: generation 1, led by the gone a
            assert trio.current_time() - start == pytest.approx(delay)
            assert (joined.generation_id, joined.leader) == (1, a.member_id)
            await a.served.wait()  # a's answer found nowhere to go: its side has ended
            # b waits for the assignment a never sends, until a's slot is cleaned up
            synced = await b.sync(joined)
            assert synced.error_code == ErrorCode.rebalance_in_progress
            rejoined = await b.rejoin()
            assert trio.current_time() - start <= delay + REBALANCE_MS / 1000
            assert (rejoined.generation_id, rejoined.leader) == (2, b.member_id)
            assert await b.describe() == ("Stable", {b.member_id})
            assert held_by_actor(ctx.registry(), "g") == 0
            nursery.cancel_scope.cancel()


@IN_FLIGHT
async def test_a_new_member_dropped_mid_rebalance_is_cleaned_up_and_the_other_carries_on(
    in_flight: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(INITIAL_DELAY_S + REBALANCE_MS / 1000 + 10):
        async with serving(tmp_path, in_flight) as ctx, trio.open_nursery() as nursery:
            a, b = await connect(nursery, ctx, 1001), await connect(nursery, ctx, 1002)
            await a.rejoin()  # alone, after the initial delay: Stable
            await b.start_joining()  # parks: the rebalance waits for a to rejoin
            await trio.testing.wait_all_tasks_blocked()
            assert held_by_actor(ctx.registry(), "g") == 1
            await b.stream.aclose()  # b's connection drops, its JoinGroup parked
            dropped = trio.current_time()

            assert await a.heartbeat() == ErrorCode.rebalance_in_progress
            # b's parked JoinGroup counts: a's rejoin completes the join at once
            await a.start_joining()
            joined = await a.joined()
            assert trio.current_time() == dropped
            assert {m.member_id for m in joined.members} == {a.member_id, b.member_id}
            await b.served.wait()  # b's answer found nowhere to go: its side has ended
            assert (await a.sync(joined)).error_code == ErrorCode.none
            # a heartbeats as a consumer does, until b's slot is cleaned up and it rejoins
            beat = ErrorCode.none
            while beat == ErrorCode.none:
                await trio.sleep(3)
                beat = await a.heartbeat()
            assert beat == ErrorCode.rebalance_in_progress
            rejoined = await a.rejoin()
            assert trio.current_time() - dropped <= REBALANCE_MS / 1000
            assert {m.member_id for m in rejoined.members} == {a.member_id}
            assert await a.describe() == ("Stable", {a.member_id})
            assert held_by_actor(ctx.registry(), "g") == 0
            nursery.cancel_scope.cancel()

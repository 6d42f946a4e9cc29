"""The reactor (gateway/reactor.py): a plain connection's fast requests answered by one task
on its own epoll; everything else by the connection's own task, replies in request order."""

from __future__ import annotations

import logging
import os
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from rafka_actors import telemetry
from rafka_actors.actors import durable_log
from rafka_actors.actors.coordinator_log import CoordinatorLog
from rafka_actors.actors.durable_log import DurableCoordinatorLog
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import Api, BrokerContext, ConnectionInfo
from rafka_actors.gateway.idle_poll import CROWD_WINDOW_PASSES, IdlePoller
from rafka_actors.gateway.plain_socket import PlainSocketStream
from rafka_actors.gateway.reactor import PASSES_PER_TURN, Reactor

from ..storage.test_coordinator_log_durable import failing
from ..wire import request_frame
from .serving import serving_groups
from .test_group_apis import HEARTBEAT, Client, commit_req, committed, fetch_req, req
from .test_idle_poll import Clock, Recording

METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


@asynccontextmanager
async def reactor_serving(
    tmp_path: Path,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    log: CoordinatorLog | None = None,
    passivate_after_s: float = 0.0,
) -> AsyncIterator[BrokerContext]:
    # An earlier test of the session may have set a tracer provider (for good, in OTel).
    monkeypatch.setattr(telemetry, "tracing", lambda: False)
    async with serving_groups(tmp_path, ((0, "t", 2),), log, passivate_after_s) as ctx:
        ctx.reactor = Reactor(ctx)
        nursery.start_soon(ctx.reactor.run)
        yield ctx


@pytest.fixture
async def ctx(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    passivate_after_s: float,
) -> AsyncIterator[BrokerContext]:
    async with reactor_serving(tmp_path, nursery, monkeypatch, None, passivate_after_s) as ctx:
        yield ctx


@pytest.fixture(params=["never", "always"])
async def durable_ctx(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    passivate_after_s: float,
) -> AsyncIterator[BrokerContext]:
    """`ctx` on the durable coordinator log, under each fsync policy (under `always`, on
    a disk taken to be fast: passes are held whatever this one's fsyncs take)."""
    monkeypatch.setattr(durable_log, "LOOP_FSYNC_LIMIT_S", 60.0)
    log = DurableCoordinatorLog.open(tmp_path / "coordinator", fsync_policy=request.param)
    await nursery.start(log.run)
    async with reactor_serving(tmp_path, nursery, monkeypatch, log, passivate_after_s) as ctx:
        yield ctx
    log.close()


class Parks:
    """Counts how often connections' tasks park in the reactor: once, and once more after
    each request handed back to them."""

    def __init__(self, reactor: Reactor) -> None:
        self.count = 0
        self._next_bytes = reactor.next_bytes
        reactor.next_bytes = self._counting  # type: ignore[method-assign]

    async def _counting(self, *args: Any) -> bytes:
        self.count += 1
        return await self._next_bytes(*args)


def record_fast_answers(reactor: Reactor) -> list[bytes | None]:
    """What each `_answer_now` try gave (None: handed on), by the reactor or a task."""
    answered: list[bytes | None] = []
    answer_now = reactor._answer_now

    def recording(frame: bytes, conn: ConnectionInfo, now: float) -> bytes | None:
        answered.append(reply := answer_now(frame, conn, now))
        return reply

    reactor._answer_now = recording  # type: ignore[method-assign]
    return answered


async def plain_client(ctx: BrokerContext, nursery: trio.Nursery) -> Client:
    return plain_connection(ctx, nursery)[1]


def plain_connection(
    ctx: BrokerContext, nursery: trio.Nursery, port: int = 1, conn: ConnectionInfo | None = None
) -> tuple[PlainSocketStream, Client]:
    """A connection over a socket pair, served with `ctx.idle_poll`: its stream and client.
    `conn`: its ConnectionInfo, for a test that changes it (the user) while it runs."""
    ours, theirs = trio.socket.socketpair()
    stream = PlainSocketStream(trio.SocketStream(ours), ctx.idle_poll)
    served = conn or ConnectionInfo("10.0.0.7", port)
    nursery.start_soon(serve_connection, stream, ctx, API_TABLE, served)
    return stream, Client(trio.SocketStream(theirs))  # type: ignore[arg-type]


async def memory_client(ctx: BrokerContext, nursery: trio.Nursery) -> Client:
    """A connection the reactor never sees (as TLS): the answers to compare with."""
    client_end, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(serve_connection, server_end, ctx, API_TABLE, ConnectionInfo("10.0.0.7", 2))
    return Client(client_end)


async def send_together(client: Client, requests: list[Any]) -> None:
    """Several requests in one write, as a pipelining client sends them."""
    await client.stream.send_all(b"".join([client.frame(request) for request in requests]))


async def test_commits_and_fetches_are_answered_without_waking_the_connection_task(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    parks = Parks(ctx.reactor)  # type: ignore[arg-type]
    client = await plain_client(ctx, nursery)
    for offset in range(5):
        done = await client.call(commit_req(9, {"t": [(0, offset), (1, offset + 10)]}))
        assert committed(done) == {("t", 0): (0, -1), ("t", 1): (0, -1)}
        fetched = await client.call(fetch_req(7, {"t": [0, 1]}))
        assert committed(fetched) == {("t", 0): (0, offset), ("t", 1): (0, offset + 10)}
    assert parks.count == 1  # parked once, before the first request, and never woken


async def test_with_tracing_on_the_connection_task_answers_everything(
    ctx: BrokerContext, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request tried here and handed back would leave a failed span behind."""
    monkeypatch.setattr(telemetry, "tracing", lambda: True)
    parks = Parks(ctx.reactor)  # type: ignore[arg-type]
    client = await plain_client(ctx, nursery)
    for offset in range(3):
        await client.call(commit_req(9, {"t": [(0, offset)]}))
    assert committed(await client.call(fetch_req(7, {"t": [0]}))) == {("t", 0): (0, 2)}
    await trio.testing.wait_all_tasks_blocked()  # waiting for a fifth request
    assert parks.count == 5  # asked for the bytes before every frame, and read them itself
    assert ctx.reactor is not None and ctx.reactor._parked == {}  # never watched


async def test_the_first_request_it_cannot_answer_and_the_rest_go_to_the_task_in_order(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    parks = Parks(ctx.reactor)  # type: ignore[arg-type]
    client = await plain_client(ctx, nursery)
    await send_together(
        client, [commit_req(9, {"t": [(0, 7)]}), METADATA, fetch_req(7, {"t": [0]})]
    )
    assert committed(await client.receive()) == {("t", 0): (0, -1)}  # the reactor's
    metadata = await client.receive()  # the task's, and so is the fetch after it
    assert [t.name for t in metadata.topics] == ["t"]
    assert committed(await client.receive()) == {("t", 0): (0, 7)}
    assert committed(await client.call(fetch_req(7, {"t": [0]}))) == {("t", 0): (0, 7)}
    assert parks.count == 2  # woken once, for the Metadata and what came with it


async def test_a_heartbeat_the_group_cannot_answer_inline_waits_in_the_reactor(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """A Heartbeat of a member the group does not know goes through the actor's mailbox
    (its actor has no task yet); its reply is waited for by the reactor (parked_reply.py)
    and is the one a task gets."""
    parks = Parks(ctx.reactor)  # type: ignore[arg-type]
    heartbeat = req(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m-1")
    plain, memory = await plain_client(ctx, nursery), await memory_client(ctx, nursery)
    answered = await plain.call(heartbeat)
    assert answered == await memory.call(heartbeat)
    assert answered.error_code == ErrorCode.unknown_member_id
    await trio.testing.wait_all_tasks_blocked()
    assert parks.count == 1  # the plain connection's task was never woken


async def test_a_commit_the_log_cannot_take_now_goes_to_the_task(
    ctx: BrokerContext, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under fsync `always` with a batch of the flusher's queued, a commit must wait: the
    reactor hands it to the task. The fetch after it is the reactor's again."""
    monkeypatch.setattr(ctx.registry()._log, "writable_now", lambda: False)
    parks = Parks(ctx.reactor)  # type: ignore[arg-type]
    client = await plain_client(ctx, nursery)
    assert committed(await client.call(commit_req(9, {"t": [(0, 3)]}))) == {("t", 0): (0, -1)}
    assert committed(await client.call(fetch_req(7, {"t": [0]}))) == {("t", 0): (0, 3)}
    assert parks.count == 2  # woken for the commit only


async def test_after_such_a_commit_its_task_parks_in_the_reactor_at_once(
    ctx: BrokerContext, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It does not poll its own socket first: its next commit must reach the reactor, where
    it shares a pass (and a write and fsync) with other connections' commits."""
    monkeypatch.setattr(ctx.registry()._log, "writable_now", lambda: False)
    ctx.idle_poll = IdlePoller(100e-6, now=Clock())  # a budget that never runs out
    reactor = ctx.reactor
    assert reactor is not None
    answered_fast = record_fast_answers(reactor)
    client = await plain_client(ctx, nursery)
    for offset in range(3):
        done = await client.call(commit_req(9, {"t": [(0, offset)]}))
        assert committed(done) == {("t", 0): (0, -1)}
        await trio.testing.wait_all_tasks_blocked()
        assert len(reactor._parked) == 1  # parked again, not polling its socket
    assert answered_fast == [None, None, None]  # each tried by the reactor, handed on


async def test_a_connection_whose_requests_the_reactor_cannot_answer_stays_in_its_task(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """After a request handed back (here a Metadata), the task reads for itself: parking
    again, each such request would cost the reactor a read and two epoll_ctl calls only to
    hand it back. A fast request answered as the reactor would sends it back."""
    reactor = ctx.reactor
    assert reactor is not None
    armed: list[int] = []
    arm = reactor._arm

    def counting_arms(fd: int, parked: Any) -> None:
        armed.append(fd)
        arm(fd, parked)

    reactor._arm = counting_arms  # type: ignore[method-assign]
    answered_fast = record_fast_answers(reactor)
    client = await plain_client(ctx, nursery)
    await trio.testing.wait_all_tasks_blocked()
    assert len(armed) == 1  # parked before the first request
    for _ in range(3):
        metadata = await client.call(METADATA)
        assert [t.name for t in metadata.topics] == ["t"]
        await trio.testing.wait_all_tasks_blocked()
        assert reactor._parked == {}  # its task waits for the next request itself
    assert len(armed) == 1  # the reactor handed back the first Metadata and saw no other
    assert answered_fast == [None, None, None]  # each tried (no wait, no syscall) by the task
    assert committed(await client.call(fetch_req(7, {"t": [0]}))) == {("t", 0): (0, -1)}
    assert answered_fast[3]  # answered by the task as the reactor would...
    await trio.testing.wait_all_tasks_blocked()
    assert len(armed) == 2 and len(reactor._parked) == 1  # ...which it is left to again


async def test_a_frame_in_pieces_is_read_by_the_task(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    client = await plain_client(ctx, nursery)
    frame = request_frame(commit_req(9, {"t": [(1, 4)]}), 1)
    client.correlation, client.sent = 1, [commit_req(9, {"t": [(1, 4)]})]
    await client.stream.send_all(frame[:9])
    await trio.testing.wait_all_tasks_blocked()
    await client.stream.send_all(frame[9:])
    assert committed(await client.receive()) == {("t", 1): (0, -1)}
    assert committed(await client.call(fetch_req(7, {"t": [1]}))) == {("t", 1): (0, 4)}


async def test_a_peer_that_hangs_up_is_forgotten(ctx: BrokerContext, nursery: trio.Nursery) -> None:
    reactor = ctx.reactor
    assert reactor is not None
    client = await plain_client(ctx, nursery)
    await client.call(fetch_req(7, {"t": [0]}))
    assert len(reactor._parked) == 1
    await client.stream.aclose()
    await trio.testing.wait_all_tasks_blocked()
    assert reactor._parked == {}


async def test_an_idle_connection_parked_in_the_reactor_is_still_closed(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    client = await plain_client(ctx, nursery)
    await client.call(fetch_req(7, {"t": [0]}))
    start = trio.current_time()
    assert await client.stream.receive_some() == b""  # closed by connections.max.idle.ms
    assert trio.current_time() - start == pytest.approx(ctx.config.connections_max_idle_ms / 1000)
    await trio.testing.wait_all_tasks_blocked()
    assert ctx.reactor is not None and ctx.reactor._parked == {}


async def test_a_fast_request_that_waits_after_all_closes_its_connection(
    ctx: BrokerContext, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler in FAST_APIS must not wait: if one did, whatever it had started could run
    twice were the task to try the request again, so the connection ends instead."""

    async def waiting(*_args: Any) -> Any:
        await trio.lowlevel.checkpoint()

    ctx.apis = {**API_TABLE, 18: Api(18, "ApiVersions", 0, 4, waiting)}
    client = await plain_client(ctx, nursery)
    await send_together(client, [req(18, 3, client_software_name="t", client_software_version="1")])
    with caplog.at_level(logging.ERROR):
        assert await client.stream.receive_some() == b""
    assert "waited" in caplog.text


async def test_fast_replies_poll_in_the_reactor_and_a_tasks_reply_on_its_own_socket(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """Whoever sent the latest reply polls for the peer's next request: a task that parked
    in a sleeping reactor right after its reply would wait for a sleeping core to wake."""
    ctx.idle_poll = poller = Recording(100e-6)
    stream, client = plain_connection(ctx, nursery, 3)
    await client.call(fetch_req(7, {"t": [0]}))
    await client.call(METADATA)
    await trio.testing.wait_all_tasks_blocked()
    assert poller.replies == [ctx.reactor, stream]


async def test_a_task_that_replied_polls_its_socket_then_parks_in_the_reactor(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    clock = Clock()
    ctx.idle_poll = poller = IdlePoller(100e-6, now=clock)
    reactor = ctx.reactor
    assert reactor is not None
    stream, client = plain_connection(ctx, nursery, 4)
    answered_fast = record_fast_answers(reactor)
    await client.call(METADATA)  # answered by the task, which then polls its socket
    for _ in range(20):
        await trio.lowlevel.checkpoint()
    assert poller.polls_for(stream) and reactor._parked == {}
    fetched = await client.call(fetch_req(7, {"t": [0]}))  # caught by the polling task...
    assert committed(fetched) == {("t", 0): (0, -1)}
    assert len(answered_fast) == 2 and answered_fast[1]  # ...and answered as fast
    assert answered_fast[0] is None  # (the Metadata was tried and handed on)
    assert poller.polls_for(stream) and reactor._parked == {}
    clock.now = 1.0  # the budget is over
    await trio.testing.wait_all_tasks_blocked()
    assert list(reactor._parked) == [stream.fileno()]
    await client.call(fetch_req(7, {"t": [0]}))  # the reactor's
    assert poller.polls_for(reactor) and len(answered_fast) == 3
    clock.now = 2.0


async def test_the_reactor_and_a_polling_socket_give_the_core_away_at_every_turn(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """Whichever polls, it offers the core to other threads before each pass (idle_poll.py)."""
    clock = Clock()
    turns: list[None] = []
    ctx.idle_poll = poller = IdlePoller(100e-6, now=clock, give_way=lambda: turns.append(None))
    reactor = ctx.reactor
    assert reactor is not None
    stream, client = plain_connection(ctx, nursery, 5)
    await client.call(METADATA)  # answered by the task, which then polls its socket
    before = len(turns)
    for _ in range(20):
        await trio.lowlevel.checkpoint()
    assert poller.polls_for(stream) and len(turns) - before >= 19
    await client.call(fetch_req(7, {"t": [0]}))  # caught by the polling task

    clock.now = 1.0  # the budget is over: the task parks in the reactor
    await trio.testing.wait_all_tasks_blocked()
    assert list(reactor._parked) == [stream.fileno()]
    await client.call(fetch_req(7, {"t": [0]}))  # answered by the reactor, which polls
    before = len(turns)
    for _ in range(20):
        await trio.lowlevel.checkpoint()
    assert poller.polls_for(reactor) and len(turns) - before >= 19

    clock.now = 2.0
    await trio.testing.wait_all_tasks_blocked()
    before = len(turns)
    for _ in range(20):
        await trio.lowlevel.checkpoint()
    assert len(turns) == before  # nobody polls: nobody gives way


async def test_the_reactor_counts_its_peers_and_two_on_two_cores_stop_the_polling(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """Each pass tells the poller which sockets it answered (IdlePoller.passed)."""
    ctx.idle_poll = poller = IdlePoller(100e-6, now=Clock(), give_way=lambda: None, cores=2)
    reactor = ctx.reactor
    assert reactor is not None
    one, two = await plain_client(ctx, nursery), await plain_client(ctx, nursery)
    for _ in range(CROWD_WINDOW_PASSES):
        await one.call(fetch_req(7, {"t": [0]}))
        await two.call(fetch_req(7, {"t": [0]}))
    assert len(reactor._parked) == 2 and poller.crowded
    assert not poller.polls_for(reactor)  # its latest reply started no budget
    for _ in range(CROWD_WINDOW_PASSES * 2):  # one of them gone quiet: polling again
        await one.call(fetch_req(7, {"t": [0]}))
    assert not poller.crowded and poller.polls_for(reactor)


class CountingEpoll:
    """The reactor's epoll, counting its polls."""

    def __init__(self, epoll: Any) -> None:
        self._epoll = epoll
        self.polls = 0

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        self.polls += 1
        return self._epoll.poll(timeout)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._epoll, name)


def reactor_on(
    ctx: BrokerContext, nursery: trio.Nursery, epoll_type: type[CountingEpoll]
) -> tuple[Reactor, CountingEpoll]:
    """A reactor in place of the fixture's, polling through `epoll_type` (started, not yet
    run: what the caller sets on it before its next checkpoint holds from the first pass)."""
    ctx.reactor = reactor = Reactor(ctx)
    reactor._epoll = epoll = epoll_type(reactor._epoll)  # type: ignore[assignment]
    nursery.start_soon(reactor.run)
    return reactor, epoll


async def test_a_peer_hanging_up_while_its_task_has_the_socket_does_not_spin_the_reactor(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """A hang-up is reported even for an fd that asks for no events: a socket its task has
    (here, a Metadata that takes its time) is not in the reactor's epoll at all."""
    release = trio.Event()

    async def slow_metadata(*_args: Any) -> Any:
        await release.wait()

    ctx.apis = {**API_TABLE, 3: Api(3, "Metadata", 0, 13, slow_metadata)}
    reactor, epoll = reactor_on(ctx, nursery, CountingEpoll)
    client = await plain_client(ctx, nursery)
    await send_together(client, [METADATA])
    await trio.testing.wait_all_tasks_blocked()  # the task is inside slow_metadata
    await client.stream.aclose()
    before = epoll.polls
    for _ in range(50):
        await trio.lowlevel.checkpoint()
    assert epoll.polls - before <= 2  # asleep on its epoll, not polling it every pass
    release.set()
    await trio.testing.wait_all_tasks_blocked()
    assert reactor._parked == {}


async def test_a_pass_that_leaves_nothing_waiting_is_followed_by_sleep_not_a_turn(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """Waiting on its epoll lets the other tasks run anyway: a turn of trio's scheduler
    first (2.5 us of Python) and one more empty poll would only delay the sleep."""
    ctx.idle_poll = None
    reactor, epoll = reactor_on(ctx, nursery, CountingEpoll)
    client = await plain_client(ctx, nursery)
    await client.call(fetch_req(7, {"t": [0]}))
    await trio.testing.wait_all_tasks_blocked()
    assert len(reactor._parked) == 1
    for _ in range(3):
        before = epoll.polls
        await client.call(fetch_req(7, {"t": [0]}))
        await trio.testing.wait_all_tasks_blocked()
        assert epoll.polls - before == 2  # the pass's, and the one that found nothing more


class EndlessEpoll(CountingEpoll):
    """An epoll with a request always waiting: a reactor under endless load."""

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        self.polls += 1
        return [(-1, select.EPOLLIN)]


async def test_under_endless_requests_the_reactor_answers_a_few_passes_a_turn(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    """Passes run back to back while requests keep coming (a turn of trio's scheduler costs
    more than a small pass), but other tasks get a turn every PASSES_PER_TURN passes."""
    reactor, _ = reactor_on(ctx, nursery, EndlessEpoll)
    passes: list[list[tuple[int, int]]] = []
    reactor._answer_events = passes.append  # type: ignore[method-assign]
    seen = []
    for _ in range(3):
        await trio.lowlevel.checkpoint()  # this task's turns come: the reactor yields
        seen.append(len(passes))
    assert all(n % PASSES_PER_TURN == 0 for n in seen)  # whole turns of passes
    assert 0 < seen[-1] <= 3 * PASSES_PER_TURN


def log_policy(ctx: BrokerContext) -> str:
    log = ctx.registry()._log
    assert isinstance(log, DurableCoordinatorLog)
    return log._policy.value


def send_now(client: Client, request: Any) -> None:
    """Write a request without a checkpoint: requests sent so on several connections reach the
    reactor in one pass of its epoll."""
    frame = client.frame(request)
    assert os.write(client.stream.socket.fileno(), frame) == len(frame)


async def committing_clients(ctx: BrokerContext, nursery: trio.Nursery, n: int) -> list[Client]:
    """`n` connections parked in the reactor, each having committed offset 1 to its group."""
    clients = [await plain_client(ctx, nursery) for _ in range(n)]
    for i, client in enumerate(clients):
        done = await client.call(commit_req(9, {"t": [(0, 1)]}, group=f"g{i}"))
        assert committed(done) == {("t", 0): (0, -1)}
    await trio.testing.wait_all_tasks_blocked()
    assert ctx.reactor is not None and len(ctx.reactor._parked) == n
    return clients


async def test_commits_answered_in_one_pass_share_one_write_that_precedes_their_replies(
    durable_ctx: BrokerContext, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    reactor = durable_ctx.reactor
    assert reactor is not None
    clients = await committing_clients(durable_ctx, nursery, 3)
    server_fds = set(reactor._parked)
    happened: list[str] = []
    real_pwrite, real_write, real_fsync = os.pwrite, os.write, os.fsync

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        happened.append("log write")
        return real_pwrite(fd, data, offset)

    def fsync(fd: int) -> None:
        happened.append("fsync")
        real_fsync(fd)

    def write(fd: int, data: bytes) -> int:
        if fd in server_fds:
            happened.append("reply")
        return real_write(fd, data)

    for i, client in enumerate(clients):
        send_now(client, commit_req(9, {"t": [(0, 10 + i)]}, group=f"g{i}"))
    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    for client in clients:
        assert committed(await client.receive()) == {("t", 0): (0, -1)}
    stored = ["log write", "fsync"] if log_policy(durable_ctx) == "always" else ["log write"]
    assert happened == [*stored, "reply", "reply", "reply"]
    for i, client in enumerate(clients):
        fetched = await client.call(fetch_req(7, {"t": [0]}, group=f"g{i}"))
        assert committed(fetched) == {("t", 0): (0, 10 + i)}


async def test_a_pass_whose_write_failed_withdraws_its_replies_and_closes_their_connections(
    durable_ctx: BrokerContext,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clients = await committing_clients(durable_ctx, nursery, 3)
    for i, client in enumerate(clients):
        send_now(client, commit_req(9, {"t": [(0, 10 + i)]}, group=f"g{i}"))
    monkeypatch.setattr(os, "pwrite", failing(28, once=True))
    with caplog.at_level(logging.ERROR):
        for client in clients:
            assert await client.stream.receive_some() == b""  # closed, no reply
    assert "not stored" in caplog.text
    other = await plain_client(durable_ctx, nursery)
    for i in range(3):  # nothing of the failed pass is stored or shown
        fetched = await other.call(fetch_req(7, {"t": [0]}, group=f"g{i}"))
        assert committed(fetched) == {("t", 0): (0, 1)}
    done = await other.call(commit_req(9, {"t": [(0, 20)]}, group="g0"))  # the log goes on
    assert committed(done) == {("t", 0): (0, -1)}
    assert committed(await other.call(fetch_req(7, {"t": [0]}, group="g0"))) == {("t", 0): (0, 20)}


async def test_replies_given_before_a_passs_first_commit_go_out_at_once(
    durable_ctx: BrokerContext, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only replies from the pass's first commit on wait for its write; a connection's later
    replies wait too, behind its earlier ones."""
    clients = await committing_clients(durable_ctx, nursery, 2)
    send_now(clients[0], fetch_req(7, {"t": [0]}, group="g0"))
    send_now(clients[1], commit_req(9, {"t": [(0, 5)]}, group="g1"))
    send_now(clients[1], fetch_req(7, {"t": [0]}, group="g1"))
    monkeypatch.setattr(os, "pwrite", failing(28, once=True))
    assert committed(await clients[0].receive()) == {("t", 0): (0, 1)}  # sent before
    assert await clients[1].stream.receive_some() == b""  # both withdrawn


async def test_after_a_commit_a_reply_about_another_group_goes_out_at_once(
    durable_ctx: BrokerContext, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a pass after a commit, only replies about a group with records held wait for the
    pass's write: a fetch of another group goes out at once, one of the committed group
    waits (and is withdrawn with the commit's reply when the write fails)."""
    clients = await committing_clients(durable_ctx, nursery, 3)
    send_now(clients[0], commit_req(9, {"t": [(0, 5)]}, group="g0"))
    send_now(clients[1], fetch_req(7, {"t": [0]}, group="g1"))
    send_now(clients[2], fetch_req(7, {"t": [0]}, group="g0"))
    monkeypatch.setattr(os, "pwrite", failing(28, once=True))
    assert committed(await clients[1].receive()) == {("t", 0): (0, 1)}  # sent before
    assert await clients[0].stream.receive_some() == b""  # the commit's reply withdrawn
    assert await clients[2].stream.receive_some() == b""  # it had read the held offset 5

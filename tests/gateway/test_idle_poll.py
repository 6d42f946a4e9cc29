"""After each reply the broker keeps trio's loop polling for `idle.poll.time.us`, then sleeps
until the next reply (gateway/idle_poll.py). Time here is a fake clock the test moves."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from rafka_actors.config import load_config
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.idle_poll import CROWD_WINDOW_PASSES, IdlePoller, usable_cores
from rafka_actors.gateway.plain_socket import PlainSocketStream
from rafka_actors.gateway.server import _idle_poller

from ..wire import request_frame
from .test_connection import API_VERSIONS, Client, ctx  # noqa: F401 (the ctx fixture)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0  # how often the poller looked: once per pass while it polls

    def __call__(self) -> float:
        self.reads += 1
        return self.now


async def passes(n: int) -> None:
    for _ in range(n):
        await trio.lowlevel.checkpoint()


async def test_the_poller_stays_runnable_for_its_budget_after_a_reply_and_then_sleeps() -> None:
    clock = Clock()
    poller = IdlePoller(100e-6, now=clock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller.run)
        await passes(3)
        asleep = clock.reads
        await passes(10)
        assert clock.reads == asleep  # no reply yet: it sleeps, not polls

        poller.replied()
        await passes(10)
        assert clock.reads >= asleep + 9  # runnable at every pass: the loop polls, never sleeps

        clock.now = 100e-6  # the budget has run out
        await passes(3)
        spent = clock.reads
        await passes(10)
        assert clock.reads == spent

        clock.now = 1.0
        poller.replied()  # the next reply wakes it for another budget
        await passes(5)
        assert clock.reads > spent + 3
        nursery.cancel_scope.cancel()  # cancellable while polling


async def test_every_turn_of_polling_first_offers_the_core_to_another_thread() -> None:
    """A client the kernel put on the broker's core must not wait out the budget."""
    clock = Clock()
    gave_way: list[float] = []
    poller = IdlePoller(100e-6, now=clock, give_way=lambda: gave_way.append(clock.now))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller.run)
        await passes(10)
        assert gave_way == []  # asleep: no turns

        poller.replied()
        await passes(10)
        assert len(gave_way) >= 9  # once a pass while it polls

        clock.now = 100e-6  # the budget has run out
        await passes(3)
        spent = len(gave_way)
        await passes(10)
        assert len(gave_way) == spent
        nursery.cancel_scope.cancel()


def events(*fds: int) -> list[tuple[int, int]]:
    return [(fd, 1) for fd in fds]


async def test_with_as_many_peers_as_cores_in_a_window_replies_start_no_budget() -> None:
    """Polling would take a core the clients need: the poller sits out while a window of
    the reactor's passes answered as many sockets as there are cores."""
    clock = Clock()
    poller = IdlePoller(100e-6, now=clock, give_way=lambda: None, cores=2)
    for _ in range(CROWD_WINDOW_PASSES - 1):
        poller.passed(events(7, 8))
    poller.replied()
    assert not poller.crowded and poller.polls_for(None)  # the window is not over yet

    poller.passed(events(7))  # the window's last pass: two peers in it
    assert poller.crowded
    poller.replied()
    assert not poller.polls_for(None)
    poller.replied(by=poller)
    assert not poller.polls_for(poller)  # nor does a stream poll for itself
    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller.run)
        await passes(3)
        asleep = clock.reads
        await passes(10)
        assert clock.reads == asleep  # the task sleeps through replies
        poller.replied()
        await passes(10)
        assert clock.reads <= asleep + 2
        nursery.cancel_scope.cancel()

    for _ in range(CROWD_WINDOW_PASSES):  # a window with one peer: polling again
        poller.passed(events(7))
    assert not poller.crowded
    poller.replied()
    assert poller.polls_for(None)


def test_one_peer_per_core_but_one_keeps_polling_on() -> None:
    poller = IdlePoller(100e-6, cores=4)
    for i in range(CROWD_WINDOW_PASSES):
        poller.passed(events(10 + i % 3))  # three peers, four cores
    assert not poller.crowded
    assert IdlePoller(1e-4)._cores == usable_cores() == len(os.sched_getaffinity(0))


async def test_a_stream_polling_for_itself_has_the_budget_and_the_task_sleeps() -> None:
    clock = Clock()
    poller = IdlePoller(100e-6, now=clock)
    stream, other = object(), object()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller.run)
        await passes(3)
        poller.replied(by=stream)
        await passes(3)
        asleep = clock.reads
        await passes(10)
        assert clock.reads == asleep  # the stream polls: the task does not
        assert poller.polls_for(stream)
        assert not poller.polls_for(other)

        poller.replied(by=other)  # a later reply on another stream takes it over
        assert not poller.polls_for(stream)
        assert poller.polls_for(other)

        clock.now = 100e-6
        assert not poller.polls_for(other)  # its budget has run out

        poller.replied()  # a stream that cannot poll (TLS): the task polls again
        assert not poller.polls_for(other)
        await passes(5)
        assert clock.reads > asleep + 3
        nursery.cancel_scope.cancel()


class Recording(IdlePoller):
    """Keeps the `by` of every reply it hears of."""

    def __init__(self, budget_s: float) -> None:
        super().__init__(budget_s)
        self.replies: list[object | None] = []

    def replied(self, by: object | None = None) -> None:
        self.replies.append(by)
        super().replied(by)


async def answer_api_versions(
    ctx: BrokerContext,  # noqa: F811
    server_end: trio.abc.Stream,
    client_end: trio.abc.Stream,
    times: int,
) -> None:
    """Serve `server_end` and have the client on `client_end` ask ApiVersions `times` times."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_connection, server_end, ctx, ctx.apis, ConnectionInfo("t", 1))
        client = Client(client_end)
        for i in range(times):
            await client.send(request_frame(API_VERSIONS, correlation_id=i))
            assert await client.read_frame() is not None
        # The client may read the last reply before the server, past its send, tells the
        # poller: let the server finish that and park on its next read first.
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()


async def test_every_reply_a_connection_sends_restarts_the_budget(ctx: BrokerContext) -> None:  # noqa: F811
    ctx.idle_poll = poller = Recording(100e-6)
    client_end, server_end = trio.testing.memory_stream_pair()
    await answer_api_versions(ctx, server_end, client_end, 3)
    assert poller.replies == [None, None, None]  # a memory stream cannot poll for itself


async def test_a_plain_socket_connection_polls_for_itself_after_its_replies(
    ctx: BrokerContext,  # noqa: F811
) -> None:
    ctx.idle_poll = poller = Recording(100e-6)
    ours, theirs = trio.socket.socketpair()
    stream = PlainSocketStream(trio.SocketStream(ours), poller)
    await answer_api_versions(ctx, stream, trio.SocketStream(theirs), 2)
    assert poller.replies == [stream, stream]


@pytest.mark.parametrize(("value", "on"), [("100", True), ("0", False)])
async def test_the_setting_starts_a_poller_or_none(value: str, on: bool) -> None:
    config = load_config(environ={}, overrides={"idle.poll.time.us": value})
    async with trio.open_nursery() as nursery:
        poller = _idle_poller(config, nursery)
        assert (poller is not None) == on
        if poller is not None:
            assert poller.budget_s == pytest.approx(100e-6)
            assert poller._give_way is os.sched_yield
        nursery.cancel_scope.cancel()

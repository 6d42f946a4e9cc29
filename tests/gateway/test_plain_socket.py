"""PlainSocketStream keeps what trio's SocketStream promises: data, checkpoints, errors."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from rafka_actors.gateway import plain_socket
from rafka_actors.gateway.idle_poll import IdlePoller
from rafka_actors.gateway.plain_socket import PlainSocketStream


@pytest.fixture
def pair() -> Iterator[tuple[PlainSocketStream, socket.socket]]:
    """(our stream, the peer's blocking socket) over loopback TCP."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        peer = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    stream = PlainSocketStream(trio.SocketStream(trio.socket.from_stdlib_socket(ours)))
    try:
        yield stream, peer
    finally:
        peer.close()
        ours.close()


async def test_reads_what_the_peer_sent_and_b_empty_at_its_end(pair):
    stream, peer = pair
    peer.sendall(b"hello")
    assert await stream.receive_some(100) == b"hello"
    peer.shutdown(socket.SHUT_WR)
    assert await stream.receive_some() == b""


async def test_a_read_waits_for_the_peer(pair):
    stream, peer = pair
    async with trio.open_nursery() as nursery:
        got = []

        async def read() -> None:
            got.append(await stream.receive_some(100))

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        peer.sendall(b"late")
    assert got == [b"late"]


async def test_a_write_bigger_than_the_socket_buffers_waits_for_room(pair):
    stream, peer = pair
    data = bytes(range(256)) * 40_000  # 10 MB: several rounds of a full buffer
    received = bytearray()

    def drain() -> None:
        while len(received) < len(data):
            received.extend(peer.recv(1 << 16))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, drain)
        await stream.send_all(memoryview(data))
    assert received == data


async def test_every_call_is_a_checkpoint(pair):
    stream, peer = pair
    peer.sendall(b"waiting")
    with trio.testing.assert_checkpoints():
        assert await stream.receive_some(100) == b"waiting"
    with trio.testing.assert_checkpoints():
        await stream.send_all(b"reply")
    assert peer.recv(100) == b"reply"


async def test_a_cancelled_task_reads_nothing(pair):
    stream, peer = pair
    peer.sendall(b"kept")
    with trio.CancelScope() as scope:
        scope.cancel()
        await stream.receive_some(100)
    assert scope.cancelled_caught
    assert await stream.receive_some(100) == b"kept"


async def test_a_closed_stream_raises_closed_resource(pair):
    stream, _ = pair
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await stream.receive_some(100)
    with pytest.raises(trio.ClosedResourceError):
        await stream.send_all(b"x")


async def test_closing_wakes_a_waiting_reader_with_closed_resource(pair):
    stream, _ = pair
    async with trio.open_nursery() as nursery:
        raised = []

        async def read() -> None:
            with pytest.raises(trio.ClosedResourceError):
                await stream.receive_some(100)
            raised.append(True)

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        await stream.aclose()
    assert raised == [True]


async def test_a_reset_connection_raises_broken_resource(pair):
    stream, peer = pair
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()  # RST
    with pytest.raises(trio.BrokenResourceError):
        for _ in range(100):  # the first writes may still be taken before the RST is seen
            await stream.send_all(b"x" * 1000)
            await trio.sleep(0.001)


async def test_max_bytes_below_one_is_refused(pair):
    stream, _ = pair
    with pytest.raises(ValueError):
        await stream.receive_some(0)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptors the stream parked on in trio's wait_readable, in order."""
    parked: list[int] = []

    async def counted_wait(fd: int) -> None:
        parked.append(fd)
        await trio.lowlevel.wait_readable(fd)

    monkeypatch.setattr(plain_socket, "wait_readable", counted_wait)
    return parked


async def test_after_its_reply_a_read_polls_the_socket_until_the_budget_ends(pair, waits):
    stream, peer = pair
    clock = Clock()
    stream.poller = IdlePoller(1.0, now=clock)
    stream.poller.replied(by=stream)

    async def read(got: list[bytes]) -> None:
        got.append(await stream.receive_some(100))

    async def peer_sends_after(passes: int, data: bytes) -> None:
        for _ in range(passes):
            await trio.lowlevel.checkpoint()
        peer.sendall(data)

    got: list[bytes] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read, got)
        nursery.start_soon(peer_sends_after, 20, b"next")
    assert got == [b"next"]
    assert waits == []  # polled at every pass; never parked in epoll

    clock.now = 1.0  # the budget is spent: the next read waits in epoll
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read, got)
        await trio.testing.wait_all_tasks_blocked()
        peer.sendall(b"late")
    assert got == [b"next", b"late"]
    assert len(waits) == 1


async def test_a_later_reply_on_another_stream_takes_the_polling_over(pair, waits):
    stream, peer = pair
    stream.poller = IdlePoller(1000.0)
    stream.poller.replied(by=stream)
    stream.poller.replied(by=object())  # another connection replied since
    got = []
    async with trio.open_nursery() as nursery:

        async def read() -> None:
            got.append(await stream.receive_some(100))

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()  # only a parked reader lets this return
        peer.sendall(b"data")
    assert got == [b"data"]
    assert len(waits) == 1


async def test_a_polling_read_can_be_cancelled(pair):
    stream, _ = pair
    stream.poller = IdlePoller(1000.0)
    stream.poller.replied(by=stream)
    with trio.move_on_after(0.05) as scope:
        await stream.receive_some(100)
    assert scope.cancelled_caught

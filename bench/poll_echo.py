"""Idle polling by a task, or by the connection itself: a trio echo server timed both ways.

The broker keeps polling for `idle.poll.time.us` after each reply (gateway/idle_poll.py). This
measures the two ways of doing it with nothing else in the way: a trio echo server over
`PlainSocketStream` whose connection parks in `wait_readable` while the `IdlePoller` task keeps
the loop running ("task"), one whose connection retries its own read at every pass of the
scheduler ("self", what the broker does), and one without polling ("none"). A blocking client
sends a 60-byte frame and waits for it back, as a synchronous Kafka client does; the figure is
round trips per second, the best of the rounds, and the server's CPU per round trip. Modes
alternate, so a drift of the machine shows in the spread.

With `--clients N`, N blocking clients (processes) echo at once and the rate is their sum: the
floor of what a trio server spends per request when it, not one client's round trip, is the
limit. Mode "reactor" is the same server without a task per connection: one task waits for
its own level-triggered epoll and serves every ready socket in turn (what a gateway redesigned
around one event loop of its own, not trio's tasks, could save per request).

    .venv/bin/python bench/poll_echo.py [--modes task,self,none,reactor] [--rounds 2]
        [--seconds 1.5] [--clients 1]
"""

from __future__ import annotations

import argparse
import os
import select
import shlex
import socket
import subprocess
import sys
import time
from typing import Any

import trio

from rafka_actors.gateway.idle_poll import IdlePoller
from rafka_actors.gateway.plain_socket import PlainSocketStream

sys.path.insert(0, os.path.dirname(__file__))
from request_cost import together  # the same clients-at-once harness

BUDGET_S = 100e-6  # the broker's default idle.poll.time.us
FRAME = b"x" * 60


async def serve(mode: str, listener: socket.socket) -> None:
    if mode == "reactor":
        await serve_from_one_task(listener)
        return
    poller = IdlePoller(BUDGET_S)

    async def echo(stream: trio.SocketStream) -> None:
        plain = PlainSocketStream(stream, poller if mode == "self" else None)
        while data := await plain.receive_some():
            await plain.send_all(data)
            if mode != "none":
                poller.replied(by=plain if mode == "self" else None)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller.run)
        sock = trio.socket.from_stdlib_socket(listener)
        await trio.serve_listeners(echo, [trio.SocketListener(sock)])


async def serve_from_one_task(listener: socket.socket) -> None:
    """Every connection served by this one task from its own level-triggered epoll, polled
    for BUDGET_S after each pass that found work (as the broker polls after a reply)."""
    ready = select.epoll()
    listener.setblocking(False)
    ready.register(listener.fileno(), select.EPOLLIN)
    clients: dict[int, socket.socket] = {}
    poll_until = 0.0
    while True:
        events = ready.poll(0)
        if not events:
            if time.perf_counter() < poll_until:
                await trio.lowlevel.checkpoint()
            else:
                await trio.lowlevel.wait_readable(ready.fileno())
            continue
        for fd, _ in events:
            if fd == listener.fileno():
                client, _ = listener.accept()
                client.setblocking(False)
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as trio's
                clients[client.fileno()] = client
                ready.register(client.fileno(), select.EPOLLIN)
                continue
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if data:
                os.write(fd, data)  # 60 bytes into an empty socket buffer: never short
            else:
                ready.unregister(fd)
                clients.pop(fd).close()
        poll_until = time.perf_counter() + BUDGET_S
        await trio.lowlevel.checkpoint()


def round_trips(port: int, seconds: float, start: Any, rates: Any) -> None:
    """One blocking client: warm up, wait for `start`, echo for `seconds` and put its round
    trips/s in `rates`."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(500):  # warm up
            sock.sendall(FRAME)
            sock.recv(len(FRAME), socket.MSG_WAITALL)
        start.wait()
        count, began = 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            sock.sendall(FRAME)
            sock.recv(len(FRAME), socket.MSG_WAITALL)
            count += 1
        rates.put(count / (time.perf_counter() - began))


def measure(mode: str, seconds: float, clients: int) -> tuple[float, float]:
    """(round trips/s of all clients together, server CPU microseconds per round trip)."""
    with socket.create_server(("127.0.0.1", 0), backlog=max(clients, 5)) as listener:
        port = listener.getsockname()[1]
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", mode, "--fd", str(listener.fileno())],
            pass_fds=[listener.fileno()],
        )
    try:
        rates, _, cpu = together(round_trips, [(port, seconds)] * clients, server.pid)
    finally:
        server.kill()
        server.wait()
    rate = sum(rates)
    return rate, cpu / (rate * seconds) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default="task,self,none,reactor")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--clients", type=int, default=1, help="echoing at once")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        listener = socket.socket(fileno=args.fd)
        trio.run(serve, args.serve, listener)
        return 0
    print(f"# {shlex.join(['bench/poll_echo.py', *sys.argv[1:]])}  ({os.cpu_count()} cores)")
    modes = args.modes.split(",")
    runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    for _ in range(args.rounds):
        for mode in modes:
            runs[mode].append(measure(mode, args.seconds, args.clients))
    for mode, got in runs.items():
        best = max(rate for rate, _ in got)
        print(
            f"{mode:>7}: best {best:,.0f} round trips/s ({1e6 / best:.1f} us), "
            f"all {', '.join(f'{rate:,.0f}' for rate, _ in got)}; server CPU per round trip "
            f"{min(cpu for _, cpu in got):.1f} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

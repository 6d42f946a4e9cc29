"""Idle polling by a task, or by the connection itself: a trio echo server timed both ways.

The broker keeps polling for `idle.poll.time.us` after each reply (gateway/idle_poll.py). This
measures the two ways of doing it with nothing else in the way: a trio echo server over
`PlainSocketStream` whose connection parks in `wait_readable` while the `IdlePoller` task keeps
the loop running ("task"), one whose connection retries its own read at every pass of the
scheduler ("self", what the broker does), and one without polling ("none"). A blocking client
sends a 60-byte frame and waits for it back, as a synchronous Kafka client does; the figure is
round trips per second, the best of the rounds. Modes alternate, so a drift of the machine
shows in the spread.

    .venv/bin/python bench/poll_echo.py [--modes task,self,none] [--rounds 2] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import sys
import time

import trio

from rafka_actors.gateway.idle_poll import IdlePoller
from rafka_actors.gateway.plain_socket import PlainSocketStream

BUDGET_S = 100e-6  # the broker's default idle.poll.time.us
FRAME = b"x" * 60


async def serve(mode: str, listener: socket.socket) -> None:
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


def round_trips(port: int, seconds: float) -> float:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(500):  # warm up
            sock.sendall(FRAME)
            sock.recv(len(FRAME), socket.MSG_WAITALL)
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            sock.sendall(FRAME)
            sock.recv(len(FRAME), socket.MSG_WAITALL)
            count += 1
        return count / (time.perf_counter() - start)


def measure(mode: str, seconds: float) -> float:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", mode, "--fd", str(listener.fileno())],
            pass_fds=[listener.fileno()],
        )
    try:
        return round_trips(port, seconds)
    finally:
        server.kill()
        server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default="task,self,none")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        listener = socket.socket(fileno=args.fd)
        trio.run(serve, args.serve, listener)
        return 0
    print(f"# {shlex.join(['bench/poll_echo.py', *sys.argv[1:]])}  ({os.cpu_count()} cores)")
    modes = args.modes.split(",")
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(args.rounds):
        for mode in modes:
            rates[mode].append(measure(mode, args.seconds))
    for mode, got in rates.items():
        print(
            f"{mode:>4}: best {max(got):,.0f} round trips/s "
            f"({1e6 / max(got):.1f} us), all {', '.join(f'{r:,.0f}' for r in got)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What one read and one write of a small request cost through the gateway's stream.

trio's `SocketStream` against `PlainSocketStream` (gateway/plain_socket.py) over a loopback
TCP connection, in one process and one task, so that no wake-up or second core moves the
figure: a peer socket sends a 60-byte "request" that the stream reads (`receive_some` finds it
waiting), the stream writes a 60-byte "reply" (`send_all`), and the peer drains the replies
now and then. The two classes alternate round by round; both make the same system calls and
the same checkpoints, so the difference is the Python around them.

    .venv/bin/python bench/stream_cost.py [--rounds 5] [--exchanges 50000]
"""

from __future__ import annotations

import argparse
import shlex
import socket
import statistics
import sys
import time
from collections.abc import Callable

import trio

from rafka_actors.gateway.plain_socket import PlainSocketStream

MESSAGE = b"x" * 60


def _drain(peer: socket.socket) -> None:
    while True:
        try:
            peer.recv(1 << 20)
        except BlockingIOError:
            return


async def _exchanges(stream: trio.abc.Stream, peer: socket.socket, count: int) -> float:
    start = time.perf_counter()
    for i in range(count):
        peer.send(MESSAGE)
        await stream.receive_some(65536)
        await stream.send_all(MESSAGE)
        if i % 64 == 63:
            _drain(peer)
    return (time.perf_counter() - start) / count * 1e6


async def measure(rounds: int, count: int) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    peer = socket.create_connection(listener.getsockname())
    peer.setblocking(False)
    ours, _ = listener.accept()
    listener.close()
    trio_stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    streams: dict[str, Callable[[], trio.abc.Stream]] = {
        "trio SocketStream": lambda: trio_stream,
        "PlainSocketStream": lambda: PlainSocketStream(trio_stream),
    }
    costs: dict[str, list[float]] = {name: [] for name in streams}
    for _ in range(rounds):
        for name, make in streams.items():
            costs[name].append(await _exchanges(make(), peer, count))
    for name, values in costs.items():
        print(
            f"{name}: read + write {statistics.median(values):.2f} us "
            f"(best {min(values):.2f}) per exchange, {rounds} rounds of {count:,}"
        )
    peer.close()
    await trio_stream.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--exchanges", type=int, default=50_000)
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/stream_cost.py', *sys.argv[1:]])}")
    trio.run(measure, args.rounds, args.exchanges)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The broker's own Python cost per request, without sockets, kernel or a second process.

The gateway's frame-to-reply step (`connection.answer`: header, decode, handler, group
registry and actor, the durable coordinator log in a temp dir, encode) called back to back
with the same pre-encoded request, in one trio task. Nothing waits for a wake-up or a
socket, so the microseconds per request are the Python work of gateway, actor and log,
steadier than the loopback figures of `request_cost.py`, which move 2-3x with the machine's
phase (the machine's own CPU speed still moves them by 10-20%: compare within one run).

    .venv/bin/python bench/handler_cost.py [--ops apiversions,commit,fetch] [--requests 20000]
        [--rounds 5] [--fsync never|interval|always]

`--ops fetch-random`: an OffsetFetch of a random one of FETCH_GROUPS groups, each with an
offset committed (the other ops repeat one request, for one group; `fetch`'s has no offsets).
Every answer is checked for its group's offset.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

# As in the broker (cli.py): without this, importing kio in a dev install runs Hypothesis's
# trio plugin, which sorts and shuffles every batch of runnable tasks.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")

import trio

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import answer
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.protocol.codec import encode_request
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.durable_log import DurableCoordinatorLog

sys.path.insert(0, str(Path(__file__).parent))
from request_cost import request  # the same requests as the loopback bench

TOPIC = "cost"
FETCH_GROUPS = 1_000  # the groups of --ops fetch-random


async def _exchange(ctx: BrokerContext, conn: ConnectionInfo, frame: bytes, count: int) -> None:
    for _ in range(count):
        await answer(frame, ctx, API_TABLE, conn)


@asynccontextmanager
async def in_process_broker(
    data_dir: Path, fsync: str, *, passivate_after_s: float = 60
) -> AsyncIterator[tuple[BrokerContext, ConnectionInfo]]:
    """The broker's parts behind `answer` (data plane with topic TOPIC, durable coordinator
    log, group registry) in `data_dir`, and one connection; all stopped on exit."""
    config = BrokerConfig(data_dir=data_dir)
    data = DataPlane.open(data_dir, segment_bytes=config.log_segment_bytes)
    data.create_topic(TOPIC, 1)
    coordinator = DurableCoordinatorLog.open(data_dir, fsync_policy=fsync)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(coordinator.run)
            registry = GroupRegistry(
                nursery,
                GroupConfig(),
                coordinator,
                topics=data.image_of,
                passivate_after_s=passivate_after_s,
            )
            ctx = BrokerContext(config, data, "127.0.0.1", 9092, API_TABLE, groups=registry)
            yield ctx, ConnectionInfo("127.0.0.1", 1)
            nursery.cancel_scope.cancel()
    finally:
        data.close()


async def _random_fetches(
    ctx: BrokerContext, conn: ConnectionInfo, count: int
) -> Callable[[], Awaitable[None]]:
    """`count` fetches of random groups among FETCH_GROUPS, group i holding offset
    FETCH_GROUPS + i (eight bytes no other field of the answer has)."""

    def frame(op: str, i: int, offset: int) -> bytes:
        wanted = request(op, f"cost-fetch-random-{i}", TOPIC, offset=offset)
        return encode_request(wanted, 1, "bench")[4:]

    for i in range(FETCH_GROUPS):
        await answer(frame("commit", i, FETCH_GROUPS + i), ctx, API_TABLE, conn)
    picks = [random.randrange(FETCH_GROUPS) for _ in range(count)]
    frames = [frame("fetch", i, 0) for i in picks]

    async def fetch_all() -> None:
        for i, fetch in zip(picks, frames, strict=True):
            reply = await answer(fetch, ctx, API_TABLE, conn)
            if reply is None or (FETCH_GROUPS + i).to_bytes(8, "big") not in reply:
                raise SystemExit(f"fetch-random: the answer lacks group {i}'s offset")

    return fetch_all


async def _requests(
    op: str, ctx: BrokerContext, conn: ConnectionInfo, count: int
) -> Callable[[], Awaitable[None]]:
    """`count` requests of `op` back to back, warmed up (the group and its actor exist)."""
    if op == "fetch-random":
        run = await _random_fetches(ctx, conn, count)
        await run()
        return run
    frame = encode_request(request(op, f"cost-{op}", TOPIC), 1, "bench")[4:]
    await _exchange(ctx, conn, frame, 500)
    return functools.partial(_exchange, ctx, conn, frame, count)


async def measure(data_dir: Path, fsync: str, ops: list[str], requests: int, rounds: int) -> None:
    async with in_process_broker(data_dir, fsync) as (ctx, conn):
        for op in ops:
            run = await _requests(op, ctx, conn, requests)
            costs = []
            for _ in range(rounds):
                start = time.perf_counter()
                await run()
                costs.append((time.perf_counter() - start) / requests * 1e6)
            costs.sort()
            print(
                f"{op}: best {costs[0]:.1f} us, median {statistics.median(costs):.1f} us "
                f"per request over {rounds} rounds of {requests:,}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default="apiversions,commit,fetch")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fsync", default="never", choices=("never", "interval", "always"))
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/handler_cost.py', *sys.argv[1:]])}")
    with tempfile.TemporaryDirectory() as tmp:
        trio.run(measure, Path(tmp), args.fsync, args.ops.split(","), args.requests, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

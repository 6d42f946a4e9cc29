"""Broker CPU per request: one pre-encoded request replayed over a blocking socket.

The client does almost nothing per request (send the same bytes, read the answer), so the
broker's CPU time (from /proc/<pid>/stat, its process tree) divided by the requests answered
is the broker's cost of one request, socket included. Starts --broker itself (rafka-actors,
noida-db or tansu, see harness.brokers) unless --bootstrap and --pid name one
that is running.

    .venv/bin/python bench/request_cost.py [--broker KIND | --bootstrap HOST:PORT --pid PID]
        [--ops apiversions,commit,fetch,fetch-all] [--seconds 3] [--rounds 5] [--clients 1]
        [-o KEY=VALUE ...]

With `--clients N`, N processes replay at once, each its own group (as (c)'s 16 committers
do), and the rate is their sum: what the broker serves when it, not one client's round trip,
is the limit.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.offset_commit.v8 import request as commit
from kio.schema.offset_fetch.v8 import request as fetch
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from harness.brokers import Broker, running
from harness.consumer_workloads import create_topic
from harness.core import Target
from harness.loadgen import cpu_seconds
from rafka_actors.protocol.codec import encode_request

TOPIC_PARTITIONS = 1


def request(op: str, group: str, topic: str, *, offset: int = 5) -> object:
    """The request of `op` for `group` (a commit commits `offset` to partition 0 of `topic`)."""
    if op == "apiversions":
        return ApiVersionsRequest(client_software_name="bench", client_software_version="1")
    if op == "commit":
        partition = commit.OffsetCommitRequestPartition(
            partition_index=i32(0),
            committed_offset=i64(offset),
            committed_leader_epoch=i32(-1),
            committed_metadata="",
        )
        committed = commit.OffsetCommitRequestTopic(name=TopicName(topic), partitions=(partition,))
        return commit.OffsetCommitRequest(
            group_id=GroupId(group),
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(committed,),
        )
    # "fetch": the partition named, as a consumer's committed() asks; "fetch-all": every
    # offset of the group (topics null), as an admin client or a lag exporter asks
    named = (fetch.OffsetFetchRequestTopics(name=TopicName(topic), partition_indexes=(i32(0),)),)
    topics = named if op == "fetch" else None
    wanted = fetch.OffsetFetchRequestGroup(group_id=GroupId(group), topics=topics)
    return fetch.OffsetFetchRequest(groups=(wanted,), require_stable=False)


def _groups(op: str) -> str:
    return "offsets" if op in ("commit", "fetch", "fetch-all") else op


def _client(bootstrap: str, frame: bytes, seconds: float, start: Any, counts: Any) -> None:
    """One blocking client: warm up, wait for `start`, replay `frame` for `seconds` and put
    how many it answered in `counts`."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def one() -> None:
            sock.sendall(frame)
            (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
            sock.recv(size, socket.MSG_WAITALL)

        for _ in range(200):  # warm up (the group exists, its actor is alive)
            one()
        start.wait()
        began, count = time.perf_counter(), 0
        while time.perf_counter() - began < seconds:
            one()
            count += 1
    counts.put(count)


def together(
    client: Callable[..., None], argsets: list[tuple[Any, ...]], pid: int
) -> tuple[list[Any], float, float]:
    """Run `client(*args, start, results)` for each of `argsets` in a process of its own: each
    warms up, waits for `start`, then puts one result. Returns (the results, wall seconds
    from start to the last result, CPU seconds `pid` used meanwhile)."""
    start = multiprocessing.Event()
    results: multiprocessing.Queue[Any] = multiprocessing.Queue()
    processes = [
        multiprocessing.Process(target=client, args=(*args, start, results)) for args in argsets
    ]
    for process in processes:
        process.start()
    time.sleep(0.2 + 0.02 * len(processes))  # every client has warmed up
    cpu0, began = cpu_seconds(pid), time.perf_counter()
    start.set()
    got = [results.get() for _ in processes]
    elapsed, cpu1 = time.perf_counter() - began, cpu_seconds(pid)
    for process in processes:
        process.join()
    assert cpu0 is not None and cpu1 is not None, f"process {pid} is gone"
    return got, elapsed, cpu1 - cpu0


def replay(bootstrap: str, pid: int, frames: list[bytes], seconds: float) -> tuple[float, float]:
    """(requests/s, broker CPU microseconds per request) over `seconds`, one client per
    frame, all at once."""
    counts, elapsed, cpu = together(_client, [(bootstrap, f, seconds) for f in frames], pid)
    count = sum(counts)
    return count / elapsed, cpu / count * 1e6


@contextmanager
def broker(args: argparse.Namespace) -> Iterator[Target]:
    if args.bootstrap:
        yield Target("external", args.bootstrap, pid=args.pid)
        return
    with running(Broker(args.broker, args.broker, tuple(args.settings))) as target:
        yield target


def broker_arguments(parser: argparse.ArgumentParser) -> None:
    """--broker KIND to start one, or --bootstrap and --pid of one running; -o its settings."""
    parser.add_argument("--broker", default="rafka-actors", help="rafka-actors|noida-db|tansu")
    parser.add_argument("--bootstrap")
    parser.add_argument("--pid", type=int)
    parser.add_argument("-o", dest="settings", action="append", default=[])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    broker_arguments(parser)
    parser.add_argument("--ops", default="apiversions,commit,fetch")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=1, help="at once, one group each")
    args = parser.parse_args()
    if args.bootstrap and not args.pid:
        parser.error("--bootstrap needs --pid (whose CPU time is measured)")
    print(f"# {shlex.join(['bench/request_cost.py', *sys.argv[1:]])}")
    with broker(args) as target:
        assert target.pid is not None
        topic = create_topic(target, TOPIC_PARTITIONS)
        for op in args.ops.split(","):
            frames = [
                # (commits and fetches share their groups: a fetch reads what commit stored)
                encode_request(request(op, f"cost-{_groups(op)}-{i}", topic), 1, "bench")
                for i in range(args.clients)
            ]
            rounds = [
                replay(target.bootstrap, target.pid, frames, args.seconds)
                for _ in range(args.rounds)
            ]
            costs = sorted(cost for _, cost in rounds)
            rate = statistics.median(r for r, _ in rounds)
            print(
                f"{op}: {rate:,.0f} requests/s; broker CPU per request: best {costs[0]:.0f} us, "
                f"median {statistics.median(costs):.0f} us over {args.rounds} rounds"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

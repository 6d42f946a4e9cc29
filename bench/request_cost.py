"""Broker CPU per request: one pre-encoded request replayed over a blocking socket.

The client does almost nothing per request (send the same bytes, read the answer), so the
broker's CPU time (from /proc/<pid>/stat, its process tree) divided by the requests answered
is the broker's cost of one request, socket included. Starts --broker itself (rafka-actors,
noida-db, tansu or kafka, see harness.brokers) unless --bootstrap and --pid name one
that is running.

    .venv/bin/python bench/request_cost.py [--broker KIND | --bootstrap HOST:PORT --pid PID |
        --brokers SPEC,SPEC...] [--ops apiversions,commit,fetch,fetch-all,heartbeat]
        [--seconds 3] [--rounds 5] [--clients 1] [-o KEY=VALUE ...]

`heartbeat` is a classic member's Heartbeat: each client's group is joined and synced first by
a member with a 5-minute session, whose Heartbeat is then replayed.

With `--clients N`, N processes replay at once, each its own group (as (c)'s 16 committers
do), and the rate is their sum: what the broker serves when it, not one client's round trip,
is the limit.

With `--brokers` (bench/run.py's `[NAME=]KIND[@PYTHON][[KEY=VALUE,...]]`, e.g.
`new=rafka-actors,old=rafka-actors@../old/.venv/bin/python`) every broker is started at once
and the rounds take turns, broker by broker, so that a machine whose speed drifts treats all
alike; each line is then a broker's median, with its ratio to the first broker's.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import shlex
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.heartbeat.v3 import request as heartbeat
from kio.schema.join_group.v5 import request as join
from kio.schema.offset_commit.v8 import request as commit
from kio.schema.offset_fetch.v8 import request as fetch
from kio.schema.sync_group.v3 import request as sync
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from harness.brokers import parse_brokers, running, split_broker_list
from harness.consumer_workloads import create_topic
from harness.core import Target
from harness.loadgen import cpu_seconds
from rafka_actors.admin.client import KafkaClient
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


def groups_of(op: str) -> str:
    return "offsets" if op in ("commit", "fetch", "fetch-all") else op


def frame_of(op: str, target: Target, group: str, topic: str) -> bytes:
    """The frame a client of `op` replays (a heartbeat's member joins `group` first)."""
    if op == "heartbeat":
        return heartbeat_frame(target.bootstrap, group)
    return encode_request(request(op, group, topic), 1, "bench")


SESSION_MS = 300_000  # a replayed member's session: rounds of other brokers come between


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def joined_member(bootstrap: str, group: str) -> tuple[str, int]:
    """Join `group` as its only classic member and sync: (member id, generation)."""
    with KafkaClient(bootstrap, 30.0) as client:
        member_id = ""
        for _ in range(3):  # the first JoinGroup (v4+) is answered MEMBER_ID_REQUIRED
            answer = client.call(
                join.JoinGroupRequest(
                    group_id=GroupId(group),
                    session_timeout=_ms(SESSION_MS),
                    rebalance_timeout=_ms(60_000),
                    member_id=member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(join.JoinGroupRequestProtocol(name="range", metadata=b""),),
                )
            )
            member_id = answer.member_id
            if answer.error_code == 0:
                break
        assert answer.error_code == 0, answer
        synced = client.call(
            sync.SyncGroupRequest(
                group_id=GroupId(group),
                generation_id=answer.generation_id,
                member_id=member_id,
                group_instance_id=None,
                assignments=(sync.SyncGroupRequestAssignment(member_id=member_id, assignment=b""),),
            )
        )
        assert synced.error_code == 0, synced
        return member_id, int(answer.generation_id)


def heartbeat_frame(bootstrap: str, group: str) -> bytes:
    member_id, generation = joined_member(bootstrap, group)
    beat = heartbeat.HeartbeatRequest(
        group_id=GroupId(group),
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=None,
    )
    return encode_request(beat, 1, "bench")


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
    (chosen,) = parse_brokers([args.broker], args.settings)
    with running(chosen) as target:
        yield target


def broker_arguments(parser: argparse.ArgumentParser) -> None:
    """--broker to start one, or --bootstrap and --pid of one running; -o its settings."""
    parser.add_argument(
        "--broker",
        default="rafka-actors",
        help="rafka-actors|noida-db|tansu|kafka, or rafka-actors@PYTHON (bench/run.py's --brokers)",
    )
    parser.add_argument("--bootstrap")
    parser.add_argument("--pid", type=int)
    parser.add_argument("-o", dest="settings", action="append", default=[])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    broker_arguments(parser)
    parser.add_argument("--brokers", help="side by side, rounds taking turns (bench/run.py's)")
    parser.add_argument("--ops", default="apiversions,commit,fetch")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=1, help="at once, one group each")
    args = parser.parse_args()
    if args.bootstrap and not args.pid:
        parser.error("--bootstrap needs --pid (whose CPU time is measured)")
    print(f"# {shlex.join(['bench/request_cost.py', *sys.argv[1:]])}")
    with ExitStack() as stack:
        if args.brokers:
            brokers = parse_brokers(split_broker_list(args.brokers), args.settings)
            targets = [stack.enter_context(running(b)) for b in brokers]
        else:
            targets = [stack.enter_context(broker(args))]
        for op in args.ops.split(","):
            _measure(op, targets, args)
    return 0


def _measure(op: str, targets: list[Target], args: argparse.Namespace) -> None:
    """`args.rounds` rounds of `op` on each target, taking turns; one line per target."""
    frames = {}
    for target in targets:
        topic = create_topic(target, TOPIC_PARTITIONS)
        # (commits and fetches share their groups: a fetch reads what commit stored)
        frames[target.name] = [
            frame_of(op, target, f"cost-{groups_of(op)}-{i}", topic) for i in range(args.clients)
        ]
    rounds: dict[str, list[tuple[float, float]]] = {target.name: [] for target in targets}
    for _ in range(args.rounds):
        for target in targets:
            assert target.pid is not None
            rounds[target.name].append(
                replay(target.bootstrap, target.pid, frames[target.name], args.seconds)
            )
    first = None
    for target in targets:
        costs = sorted(cost for _, cost in rounds[target.name])
        rate = statistics.median(r for r, _ in rounds[target.name])
        cost = statistics.median(costs)
        versus = ""
        if first is None:
            first = (rate, cost)
        else:
            versus = f"; first/this: rate {first[0] / rate:.2f}x, CPU {cost / first[1]:.2f}x"
        name = f"{target.name} " if len(targets) > 1 else ""
        print(
            f"{name}{op}: {rate:,.0f} requests/s; broker CPU per request: best {costs[0]:.0f} us, "
            f"median {cost:.0f} us over {args.rounds} rounds{versus}"
        )


if __name__ == "__main__":
    sys.exit(main())

"""A load generator that speaks the Kafka protocol itself: many group members in one trio process.

Client libraries spend more CPU per request than a broker should, so a benchmark driven by
them measures the client. Here every member is one trio task with its own TCP connection (as a
consumer has its own connection to its coordinator), and requests are encoded and decoded with
the broker's own codec (`encode_request` / `decode_response`, kio's native reader).

`Connection` is one non-blocking socket driven by trio's readiness waits: ApiVersions on open,
then each API at the highest version both sides know (`Connection.version`), answers in the
order of the requests (Kafka's rule), `call` for one request and `pipeline` for many in flight.
Frames are cut from a buffer that survives cancellation, and a cancelled call's answer is
skipped by the next call, so a timed-out wait never desynchronises the stream.

Cost, measured against a fake broker that answers instantly: trio's own floor for a request/
answer on one of many sockets is ~40 us of CPU when answers arrive one at a time (~10 us when
they arrive in bursts); a heartbeat through `Connection.call` costs ~65 us. A cancel scope per
call cost another ~25 us (trio re-sorts its deadlines), so members' connections are `watched`:
the fleet's watchdog enforces their deadlines twice a second instead.

`Member` implements the classic group protocol the way a consumer does: JoinGroup (retried
with the member id on MEMBER_ID_REQUIRED), SyncGroup (the leader computes a range assignment
from the subscriptions it is given), Heartbeat every `Fleet.heartbeat_interval_s` (or
back-to-back once `Fleet.closed_loop` is set), rejoin on REBALANCE_IN_PROGRESS (from a
Heartbeat or a SyncGroup), LeaveGroup when told to go. `Fleet` owns the members and what they
measure; a `GroupTracker` per group tells when every live member holds an assignment of the
same generation (the group is Stable as its clients see it) and checks that those assignments
are disjoint and complete.

Timing uses trio's clock (monotonic seconds). Every wait is bounded: a request that gets no
answer in time raises `LoadgenError`, which a workload turns into a missing figure.
"""

from __future__ import annotations

import bisect
import datetime
import logging
import math
import multiprocessing
import os
import random
import socket
import struct
import sys
import time
from array import array
from collections import Counter, deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from ..admin.client import parse_addresses
from ..gateway.apis._build import make  # kio entity from the fields this version has
from ..protocol.codec import decode_response, encode_request
from ..protocol.messages import request_class

log = logging.getLogger(__name__)

CLIENT_ID = "rafka-bench"
REQUEST_TIMEOUT_S = 30.0
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
# (api key, lowest version we speak, highest version we speak)
API_VERSIONS, JOIN, SYNC, HEARTBEAT, LEAVE = 18, 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS = 8, 9, 19
_OURS = {JOIN: (4, 9), SYNC: (0, 5), HEARTBEAT: (0, 4), LEAVE: (0, 5)}
_OURS |= {OFFSET_COMMIT: (2, 8), OFFSET_FETCH: (1, 7), CREATE_TOPICS: (2, 7)}
_RETRY = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}


class LoadgenError(Exception):
    """The broker did not do what a client needs (no answer in time, an error it cannot handle)."""


def schema(api_key: int, version: int) -> ModuleType:
    """The generated module of a request version (for its nested classes)."""
    return sys.modules[request_class(api_key, version).__module__]


def ms(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=round(seconds * 1000))


class Connection:
    """One connection to the broker; requests are answered in the order they were sent.

    Built on a plain non-blocking socket and trio's readiness waits (`wait_readable`), not on
    `trio.SocketStream`: a request costs one `send`, one wait and one `recv` (a third less CPU
    per heartbeat than with a stream). A request is sent whole or the connection is broken.
    """

    def __init__(self, sock: socket.socket, address: str) -> None:
        self._sock = sock
        self.address = address
        self._buf = bytearray()
        self._correlation = 0
        self._sent: deque[tuple[int, int, int]] = deque()  # (correlation, key, version)
        self._broken = ""
        self.versions: dict[int, tuple[int, int]] = {}
        self.watched = False  # timeouts are enforced by a watchdog calling `overdue`
        self.deadline = math.inf
        self.waiting_for: Any = None

    @classmethod
    async def open(cls, bootstrap: str, timeout: float = REQUEST_TIMEOUT_S) -> Connection:
        host, port = parse_addresses(bootstrap)[0]
        sock = None
        try:
            with trio.fail_after(timeout):
                family, kind, proto, _, address = (
                    await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                )[0]
                sock = socket.socket(family, kind, proto)
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    sock.connect(address)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sock)
                    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if error:
                        raise OSError(error, os.strerror(error)) from None
        except (OSError, trio.TooSlowError) as exc:
            if sock is not None:
                sock.close()
            raise LoadgenError(f"cannot connect to {bootstrap}: {exc}") from exc
        conn = cls(sock, f"{host}:{port}")
        await conn._learn_versions(timeout)
        return conn

    async def _learn_versions(self, timeout: float) -> None:
        request = make(
            request_class(API_VERSIONS, 3),
            client_software_name=CLIENT_ID,
            client_software_version="1",
        )
        answer = await self.call(request, timeout)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        if not self.versions:
            raise LoadgenError(f"{self.address}: ApiVersions failed: {answer.error_code!r}")

    def version(self, api_key: int) -> int:
        """The highest version of `api_key` that we and the broker both speak."""
        low, high = _OURS[api_key]
        theirs = self.versions.get(api_key)
        if theirs is None or min(high, theirs[1]) < max(low, theirs[0]):
            raise LoadgenError(f"{self.address} serves no version of API {api_key} in {low}-{high}")
        return min(high, theirs[1])

    def request(self, api_key: int, **values: Any) -> Any:
        """A request of `api_key` at the negotiated version, built from the newest field names."""
        return make(request_class(api_key, self.version(api_key)), **values)

    async def call(self, request: Any, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """Send one request and return its answer (answers to cancelled calls are skipped).

        A `watched` connection leaves the timeout to a watchdog (`overdue`): a cancel scope
        per call would cost more CPU than the rest of a heartbeat round trip."""
        if self.watched:
            self.deadline = trio.current_time() + timeout
            self.waiting_for = request
            try:
                return await self._call(request)
            finally:
                self.deadline = math.inf
        with trio.CancelScope(deadline=trio.current_time() + timeout) as scope:
            return await self._call(request)
        assert scope.cancelled_caught
        raise LoadgenError(
            f"{self.address}: no answer to {type(request).__name__} in {timeout:g} s"
        )

    async def _call(self, request: Any) -> Any:
        correlation = await self._send((request,))
        while True:
            got, answer = await self._receive()
            if got == correlation:
                return answer

    def overdue(self, now: float) -> str | None:
        """Why a watched call has failed by `now`, if it has."""
        if now <= self.deadline:
            return None
        return f"{self.address}: no answer to {type(self.waiting_for).__name__} in time"

    async def pipeline(
        self, requests: Sequence[Any], window: int, timeout: float = REQUEST_TIMEOUT_S
    ) -> list[Any]:
        """Send `requests` with up to `window` in flight; their answers, in order. (Not to be
        mixed with concurrent `call`s on the same connection.)"""
        answers: list[Any] = []
        sent = 0
        while len(answers) < len(requests):
            free = window - (sent - len(answers))
            if free > 0 and sent < len(requests):
                await self._send(requests[sent : sent + free])
                sent = min(sent + free, len(requests))
            with trio.CancelScope(deadline=trio.current_time() + timeout):
                answers.append((await self._receive())[1])
                while self._has_frame() and len(answers) < sent:
                    answers.append((await self._receive())[1])
                continue
            raise LoadgenError(f"{self.address}: pipelined answers stopped coming")
        return answers

    async def _send(self, requests: Sequence[Any]) -> int:
        if self._broken:
            raise LoadgenError(f"{self.address}: {self._broken}")
        frames = []
        for request in requests:
            cls: Any = type(request)
            self._correlation += 1
            frames.append(encode_request(request, self._correlation, CLIENT_ID))
            self._sent.append((self._correlation, cls.__api_key__, cls.__version__))
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        done = 0
        try:
            while True:
                try:
                    done += self._sock.send(memoryview(data)[done:] if done else data)
                except BlockingIOError:
                    pass
                if done == len(data):
                    return self._correlation
                await trio.lowlevel.wait_writable(self._sock)  # the kernel's buffer is full
        except OSError as exc:
            self._broken = f"connection lost: {exc}"
            raise LoadgenError(f"{self.address}: {self._broken}") from exc
        except BaseException:
            self._broken = "a request was cut off unsent"  # its answer would never come
            raise

    async def _receive(self) -> tuple[int, Any]:
        frame = await self._read_frame()
        correlation, key, version = self._sent.popleft()
        (got,) = _CORRELATION.unpack_from(frame, 0)
        if got != correlation:
            raise LoadgenError(f"{self.address} answered {got}, expected {correlation}")
        return decode_response(key, version, frame)

    def _has_frame(self) -> bool:
        buf = self._buf
        return len(buf) >= 4 and len(buf) >= 4 + _SIZE.unpack_from(buf, 0)[0]

    async def _read_frame(self) -> bytes:
        buf = self._buf
        while True:
            if len(buf) >= 4:
                (size,) = _SIZE.unpack_from(buf, 0)
                if len(buf) >= 4 + size:
                    frame = bytes(buf[4 : 4 + size])
                    del buf[: 4 + size]
                    return frame
            await trio.lowlevel.wait_readable(self._sock)  # the answer is never there at once
            try:
                data = self._sock.recv(1 << 18)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise LoadgenError(f"{self.address}: connection lost: {exc}") from exc
            if not data:
                raise LoadgenError(f"{self.address} closed the connection")
            buf += data

    async def aclose(self) -> None:
        trio.lowlevel.notify_closing(self._sock)
        self._sock.close()
        await trio.lowlevel.checkpoint()


async def create_topic(conn: Connection, name: str, partitions: int) -> None:
    """Create topic `name` (offsets can only be committed for partitions that exist)."""
    nested = schema(CREATE_TOPICS, conn.version(CREATE_TOPICS))
    topic = make(
        nested.CreatableTopic,
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    answer = await conn.call(
        conn.request(CREATE_TOPICS, topics=(topic,), timeout=ms(30), validate_only=False)
    )
    code = answer.topics[0].error_code
    if code not in (ErrorCode.none, ErrorCode.topic_already_exists):
        raise LoadgenError(f"{conn.address}: cannot create topic {name}: {code.name}")


# -- the consumer protocol's embedded formats (version 0) and the range assignor -------------


def subscription(topics: Sequence[str]) -> bytes:
    parts = [struct.pack(">hi", 0, len(topics))]
    for topic in topics:
        raw = topic.encode()
        parts.append(struct.pack(">h", len(raw)) + raw)
    parts.append(struct.pack(">i", -1))  # no user data
    return b"".join(parts)


def subscribed_topics(metadata: bytes) -> list[str]:
    (count,) = struct.unpack_from(">i", metadata, 2)
    topics, pos = [], 6
    for _ in range(count):
        (size,) = struct.unpack_from(">h", metadata, pos)
        topics.append(metadata[pos + 2 : pos + 2 + size].decode())
        pos += 2 + size
    return topics


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    raw = topic.encode()
    head = struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", len(partitions))
    return head + struct.pack(f">{len(partitions)}i", *partitions) + struct.pack(">i", -1)


def assigned_partitions(data: bytes) -> tuple[int, ...]:
    """The partitions of a version-0 assignment (of its one topic); () for an empty one."""
    if len(data) < 6 or struct.unpack_from(">i", data, 2)[0] == 0:
        return ()
    (size,) = struct.unpack_from(">h", data, 6)
    pos = 8 + size
    (count,) = struct.unpack_from(">i", data, pos)
    return struct.unpack_from(f">{count}i", data, pos + 4)


def range_assign(member_ids: Sequence[str], topic: str, partitions: int) -> dict[str, bytes]:
    """Kafka's RangeAssignor for one topic: members sorted, contiguous runs, extras first."""
    ordered = sorted(member_ids)
    per, extra = divmod(partitions, len(ordered))
    out, start = {}, 0
    for i, member_id in enumerate(ordered):
        count = per + (1 if i < extra else 0)
        out[member_id] = assignment(topic, range(start, start + count))
        start += count
    return out


# -- members and the fleet --------------------------------------------------------------------


class GroupTracker:
    """When do all live members of one group hold an assignment of the same generation?"""

    def __init__(self, name: str, size: int, partitions: int) -> None:
        self.name = name
        self.expected = size
        self.partitions = partitions
        self.floor = -1  # a Stable generation must be newer than this (Tansu starts at 0)
        self._counts: Counter[int] = Counter()
        self._held: dict[int, tuple[int, tuple[int, ...]]] = {}  # member index -> (gen, parts)
        self.stable = trio.Event()
        self.stable_generation = -1
        self.stable_at = 0.0
        self.bad_assignments = 0

    def synced(self, member: int, generation: int, parts: tuple[int, ...], now: float) -> None:
        previous = self._held.get(member)
        if previous is not None:
            self._counts[previous[0]] -= 1
        self._held[member] = (generation, parts)
        self._counts[generation] += 1
        if (
            self._counts[generation] == self.expected
            and generation > self.floor
            and not self.stable.is_set()
        ):
            self.stable_generation, self.stable_at = generation, now
            self._check_assignments(generation)
            self.stable.set()

    def _check_assignments(self, generation: int) -> None:
        held = [p for gen, parts in self._held.values() if gen == generation for p in parts]
        if sorted(held) != list(range(self.partitions)):
            self.bad_assignments += 1
            log.warning("%s: generation %d assignment not disjoint/complete", self.name, generation)

    def left(self, member: int) -> None:
        """`member` left: the next Stable generation is the one without it."""
        previous = self._held.pop(member, None)
        if previous is not None:
            self._counts[previous[0]] -= 1
        self.expected -= 1
        self.floor = max(self.stable_generation, self.floor)
        self.stable = trio.Event()


class Fleet:
    """Members of classic consumer groups, all in this trio process, and what they measured."""

    def __init__(
        self,
        bootstrap: str,
        *,
        session_timeout_s: float = 10.0,
        rebalance_timeout_s: float = 30.0,
        heartbeat_interval_s: float = 0.1,
        topic: str = "bench",
    ) -> None:
        self.bootstrap = bootstrap
        self.session_timeout_s = session_timeout_s
        self.rebalance_timeout_s = rebalance_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.topic = topic
        self.members: list[Member] = []
        self.groups: dict[str, GroupTracker] = {}
        self.closed_loop = False
        self.stopping = False
        self.recording = False
        self.heartbeat_latency = array("d")  # seconds, successful heartbeats while recording
        self.heartbeat_errors: Counter[str] = Counter()
        self.reactions = array("d")  # REBALANCE_IN_PROGRESS answer -> JoinGroup sent, seconds
        self.last_join_sent = 0.0
        self.go = trio.Event()  # members join once all are connected
        self.started_at = 0.0
        self.done = trio.Event()

    def add_group(self, name: str, size: int, partitions: int | None = None) -> GroupTracker:
        tracker = self.groups[name] = GroupTracker(name, size, partitions or size)
        for _ in range(size):
            self.members.append(Member(self, tracker, len(self.members)))
        return tracker

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect every member (started once all are connected), then run them until stopped."""
        connected = 0
        all_connected = trio.Event()

        def one_connected() -> None:
            nonlocal connected
            connected += 1
            if connected == len(self.members):
                all_connected.set()

        async with trio.open_nursery() as outer:
            outer.start_soon(self._watchdog)
            async with trio.open_nursery() as nursery:
                for member in self.members:
                    nursery.start_soon(member.run, one_connected)
                await all_connected.wait()
                self.started_at = trio.current_time()
                self.go.set()
                task_status.started()
            outer.cancel_scope.cancel()
        self.done.set()

    async def _watchdog(self) -> None:
        """Fail every member whose request has gone unanswered past its deadline."""
        while True:
            await trio.sleep(0.5)
            now = trio.current_time()
            for member in self.members:
                if member.conn is not None and (why := member.conn.overdue(now)):
                    member.fail(why)

    async def wait_stable(self, timeout: float) -> bool:
        """True once every group is Stable (within `timeout` seconds)."""
        with trio.move_on_after(timeout):
            for tracker in self.groups.values():
                await tracker.stable.wait()
            return True
        return False

    def go_closed_loop(self) -> None:
        self.closed_loop = True
        for member in self.members:
            member.wake.set()

    def stop(self) -> None:
        """Members leave their groups at their next chance and disconnect."""
        self.stopping = True
        for member in self.members:
            member.wake.set()


@asynccontextmanager
async def running(
    fleet: Fleet, connect_timeout: float = 60.0, stop_timeout: float = 10.0
) -> AsyncIterator[Fleet]:
    """Run `fleet` (connected, joining) inside the block; on exit members leave, then close."""
    async with trio.open_nursery() as nursery:
        with trio.fail_after(connect_timeout):
            await nursery.start(fleet.run)
        try:
            yield fleet
        finally:
            fleet.stop()
            with trio.move_on_after(stop_timeout):
                await fleet.done.wait()
            nursery.cancel_scope.cancel()


class Member:
    """One consumer of the classic protocol, on its own connection."""

    def __init__(self, fleet: Fleet, group: GroupTracker, index: int) -> None:
        self.fleet = fleet
        self.group = group
        self.index = index
        self.conn: Connection | None = None
        self.member_id = ""
        self.generation = -1
        self.wake = trio.Event()  # stop waiting between heartbeats (closed loop, leave, stop)
        self.leaving = False
        self.is_leader = False
        self.noticed_at: float | None = None  # when a rebalance was announced to us
        self.left_at: float | None = None  # when our LeaveGroup was sent
        self._members: tuple[Any, ...] = ()  # the leader's JoinGroup answer: who to assign
        self._scope = trio.CancelScope()  # cancelled by the fleet's watchdog (`fail`)
        self._failure = ""

    async def run(self, connected: Any) -> None:
        with self._scope:
            conn = self.conn = await Connection.open(self.fleet.bootstrap)
            conn.watched = True
            connected()
            try:
                await self._run()
            finally:
                await conn.aclose()
        if self._failure:
            raise LoadgenError(f"{self.group.name}: {self._failure}")

    async def _run(self) -> None:
        await self.fleet.go.wait()
        while not (self.fleet.stopping or self.leaving):
            if not await self._join() or not await self._sync():
                continue
            await self._heartbeats()
        if self.member_id and not self.fleet.stopping:
            await self._leave()
        elif self.member_id:
            with trio.move_on_after(5):
                await self._leave()

    def fail(self, why: str) -> None:
        self._failure = why
        self._scope.cancel()

    def leave(self) -> None:
        """Leave the group (LeaveGroup) at the next heartbeat and stop."""
        self.leaving = True
        self.group.left(self.index)
        self.wake.set()

    @property
    def _conn(self) -> Connection:
        assert self.conn is not None
        return self.conn

    async def _join(self) -> bool:
        fleet, conn = self.fleet, self._conn
        version = conn.version(JOIN)
        protocol = schema(JOIN, version).JoinGroupRequestProtocol
        now = trio.current_time()
        if self.noticed_at is not None:
            fleet.reactions.append(now - self.noticed_at)
            self.noticed_at = None
        fleet.last_join_sent = max(fleet.last_join_sent, now)
        while True:
            request = conn.request(
                JOIN,
                group_id=self.group.name,
                session_timeout=ms(fleet.session_timeout_s),
                rebalance_timeout=ms(fleet.rebalance_timeout_s),
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(protocol(name="range", metadata=subscription([fleet.topic])),),
                reason=None,
            )
            answer = await conn.call(request, fleet.rebalance_timeout_s + 10)
            code = answer.error_code
            if code == ErrorCode.member_id_required:
                self.member_id = answer.member_id
            elif code == ErrorCode.none:
                self.member_id, self.generation = answer.member_id, answer.generation_id
                self.is_leader = answer.leader == answer.member_id
                self._members = answer.members
                return True
            elif code == ErrorCode.unknown_member_id:
                self.member_id = ""
            elif code in _RETRY or code == ErrorCode.rebalance_in_progress:
                await trio.sleep(0.05)
            else:
                raise LoadgenError(f"{self.group.name}: JoinGroup failed: {code.name}")
            if fleet.stopping:
                return False

    async def _sync(self) -> bool:
        fleet, conn = self.fleet, self._conn
        assignments: tuple[Any, ...] = ()
        version = conn.version(SYNC)
        if self.is_leader:
            wanted = {m.member_id for m in self._members}
            plan = range_assign(sorted(wanted), fleet.topic, self.group.partitions)
            entry = schema(SYNC, version).SyncGroupRequestAssignment
            assignments = tuple(entry(member_id=m, assignment=a) for m, a in plan.items())
        self._members = ()
        request = conn.request(
            SYNC,
            group_id=self.group.name,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=assignments,
        )
        answer = await conn.call(request, fleet.rebalance_timeout_s + 10)
        return self._synced(answer.error_code, answer.assignment)

    def _synced(self, code: ErrorCode, data: bytes) -> bool:
        now = trio.current_time()
        if code == ErrorCode.none:
            self.group.synced(self.index, self.generation, assigned_partitions(data), now)
            return True
        if code == ErrorCode.rebalance_in_progress:
            self.noticed_at = now
        elif code == ErrorCode.unknown_member_id:
            self.member_id = ""
        elif code not in _RETRY and code != ErrorCode.illegal_generation:
            raise LoadgenError(f"{self.group.name}: SyncGroup failed: {code.name}")
        return False

    async def _heartbeats(self) -> None:
        """Heartbeat until the group rebalances (return: rejoin) or we are told to go."""
        fleet, conn = self.fleet, self._conn
        request = conn.request(
            HEARTBEAT,
            group_id=self.group.name,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
        )
        pause = fleet.heartbeat_interval_s * random.random()  # spread the first ones out
        latency = fleet.heartbeat_latency
        while True:
            if not fleet.closed_loop:
                with trio.move_on_after(pause):
                    await self.wake.wait()
                pause = fleet.heartbeat_interval_s
            if fleet.stopping or self.leaving:
                return
            start = trio.current_time()
            code = (await conn.call(request)).error_code
            if code == ErrorCode.none:
                if fleet.recording:
                    latency.append(trio.current_time() - start)
                continue
            if fleet.recording:
                fleet.heartbeat_errors[code.name] += 1
            if code == ErrorCode.rebalance_in_progress:
                self.noticed_at = trio.current_time()
            elif code == ErrorCode.unknown_member_id:
                self.member_id = ""
            elif code not in _RETRY and code != ErrorCode.illegal_generation:
                raise LoadgenError(f"{self.group.name}: Heartbeat failed: {code.name}")
            return

    async def _leave(self) -> None:
        conn = self._conn
        if conn.version(LEAVE) >= 3:
            identity = schema(LEAVE, conn.version(LEAVE)).MemberIdentity
            who = identity(member_id=self.member_id, group_instance_id=None, reason=None)
            request = conn.request(LEAVE, group_id=self.group.name, members=(who,))
        else:
            request = conn.request(LEAVE, group_id=self.group.name, member_id=self.member_id)
        self.left_at = trio.current_time()
        await conn.call(request)
        self.member_id = ""


# -- measurements -----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _children(pid: int) -> list[int]:
    """`pid` and its descendants (a wrapper script's broker binary, say)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(parents.get(current, ()))
    return tree


def rss_bytes(pid: int) -> int | None:
    """Resident memory of `pid` and its descendants (None if it is gone)."""
    total, seen = 0, False
    for each in _children(pid):
        try:
            with open(f"/proc/{each}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        seen = True
        except OSError:
            continue
    return total if seen else None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of `pid` and its descendants so far."""
    return _cpu_of(_children(pid))


def _cpu_of(pids: list[int]) -> float | None:
    total, seen, tick = 0.0, False, os.sysconf("SC_CLK_TCK")
    for each in pids:
        try:
            with open(f"/proc/{each}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
        seen = True
    return total if seen else None


class CpuTimeline:
    """A process's CPU seconds (with its descendants as at the start, unless `alone`: the
    generator's own, without the sampler), sampled every `every` s by a forked process, so
    that a window known only afterwards can be read (`between`). The sampler holds no lock
    of ours and the generator's loop never waits for it; /proc counts in clock ticks
    (10 ms), so each end of a window is good to about a tick. Without a pid (a broker not
    ours to see) nothing is sampled and every window reads None."""

    def __init__(self, pid: int | None, every: float = 0.002, *, alone: bool = False) -> None:
        pids = [] if pid is None else [pid] if alone else _children(pid)
        self._pids, self._every = pids, every
        self._times, self._cpu = array("d"), array("d")

    def __enter__(self) -> CpuTimeline:
        if self._pids:
            ctx = multiprocessing.get_context("fork")
            self._pipe, theirs = ctx.Pipe()
            self._proc = ctx.Process(target=self._sample, args=(theirs,), daemon=True)
            self._proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._pids:
            return
        self._pipe.send("stop")
        if self._pipe.poll(10):
            times, cpu = self._pipe.recv()
            self._times.frombytes(times)
            self._cpu.frombytes(cpu)
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()

    def _sample(self, pipe: Any) -> None:
        times, cpu = array("d"), array("d")
        while not pipe.poll(self._every):
            now = _cpu_of(self._pids)
            if now is not None:
                times.append(time.monotonic())
                cpu.append(now)
        pipe.send((times.tobytes(), cpu.tobytes()))

    def between(self, start: float, end: float) -> float | None:
        """CPU seconds from `start` to `end` (time.monotonic()), interpolated between
        samples; None unless samples surround both."""
        times = self._times
        if len(times) < 2 or not times[0] <= start <= end <= times[-1]:
            return None
        return self._at(end) - self._at(start)

    def _at(self, t: float) -> float:
        i = max(1, bisect.bisect_left(self._times, t))
        t0, t1 = self._times[i - 1], self._times[i]
        c0, c1 = self._cpu[i - 1], self._cpu[i]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)


class CpuMeter:
    """CPU used by this process (the generator) and by the broker over a window, in cores."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self._wall = time.perf_counter()
        self._ours = time.process_time()
        self._theirs = cpu_seconds(broker_pid) if broker_pid else None

    def read(self) -> tuple[float, float | None]:
        wall = max(time.perf_counter() - self._wall, 1e-9)
        ours = (time.process_time() - self._ours) / wall
        theirs = None
        if self.broker_pid and self._theirs is not None:
            now = cpu_seconds(self.broker_pid)
            theirs = None if now is None else (now - self._theirs) / wall
        return ours, theirs

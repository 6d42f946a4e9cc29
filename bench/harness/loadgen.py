"""A load generator that speaks the Kafka protocol itself: its connections and codec.

Client libraries spend more CPU per request than a broker should, so a benchmark driven by
them measures the client. Requests here are encoded and decoded with the broker's own codec
(`encode_request` / `decode_response`, kio's native reader); the group members of workloads
(e) and (f) are in fleet.py.

`Connection` is one non-blocking socket driven by trio's readiness waits: ApiVersions on open,
then each API at the highest version both sides know (`Connection.version`), answers in the
order of the requests (Kafka's rule), `call` for one request and `pipeline` for many in flight.
Frames are cut from a buffer that survives cancellation, and a cancelled call's answer is
skipped by the next call, so a timed-out wait never desynchronises the stream. Measured
against a fake broker that answers instantly, trio's own floor for a request/answer on one of
many sockets is ~40 us of CPU when answers arrive one at a time (~10 us when they arrive in
bursts); a heartbeat through `call` costs ~65 us, and its cancel scope ~25 us more: fine
for a workload's few connections, not for a thousand members (fleet.py drives theirs from
one epoll).

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
import socket
import struct
import sys
import time
from array import array
from collections import deque
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NamedTuple

import trio
from kio.schema.errors import ErrorCode

from rafka_actors.admin.client import parse_addresses
from rafka_actors.protocol.codec import decode_response, encode_request
from rafka_actors.protocol.messages import request_class

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
RETRY_CODES = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}


class Prepared(NamedTuple):
    """A request encoded once, with correlation id 0, to be sent with another each time
    (`stamped`): encoding a request costs the generator more than sending it."""

    frame: bytes
    api_key: int
    version: int

    def stamped(self, correlation: int) -> bytes:
        frame = self.frame  # size (4 bytes), api key (2), version (2), correlation id (4), ...
        return b"".join((frame[:8], _CORRELATION.pack(correlation), frame[12:]))


def _name(request: Any) -> str:
    if type(request) is Prepared:
        return str(request_class(request.api_key, request.version).__name__)
    return type(request).__name__


def cut_frame(buf: bytearray) -> bytes | None:
    """The first whole frame in `buf` (its size prefix cut off), taken out of it; or None."""
    if len(buf) < 4:
        return None
    end = 4 + _SIZE.unpack_from(buf, 0)[0]
    if len(buf) < end:
        return None
    frame = bytes(buf[4:end])
    del buf[:end]
    return frame


class LoadgenError(Exception):
    """The broker did not do what a client needs (no answer in time, an error it cannot handle)."""


def make(cls: type, **values: Any) -> Any:
    """A kio entity of `cls` from those of `values` its version has: fields come and go
    between versions, and requests here are written once, against the newest shape."""
    names = cls.__dataclass_fields__  # type: ignore[attr-defined]
    return cls(**{key: value for key, value in values.items() if key in names})


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

    def prepare(self, request: Any) -> Prepared:
        cls: Any = type(request)
        return Prepared(encode_request(request, 0, CLIENT_ID), cls.__api_key__, cls.__version__)

    async def call(self, request: Any, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """Send one request and return its answer (answers to cancelled calls are skipped)."""
        with trio.CancelScope(deadline=trio.current_time() + timeout) as scope:
            return await self._call(request)
        assert scope.cancelled_caught
        raise LoadgenError(f"{self.address}: no answer to {_name(request)} in {timeout:g} s")

    async def _call(self, request: Any) -> Any:
        correlation = await self._send((request,))
        while True:
            got, answer = await self._receive()
            if got == correlation:
                return answer

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
        for request in requests:  # a kio request, or one `prepare`d
            prepared = request if type(request) is Prepared else self.prepare(request)
            self._correlation += 1
            frames.append(prepared.stamped(self._correlation))
            self._sent.append((self._correlation, prepared.api_key, prepared.version))
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
            frame = cut_frame(buf)
            if frame is not None:
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

    @property
    def sock(self) -> socket.socket:
        return self._sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def next_correlation(self) -> int:
        """A correlation id for a request sent by other means than `call` or `pipeline`."""
        self._correlation += 1
        return self._correlation

    def close(self) -> None:
        """Close at once (outside trio's waits: see `aclose`)."""
        self._sock.close()

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

"""How much can hostile clients raise a well-behaved client's latency? (issue 7, points 4 and 7)

For each hostile load, a fresh `rafka-actors serve` (127.0.0.1:0, temporary data dir, its log
in a file so no pipe-reading thread competes with the measuring client) and one well-behaved
client on its own connection: a direct wire client (our `encode_request` / `decode_response`,
blocking socket, TCP_NODELAY, no client library overhead) that joins a classic group alone
(initial rebalance delay 0), syncs, then sends Heartbeats back to back, each answered before
the next is sent. A Heartbeat crosses the gateway and the group actor and writes nothing, so
its latency is the broker's own queueing and scheduling. On each broker:

1. baseline window (--seconds): Heartbeats with no hostile load;
2. a load generator starts in a separate process (multiprocessing, spawn, niced by
   --load-nice so the 2-core box favours the broker and the measuring client, as if the
   hostile clients were elsewhere); the measuring client keeps heartbeating (not counted)
   until the load reports it is established;
3. hostile window (--seconds): Heartbeats under that load; the broker's CPU, peak RSS
   (VmHWM), open fds and log lines are sampled; a Heartbeat slower than --stall-ms triggers
   one `py-spy dump` of the broker (if py-spy is installed);
4. the load stops; a fresh connection's ApiVersions must be answered (the broker recovered).

The loads (separately, each on its own broker):

* slowloris: 200 connections: a third dribble ApiVersions frames one byte per 10 ms, a
  third send a length prefix and 2 bytes then nothing, a third send nothing. The broker runs
  with connections.max.idle.ms=1500 so the window shows which of them the idle timeout closes.
* garbage: 16 connections in a loop: connect, send noise / framed noise / a real api header
  with a random body / a valid request with flipped bytes, half-close, read to EOF, reconnect.
* maxframe-100MiB / maxframe-1MiB: clients sending one junk frame of exactly
  socket.request.max.bytes (Kafka's default 104857600, and 1048576), half of them behind a
  valid Produce header, then reading to EOF and reconnecting.
* connflood: 16 tasks opening connections as fast as they can and holding them, with
  max.connections=1000 on the broker (the measuring client holds one): every connection past
  the limit is closed by the broker at once.
* reqflood-noread: 4 connections pipelining ApiVersions + Metadata (100 each per write)
  without ever reading. Once a connection's writes stall for 0.5 s (socket buffers full, the
  broker blocked sending it a reply) it is left open, unread, and a new one takes its place;
  the broker runs with connections.max.idle.ms=1500 and the load counts how many of the
  stalled connections the broker closes (their TCP state leaves ESTABLISHED).
* reqflood-drain: 4 connections pipelining the same, each reading (and discarding) its
  replies, so the broker answers as fast as it can (a stalled connection is closed and
  replaced).
* sasl-plain-flood: a SASL_PLAINTEXT listener; the measuring client logs in with SCRAM; 64
  connections in a loop: SaslHandshake(PLAIN) + a bogus SaslAuthenticate (a known user with a
  wrong password, or an unknown user: one PBKDF2 each), read to EOF, reconnect. Skipped with a
  note when the broker has no SASL (`--help-config` lists no sasl.users.file).

Figures per load: the measuring client's Heartbeats (n, p50, p99, max), the same broker's
baseline p99, and p99 / baseline p99; the baseline row compares two quiet windows, which is
the noise floor. Because the client sends one request at a time, a broker stall of S ms
delays one request by S ms however long it is, so p99 (which counts requests) understates a
load that stalls the broker rarely but long: ">10ms", the share of the window's time spent
in requests slower than 10 ms, and max show it. A request that fails or times out
(--probe-timeout) is counted with the time it took, and the client reconnects and rejoins.

    .venv/bin/python bench/hostile_clients.py [--seconds 3] [--quick] [--loads a,b,...]
        [--rounds 1] [--load-nice 10] [--probe-timeout 10] [--stall-ms 250] [--keep DIR]
        [-o KEY=VALUE ...] [-p LOAD.KEY=VALUE ...]

--quick: 1 s windows and smaller loads (the smoke test's mode); --rounds N runs every load N
times and reports the median of each figure (this box's noise is large: see the baseline
row); --loads picks scenarios by name prefix; -o settings go to every broker after the
scenario's own; -p changes a load's parameter (e.g. -p maxframe-100MiB.conns=8).

Progress goes to stderr; the table, the notes and the command go to stdout.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import gc
import math
import multiprocessing
import os
import platform
import random
import re
import shlex
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.offset_commit.v8 import request as commit8
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64
from tricycle import BufferedReceiveStream

from rafka_actors.auth.client import client_exchange
from rafka_actors.protocol.codec import decode_response, encode_request

LISTENING = re.compile(r"listening on (\S+):(\d+)")
SASL_USER, SASL_PASSWORD = "bench", "bench-password"
CLIENT_ID = "hostile-bench"
MiB = 1 << 20
SKIPPED_SASL = "this broker has no SASL (`serve --help-config` lists no sasl.users.file)"


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- the broker ------------------------------------------------------------------------------
class Broker:
    """`rafka-actors serve` on 127.0.0.1:0 with its log in a file, and /proc readings."""

    def __init__(self, workdir: Path, overrides: list[str]) -> None:
        self.data = workdir / "data"
        self.data.mkdir(parents=True)
        self.log_path = workdir / "broker.log"
        self.overrides = overrides
        self.proc: subprocess.Popen[bytes] | None = None
        self.host, self.port = "", 0

    def start(self, timeout: float = 30.0) -> Broker:
        args = [sys.executable, "-m", "rafka_actors", "serve", "--listen", "127.0.0.1:0"]
        args += ["--data-dir", str(self.data)]
        for item in self.overrides:
            args += ["-o", item]
        with self.log_path.open("wb") as log_file:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log_file)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = LISTENING.search(self.log_text())
            if found:
                self.host, self.port = found.group(1), int(found.group(2))
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("broker did not start:\n" + self.log_text()[-3000:])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def status_mib(self, key: str) -> float:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return math.nan

    def fds(self) -> int:
        try:
            return len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            return -1

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def broker_has_sasl() -> bool:
    out = subprocess.run(
        [sys.executable, "-m", "rafka_actors", "serve", "--help-config"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return "sasl.users.file" in out


def add_sasl_user(users_file: Path) -> None:
    subprocess.run(
        [
            *(sys.executable, "-m", "rafka_actors", "users", "add", SASL_USER, "--org", "1"),
            *("--password", SASL_PASSWORD, "--file", str(users_file)),
        ],
        check=True,
        capture_output=True,
    )


# -- the well-behaved client -----------------------------------------------------------------
class ProbeError(Exception):
    pass


class Wire:
    """A blocking Kafka wire connection using the project's codec."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def _exactly(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ProbeError("connection closed by the broker")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def call(self, request: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(request, self.correlation, CLIENT_ID))
        (size,) = struct.unpack(">i", self._exactly(4))
        correlation, response = decode_response(
            request.__api_key__, request.__version__, self._exactly(size)
        )
        if correlation != self.correlation:
            raise ProbeError(f"correlation {correlation} != {self.correlation}")
        return response

    def close(self) -> None:
        self.sock.close()


class Probe:
    """One classic-group member alone in its group, heartbeating on its own connection."""

    def __init__(self, host: str, port: int, timeout: float, sasl: bool) -> None:
        self.host, self.port, self.timeout, self.sasl = host, port, timeout, sasl
        self.group = GroupId(f"hostile-bench-{os.getpid()}")
        self.wire: Wire | None = None
        self.member, self.generation = "", -1
        self.inflight_since: float | None = None  # perf_counter() when the request went out

    def connect(self) -> None:
        if self.wire is not None:
            self.wire.close()
        self.wire = Wire(self.host, self.port, self.timeout)
        if self.sasl:
            self._login()
        self._join()

    def _login(self) -> None:
        assert self.wire is not None
        shake = self.wire.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        if shake.error_code != ErrorCode.none:
            raise ProbeError(f"SaslHandshake: {shake.error_code!r}")
        exchange = client_exchange("SCRAM-SHA-256", SASL_USER, SASL_PASSWORD)
        token: bytes | None = exchange.first()
        while token is not None:
            reply = self.wire.call(SaslAuthenticateRequest(auth_bytes=token))
            if reply.error_code != ErrorCode.none:
                raise ProbeError(f"SaslAuthenticate: {reply.error_code!r} {reply.error_message}")
            token = exchange.next(reply.auth_bytes)

    def _join(self) -> None:
        assert self.wire is not None
        timeout = i32Timedelta.parse(datetime.timedelta(seconds=30))
        protocol = JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")
        for _ in range(3):
            joined = self.wire.call(
                JoinGroupRequest(
                    group_id=self.group,
                    session_timeout=timeout,
                    rebalance_timeout=timeout,
                    member_id=self.member,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(protocol,),
                )
            )
            self.member = joined.member_id
            if joined.error_code == ErrorCode.none:
                break
            if joined.error_code not in (ErrorCode.member_id_required, ErrorCode.unknown_member_id):
                raise ProbeError(f"JoinGroup: {joined.error_code!r}")
            if joined.error_code == ErrorCode.unknown_member_id:
                self.member = ""
        else:
            raise ProbeError("JoinGroup did not succeed")
        self.generation = joined.generation_id
        assignment = SyncGroupRequestAssignment(member_id=self.member, assignment=b"")
        synced = self.wire.call(
            SyncGroupRequest(
                group_id=self.group,
                generation_id=i32(self.generation),
                member_id=self.member,
                group_instance_id=None,
                assignments=(assignment,),
            )
        )
        if synced.error_code != ErrorCode.none:
            raise ProbeError(f"SyncGroup: {synced.error_code!r}")

    def heartbeat(self) -> None:
        assert self.wire is not None
        reply = self.wire.call(
            HeartbeatRequest(
                group_id=self.group,
                generation_id=i32(self.generation),
                member_id=self.member,
                group_instance_id=None,
            )
        )
        if reply.error_code != ErrorCode.none:
            raise ProbeError(f"Heartbeat: {reply.error_code!r}")


@dataclass
class Window:
    latencies: list[float] = field(default_factory=list)  # seconds
    errors: Counter[str] = field(default_factory=Counter)
    recovery_s: float = 0.0  # spent reconnecting and rejoining after errors (not counted)

    def slow_share(self, over_s: float) -> float:
        """Percent of the window's time spent in requests slower than `over_s`."""
        total = sum(self.latencies)
        return 100 * sum(x for x in self.latencies if x > over_s) / total if total else math.nan

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return math.nan
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def probe_for(probe: Probe, seconds: float, until: Callable[[], bool] | None = None) -> Window:
    """Heartbeat back to back for `seconds` (or until `until()`), timing each."""
    window = Window()
    gc.collect()
    gc.disable()
    try:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and not (until and until()):
            start = probe.inflight_since = time.perf_counter()
            try:
                probe.heartbeat()
                failure = None
            except (OSError, ProbeError, ValueError) as exc:
                failure = type(exc).__name__ if isinstance(exc, OSError) else str(exc)
            probe.inflight_since = None
            window.latencies.append(time.perf_counter() - start)
            if failure is not None:
                window.errors[failure[:80]] += 1
                window.recovery_s += reconnect(probe, deadline + 30)
    finally:
        gc.enable()
    return window


def reconnect(probe: Probe, give_up_at: float) -> float:
    start = time.perf_counter()
    while time.perf_counter() < give_up_at:
        try:
            probe.connect()
            break
        except (OSError, ProbeError, ValueError):
            time.sleep(0.1)
    return time.perf_counter() - start


# -- the hostile load generators (run in a separate process) ----------------------------------
def frame(request: Any, correlation: int = 1) -> bytes:
    return encode_request(request, correlation, "hostile")


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="hostile", client_software_version="1")


def metadata() -> MetadataRequest:
    return MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def valid_frames() -> list[bytes]:
    commit = commit8.OffsetCommitRequest(
        group_id=GroupId("g"),
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=(
            commit8.OffsetCommitRequestTopic(
                name=TopicName("t"),
                partitions=(
                    commit8.OffsetCommitRequestPartition(
                        partition_index=i32(0),
                        committed_offset=i64(1),
                        committed_leader_epoch=i32(-1),
                        committed_metadata="m",
                    ),
                ),
            ),
        ),
    )
    return [frame(api_versions()), frame(metadata()), frame(commit)]


Stats = Counter[str]
Load = Callable[[str, int, dict[str, Any], Stats, Callable[[], None]], Coroutine[Any, Any, None]]


async def _read_to_eof(stream: trio.abc.Stream) -> int:
    got = 0
    try:
        while chunk := await stream.receive_some(65536):
            got += len(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    return got


async def _connect(host: str, port: int, stats: Stats) -> trio.SocketStream | None:
    try:
        with trio.fail_after(5):
            return await trio.open_tcp_stream(host, port)
    except (OSError, trio.TooSlowError):
        stats["connect failed"] += 1
        await trio.sleep(0.01)
        return None


def _tcp_state(stream: trio.SocketStream) -> int:
    """The kernel's TCP state of our end (1 = ESTABLISHED): tells whether the broker closed
    the connection without our reading anything from it."""
    return stream.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


async def slowloris(
    host: str, port: int, p: dict[str, Any], stats: Stats, ready: Callable[[], None]
) -> None:
    request = frame(api_versions())

    async def dribble(stream: trio.SocketStream) -> None:
        reader = BufferedReceiveStream(stream)
        while True:
            for i in range(len(request)):
                await stream.send_all(request[i : i + 1])
                stats["dribbled bytes"] += 1
                await trio.sleep(p["byte_interval"])
            head = await reader.receive_all_or_none(4)
            if head is None:
                return
            await reader.receive_exactly(struct.unpack(">i", head)[0])
            stats["dribbled frames answered"] += 1

    async def loris(stream: trio.SocketStream, kind: str) -> None:
        try:
            if kind == "dribbling":
                await dribble(stream)
            else:
                if kind == "prefix-only":
                    await stream.send_all(struct.pack(">i", 64) + b"\x00\x12")
                await stream.receive_some(65536)  # b"": closed by the broker
        except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
            pass
        stats[f"{kind} closed by the broker"] += 1

    async with trio.open_nursery() as nursery:
        kinds = ("dribbling", "prefix-only", "silent")
        for i in range(p["conns"]):
            kind = kinds[i % len(kinds)]
            stream = await _connect(host, port, stats)
            if stream is not None:
                stats[f"{kind} opened"] += 1
                nursery.start_soon(loris, stream, kind)
        ready()


def _garbage(rng: random.Random, frames: list[bytes]) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:  # noise, its first 4 bytes an absurd, negative or small length
        return rng.randbytes(rng.randrange(1, 2048))
    if kind == 1:  # framed noise
        body = rng.randbytes(rng.randrange(1, 2048))
    elif kind == 2:  # a real api header, random body
        key = rng.choice([0, 1, 3, 8, 9, 10, 11, 12, 14, 18, 19, 36, 68])
        body = struct.pack(">hhih", key, rng.randrange(0, 14), 1, -1)
        body += rng.randbytes(rng.randrange(0, 512))
    else:  # a valid request with a few bytes flipped
        good = bytearray(rng.choice(frames)[4:])
        for _ in range(rng.randrange(1, 4)):
            good[rng.randrange(len(good))] = rng.randrange(256)
        body = bytes(good)
    return struct.pack(">i", len(body)) + body


async def garbage(
    host: str, port: int, p: dict[str, Any], stats: Stats, ready: Callable[[], None]
) -> None:
    frames = valid_frames()

    async def one(seed: int) -> None:
        rng = random.Random(seed)
        while True:
            stream = await _connect(host, port, stats)
            if stream is None:
                continue
            try:
                payload = _garbage(rng, frames)
                await stream.send_all(payload)
                await stream.send_eof()
                stats["bytes sent"] += len(payload)
                if await _read_to_eof(stream):
                    stats["answered before close"] += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                stats["reset while sending"] += 1
            finally:
                await stream.aclose()
            stats["connections"] += 1

    async with trio.open_nursery() as nursery:
        for i in range(p["conns"]):
            nursery.start_soon(one, i)
        ready()


async def maxframe(
    host: str, port: int, p: dict[str, Any], stats: Stats, ready: Callable[[], None]
) -> None:
    size = p["size"]
    junk = memoryview(os.urandom(size))
    produce_header = struct.pack(">hhih", 0, 9, 1, 1) + b"x\x00"  # Produce v9, header v2

    async def one(i: int) -> None:
        while True:
            stream = await _connect(host, port, stats)
            if stream is None:
                continue
            head = produce_header if i % 2 else b""
            start = time.perf_counter()
            try:
                await stream.send_all(struct.pack(">i", size) + head)
                await stream.send_all(junk[: size - len(head)])
                await stream.send_eof()
                await _read_to_eof(stream)
                stats["frames sent"] += 1
                stats["MiB sent"] += size // MiB
                stats["ms per frame (sum)"] += round((time.perf_counter() - start) * 1000)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                stats["closed before the frame was sent"] += 1
            finally:
                await stream.aclose()

    async with trio.open_nursery() as nursery:
        for i in range(p["conns"]):
            nursery.start_soon(one, i)
        ready()


async def connflood(
    host: str, port: int, p: dict[str, Any], stats: Stats, ready: Callable[[], None]
) -> None:
    open_now = 0

    async def hold(stream: trio.SocketStream) -> None:
        nonlocal open_now
        open_now += 1
        stats["most held at once"] = max(stats["most held at once"], open_now)
        try:
            await _read_to_eof(stream)
            stats["closed by the broker"] += 1
        finally:
            open_now -= 1
            await stream.aclose()

    async def opener(nursery: trio.Nursery) -> None:
        while True:
            stream = await _connect(host, port, stats)
            if stream is not None:
                stats["connected"] += 1
                nursery.start_soon(hold, stream)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        for _ in range(p["openers"]):
            nursery.start_soon(opener, nursery)
        ready()


async def reqflood(
    host: str, port: int, p: dict[str, Any], stats: Stats, ready: Callable[[], None]
) -> None:
    batch = p["batch"]
    blob = b"".join(frame(api_versions() if i % 2 else metadata(), i) for i in range(2 * batch))
    stalled_streams: list[trio.SocketStream] = []

    async def count_replies(stream: trio.SocketStream) -> None:
        buf = bytearray()
        while chunk := await stream.receive_some(1 << 16):
            buf += chunk
            pos = 0
            while len(buf) - pos >= 4:
                (size,) = struct.unpack_from(">i", buf, pos)
                if len(buf) - pos < 4 + size:
                    break
                pos += 4 + size
                stats["replies read"] += 1
            del buf[:pos]

    async def flood(stream: trio.SocketStream) -> None:
        """Write until a write stalls for 0.5 s (the broker stopped reading)."""
        async with trio.open_nursery() as nursery:
            if p["drain"]:
                nursery.start_soon(count_replies, stream)
            while True:
                with trio.move_on_after(0.5) as stalled:
                    await stream.send_all(blob)
                    stats["requests sent"] += 2 * batch
                if stalled.cancelled_caught:
                    stats["stalled connections"] += 1
                    nursery.cancel_scope.cancel()
                    return

    async def one() -> None:
        while True:
            stream = await _connect(host, port, stats)
            if stream is None:
                continue
            try:
                await flood(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                stats["closed by the broker while writing"] += 1
            if p["drain"]:
                await stream.aclose()
            else:  # leave it open, unread: does the broker ever give up on it?
                stalled_streams.append(stream)

    async def watch_stalled() -> None:
        while True:
            await trio.sleep(0.25)
            for stream in list(stalled_streams):
                if _tcp_state(stream) != 1:  # no longer ESTABLISHED: the broker closed it
                    stats["stalled ones closed by the broker"] += 1
                    stalled_streams.remove(stream)
                    await stream.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(p["conns"]):
            nursery.start_soon(one)
        nursery.start_soon(watch_stalled)
        ready()


async def sasl_flood(
    host: str, port: int, p: dict[str, Any], stats: Stats, ready: Callable[[], None]
) -> None:
    handshake = frame(SaslHandshakeRequest(mechanism="PLAIN"), 1)

    async def one(i: int) -> None:
        attempt = 0
        while True:
            stream = await _connect(host, port, stats)
            if stream is None:
                continue
            attempt += 1
            user = SASL_USER if attempt % 2 else f"ghost-{i}-{attempt}"
            token = f"\0{user}\0wrong-{attempt}".encode()
            try:
                await stream.send_all(handshake + frame(SaslAuthenticateRequest(auth_bytes=token)))
                await _read_to_eof(stream)
                stats["bogus logins"] += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                stats["reset"] += 1
            finally:
                await stream.aclose()

    async with trio.open_nursery() as nursery:
        for i in range(p["conns"]):
            nursery.start_soon(one, i)
        ready()


LOADS: dict[str, Load] = {
    "slowloris": slowloris,
    "garbage": garbage,
    "maxframe": maxframe,
    "connflood": connflood,
    "reqflood": reqflood,
    "sasl": sasl_flood,
}


def load_worker(
    load: str,
    host: str,
    port: int,
    params: dict[str, Any],
    nice: int,
    ready: MpEvent,
    stop: MpEvent,
    results: Any,
) -> None:
    """Process entry point: run one load until `stop` is set, then report its counters."""
    if nice:
        os.nice(nice)
    stats: Stats = Counter()
    start = time.process_time()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(LOADS[load], host, port, params, stats, ready.set)
            await trio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    except BaseException as exc:  # the report says the load died, and why
        stats[f"load generator died: {exc!r}"[:120]] += 1
    stats["load cpu ms"] = round((time.process_time() - start) * 1000)
    results.put(dict(stats))


# -- one scenario ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    load: str | None
    overrides: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    sasl: bool = False


def scenarios(quick: bool) -> list[Scenario]:
    q = quick
    return [
        Scenario("none (baseline)", None),
        Scenario(
            "slowloris",
            "slowloris",
            ("connections.max.idle.ms=1500",),
            {"conns": 60 if q else 200, "byte_interval": 0.01},
        ),
        Scenario("garbage", "garbage", (), {"conns": 16}),
        Scenario("maxframe-100MiB", "maxframe", (), {"size": 100 * MiB, "conns": 1 if q else 2}),
        Scenario(
            "maxframe-1MiB",
            "maxframe",
            (f"socket.request.max.bytes={MiB}",),
            {"size": MiB, "conns": 8},
        ),
        Scenario("connflood", "connflood", ("max.connections=1000",), {"openers": 16}),
        Scenario(
            "reqflood-noread",
            "reqflood",
            ("connections.max.idle.ms=1500",),
            {"conns": 4, "batch": 100, "drain": False},
        ),
        Scenario("reqflood-drain", "reqflood", (), {"conns": 4, "batch": 100, "drain": True}),
        Scenario(
            "sasl-plain-flood",
            "sasl",
            ("listener.security.protocol=SASL_PLAINTEXT",),
            {"conns": 32 if q else 64},
            sasl=True,
        ),
    ]


@dataclass
class Outcome:
    scenario: Scenario
    baseline: Window
    hostile: Window | None = None
    stats: dict[str, int] = field(default_factory=dict)
    cpu_pct: float = math.nan
    peak_rss_mib: float = math.nan
    max_fds: int = 0
    log_lines: int = 0
    log_kib: float = 0.0
    loadavg: str = ""
    notes: list[str] = field(default_factory=list)


class Sampler(threading.Thread):
    """Samples the broker's open fds every 0.25 s (a cheap read, so the measuring loop barely
    notices) and, the first time a Heartbeat has been waiting longer than `stall_s`, takes a
    `py-spy dump` of the broker while it is still stuck."""

    def __init__(self, broker: Broker, probe: Probe, stall_s: float, dump_path: Path) -> None:
        super().__init__(daemon=True)
        self.broker, self.probe, self.stall_s, self.dump_path = broker, probe, stall_s, dump_path
        self.max_fds = 0
        self.stopping = threading.Event()
        self.dumped = False

    def run(self) -> None:
        tick = 0
        while not self.stopping.wait(0.05):
            tick += 1
            if tick % 5 == 0:
                self.max_fds = max(self.max_fds, self.broker.fds())
            since = self.probe.inflight_since
            if not self.dumped and since is not None:
                waited = time.perf_counter() - since
                if waited > self.stall_s:
                    self.dump(waited)

    def dump(self, waited: float) -> None:
        self.dumped = True
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(spy).exists():
            return
        out = subprocess.run(
            [spy, "dump", "--pid", str(self.broker.pid)],
            capture_output=True,
            text=True,
            check=False,
        )
        header = f"# a Heartbeat waiting for {waited * 1000:.0f} ms; py-spy dump of the broker"
        self.dump_path.write_text(header + "\n" + out.stdout + out.stderr)

    def main_thread_stack(self) -> list[str]:
        try:
            lines = self.dump_path.read_text().splitlines()
        except OSError:
            return []
        start = next((i for i, line in enumerate(lines) if "MainThread" in line), 0)
        end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
        return [lines[0], *lines[start:end]]


def run_scenario(sc: Scenario, opts: argparse.Namespace, workdir: Path) -> Outcome:
    overrides = ["group.initial.rebalance.delay.ms=0", *sc.overrides, *opts.overrides]
    if sc.sasl:
        users = workdir / "users.json"
        add_sasl_user(users)
        overrides.append(f"sasl.users.file={users}")
    broker = Broker(workdir, overrides).start()
    try:
        probe = Probe(broker.host, broker.port, opts.probe_timeout, sc.sasl)
        probe.connect()
        probe_for(probe, min(1.0, opts.seconds))  # warm up
        outcome = Outcome(sc, probe_for(probe, opts.seconds))
        outcome.loadavg = Path("/proc/loadavg").read_text().split()[0]
        if sc.load is None:
            outcome.hostile = measure(broker, probe, opts, outcome, None, workdir)
        else:
            outcome.hostile = with_load(broker, probe, sc, opts, outcome, workdir)
        after_check(broker, outcome, opts)
        return outcome
    finally:
        broker.stop()
        if opts.keep:
            base = Path(opts.keep) / re.sub(r"\W+", "-", sc.name).strip("-")
            dest, n = base, 1
            while dest.exists():  # one directory per round
                n += 1
                dest = base.with_name(f"{base.name}-{n}")
            dest.mkdir(parents=True)
            for item in workdir.glob("*.*"):
                shutil.copy(item, dest / item.name)


def measure(
    broker: Broker,
    probe: Probe,
    opts: argparse.Namespace,
    outcome: Outcome,
    worker: Any,
    workdir: Path,
) -> Window:
    sampler = Sampler(broker, probe, opts.stall_ms / 1000, workdir / "py-spy-dump.txt")
    sampler.start()
    cpu0, log0, wall0 = broker.cpu_seconds(), broker.log_size(), time.perf_counter()
    text0 = broker.log_text()
    window = probe_for(
        probe, opts.seconds, until=(lambda: not worker.is_alive()) if worker else None
    )
    wall = time.perf_counter() - wall0
    sampler.stopping.set()
    sampler.join()
    outcome.cpu_pct = 100 * (broker.cpu_seconds() - cpu0) / wall
    outcome.peak_rss_mib = broker.status_mib("VmHWM")
    outcome.max_fds = sampler.max_fds
    new_text = broker.log_text()[len(text0) :]
    outcome.log_lines = new_text.count("\n")
    outcome.log_kib = (broker.log_size() - log0) / 1024
    if sampler.dumped:
        outcome.notes += sampler.main_thread_stack() or ["(py-spy dump failed or absent)"]
    return window


def with_load(
    broker: Broker,
    probe: Probe,
    sc: Scenario,
    opts: argparse.Namespace,
    outcome: Outcome,
    workdir: Path,
) -> Window:
    assert sc.load is not None
    mp = multiprocessing.get_context("spawn")
    ready, stop, results = mp.Event(), mp.Event(), mp.Queue()
    args = (sc.load, broker.host, broker.port, sc.params, opts.load_nice, ready, stop, results)
    worker = mp.Process(target=load_worker, args=args, daemon=True)
    worker.start()
    try:
        # keep the group member alive (and the connection busy) until the load is on
        probe_for(probe, 60, until=lambda: ready.is_set() or not worker.is_alive())
        if not ready.is_set():
            outcome.notes.append("the load generator never got going")
        window = measure(broker, probe, opts, outcome, worker, workdir)
    finally:
        stop.set()
        try:
            outcome.stats = results.get(timeout=30)
        except Exception as exc:
            outcome.notes.append(f"no counters from the load generator: {exc!r}")
        worker.join(10)
        if worker.is_alive():
            worker.kill()
    return window


def after_check(broker: Broker, outcome: Outcome, opts: argparse.Namespace) -> None:
    if not broker.alive():
        outcome.notes.append(f"BROKER DIED (exit {broker.proc and broker.proc.returncode})")
        outcome.notes += broker.log_text().splitlines()[-20:]
        return
    start = time.perf_counter()
    answered = False
    while time.perf_counter() - start < 10 and not answered:
        try:
            wire = Wire(broker.host, broker.port, 10)
            wire.call(api_versions())
            wire.close()
            answered = True
        except (OSError, ProbeError, ValueError):
            time.sleep(0.1)
    took = (time.perf_counter() - start) * 1000
    if not answered:
        outcome.notes.append("after the load a new connection's ApiVersions was NOT answered")
    elif took > 100:
        outcome.notes.append(f"after the load a new connection's ApiVersions took {took:.0f} ms")
    text = broker.log_text()
    for word in ("Traceback", "ERROR", "CRITICAL"):
        if word in text:
            outcome.notes.append(f"the broker log has {text.count(word)} {word}")


# -- the report ------------------------------------------------------------------------------
HEAD = (
    f"{'load':18}{'n':>7}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'base p99':>10}"
    f"{'p99/base':>10}{'>10ms':>7}{'errors':>8}{'brk cpu':>9}{'peak RSS':>10}{'fds':>6}"
    f"{'log kB':>8}"
)


def _median(values: list[float]) -> float:
    done = [v for v in values if not math.isnan(v)]
    return statistics.median(done) if done else math.nan


def row(runs: list[Outcome]) -> str:
    """One scenario's figures; over several rounds, the median of each (max of RSS, fds)."""
    windows = [o.hostile or Window() for o in runs]
    base = [o.baseline.pct(0.99) for o in runs]
    p99 = [w.pct(0.99) for w in windows]
    ratio = [h / b if b > 0 else math.nan for h, b in zip(p99, base, strict=True)]
    return (
        f"{runs[0].scenario.name:18}{_median([len(w.latencies) for w in windows]):7.0f}"
        f"{_median([w.pct(0.5) for w in windows]) * 1e3:9.2f}{_median(p99) * 1e3:9.2f}"
        f"{_median([max(w.latencies, default=math.nan) for w in windows]) * 1e3:9.1f}"
        f"{_median(base) * 1e3:10.2f}{_median(ratio):10.2f}"
        f"{_median([w.slow_share(0.010) for w in windows]):6.1f}%"
        f"{sum(sum(w.errors.values()) for w in windows):8d}"
        f"{_median([o.cpu_pct for o in runs]):8.0f}%"
        f"{max(o.peak_rss_mib for o in runs):7.0f}MiB{max(o.max_fds for o in runs):6d}"
        f"{_median([o.log_kib for o in runs]):8.0f}"
    )


def report(outcomes: list[Outcome], skipped: list[str], opts: argparse.Namespace) -> None:
    print()
    print(
        "hostile_clients: one well-behaved client's Heartbeat latency (settled classic group,"
        " own connection, direct wire client, one request at a time)"
    )
    print(
        f"machine: {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; window {opts.seconds:g} s per figure; "
        f"load generator: one separate process at nice +{opts.load_nice}"
    )
    print(f"broker code: {source_description()}")
    print(
        "base p99 = the same broker's quiet window just before the load; >10ms = share of the"
        " window's time spent in requests slower than 10 ms (p99 counts requests: a long stall"
        " delays one sequential request, so it shows in max and here); brk cpu = broker CPU"
        " during the hostile window; peak RSS = broker VmHWM; fds = most open broker fds"
    )
    by_name: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_name.setdefault(o.scenario.name, []).append(o)
    if opts.rounds > 1:
        print(f"each figure: the median over {opts.rounds} rounds (peak RSS, fds: the highest)")
    print(HEAD)
    for runs in by_name.values():
        print(row(runs))
    print()
    if opts.rounds > 1:
        print("p99 ms / max ms per round:")
        for name, runs in by_name.items():
            figures = "  ".join(
                f"{(o.hostile or Window()).pct(0.99) * 1e3:.2f}/"
                f"{max((o.hostile or Window()).latencies, default=math.nan) * 1e3:.0f}"
                for o in runs
            )
            print(f"  {name:18} {figures}")
    print("broker settings (besides group.initial.rebalance.delay.ms=0 everywhere):")
    for name, runs in by_name.items():
        sets = " ".join(runs[0].scenario.overrides) or "defaults"
        loadavg = " ".join(o.loadavg for o in runs)
        print(
            f"  {name:18} {sets}; load {runs[0].scenario.params or '-'};"
            f" 1-min loadavg before {loadavg}"
        )
    print("what the hostile clients did (counters of the load generator, per round):")
    for o in outcomes:
        if o.stats:
            items = ", ".join(f"{k} {v}" for k, v in sorted(o.stats.items()))
            print(f"  {o.scenario.name:18} {items}")
    notes = [(o.scenario.name, n) for o in outcomes for n in o.notes]
    notes += [
        (
            o.scenario.name,
            f"probe errors: {dict(o.hostile.errors)}; "
            f"{o.hostile.recovery_s:.1f} s spent reconnecting",
        )
        for o in outcomes
        if o.hostile is not None and o.hostile.errors
    ]
    if notes or skipped:
        print("notes:")
        for name in skipped:
            print(f"  {name}: skipped, {SKIPPED_SASL}")
        for name, note in notes:
            print(f"  {name}: {note}")
    print(f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}")


def source_description() -> str:
    """Where the broker's code came from (the child inherits our sys.path / PYTHONPATH)."""
    import rafka_actors

    src = Path(rafka_actors.__file__).resolve().parents[1]
    git = ["git", "-C", str(src)]
    commit = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not commit:
        return f"{src} (not a git checkout)"
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "."], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"{src} (git {commit}{', with uncommitted changes' if dirty else ''})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=None, help="per window (default 3)")
    parser.add_argument("--quick", action="store_true", help="1 s windows, smaller loads")
    parser.add_argument("--rounds", type=int, default=1, help="run every load this many times")
    parser.add_argument("--loads", default="", help="comma-separated scenario names (prefixes)")
    parser.add_argument("--load-nice", type=int, default=10)
    parser.add_argument("--probe-timeout", type=float, default=10.0)
    parser.add_argument("--stall-ms", type=float, default=250.0)
    parser.add_argument("--keep", help="copy each broker's log (and py-spy dumps) here")
    parser.add_argument("-o", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "-p",
        dest="params",
        action="append",
        default=[],
        metavar="LOAD.KEY=VALUE",
        help="change a load's parameter, e.g. -p maxframe-100MiB.conns=8",
    )
    opts = parser.parse_args(argv)
    if opts.seconds is None:
        opts.seconds = 1.0 if opts.quick else 3.0
    chosen = [
        with_params(s, opts.params) for s in scenarios(opts.quick) if selected(s.name, opts.loads)
    ]
    skipped: list[str] = []
    if any(s.sasl for s in chosen) and not broker_has_sasl():
        skipped = [s.name for s in chosen if s.sasl]
        chosen = [s for s in chosen if not s.sasl]
    outcomes = []
    for round_no in range(1, opts.rounds + 1):
        for sc in chosen:
            log(f"{sc.name}: starting (round {round_no}/{opts.rounds})")
            with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
                outcome = run_scenario(sc, opts, Path(tmp))
            outcomes.append(outcome)
            log(row([outcome]))
    report(outcomes, skipped, opts)
    return 0


def with_params(sc: Scenario, changes: list[str]) -> Scenario:
    params = dict(sc.params)
    for change in changes:
        target, _, value = change.partition("=")
        name, _, key = target.rpartition(".")
        if name == sc.name:
            try:
                params[key] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                params[key] = value
    return dataclasses.replace(sc, params=params)


def selected(name: str, loads: str) -> bool:
    if not loads:
        return True
    return any(name.startswith(want.strip()) for want in loads.split(",") if want.strip())


if __name__ == "__main__":
    sys.exit(main())

"""Members of classic consumer groups, all driven by one trio task: the load generator of
workloads (e) and (f) and of the group-size sweep.

Each member has its own TCP connection (as a consumer has its own connection to its
coordinator) and implements the classic group protocol the way a consumer does: JoinGroup
(again with the member id on MEMBER_ID_REQUIRED), SyncGroup (the leader computes a range
assignment from the subscriptions it is given), Heartbeat every `Fleet.heartbeat_interval_s`
(or back to back once `Fleet.closed_loop` is set), rejoin on REBALANCE_IN_PROGRESS (from a
Heartbeat or a SyncGroup), LeaveGroup when told to go. A `GroupTracker` per group tells when
every live member holds an assignment of the same generation (the group is Stable as its
clients see it) and checks that those assignments are disjoint and complete.

Why one task. With a trio task per member, each request cost the generator about 65 us of
CPU (trio's readiness wait, its epoll registration, a reschedule and a task switch around
every answer), so in (f)'s rebalance of 1 000 members, the generator's work on 999 JoinGroup
and 999 SyncGroup answers (0.13 s of CPU) was most of what the table called the
coordinator's share. Here one task (`Fleet._pump`) waits on one level-triggered epoll of every
member's socket; each member is a plain state machine with at most one request in flight,
which its answer moves on (`Member._answered`). Timers (the next heartbeat, a retry) are one
heap. A request costs a `send`, its answer a `recv` and a decode, and the requests a member
sends again and again (its heartbeat, its JoinGroup) are encoded once and get only their
correlation id written into them.

Timing uses trio's clock (monotonic seconds). An answer is timed by the pass that read it;
the first JoinGroup of a rejoin by the clock as it is sent, since one pass may read a
thousand answers before it.

Every wait is bounded: a request unanswered for its timeout fails the fleet with
`LoadgenError` (which a workload turns into a missing figure), but for the LeaveGroups of a
fleet that is stopping, which are given up on instead.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
import select
from array import array
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from rafka_actors.protocol.codec import decode_response

from .loadgen import (
    HEARTBEAT,
    JOIN,
    LEAVE,
    REQUEST_TIMEOUT_S,
    RETRY_CODES,
    SYNC,
    Connection,
    LoadgenError,
    Prepared,
    assigned_partitions,
    cut_frame,
    ms,
    range_assign,
    schema,
    subscription,
)

log = logging.getLogger(__name__)

_RECEIVE = 1 << 18
RETRY_S = 0.05  # before a JoinGroup again, after an error worth retrying
LEAVE_TIMEOUT_S = 5.0  # a stopping fleet's LeaveGroup
WATCH_EVERY_S = 0.5  # how often requests are checked for answers overdue


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
        self.started_at = 0.0
        self.done = trio.Event()
        self.now = 0.0  # the pump's pass: when the answers it reads came
        self._epoll: Any = None
        self._by_fd: dict[int, Member] = {}
        self._timers: list[tuple[float, int, Member, int]] = []  # (when, order, member, token)
        self._order = 0
        self._running = 0  # members not done
        self._failure = ""
        self._idle: trio.CancelScope | None = None  # the pump's wait for its epoll

    def add_group(self, name: str, size: int, partitions: int | None = None) -> GroupTracker:
        tracker = self.groups[name] = GroupTracker(name, size, partitions or size)
        for _ in range(size):
            self.members.append(Member(self, tracker, len(self.members)))
        return tracker

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect every member, then start them together and drive them until all are done
        (`stop`)."""
        epoll = self._epoll = select.epoll()
        try:
            async with trio.open_nursery() as nursery:
                for member in self.members:
                    nursery.start_soon(member.connect)
            for member in self.members:
                self._by_fd[member.fd] = member
                epoll.register(member.fd, select.EPOLLIN)
            self._running = len(self.members)
            self.now = self.started_at = trio.current_time()
            for member in self.members:
                member.join(fresh=True)
            task_status.started()
            await self._pump()
        finally:
            for member in self.members:
                member.close()
            epoll.close()
            self.done.set()

    async def _pump(self) -> None:
        epoll = self._epoll
        watch_at = trio.current_time() + WATCH_EVERY_S
        while self._running:
            if self._failure:
                raise LoadgenError(self._failure)
            now = self.now = trio.current_time()
            events = epoll.poll(0)
            for fd, mask in events:
                member = self._by_fd.get(fd)
                if member is None:
                    continue  # done and closed earlier in this pass
                if mask & select.EPOLLOUT:
                    member.flush()
                if mask & ~select.EPOLLOUT:
                    member.readable()
            self._fire_timers(now)
            if now >= watch_at:
                self._watch(now)
                watch_at = now + WATCH_EVERY_S
            if events:
                await trio.lowlevel.checkpoint()  # the workload's own tasks run between passes
                continue
            wake_at = min(watch_at, self._timers[0][0]) if self._timers else watch_at
            with trio.CancelScope(deadline=wake_at) as self._idle:
                await trio.lowlevel.wait_readable(epoll.fileno())
            self._idle = None
        if self._failure:
            raise LoadgenError(self._failure)

    def after(self, delay: float, member: Member) -> None:
        """Call `member.on_timer` in `delay` seconds, unless it acts otherwise first."""
        self._order += 1
        heapq.heappush(self._timers, (self.now + delay, self._order, member, member.timer))

    def _fire_timers(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, member, token = heapq.heappop(timers)
            if token == member.timer:
                member.on_timer()

    def _watch(self, now: float) -> None:
        for member in self.members:
            if member.overdue(now):
                if self.stopping:
                    member.finished()  # its LeaveGroup: given up on
                else:
                    self.fail(f"{member.address}: no answer to {member.waiting_for} in time")

    def writable_wanted(self, member: Member, wanted: bool) -> None:
        mask = select.EPOLLIN | (select.EPOLLOUT if wanted else 0)
        self._epoll.modify(member.fd, mask)

    def member_done(self, member: Member) -> None:
        if self._by_fd.pop(member.fd, None) is not None:
            self._epoll.unregister(member.fd)
        self._running -= 1

    def fail(self, why: str) -> None:
        self._failure = self._failure or why

    async def wait_stable(self, timeout: float) -> bool:
        """True once every group is Stable (within `timeout` seconds)."""
        with trio.move_on_after(timeout):
            for tracker in self.groups.values():
                await tracker.stable.wait()
            return True
        return False

    def go_closed_loop(self) -> None:
        self.closed_loop = True
        self.from_outside()
        for member in self.members:
            member.act_now()

    def stop(self) -> None:
        """Members leave their groups at their next chance and disconnect."""
        self.stopping = True
        self.from_outside()
        for member in self.members:
            member.act_now()

    def from_outside(self) -> None:
        """A workload's task is about to move members on: `now` is its time, not the pump's
        last pass, and the pump must look again at what is due (a member done, a timer)."""
        self.now = trio.current_time()
        if self._idle is not None:
            self._idle.cancel()


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
    """One consumer of the classic protocol, on its own connection: a state machine that the
    fleet's pump moves on with each answer (`_answered`) and timer (`on_timer`)."""

    def __init__(self, fleet: Fleet, group: GroupTracker, index: int) -> None:
        self.fleet = fleet
        self.group = group
        self.index = index
        self.conn: Connection | None = None
        self.fd = -1
        self.address = fleet.bootstrap
        self.member_id = ""
        self.generation = -1
        self.leaving = False
        self.is_leader = False
        self.noticed_at: float | None = None  # when a rebalance was announced to us
        self.left_at: float | None = None  # when our LeaveGroup was sent
        self.timer = 0  # the token of the one timer that may still act (`Fleet.after`)
        self.waiting_for = ""  # the API whose answer is awaited ("": none in flight)
        self._expected = (0, 0, 0)  # (correlation, api key, version) of that request
        self._sent_at = 0.0
        self._deadline = math.inf
        self._on_timer: Callable[[], None] | None = None
        self._members: tuple[Any, ...] = ()  # the leader's JoinGroup answer: who to assign
        self._join_frame: tuple[str, Prepared] | None = None  # (member id, its JoinGroup)
        self._heartbeat_frame: tuple[int, Prepared] | None = None  # (generation, its Heartbeat)
        self._buf = bytearray()
        self._out = b""  # what the kernel has not taken yet
        self._done = False

    async def connect(self) -> None:
        conn = self.conn = await Connection.open(self.fleet.bootstrap)
        self.address = conn.address
        self.fd = conn.fileno()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def leave(self) -> None:
        """Leave the group (LeaveGroup) at the next chance and stop."""
        self.leaving = True
        self.group.left(self.index)
        self.fleet.from_outside()
        self.act_now()

    def act_now(self) -> None:
        """Take the next step at once if waiting only for a timer (a heartbeat's, a retry's)."""
        if not self.waiting_for and not self._done and self._on_timer is not None:
            self.on_timer()

    def on_timer(self) -> None:
        step, self._on_timer = self._on_timer, None
        self.timer += 1
        if step is not None:
            step()

    def overdue(self, now: float) -> bool:
        return bool(self.waiting_for) and now > self._deadline

    def _wait(self, delay: float, step: Callable[[], None]) -> None:
        self._on_timer = step
        self.timer += 1
        self.fleet.after(delay, self)

    # -- the protocol -------------------------------------------------------------------------

    def join(self, *, fresh: bool = False) -> None:
        """Send a JoinGroup (`fresh`: the first of a rejoin, which the fleet's timing counts)."""
        fleet = self.fleet
        if fleet.stopping or self.leaving:
            self._finish()
            return
        if fresh:  # the clock, not the pass's time: the pass may have read many answers
            now = trio.current_time()
            if self.noticed_at is not None:
                fleet.reactions.append(now - self.noticed_at)
                self.noticed_at = None
            fleet.last_join_sent = max(fleet.last_join_sent, now)
        conn = self._conn
        if self._join_frame is None or self._join_frame[0] != self.member_id:
            protocol = schema(JOIN, conn.version(JOIN)).JoinGroupRequestProtocol
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
            self._join_frame = (self.member_id, conn.prepare(request))
        self._send(self._join_frame[1], fleet.rebalance_timeout_s + 10)

    def _joined(self, answer: Any) -> None:
        code = answer.error_code
        if code == ErrorCode.none:
            self.member_id, self.generation = answer.member_id, answer.generation_id
            self.is_leader = answer.leader == answer.member_id
            self._members = answer.members
            self._sync()
        elif code == ErrorCode.member_id_required:
            self.member_id = answer.member_id
            self.join()
        elif code == ErrorCode.unknown_member_id:
            self.member_id = ""
            self.join()
        elif code in RETRY_CODES or code == ErrorCode.rebalance_in_progress:
            self._wait(RETRY_S, self.join)
        else:
            self.fleet.fail(f"{self.group.name}: JoinGroup failed: {code.name}")

    def _sync(self) -> None:
        if self.fleet.stopping or self.leaving:
            self._finish()
            return
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
        self._send(conn.prepare(request), fleet.rebalance_timeout_s + 10)

    def _synced(self, answer: Any) -> None:
        code = answer.error_code
        if code != ErrorCode.none:
            self._rejoin_after(code, "SyncGroup")
            return
        parts = assigned_partitions(answer.assignment)
        self.group.synced(self.index, self.generation, parts, self.fleet.now)
        # the first heartbeats spread out over an interval
        self._heartbeat_in(self.fleet.heartbeat_interval_s * random.random())

    def heartbeat(self) -> None:
        fleet = self.fleet
        if fleet.stopping or self.leaving:
            self._finish()
            return
        if self._heartbeat_frame is None or self._heartbeat_frame[0] != self.generation:
            request = self._conn.request(
                HEARTBEAT,
                group_id=self.group.name,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=None,
            )
            self._heartbeat_frame = (self.generation, self._conn.prepare(request))
        self._send(self._heartbeat_frame[1], REQUEST_TIMEOUT_S)

    def _heartbeat_answered(self, answer: Any) -> None:
        fleet, code = self.fleet, answer.error_code
        if code == ErrorCode.none:
            if fleet.recording:
                fleet.heartbeat_latency.append(fleet.now - self._sent_at)
            self._heartbeat_in(fleet.heartbeat_interval_s)
            return
        if fleet.recording:
            fleet.heartbeat_errors[code.name] += 1
        self._rejoin_after(code, "Heartbeat")

    def _heartbeat_in(self, delay: float) -> None:
        """The next heartbeat: after `delay`, or at once in a closed loop."""
        if self.fleet.closed_loop:
            self.heartbeat()
        else:
            self._wait(delay, self.heartbeat)

    def _rejoin_after(self, code: ErrorCode, api: str) -> None:
        """After a SyncGroup's or Heartbeat's error: join again, as a consumer does, unless it
        is one a consumer cannot handle."""
        if code == ErrorCode.rebalance_in_progress:
            self.noticed_at = self.fleet.now
        elif code == ErrorCode.unknown_member_id:
            self.member_id = ""
        elif code not in RETRY_CODES and code != ErrorCode.illegal_generation:
            self.fleet.fail(f"{self.group.name}: {api} failed: {code.name}")
            return
        self.join(fresh=True)

    def _finish(self) -> None:
        """Leave the group if in it, then be done."""
        if not self.member_id:
            self.finished()
            return
        conn = self._conn
        if conn.version(LEAVE) >= 3:
            identity = schema(LEAVE, conn.version(LEAVE)).MemberIdentity
            who = identity(member_id=self.member_id, group_instance_id=None, reason=None)
            request = conn.request(LEAVE, group_id=self.group.name, members=(who,))
        else:
            request = conn.request(LEAVE, group_id=self.group.name, member_id=self.member_id)
        self.left_at = self.fleet.now
        timeout = LEAVE_TIMEOUT_S if self.fleet.stopping else REQUEST_TIMEOUT_S
        self._send(conn.prepare(request), timeout)

    def _left(self, answer: Any) -> None:
        self.member_id = ""
        self.finished()

    def finished(self) -> None:
        if not self._done:
            self._done = True
            self.waiting_for, self._on_timer = "", None
            self.fleet.member_done(self)
            self.close()

    # -- the wire -----------------------------------------------------------------------------

    @property
    def _conn(self) -> Connection:
        assert self.conn is not None
        return self.conn

    def _send(self, request: Prepared, timeout: float) -> None:
        """Send `request` as the one request in flight."""
        correlation = self._conn.next_correlation()
        frame = request.stamped(correlation)
        self._expected = (correlation, request.api_key, request.version)
        self.waiting_for = _NAMES[request.api_key]
        self._sent_at = now = self.fleet.now
        self._deadline = now + timeout
        if self._out:
            self._out += frame
            return
        try:
            sent = self._conn.sock.send(frame)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self.fleet.fail(f"{self.address}: connection lost: {exc}")
            return
        if sent < len(frame):
            self._out = frame[sent:]
            self.fleet.writable_wanted(self, True)

    def flush(self) -> None:
        try:
            sent = self._conn.sock.send(self._out)
        except BlockingIOError:
            return
        except OSError as exc:
            self.fleet.fail(f"{self.address}: connection lost: {exc}")
            return
        self._out = self._out[sent:]
        if not self._out:
            self.fleet.writable_wanted(self, False)

    def readable(self) -> None:
        try:
            data = self._conn.sock.recv(_RECEIVE)
        except BlockingIOError:
            return
        except OSError as exc:
            self.fleet.fail(f"{self.address}: connection lost: {exc}")
            return
        if not data:
            if not self._done:
                self.fleet.fail(f"{self.address} closed the connection")
            return
        buf = self._buf
        buf += data
        while (frame := cut_frame(buf)) is not None:
            self._answered(frame)

    def _answered(self, frame: bytes) -> None:
        correlation, api_key, version = self._expected
        got, answer = decode_response(api_key, version, frame)
        if not self.waiting_for or got != correlation:
            self.fleet.fail(f"{self.address} answered {got}, expected {correlation}")
            return
        self.waiting_for = ""
        _ANSWERED[api_key](self, answer)


_NAMES = {JOIN: "JoinGroup", SYNC: "SyncGroup", HEARTBEAT: "Heartbeat", LEAVE: "LeaveGroup"}
_ANSWERED: dict[int, Callable[[Member, Any], None]] = {
    JOIN: Member._joined,
    SYNC: Member._synced,
    HEARTBEAT: Member._heartbeat_answered,
    LEAVE: Member._left,
}

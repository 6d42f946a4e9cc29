"""One task that answers the hot requests of every plain connection, without a task switch.

A connection's task (connection.py) reads a frame, answers it and sends the reply; between
requests it waits in trio's `wait_readable`. Each request then costs a registration with
trio's epoll, the event's dispatch, a switch into the task and back, and checkpoints
around the read and the write (docs/performance.md, "Many clients at once": a trio echo
server spends 14 us a round trip with a task per connection, 6.5 us from one task on its
own epoll). Answered here instead, a commit from one of 16 busy clients cost the broker
26 us of CPU instead of 32-37 ("What changed in the hot paths", session 17).

So between frames a plain connection's task parks here (`next_bytes`) and the reactor
watches its socket in its own level-triggered epoll. When the peer's bytes come, the
reactor reads them and answers each whole frame of an API in `FAST_APIS` (OffsetCommit,
OffsetFetch, Heartbeat, ApiVersions) on the spot, as long as the answer needs no wait: the
group's actor answers inline (`GroupActor.answer_inline`) or the request never reaches an
actor. It drives the connection's own `answer` coroutine with `conn.now_only` set, under
which a group ask that would wait raises `NotNow` instead (apis/groups.py). The first frame
it cannot answer so, and every byte after it, goes back to the connection's task, which
answers as it always did (Metadata, a frame in pieces, a bad frame, the end of the stream):
the reactor only ever answers a prefix of what the peer sent, in order, so replies keep the
request order. A JoinGroup or SyncGroup, which waits for other members, waits here instead
(parked_reply.py), and so does a LeaveGroup, a KIP-848 ConsumerGroupHeartbeat, or a
Heartbeat the group's actor cannot answer inline: the reactor keeps its handler's
coroutine, stops watching the socket until the group's actor answers, then replies and
answers the bytes that came after it.

A commit equal to the connection's last one but for its offsets is answered from that one,
without decoding it (commit_repeat.py); the group's actor still steps it in full. A fetch
equal to the connection's last one gets its reply again while the offsets it answered are
unchanged (fetch_repeat.py); a heartbeat equal to the last one is stepped by the group's
actor without a decode (heartbeat_repeat.py).

The commits of one pass over the epoll's events share one write of the coordinator log, and
under fsync `always` one fsync (`_answer_events`, GroupRegistry.hold_writes): their records
are kept until the pass has answered every socket, then stored, and only then do the
replies that rest on them go out: a commit's, a fetch's or a heartbeat's about a group with
records held (GroupRegistry.answered_held), and every later one on the same connection.
Replies about other groups go out at once. If the write fails, none of the held replies
does: their connections close, and the groups forget what was not stored. A commit the
log cannot take in a pass (a batch of the flusher's is queued, under `always`) goes to the
task, which parks here again right after answering it (`conn.parks_at_once`), so that its
next commit shares a pass with the others.

The task keeps everything else: its idle clock (a fast reply restarts it, as a reply of
its own would), connection limits, SASL (a connection that must still authenticate never
parks here), TLS (never parks here), and closing. With tracing on nothing is answered
here: a request tried and handed back would leave a failed span behind.

Idle polling (idle_poll.py): after its own replies the reactor keeps polling its epoll for
the budget; each pass tells the poller which sockets it answered, so that polling stops
while as many peers as cores keep the machine busy. A task that has just sent a reply does
not park at once: its socket polls itself for the budget, as without the reactor, and the
task answers what comes then; it parks here once the budget is over (or another reply was
sent since).

A connection whose latest request the reactor could not answer (`conn.waits_in_task`:
Produce, Fetch, Metadata) does not park here at all: its task
reads for itself, as without the reactor, and answers fast frames as the reactor would; it
parks again after one of those. Parked, each such request would cost a read here and two
epoll_ctl calls only to be handed back.
"""

from __future__ import annotations

import logging
import os
import select
from collections.abc import Coroutine
from typing import Any, Final

import trio
from outcome import Error, Outcome, Value

from .. import telemetry
from . import commit_repeat, fetch_repeat, heartbeat_repeat
from .connection import answer
from .context import BrokerContext, ConnectionInfo
from .frames import BETWEEN_FRAMES, BIG_FRAME, SENDING
from .idle import CloseConnection, IdleClock
from .idle_poll import IdlePoller
from .parked_reply import ParkedReply
from .plain_socket import PlainSocketStream, stream_error

log = logging.getLogger(__name__)

# OffsetCommit, OffsetFetch, Heartbeat, ApiVersions: handlers whose only wait is a group
# ask (ask_group_light) or none at all
COMMIT_KEY: Final = 8
FETCH_KEY: Final = 9
HEARTBEAT_KEY: Final = 12
FAST_APIS: Final = frozenset({COMMIT_KEY, FETCH_KEY, HEARTBEAT_KEY, 18})
# JoinGroup, SyncGroup: answered once other members come; LeaveGroup, ConsumerGroupHeartbeat
# and a Heartbeat the group's actor cannot answer inline (its mailbox holds joins in a
# rebalance): answered once the actor has taken what came first. Handlers of one group ask,
# whose replies are waited for here (parked_reply.py).
WAITING_APIS: Final = frozenset({11, HEARTBEAT_KEY, 13, 14, 68})
# Passes answered back to back while requests keep coming, before other tasks get a turn:
# a turn of trio's scheduler is Python, and with 16 confluent-kafka committers (4 commits a
# pass) it took 18% of the broker's CPU when every pass was followed by one.
PASSES_PER_TURN: Final = 4
_RECEIVE: Final = 1 << 16
_WATCHED: Final = select.EPOLLIN | select.EPOLLRDHUP


class _Parked:
    """A connection whose task waits in `next_bytes` for the reactor to hand it bytes.
    While `waiting` (a JoinGroup's or SyncGroup's handler, suspended until `slot` is
    filled), its socket is not watched, and `rest` holds the bytes that came after it."""

    __slots__ = ("conn", "fd", "idle", "rest", "slot", "task", "waiting")

    def __init__(self, fd: int, conn: ConnectionInfo, idle: IdleClock) -> None:
        self.fd = fd
        self.conn = conn
        self.idle = idle
        self.task = trio.lowlevel.current_task()
        self.waiting: Coroutine[Any, Any, bytes | None] | None = None
        self.slot: ParkedReply | None = None
        self.rest = b""


class Reactor:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._epoll = select.epoll()
        # The connections parked here, by fd: exactly those registered in the epoll (a
        # connection's task that has its socket must not be watched: level-triggered, and
        # a hang-up is reported even with no events asked for, its fd would keep firing).
        self._parked: dict[int, _Parked] = {}
        self._limit = min(ctx.config.socket_request_max_bytes, BIG_FRAME)
        # Connections whose waiting request has its answer, and the eventfd in the epoll
        # that wakes the reactor for them (written once for however many come together).
        self._ready: list[_Parked] = []
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._epoll.register(self._wake, select.EPOLLIN)

    @property
    def poller(self) -> IdlePoller | None:
        return self._ctx.idle_poll

    # -- the connection's side ----------------------------------------------------------

    async def next_bytes(
        self, stream: PlainSocketStream, conn: ConnectionInfo, idle: IdleClock
    ) -> bytes:
        """What the peer sent after the requests answered here (b"" at the end of the
        stream), for the connection's task to answer from its first frame on."""
        if conn.gate is not None or telemetry.tracing() or self._epoll.closed:
            return await stream.receive_some(_RECEIVE)  # (closed: shutting down)
        fd = stream.fileno()
        # The task reads for itself while its socket polls itself (this task sent the
        # latest reply: parked at once, the request would find the reactor asleep, 0.1 ms
        # more a commit under `always`), or while its requests are ones the reactor cannot
        # answer (read here and handed back, each would cost two epoll_ctl calls more). It
        # answers fast frames as the reactor would, and hands the rest to its frame reader.
        while True:
            if conn.waits_in_task:
                data = await stream.receive_some(_RECEIVE)
            elif conn.parks_at_once:
                conn.parks_at_once = False
                break
            elif (polled := await stream.receive_while_polling(_RECEIVE)) is not None:
                data = polled
            else:
                break
            if not data:
                return data  # the end of the stream
            handed = self._answer_frames(data, fd, conn, idle, stream, trio.current_time())
            if handed is not None:
                return await _after_pending(handed.unwrap(), stream, idle)
        parked = _Parked(fd, conn, idle)
        self._arm(fd, parked)

        def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
            self._disarm(fd)
            return trio.lowlevel.Abort.SUCCEEDED

        return await _after_pending(await trio.lowlevel.wait_task_rescheduled(abort), stream, idle)

    def forget(self, fd: int) -> None:
        """The connection is closing: never look at `fd` again (its number may be reused)."""
        self._disarm(fd)

    def _arm(self, fd: int, parked: _Parked) -> None:
        self._epoll.register(fd, _WATCHED)
        self._parked[fd] = parked

    def _disarm(self, fd: int) -> None:
        """Stop watching `fd`: its task has it, or it is closing (then a request of its
        that waits here is dropped, and so is its answer when it comes)."""
        parked = self._parked.pop(fd, None)
        if parked is not None:
            self._unwatch(fd)
            if parked.waiting is not None:
                parked.waiting.close()
                parked.waiting = None
            if parked.slot is not None:
                parked.slot.forget()
                parked.slot = None

    def _unwatch(self, fd: int) -> None:
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass  # not watched (a request of its waits), or the socket or epoll is closed

    def _hand_back(self, parked: _Parked, result: Outcome[tuple[bytes, bytes]]) -> None:
        self._disarm(parked.fd)
        trio.lowlevel.reschedule(parked.task, result)

    # -- the reactor's task -------------------------------------------------------------

    async def run(self) -> None:
        epoll = self._epoll
        try:
            while True:
                events = epoll.poll(0)
                if events:
                    for _ in range(PASSES_PER_TURN):
                        self._answer_events(events)
                        if not (events := epoll.poll(0)):
                            break
                    else:
                        await trio.lowlevel.checkpoint()  # other tasks run between turns
                        continue
                # Nothing more came: polling on or sleeping lets the other tasks run too,
                # without a turn of the scheduler first.
                if (poller := self.poller) is not None and poller.polls_for(self):
                    await poller.poll_again()  # a reply just went out: keep polling
                else:
                    await trio.lowlevel.wait_readable(epoll.fileno())
        finally:
            epoll.close()
            os.close(self._wake)

    def _answer_events(self, events: list[tuple[int, int]]) -> None:
        """Answer what came on each socket of `events`. The records of the commits answered
        are written together once all are answered (GroupRegistry.hold_writes): with 16
        committing clients, 11 commits a pass shared one write instead of making 11. So every
        reply about a group with records held waits for that write, in its connection's
        `deferred`, and so do the connection's later replies; if the write failed, those
        connections close instead (their clients retry)."""
        registry = self._ctx.groups  # (None: a context without groups, where nothing writes)
        if registry is not None:
            registry.hold_writes()
        served: list[tuple[_Parked, list[bytes], Outcome[tuple[bytes, bytes]] | None]] = []
        now = trio.current_time()  # the pass's time: its requests came together
        try:
            for fd, _mask in events:
                if fd == self._wake:
                    served += self._answer_waited(now)
                    continue
                answered = self._serve(fd, now)
                if answered is not None:
                    served.append(answered)
        finally:
            stored = registry is None or registry.release_writes()
        for parked, deferred, handed in served:
            if deferred:
                handed = self._send_deferred(parked.fd, deferred, handed, stored)
            if handed is not None:
                self._hand_back(parked, handed)
        if (poller := self.poller) is not None:
            poller.passed(events)

    def _serve(
        self, fd: int, now: float
    ) -> tuple[_Parked, list[bytes], Outcome[tuple[bytes, bytes]] | None] | None:
        """Answer what came on `fd`: its connection, the replies held for the pass's write
        and what its task must have next; None if `fd` is no longer parked here."""
        parked = self._parked.get(fd)
        if parked is None:
            return None
        return self._served(parked, now)

    def _served(
        self, parked: _Parked, now: float, *, resume: bool = False
    ) -> tuple[_Parked, list[bytes], Outcome[tuple[bytes, bytes]] | None]:
        """`_answer_what_came`, or with `resume` `_resume`, for a connection parked here:
        it, the replies held for the pass's write and what its task must have next."""
        deferred: list[bytes] = []
        try:
            if resume:
                handed = self._resume(parked, deferred, now)
            else:
                handed = self._answer_what_came(parked, deferred, now)
        except Exception:  # a bug of ours: this connection ends, the reactor carries on
            conn = parked.conn
            log.exception("reactor: internal error on %s:%d", conn.peer_host, conn.peer_port)
            handed = Error(CloseConnection("internal error"))
        return parked, deferred, handed

    def _send_deferred(
        self,
        fd: int,
        deferred: list[bytes],
        handed: Outcome[tuple[bytes, bytes]] | None,
        stored: bool,
    ) -> Outcome[tuple[bytes, bytes]] | None:
        """Send the replies held for the pass's write; what the task must have next."""
        if not stored:
            return Error(CloseConnection("coordinator log write failed; replies withdrawn"))
        try:
            unsent = self._send(fd, deferred[0] if len(deferred) == 1 else b"".join(deferred))
        except OSError as exc:
            return Error(stream_error(exc))
        if not unsent or isinstance(handed, Error):
            return handed  # (a close after the reply: the close)
        return Value((unsent, b"" if handed is None else handed.unwrap()[1]))

    def _answer_what_came(
        self, parked: _Parked, deferred: list[bytes], now: float
    ) -> Outcome[tuple[bytes, bytes]] | None:
        """Read what the peer sent and answer its whole fast frames. Returns what the task
        must have next (a reply the socket had no room for, and the bytes from the first
        frame not answered here), or None: nothing is left, keep watching."""
        try:
            data = os.read(parked.fd, _RECEIVE)
        except BlockingIOError:
            return None
        except OSError as exc:
            return Error(stream_error(exc))
        if not data:
            return Value((b"", b""))  # the end of the stream: the task closes
        return self._answer_frames(
            data, parked.fd, parked.conn, parked.idle, self, now, deferred, parked
        )

    def _answer_frames(
        self,
        data: bytes,
        fd: int,
        conn: ConnectionInfo,
        idle: IdleClock,
        replier: object,
        now: float,
        deferred: list[bytes] | None = None,
        parked: _Parked | None = None,
    ) -> Outcome[tuple[bytes, bytes]] | None:
        """Answer the whole fast frames `data` starts with, on `fd`; what the task must have
        next, or None. `replier` polls for the peer's next request after the replies; `now`
        is trio.current_time(), read once for all the frames. With
        `deferred` (a pass of `_answer_events`), a reply about a group whose records the pass
        holds (its commit, or a fetch after it) goes there instead, and so does every later
        one on the connection, to keep their order. With `parked` (the connection parked
        here), a JoinGroup or SyncGroup that must wait for other members, after replies that
        all went out, waits here (`_park`): its socket is not watched meanwhile, and the
        bytes after it are kept for after its reply."""
        done, size, replied, waits = 0, len(data), False, False
        registry = self._ctx.groups
        try:
            while size - done >= 4:
                length = int.from_bytes(data[done : done + 4], "big", signed=True)
                end = done + 4 + length
                if not 0 < length <= self._limit or end > size:
                    break  # a bad length or a frame in pieces: the frame reader's job
                frame = data[done + 4 : end]
                reply = self._answer_now(frame, conn, now)
                held = registry is not None and registry.answered_held()
                if reply is None:
                    if parked is None or deferred or _api_key(frame) not in WAITING_APIS:
                        break
                    reply = self._park(frame, parked)
                    if reply is None:
                        waits = parked.waiting is not None
                        if waits:
                            parked.rest = data[end:]
                            self._unwatch(fd)
                            return None
                        break
                done = end
                if not reply:
                    continue
                replied = True
                if deferred is not None and (deferred or held):
                    deferred.append(reply)
                    if conn.close_after_reply is not None:
                        return Error(CloseConnection(conn.close_after_reply))
                    continue
                unsent = self._send(fd, reply)
                if unsent:
                    return Value((unsent, data[done:]))
                if conn.close_after_reply is not None:
                    return Error(CloseConnection(conn.close_after_reply))
        except OSError as exc:
            return Error(stream_error(exc))
        except CloseConnection as exc:
            return Error(exc)
        finally:
            if replied:
                idle.waiting(BETWEEN_FRAMES, now)  # the peer was active: its idle time restarts
                if self.poller is not None:
                    self.poller.replied(by=replier)
            if waits:
                idle.busy()  # the peer waits for us, not we for it
        return Value((b"", data[done:])) if done < size else None

    def _answer_now(self, frame: bytes, conn: ConnectionInfo, now: float) -> bytes | None:
        """The encoded reply (b"" for none), or None: the task must answer this frame.
        Raises CloseConnection if the request waited after all (a bug: see FAST_APIS)."""
        ctx = self._ctx
        api_key = _api_key(frame)
        if api_key == COMMIT_KEY and not ctx.registry().writes_now:
            # Outside a pass under fsync `always`, or with a batch of the flusher's queued:
            # the task answers this one, then parks here for the next.
            conn.waits_in_task, conn.parks_at_once = False, True
            return None
        conn.waits_in_task = True  # until answered here
        if api_key not in FAST_APIS:
            return None
        repeated = self._repeat(api_key, frame, conn, now)
        if repeated is not None:
            conn.waits_in_task = False
            return repeated
        conn.now_only = True
        coroutine = answer(frame, ctx, ctx.apis, conn)
        try:
            coroutine.send(None)
        except StopIteration as done:
            reply: bytes | None = done.value
            conn.waits_in_task = False
            self._keep(api_key, frame, reply, conn)
            return b"" if reply is None else reply
        except Exception:  # NotNow, a bad frame, a handler's bug: the task tries it again
            return None
        finally:
            conn.now_only = False
        # It waited: whatever it started may not run twice, so the connection ends.
        coroutine.close()
        log.error("reactor: a request of api %d waited; closing its connection", frame[1])
        raise CloseConnection("internal error: a fast request waited")

    def _park(self, frame: bytes, parked: _Parked) -> bytes | None:
        """Drive the handler of a request of WAITING_APIS until it waits for its group's actor:
        its reply (b"" for none) if it needs no wait (an error, say); None with
        `parked.waiting` set if it waits here for the actor's answer; None without if the
        task must answer it (a full mailbox, a bad frame: the task tries it again)."""
        conn = parked.conn
        slot = ParkedReply(parked, self._filled)
        conn.parked_reply = slot
        coroutine = answer(frame, self._ctx, self._ctx.apis, conn)
        try:
            yielded = coroutine.send(None)
        except StopIteration as done:
            reply: bytes | None = done.value
            conn.waits_in_task = False
            return b"" if reply is None else reply
        except Exception:
            return None
        finally:
            conn.parked_reply = None
        if yielded is not slot:  # it waited on something else: it may not run twice
            coroutine.close()
            log.error("reactor: a request of api %d waited elsewhere; closing", frame[1])
            raise CloseConnection("internal error: a waiting request waited elsewhere")
        parked.waiting, parked.slot = coroutine, slot
        return None

    def _filled(self, slot: ParkedReply) -> None:
        """A waiting request's answer came (from its group's actor): wake the reactor."""
        if self._epoll.closed:
            return  # shutting down: the eventfd is closed (its number may be reused)
        if not self._ready:
            os.eventfd_write(self._wake, 1)
        self._ready.append(slot.owner)

    def _answer_waited(
        self, now: float
    ) -> list[tuple[_Parked, list[bytes], Outcome[tuple[bytes, bytes]] | None]]:
        """Reply to the waiting requests whose answers came, and answer what came after
        them; as `_serve` does for a socket's events."""
        try:
            os.eventfd_read(self._wake)
        except BlockingIOError:
            pass
        ready, self._ready = self._ready, []
        return [
            self._served(parked, now, resume=True)
            for parked in ready
            # (not if its connection went meanwhile)
            if self._parked.get(parked.fd) is parked and parked.waiting is not None
        ]

    def _resume(
        self, parked: _Parked, deferred: list[bytes], now: float
    ) -> Outcome[tuple[bytes, bytes]] | None:
        """Send a waiting request's handler its answer, write the reply, answer the frames
        that came after it and watch the socket again; what the task must have next."""
        coroutine, rest = parked.waiting, parked.rest
        assert coroutine is not None
        parked.waiting, parked.slot, parked.rest = None, None, b""
        conn, fd = parked.conn, parked.fd
        try:
            coroutine.send(None)
        except StopIteration as done:
            reply: bytes | None = done.value
        except CloseConnection as exc:
            return Error(exc)
        else:  # it waited again: it may not run twice
            coroutine.close()
            log.error("reactor: a waiting request waited twice; closing its connection")
            return Error(CloseConnection("internal error: a waiting request waited twice"))
        conn.waits_in_task = False
        parked.idle.waiting(BETWEEN_FRAMES, now)
        if reply:
            try:
                unsent = self._send(fd, reply)
            except OSError as exc:
                return Error(stream_error(exc))
            if unsent:
                return Value((unsent, rest))
            if self.poller is not None:
                self.poller.replied(by=self)
        if conn.close_after_reply is not None:
            return Error(CloseConnection(conn.close_after_reply))
        if rest:
            handed = self._answer_frames(rest, fd, conn, parked.idle, self, now, deferred, parked)
            if handed is not None or parked.waiting is not None:
                return handed
        self._epoll.register(fd, _WATCHED)
        return None

    def _repeat(self, api_key: int, frame: bytes, conn: ConnectionInfo, now: float) -> bytes | None:
        """The reply to `frame` from what the connection kept of its last request of the same
        api (commit_repeat.py, fetch_repeat.py, heartbeat_repeat.py), or None."""
        ctx = self._ctx
        if api_key == COMMIT_KEY and conn.repeat_commit is not None:
            return commit_repeat.answer(conn.repeat_commit, frame, ctx, conn, now)
        if api_key == FETCH_KEY and conn.repeat_fetch is not None:
            return fetch_repeat.answer(conn.repeat_fetch, frame, ctx, conn, now)
        if api_key == HEARTBEAT_KEY and conn.repeat_heartbeat is not None:
            return heartbeat_repeat.answer(conn.repeat_heartbeat, frame, ctx, conn, now)
        return None

    def _keep(self, api_key: int, frame: bytes, reply: bytes | None, conn: ConnectionInfo) -> None:
        """After the handler answered `frame` with `reply`: what to answer a repeat from."""
        if api_key == COMMIT_KEY:
            conn.repeat_commit = commit_repeat.keep(frame, reply, conn)
        elif api_key == FETCH_KEY:
            conn.repeat_fetch = fetch_repeat.keep(frame, reply, self._ctx, conn)
        elif api_key == HEARTBEAT_KEY:
            conn.repeat_heartbeat = heartbeat_repeat.keep(frame, reply, conn)

    @staticmethod
    def _send(fd: int, reply: bytes) -> bytes:
        """Write `reply`; what the socket had no room for (b"": all sent)."""
        try:
            sent = os.write(fd, reply)
        except BlockingIOError:
            return reply
        return reply[sent:]


def _api_key(frame: bytes) -> int:
    return int.from_bytes(frame[:2], "big")


async def _after_pending(
    handed: tuple[bytes, bytes], stream: PlainSocketStream, idle: IdleClock
) -> bytes:
    """The bytes handed to the task, once the reply the socket had no room for is sent."""
    pending, data = handed
    if pending:
        idle.waiting(SENDING)
        await stream.send_all(pending)
        idle.waiting(BETWEEN_FRAMES)
    return data

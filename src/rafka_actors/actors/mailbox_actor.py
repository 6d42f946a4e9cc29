"""The actor base: one trio task that alone owns one key's state, behind a bounded mailbox.

Every kind of actor (a group's, a transactional id's) is this class over a `Machine`: the kind's
pure state machine and the few lines that wire it to a key (group_actor.py, txn_actor.py).

A turn. The actor's task loops over its mailbox, a trio memory channel of `Envelope`s, each an
op with a one-shot reply. When it wakes it takes everything queued (up to `BATCH_LIMIT`) and
`turn` steps each op through the machine in arrival order, appends all their records to the
log at once (one write, one fsync, shared with other actors' turns by the log's group commit),
and only once they are stored lets the machine publish what readers see and sends the
replies. Timers are not tasks: the actor waits for mail until the state's next deadline
(`trio.move_on_at`) and then steps the machine's timer op through the same turn, ahead of what
is queued.

Waiting. Every envelope taken is held under a waiter token until answered; an op that must
wait (a JoinGroup parked for a rebalance) is answered in a later turn, when the machine names
its token. A caller that gave up meanwhile finds nobody reading its reply slot: the answer is
dropped.

One failure path. A step that raises, a log that refuses the records, and a write that takes
longer than `offsets.commit.timeout.ms` are handled alike: nothing of the turn was
acknowledged; the actor logs it, answers everyone it holds with a retriable error, and
rebuilds its state from the log (`Machine.rebuild`), like a coordinator failover. The error is
Kafka's for the same failure of its coordinators' appends (CoordinatorOperationExceptionHelper,
TransactionStateManager): NOT_COORDINATOR for a disk that refused the write (KAFKA_STORAGE_ERROR
there), COORDINATOR_NOT_AVAILABLE for a timeout and for a failed step. Storage failures are
logged once per 10 s with a count (storage/failures.py).

One stop protocol. An idle actor (nothing held, no follow-up under way, and a state that is
exactly what its stored records say: `Machine.idle`) that finds its mailbox empty waits up to
`idle_grace_s` for more mail, then stops when it finds it empty: in that same turn, with no
checkpoint in between, it closes its mailbox and hands its state to `on_stop` (the registry,
which rests it and forgets the actor). A sender that comes later finds the mailbox closed and
asks the registry again. Whatever else ends the actor (cancelled, a bug), everything it holds
or still has queued is answered, and the mailbox closed (`_drain`): no caller waits forever.

The grace (issue 53, lever 4; `group.actor.idle.grace.ms`, 1 s), which the registry gives an
actor whose key was asked again within the grace of coming to rest (a burst), and not one
asked once (actor_registry.py): a simple consumer's group is Empty, so without it every
commit started an actor (a mailbox, the machine's wiring, a task and its first scheduler
pass). Side by side with the build before it, under
`coordinator.log.fsync=always`, `bench/request_cost.py --ops commit --brokers
'new=rafka-actors,main=rafka-actors@<main's python>'` in both orders: 16 committers in 16
groups (`--clients 16`, 3 runs) 1.43x, 1.59x and 2.89x the commits/s (e.g. 2 466 against
1 552/s) at 0.71-0.79x the broker CPU per commit; one committer (4 runs) 0.79-0.92x the CPU per
commit. With confluent-kafka clients (`bench/run.py --workloads c`, 2 runs), whose 16 threads
share one process and limit that figure, 16 clients 1.07x and 1.15x; one client's rate is
within the noise (1.33x and 0.75x, its p50 latency 1.21x and 1.22x better). With the burst
rule, 16 committers 1.76x (2 253 against 1 278/s); (g)'s 100 000 one-commit groups unchanged
(docs/performance.md, "Issue 53, levers 4 and 5").

Follow-ups. A state may call for work outside any turn (a prepared transaction's markers):
`Machine.follow_up` gives it, the actor runs it in a nursery of its own (only a kind that
`follows_up` pays for one), and its result comes back as an op through the mailbox.

Traces. An envelope carries its sender's OpenTelemetry context (the actor's task keeps the
context of whichever request started it): each op's spans hang off its own request, and the
turn's append is one span under the one request it serves, or linked to each of them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar

import trio
from kio.schema.errors import ErrorCode
from opentelemetry.context import Context

from .. import telemetry
from ..ids import LogKey
from ..storage.coordinator_log import CoordinatorLog
from ..storage.coordinator_segments import CoordinatorLogError
from ..storage.failures import STORAGE_LOG
from .clock import now_ms, trio_time
from .reply import ReplyTo

log = logging.getLogger(__name__)

# Ops stepped together at most: their replies wait for the turn's one append, so a long
# queue is served in slices and the first callers are not held back by the last.
BATCH_LIMIT: Final = 256
DEFAULT_COMMIT_TIMEOUT_S: Final = 5.0  # Kafka's offsets.commit.timeout.ms

K = TypeVar("K", bound=LogKey)
S = TypeVar("S")


@dataclass(slots=True)
class Envelope:
    op: Any
    reply: ReplyTo
    # the sender's OpenTelemetry context: the op's spans are children of its request's span
    # (telemetry.py), not of whatever request started the actor's task
    context: Context | None = None


class _NoReply:
    """The reply slot of an actor's own ops: nobody waits for them."""

    def send_nowait(self, value: Any, /) -> None:
        pass


NO_REPLY: Final = _NoReply()


class StoreTimedOut(Exception):
    """A turn's records were not stored within the commit timeout; its replies must not go."""


class Batch:
    """What the steps of one turn produced: stored with one append, then answered. (A plain
    class: a dataclass's __init__ with three default factories runs three times the bytecode.)"""

    __slots__ = ("causes", "deadline", "events", "records", "replies")

    def __init__(self, deadline: int | None) -> None:
        self.deadline = deadline  # the state's next deadline after these steps (or earlier)
        self.records: list[Any] = []
        self.replies: list[tuple[int, Any]] = []  # (waiter token, answer)
        # for the machine's log lines and spans: (event, the span it happened in)
        self.events: list[tuple[Any, Context | None]] = []
        self.causes: list[Context | None] = []  # each op's request (None: the timer)


FollowUp = Callable[[], Awaitable[Any]]  # work outside the turns; returns the op to step


class Machine(Protocol[S]):
    """A kind of actor: its pure machine, wired to one key."""

    @property
    def timer_op(self) -> Any:
        """Stepped (waiter -1) when the state's deadline is due."""
        ...

    @property
    def follows_up(self) -> bool:
        """Whether `follow_up` may give work (the actor then opens a nursery for it)."""
        ...

    def describe(self, state: S) -> str:
        """The key as log lines name it ("group g (cgp_… 0/consumer-groups/g)")."""
        ...

    def step(
        self, state: S, op: Any, waiter: int, now: int, batch: Batch, cause: Context | None
    ) -> S:
        """Step `op` (answers go to `waiter`; its spans under `cause`, its request's); add
        what it produced to `batch`."""
        ...

    def next_deadline(self, state: S) -> int | None: ...

    def span_attributes(self, state: S) -> Mapping[str, Any]:
        """What a span of this key's work names (the append's)."""
        ...

    def idle(self, state: S) -> bool:
        """Exactly what its stored records say, with nothing to wait for: may stop."""
        ...

    def rebuild(self, now: int) -> S:
        """The state as the log has it (one replay of the kind's records)."""
        ...

    def settled(self, before: S, after: S, batch: Batch) -> None:
        """The turn's records are stored: publish what readers see, trace its events."""
        ...

    def rebuilt(self, state: S) -> None:
        """The state was rebuilt from the log: publish it."""
        ...

    def follow_up(self, state: S) -> FollowUp | None:
        """Work the state calls for outside the turns, if any."""
        ...


class MailboxActor(Generic[K, S]):
    __slots__ = (
        "_commit_timeout_s",
        "_deadline",
        "_following",
        "_grace",
        "_inbox",
        "_next_token",
        "_tasks",
        "_waiters",
        "idle_grace_s",
        "key",
        "log",
        "machine",
        "mailbox",
        "on_stop",
        "state",
    )

    def __init__(
        self,
        key: K,
        machine: Machine[S],
        state: S,
        coordinator_log: CoordinatorLog,
        *,
        mailbox_size: int = 1024,
        commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S,
        on_stop: Callable[[S], None] = lambda _state: None,
        idle_grace_s: float = 0.0,
    ) -> None:
        self.key = key
        self.machine = machine
        self.state = state
        self.log = coordinator_log
        self.mailbox, self._inbox = trio.open_memory_channel[Envelope](mailbox_size)
        self._commit_timeout_s = commit_timeout_s
        self.on_stop = on_stop  # gets the state of an actor that stopped idle (its registry)
        self._waiters: dict[int, tuple[ReplyTo, Any]] = {}  # token -> (reply to, its op)
        self._next_token = 1
        self._deadline = machine.next_deadline(state)  # or an earlier time (Batch.deadline)
        self._tasks: trio.Nursery | None = None  # where follow-ups run
        self._following = False  # a follow-up is under way
        # how long an idle actor waits for more mail before it stops (lever 4 of issue 53)
        self.idle_grace_s = idle_grace_s
        self._grace: trio.CancelScope | None = None  # its wait, while it waits

    @property
    def idle(self) -> bool:
        """Nothing to stay for: nothing held, no follow-up under way, an idle state."""
        return not self._waiters and not self._following and self.machine.idle(self.state)

    def describe(self) -> str:
        return self.machine.describe(self.state)

    async def run(self) -> None:
        """Serve the mailbox until idle with nothing queued. Whatever ends it (idle,
        cancelled, a bug), every request still held or queued is answered."""
        if self.machine.follows_up and self._tasks is None:
            async with trio.open_nursery() as tasks:  # where its follow-ups run
                self._tasks = tasks
                try:
                    await self.run()
                finally:
                    tasks.cancel_scope.cancel()
            return
        try:
            if self._tasks is not None:
                self._follow_up()  # e.g. a restart in PrepareCommit: finish the decision
            while True:
                batch = await self._next_batch()
                if batch is None:  # idle, its mailbox found empty: stop in this same turn
                    self._inbox.close()
                    self.on_stop(self.state)
                    return
                await self.turn(*batch)
                del batch  # (not kept alive while the actor waits for the next one)
        finally:
            self._drain()

    async def _next_batch(self) -> tuple[bool, list[Envelope]] | None:
        """Whether the state's deadline is due, and what is queued (at least one envelope
        unless the deadline came first); None if the actor is idle and may stop."""
        envelopes: list[Envelope] = []
        if self._due():
            await trio.lowlevel.checkpoint()  # a state whose timers keep firing still yields
        elif not self._waiters and not self._following and self.machine.idle(self.state):
            try:  # idle: what is queued, or a sender waiting on a full mailbox
                envelopes.append(self._inbox.receive_nowait())
            except trio.WouldBlock:
                if not await self._linger(envelopes):
                    return None
        elif self._deadline is None:
            envelopes.append(await self._inbox.receive())
        else:
            with trio.move_on_at(trio_time(self._deadline)):
                envelopes.append(await self._inbox.receive())
        while len(envelopes) < BATCH_LIMIT:
            try:
                envelopes.append(self._inbox.receive_nowait())
            except trio.WouldBlock:
                break
        return self._due(), envelopes

    async def _linger(self, envelopes: list[Envelope]) -> bool:
        """Idle with an empty mailbox: wait up to the grace for mail (a burst of commits to
        an Empty group is served by one actor, not one started per commit). False: none
        came, and the mailbox was found empty with no checkpoint before the caller stops."""
        if self.idle_grace_s <= 0:
            return False
        with trio.move_on_after(self.idle_grace_s) as self._grace:
            envelopes.append(await self._inbox.receive())
        self._grace = None
        if envelopes:
            return True
        try:  # (a sender may have come as the grace ran out)
            envelopes.append(self._inbox.receive_nowait())
        except trio.WouldBlock:
            return False
        return True

    def stop_lingering(self) -> None:
        """Stop as soon as idle from now on (a visit by a sweep need not keep it)."""
        self.idle_grace_s = 0.0
        if self._grace is not None:
            self._grace.cancel()

    def _due(self) -> bool:
        deadline = self._deadline
        return deadline is not None and trio.current_time() >= trio_time(deadline)

    async def turn(self, timer_due: bool, envelopes: list[Envelope]) -> None:
        """Step the batch (a due timer first), store its records, then publish and answer."""
        # Every envelope is held from the start: if a step fails, everything taken out of
        # the mailbox is answered, stepped or not.
        tokens = [self._hold(envelope) for envelope in envelopes]
        now = now_ms()
        machine = self.machine
        state = self.state
        batch = Batch(self._deadline)
        op: Any = None
        try:
            if timer_due:
                op = machine.timer_op
                state = self._fire(state, now, batch)
            causes = batch.causes
            for envelope, token in zip(envelopes, tokens, strict=True):
                op = envelope.op
                causes.append(envelope.context)
                state = machine.step(state, op, token, now, batch, envelope.context)
            if batch.records:
                await self._store(state, batch)
        except CoordinatorLogError as exc:  # the disk refused: Kafka's KAFKA_STORAGE_ERROR
            STORAGE_LOG.log("%s: %s; restarting from its log", self.describe(), exc)
            self._fail(now, ErrorCode.not_coordinator)
        except StoreTimedOut as exc:  # Kafka's REQUEST_TIMED_OUT (a hung disk: budgeted too)
            STORAGE_LOG.log("%s: %s; restarting from its log", self.describe(), exc)
            self._fail(now, ErrorCode.coordinator_not_available)
        except Exception:
            log.exception(
                "%s: failed on %s; restarting from its log", self.describe(), type(op).__name__
            )
            self._fail(now, ErrorCode.coordinator_not_available)
        else:
            self._settle(state, batch)

    def _fire(self, state: S, now: int, batch: Batch) -> S:
        """The timer op, if the deadline is due by the wall clock too (else: wait on)."""
        due = self.machine.next_deadline(state)
        if due is None or now < due - 1:  # (clock rounding: not early)
            batch.deadline = due
            return state
        batch.causes.append(None)
        return self.machine.step(state, self.machine.timer_op, -1, max(now, due), batch, None)

    def _hold(self, envelope: Envelope) -> int:
        """A waiter token for the envelope's reply, held until answered."""
        token = self._next_token
        self._next_token += 1
        self._waiters[token] = (envelope.reply, envelope.op)
        return token

    async def _store(self, state: S, batch: Batch) -> None:
        """Append the turn's records: one span, under the one request the turn serves or
        linked to each of them (telemetry.batch_span)."""
        records = batch.records
        span = telemetry.NOT_TRACING
        if telemetry.tracing():
            span = telemetry.batch_span(
                "rafka.broker.coordinator.append",
                batch.causes,
                records=len(records),
                **self.machine.span_attributes(state),
            )
        with span, trio.move_on_after(self._commit_timeout_s) as scope:
            await self.log.append(self.key, records)
        if scope.cancelled_caught:
            raise StoreTimedOut(f"log append took over {self._commit_timeout_s:g}s")

    def _settle(self, state: S, batch: Batch) -> None:
        """The turn's records are stored: take its state, publish, answer."""
        before, self.state = self.state, state
        self._deadline = batch.deadline
        self.machine.settled(before, state, batch)
        for token, answer in batch.replies:
            self._send(token, answer)
        if self._tasks is not None:
            self._follow_up()

    def _fail(self, now: int, code: int) -> None:
        """Nothing of the turn may be acknowledged: answer everyone held with `code` and
        rebuild the state from the log."""
        self._answer_held(code)
        self.state = self.machine.rebuild(now)
        self._deadline = self.machine.next_deadline(self.state)
        self.machine.rebuilt(self.state)
        if self._tasks is not None:
            self._follow_up()

    def _send(self, token: int, answer: Any) -> None:
        waiter = self._waiters.pop(token, None)
        if waiter is not None:
            waiter[0].send_nowait(answer)  # a slot whose caller has gone drops it

    def _answer_held(self, code: int) -> None:
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, {}
        for reply, op in waiters.values():
            reply.send_nowait(op.error_reply(code))

    def _drain(self) -> None:
        """Answer everything still held or queued, and close the mailbox: no caller waits
        forever, and a sender who comes too late learns the actor is gone."""
        code = ErrorCode.coordinator_not_available
        self._answer_held(code)
        while True:
            try:
                envelope = self._inbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            envelope.reply.send_nowait(envelope.op.error_reply(code))
        self._inbox.close()

    def _follow_up(self) -> None:
        """Start the work the state calls for outside the turns, unless one is under way."""
        if self._following or self._tasks is None:
            return
        work = self.machine.follow_up(self.state)
        if work is not None:
            self._following = True
            self._tasks.start_soon(self._follow, work)

    async def _follow(self, work: FollowUp) -> None:
        op = await work()
        # Not following any more once its op is in the mailbox: put there with no checkpoint
        # in between, or handed over by a sender waiting for room, it is there before the
        # actor can find its mailbox empty and stop.
        self._following = False
        envelope = Envelope(op, NO_REPLY)
        try:
            self.mailbox.send_nowait(envelope)
        except trio.WouldBlock:
            await self.mailbox.send(envelope)

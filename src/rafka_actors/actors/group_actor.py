"""One trio actor per consumer group: the only owner of that group's state.

The actor loops over its bounded mailbox. For every command it calls the pure state machine,
appends the records it returns to the coordinator log, and only once they are stored sends
the replies. Timers are not tasks: the loop waits for mail until the machine's next deadline
(`trio.move_on_at`) and then feeds `TimerFired` through the same path. A rebalance completes
when the last member's JoinGroup arrives: an event.

While the actor waits on an empty mailbox, an OffsetFetch, a Heartbeat or an OffsetCommit may
be stepped in the requesting connection's task instead (`answer_inline`; a commit that must
wait for its fsync, `answer_durably`, holding the group until the log has it), which saves the
mailbox round trip's two task switches; the order of steps is the same.

The registry spawns an actor dormant: no task and no mailbox until its first envelope or
deadline (`wake`). Until then it is an actor parked on an empty mailbox with nothing due, so
inline steps answer it, and a group that only commits and fetches offsets (a simple consumer,
a lag exporter) never costs a trio task and a memory channel, about half of a live group's
memory (docs/performance.md).

Replies go to one-shot channels. A client that hung up while parked has closed its end, so
sending fails with BrokenResourceError and is simply dropped: the member's slot is cleaned up
by the rebalance or session timeout, as in Kafka.

Faults stay inside: if the machine raises, the actor logs it, answers every request it holds
with COORDINATOR_NOT_AVAILABLE (retriable: clients look the coordinator up again and retry)
and rebuilds the group from its stored records, like a coordinator failover. When the actor
stops, everything still queued is answered the same way, so no caller waits forever.

Every log line and span that names the group also carries its identity: the `cgp_` id
(attribute `rafka.group.cgp_id`; empty while the group does not exist) and the RRL
(`rafka.group.rrl`). A `cgp_` id is minted only for a step that starts without a group and
may create one (`machine.creates_group`), the only case in which the state machine reads it:
not per request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import trio
from kio.schema.errors import ErrorCode
from opentelemetry.trace import Span

from .. import telemetry
from ..coordinator import machine
from ..coordinator.machine import AnyGroup
from ..group.state import ClassicGroup
from ..group_common import ops
from ..group_common.effects import GroupConfig, MemberFenced, RebalanceCompleted, TargetAssigned
from ..group_common.ops import TimerFired
from ..group_common.topic_image import EMPTY_IMAGE, TopicImage
from ..ids import GroupKey, mint_group_uuid, rrl
from .coordinator_log import CoordinatorLog, now_ms, stored_group, trio_time
from .errors import error_response
from .reply import ReplyTo

log = logging.getLogger(__name__)

CGP_ID_ATTRIBUTE = "rafka.group.cgp_id"
RRL_ATTRIBUTE = "rafka.group.rrl"


@dataclass(slots=True)
class Envelope:
    op: Any
    reply: ReplyTo | None  # None: nobody waits for an answer


PASSIVATE: Final = object()  # an Envelope op: stop if still idle (sent by the registry's sweeper)
# An Envelope op sent by an inline step (answer_inline): look at the deadline again, and
# stop if idle when passivation is immediate.
RECHECK: Final = object()

InlineOp: TypeAlias = (
    ops.OffsetFetchOp
    | ops.HeartbeatOp
    | ops.OffsetCommitOp
    | ops.ExpireOffsetsOp
    | ops.DescribeGroupOp
    | ops.ConsumerGroupDescribeOp
)
WritingOp: TypeAlias = ops.OffsetCommitOp | ops.ExpireOffsetsOp
# The inline ops whose step may append records: answered inline only by a log that writes
# without waiting, else by `answer_durably`.
WRITING_OPS: Final = (ops.OffsetCommitOp, ops.ExpireOffsetsOp)


INLINE: Final = 0  # the waiter token of an op answered inline (mailbox tokens start at 1)


_SPANS: Final = {
    ops.JoinGroupOp: "rafka.broker.group.join",
    ops.SyncGroupOp: "rafka.broker.group.sync",
    ops.HeartbeatOp: "rafka.broker.group.heartbeat",
    ops.LeaveGroupOp: "rafka.broker.group.leave",
    ops.OffsetCommitOp: "rafka.broker.group.offset-commit",
    ops.OffsetFetchOp: "rafka.broker.group.offset-fetch",
    ops.DescribeGroupOp: "rafka.broker.group.describe",
    ops.DeleteGroupOp: "rafka.broker.group.delete",
    ops.OffsetDeleteOp: "rafka.broker.group.offset-delete",
    ops.ConsumerGroupHeartbeatOp: "rafka.broker.group.consumer-heartbeat",
    ops.ConsumerGroupDescribeOp: "rafka.broker.group.consumer-describe",
}


class GroupActor:
    def __init__(
        self,
        key: GroupKey,
        config: GroupConfig,
        coordinator_log: CoordinatorLog,
        *,
        mailbox_size: int = 1024,
        group: AnyGroup = None,
        topics: Callable[[int], TopicImage] = lambda _org: EMPTY_IMAGE,
        passivate_after_s: float = 0.0,
        start: Callable[[GroupActor], None] | None = None,
    ) -> None:
        """With `start`, the actor is dormant (see the module's doc) until it needs its task,
        and then calls `start(self)` to have it run; without, its caller runs it."""
        self.key = key
        self.rrl = rrl(key.org_id, key.group_id)
        self.config = config
        self.log = coordinator_log
        self.group = group
        self._topics = topics  # topics(org_id): the image of that org's topics
        self._passivate_after_s = passivate_after_s
        self.last_active = trio.current_time()  # of the last request (for passivation)
        self._mailbox_size = mailbox_size
        self._mailbox: trio.MemorySendChannel[Envelope] | None = None  # None while dormant
        self._inbox: trio.MemoryReceiveChannel[Envelope] | None = None
        self._start = start
        # Envelopes posted and taken: their difference is what the mailbox holds (or has
        # handed to the parked actor), without building MemoryChannelStatistics each time.
        self._posted = self._taken = 0
        self._waiters: dict[int, tuple[ReplyTo, Any]] = {}  # token -> (reply to, its op)
        self._next_token = 1
        self._parked = True  # waiting on the mailbox, or dormant (answer_inline may answer)
        # Set while a caller's task holds the group for a step awaiting the log
        # (answer_durably); the actor waits for it before its next step.
        self._held: trio.Event | None = None
        self._wait: trio.CancelScope | None = None  # the parked wait's deadline, if any
        # When to wake: the group's next deadline or an earlier time (machine.deadline_after)
        self._deadline = machine.next_deadline(group)
        if start is None or self._deadline is not None:  # a deadline needs the task's timer
            self.wake()

    @property
    def dormant(self) -> bool:
        """No task and no mailbox yet: nothing ever had to wait for this group."""
        return self._mailbox is None

    def wake(self) -> trio.MemorySendChannel[Envelope]:
        """Open a dormant actor's mailbox and start its task (idempotent); the mailbox."""
        if self._mailbox is not None:
            return self._mailbox
        self._mailbox, self._inbox = trio.open_memory_channel[Envelope](self._mailbox_size)
        self._parked = False  # until its task parks on the mailbox
        if self._start is not None:
            self._start(self)
        return self._mailbox

    @property
    def cgp_id(self) -> str:
        """The group's `cgp_` id; "" while there is no group."""
        return "" if self.group is None else self.group.cgp_id

    def _identity(self) -> dict[str, str]:
        return {CGP_ID_ATTRIBUTE: self.cgp_id, RRL_ATTRIBUTE: self.rrl}

    def _name(self) -> str:
        """The group as log lines name it: `<group id> (<cgp_ id> <RRL>)`."""
        return f"{self.key.group_id} ({self.cgp_id or 'no cgp_ id'} {self.rrl})"

    @property
    def idle(self) -> bool:
        """Nothing to keep this actor alive for: no parked request, no caller's step holding
        the group, and no group, or an Empty group with no deadline and no member id handed
        out. Such a group is exactly what its stored records say, so it can be passivated and
        rebuilt from the log when next asked (memory then grows with active groups, not with
        every group ever seen)."""
        return not self._waiters and self._held is None and machine.passivable(self.group)

    async def run(self, *, stop_when_idle: bool = True) -> None:
        """Serve the mailbox. With `stop_when_idle`, an idle actor (see `idle`) stops: at once
        when `passivate_after_s` is 0, else when the registry's sweeper finds it idle for that
        long and sends PASSIVATE. Waiting for requests then needs no timer of its own, and a
        group used again and again (a simple consumer committing every second) keeps its
        actor while one left alone costs no memory."""
        try:
            while True:
                envelope = await self._next_envelope()
                if self._held is not None:  # a caller's step holds the group: it goes first
                    await self._held.wait()
                if envelope is None:  # the wake-up time passed: is a deadline really due?
                    due = machine.next_deadline(self.group)
                    if due is not None and trio.current_time() >= trio_time(due):
                        await self._step(TimerFired(), None)
                    else:
                        self._deadline = due
                elif envelope.op is PASSIVATE or envelope.op is RECHECK:
                    at_once = envelope.op is PASSIVATE or not self._passivate_after_s
                    if stop_when_idle and at_once and self.idle and not self._queued():
                        return
                else:
                    self.last_active = trio.current_time()
                    await self._step(envelope.op, envelope.reply)
                    # Not held while parked: the request, its reply slot and its Event
                    # would stay in memory for every idle live actor.
                    envelope = None
                    if (
                        stop_when_idle
                        and not self._passivate_after_s
                        and self.idle
                        and not self._queued()
                    ):
                        return
        finally:
            self._drain()

    def post_nowait(self, envelope: Envelope) -> None:
        """Put `envelope` in the mailbox; trio.WouldBlock if it is full, BrokenResourceError
        if the actor has stopped. Every envelope goes in through here or `post`."""
        (self._mailbox or self.wake()).send_nowait(envelope)
        self._posted += 1

    async def post(self, envelope: Envelope) -> None:
        """`post_nowait`, or wait for room in a full mailbox (backpressure). Without a
        checkpoint when there is room: the caller's wait for its reply is one. A waiting
        envelope counts from the start: once room frees up trio moves it in before this task
        runs again, and meanwhile the actor has work coming (it must not stop, nor answer
        inline ahead of it)."""
        try:
            self.post_nowait(envelope)
            return
        except trio.WouldBlock:
            pass
        self._posted += 1
        try:
            await self.wake().send(envelope)
        except BaseException:  # cancelled or stopped: it never went in
            self._posted -= 1
            raise

    def _queued(self) -> int:
        """Envelopes posted and not yet taken: while the actor runs, those in its mailbox;
        while it is parked, also one that trio may have handed to its waiting receive."""
        return self._posted - self._taken

    async def _next_envelope(self) -> Envelope | None:
        inbox = self._inbox
        assert inbox is not None, "a dormant actor's task runs only once woken"
        deadline = self._deadline
        due = deadline is not None and trio.current_time() >= trio_time(deadline)
        if not due:
            # A queued envelope needs no cancel scope (~10 us each); the actor still
            # checkpoints whenever its mailbox runs dry, and a due deadline goes first.
            try:
                envelope = inbox.receive_nowait()
            except trio.WouldBlock:
                pass
            else:
                self._taken += 1
                return envelope
        self._parked = True
        try:
            if deadline is None:
                envelope = await inbox.receive()
            else:
                with trio.move_on_at(trio_time(deadline)) as self._wait:
                    envelope = await inbox.receive()
                if self._wait.cancelled_caught:  # the deadline came first
                    return None
        finally:
            self._parked, self._wait = False, None
        self._taken += 1
        return envelope

    def answer_inline(self, op: InlineOp, trio_now: float | None = None) -> Any | None:
        """The answer to an OffsetFetch, a classic Heartbeat, an OffsetCommit, a describe
        (classic or KIP-848) or the retention sweep's ExpireOffsets, given here in the
        caller's task, or None: the caller then asks through the mailbox. It saves the two
        task switches of a mailbox round trip, and a dormant actor its task.

        Only while the actor is parked on an empty mailbox: then no step is half done (no
        offset is in memory before it is in the log), and trio runs one task at a time, so
        the handler sees the same settled state the actor would, and the whole step (state
        machine, log write, replies) runs without a checkpoint. Not while anything posted
        is still untaken, even an envelope trio has handed to the parked receive: requests
        that reached the actor first are answered first.

        Nothing but a fetch is answered here once the parked wait's deadline is due (the
        timer goes first): a Heartbeat or a write may move deadlines, and a due timer may
        change what a describe reports (offsets it leaves alone). A Heartbeat also needs
        that wait (its member has a session deadline); a commit or an expiry needs a log
        that writes without waiting (`writable_now`: not under fsync policy `always`, but
        in a pass of the gateway's reactor, whose held appends are fsynced together).
        `trio_now`: trio.current_time(), if the caller has it (the reactor's pass time)."""
        kind = type(op)
        if trio_now is None:
            trio_now = trio.current_time()
        if not self._steppable_by_caller(trio_now, timed=kind is not ops.OffsetFetchOp):
            return None
        if kind is ops.HeartbeatOp and self._wait is None:
            return None
        if kind in WRITING_OPS and not self.log.writable_now():
            return None
        self.last_active = trio_now
        now = now_ms(trio_now)
        try:
            with self._span(op) as span:
                result = self._handle(op, INLINE, now, span)
                if result.records:
                    self.log.append_now(self.key, result.records)
        except Exception:
            self._recover(op, now)
            answer = error_response(op, ErrorCode.coordinator_not_available)
        else:
            answer = self._settle(result, op)
        self._wake_if_needed()
        return answer

    def answers_fetch_again(self, group: Any, trio_now: float) -> bool:
        """Whether an OffsetFetch answered inline from `group` may be answered again from
        the same offsets without a step: the actor still holds that group object, and
        answer_inline would answer a fetch now (nothing half done, nothing held). The
        caller compares the offsets; a fetch changes nothing else but `last_active`."""
        if self.group is not group or not self._steppable_by_caller(trio_now, timed=False):
            return False
        self.last_active = trio_now
        return True

    async def answer_durably(self, op: WritingOp) -> Any | None:
        """An OffsetCommit (or ExpireOffsets) answered in the caller's task when the log must
        be waited for (fsync policy `always`), or None: the caller then asks through the
        mailbox. It saves the mailbox round trip's two task switches, as answer_inline does
        without a wait.

        Under answer_inline's conditions (parked on an empty mailbox, no due deadline), the
        caller's task holds the group from the step until its records are stored: nothing is
        answered inline meanwhile, and the actor, woken by mail or its deadline, waits for
        the hold before its next step, so requests are still stepped in arrival order and
        no one reads an offset before it is stored. The wait is shielded: a step whose
        records may be stored is always settled, whatever happens to the caller."""
        trio_now = trio.current_time()
        if not self._steppable_by_caller(trio_now, timed=True):
            return None
        self.last_active = trio_now
        now = now_ms(trio_now)
        held = self._held = trio.Event()
        try:
            with self._span(op) as span:
                result = self._handle(op, INLINE, now, span)
                if result.records:
                    await self.log.append(self.key, result.records, shielded=True)
        except Exception:
            self._recover(op, now)
            answer = error_response(op, ErrorCode.coordinator_not_available)
        else:
            answer = self._settle(result, op)
        finally:
            self._held = None
            held.set()
        self._wake_if_needed()
        return answer

    def _steppable_by_caller(self, trio_now: float, *, timed: bool) -> bool:
        """Whether a caller's task may step now (answer_inline, answer_durably): the actor is
        parked on an empty mailbox and no step holds the group, and for a step that may move
        deadlines (`timed`) the parked wait's deadline is not due (the timer goes first)."""
        if not self._parked or self._queued() or self._held is not None:
            return False
        wait = self._wait
        return not (timed and wait is not None and trio_now >= wait.deadline)

    def _wake_if_needed(self) -> None:
        """After an inline step: make the parked actor wait for the (possibly earlier)
        deadline, or stop if it may stop at once. Its wait scope is shortened when it has
        one; otherwise a RECHECK envelope wakes it."""
        wait, deadline = self._wait, self._deadline
        if wait is not None and deadline is not None and trio_time(deadline) < wait.deadline:
            wait.deadline = trio_time(deadline)
        uncovered = deadline is not None and wait is None  # a wait without a scope (or task)
        # (a dormant actor has no task to stop: the registry drops it, `_drop_if_idle`)
        stop = not self._passivate_after_s and self.idle and not self.dormant
        if uncovered or stop:
            try:
                self.post_nowait(Envelope(RECHECK, None))
            except (trio.WouldBlock, trio.BrokenResourceError):
                pass  # it has mail or is stopping: it looks at its deadline again anyway

    def _span(self, op: Any) -> AbstractContextManager[Span]:
        if not telemetry.tracing():  # every inline answer passes here: skip the attributes
            return telemetry.NOT_TRACING
        return telemetry.span(
            _SPANS.get(type(op), "rafka.broker.group.timer"),
            group_id=self.key.group_id,
            org_id=self.key.org_id,
            **self._identity(),
        )

    def _handle(self, op: Any, token: int, now: int, span: Span) -> machine.Result:
        result = machine.handle(
            self.group,
            op,
            now,
            token,
            config=self.config,
            # read only to create the group, so minted only for a step that may create it
            fresh_cgp_id=(
                mint_group_uuid() if self.group is None and machine.creates_group(op) else ""
            ),
            topics=self._topics(self.key.org_id),
        )
        if self.group is None and result.group is not None:  # created just now
            span.set_attribute(CGP_ID_ATTRIBUTE, result.group.cgp_id)
        return result

    async def _step(self, op: Any, reply: ReplyTo | None) -> None:
        token = -1
        if reply is not None:
            token = self._next_token
            self._next_token += 1
            self._waiters[token] = (reply, op)
        now = now_ms()
        if isinstance(op, TimerFired):
            # We woke because a deadline passed; clock rounding must not make it look early.
            now = max(now, machine.next_deadline(self.group) or now)
        try:
            with self._span(op) as span:
                result = self._handle(op, token, now, span)
                if result.records:
                    await self.log.append(self.key, result.records)
        except Exception:
            self._recover(op, now)
            return
        self._settle(result, op)

    def _recover(self, op: Any, now: int) -> None:
        """A bug, or records that could not be stored: nothing of this step may be
        acknowledged. Fail what we hold and rebuild from what the log has."""
        log.exception(
            "group %s: failed on %s; restarting from its log", self._name(), type(op).__name__
        )
        self._restart_from_log(now)

    def forget_unstored(self) -> None:
        """Records of its inline steps, held to be written together (`hold_appends`), could
        not be stored: none of those steps' replies goes out (the registry's caller drops
        them). Rebuild from what the log has, as `_recover` does."""
        log.error("group %s: records not stored; restarting from its log", self._name())
        self._restart_from_log(now_ms())
        self._wake_if_needed()

    def _restart_from_log(self, now: int) -> None:
        self._fail_all_waiters()
        self.group = stored_group(self.log, self.key, now, self.config)
        self._deadline = machine.next_deadline(self.group)

    def _settle(self, result: machine.Result, op: Any) -> Any:
        """The step's records are stored: take its group and answer. Returns the reply to
        the INLINE token, if any."""
        self.group = result.group
        self._deadline = machine.deadline_after(result, op, self._deadline)
        inline = None
        for waiter, response in result.replies:
            if waiter == INLINE:
                inline = response
            else:
                self._send(waiter, response)
        for event in result.events:
            self._trace(event)
        return inline

    def _send(self, token: int, response: Any) -> None:
        waiter = self._waiters.pop(token, None)
        if waiter is None:
            return
        try:
            waiter[0].send_nowait(response)
        except (trio.BrokenResourceError, trio.WouldBlock, trio.ClosedResourceError):
            pass  # the client left; nobody to tell

    def _fail_all_waiters(self) -> None:
        for token, (_, op) in list(self._waiters.items()):
            self._send(token, error_response(op, ErrorCode.coordinator_not_available))
        if isinstance(self.group, ClassicGroup):
            for member in self.group.members.values():
                self.group.set_awaiting_join(member, None)
                member.awaiting_sync = None

    def _drain(self) -> None:
        """Answer everything still held or queued: no caller waits forever."""
        self._fail_all_waiters()
        inbox = self._inbox
        while inbox is not None:
            try:
                envelope = inbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            if envelope.reply is None:  # PASSIVATE: nobody to answer
                continue
            try:
                envelope.reply.send_nowait(
                    error_response(envelope.op, ErrorCode.coordinator_not_available)
                )
            except (trio.BrokenResourceError, trio.WouldBlock, trio.ClosedResourceError):
                pass
        if inbox is not None:
            inbox.close()

    def _trace(self, event: Any) -> None:
        if isinstance(event, TargetAssigned):
            with telemetry.span(
                "rafka.broker.coordinator.target-assignment",
                group_id=event.group_id,
                assignment_epoch=event.assignment_epoch,
                assignor=event.assignor,
                members=event.members,
                **self._identity(),
            ):
                log.info(
                    "group %s: target assignment for epoch %d by %s over %d members",
                    self._name(),
                    event.assignment_epoch,
                    event.assignor,
                    event.members,
                )
        elif isinstance(event, MemberFenced):
            log.info(
                "group %s: member %s fenced (%s); group epoch %d",
                self._name(),
                event.member_id,
                event.reason,
                event.group_epoch,
            )
        elif isinstance(event, RebalanceCompleted):
            with telemetry.span(
                "rafka.broker.coordinator.rebalance-complete",
                group_id=event.group_id,
                generation_id=event.generation,
                leader_id=event.leader_id or "",
                members=event.members,
                **self._identity(),
            ):
                log.info(
                    "group %s: generation %d with %d members, leader %s",
                    self._name(),
                    event.generation,
                    event.members,
                    event.leader_id,
                )

"""One trio actor per consumer group: the only owner of that group's state.

The actor's task loops over its bounded mailbox, a trio memory channel of `Envelope`s, each an
op with a one-shot reply. When it wakes it takes everything queued (up to `BATCH_LIMIT`),
steps each op through the pure state machine in arrival order, appends all their records to
the coordinator log at once (one write, one fsync, shared with other groups' batches by the
log's group commit), and only once they are stored publishes a snapshot for readers
(snapshot.py) and sends the replies. Timers are not tasks: the actor waits for mail until the
machine's next deadline (`trio.move_on_at`) and then steps `TimerFired` through the same
path. A rebalance completes on an event: the last member's JoinGroup.

A JoinGroup or SyncGroup that must wait for other members parks in the group as a waiter
token; the machine answers the token when the rebalance gets there. A caller that gave up
meanwhile (its connection closed) finds nobody reading its reply slot: the answer is dropped
and the member's slot is cleaned up by the rebalance or session timeout, as in Kafka.

Faults stay inside: if the machine raises, or the log cannot store a batch (or takes longer
than `offsets.commit.timeout.ms`), the actor logs it, answers every request it holds with a
retriable error and rebuilds the group from its stored records, like a coordinator failover.
The error is Kafka's for the same failure of its coordinator's append
(CoordinatorOperationExceptionHelper): NOT_COORDINATOR for a disk that refused the write
(KAFKA_STORAGE_ERROR there), COORDINATOR_NOT_AVAILABLE for a write that timed out and for a
failed step. Either way clients look the coordinator up again and retry, on the same
connection; a full disk's failures are logged once per 10 s with a count
(storage/failures.py). Nothing of the failed batch was acknowledged. When the
actor stops, for whatever reason, everything still queued is answered the same way, so no
caller waits forever.

An actor with nothing to do (no waiter, an Empty group with no deadline: `machine.passivable`)
stops as soon as its mailbox is empty; its group is then exactly what its stored records say,
and `run` returns it for the registry to keep or drop (passivation, registry.py).

Every log line and span that names the group also carries its identity: the `cgp_` id
(attribute `rafka.group.cgp_id`; empty while the group does not exist) and the RRL
(`rafka.group.rrl`). A `cgp_` id is minted only for a step that starts without a group and
may create one (`machine.creates_group`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final

import trio
from kio.schema.errors import ErrorCode
from opentelemetry.context import Context
from opentelemetry.trace import Span

from .. import telemetry
from ..classic_group.state import ClassicGroup
from ..coordinator import machine
from ..coordinator.machine import AnyGroup
from ..group_common import group_configs, ops
from ..group_common.effects import (
    GroupConfig,
    MemberFenced,
    MemberRemoved,
    RebalanceCompleted,
    TargetAssigned,
)
from ..group_common.topic_image import EMPTY_IMAGE, TopicImage
from ..ids import GroupKey, mint_group_uuid, rrl
from ..storage.coordinator_log import CoordinatorLog
from ..storage.coordinator_segments import CoordinatorLogError
from ..storage.failures import STORAGE_LOG
from .clock import now_ms, trio_time
from .errors import error_response
from .reply import ReplyTo
from .snapshot import GroupSnapshot, snapshot_of
from .stored_groups import stored_group

log = logging.getLogger(__name__)

CGP_ID_ATTRIBUTE = "rafka.group.cgp_id"
RRL_ATTRIBUTE = "rafka.group.rrl"

# Ops stepped together at most: their replies wait for the batch's one append, so a long
# queue is served in slices and the first callers are not held back by the last.
BATCH_LIMIT: Final = 256
DEFAULT_COMMIT_TIMEOUT_S: Final = 5.0  # Kafka's offsets.commit.timeout.ms


@dataclass(slots=True)
class Envelope:
    op: Any
    reply: ReplyTo
    # the sender's OpenTelemetry context: the op's spans are children of its request's span
    # (telemetry.py), not of whatever request started the actor's task
    context: Context | None = None


def answer_queued_and_close(
    inbox: trio.MemoryReceiveChannel[Envelope], answer: Callable[[Any], Any]
) -> None:
    """Answer every envelope still queued with `answer(op)`, then close the mailbox: no caller
    waits forever, and a sender who comes too late learns the actor is gone (both actors)."""
    while True:
        try:
            envelope = inbox.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
        envelope.reply.send_nowait(answer(envelope.op))
    inbox.close()


class StoreTimedOut(Exception):
    """A batch was not stored within offsets.commit.timeout.ms; its replies must not go out."""


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
    ops.TxnOffsetCommitOp: "rafka.broker.group.txn-offset-commit",
    ops.TxnMarkerOp: "rafka.broker.group.txn-marker",
    ops.TopicsChangedOp: "rafka.broker.group.topics-changed",
    ops.ShareGroupHeartbeatOp: "rafka.broker.group.share-heartbeat",
    ops.ShareGroupDescribeOp: "rafka.broker.group.share-describe",
    ops.ShareSessionOp: "rafka.broker.group.share-session",
    ops.ShareAcquireOp: "rafka.broker.group.share-acquire",
}


def _cgp_id(group: AnyGroup) -> str:
    return "" if group is None else group.cgp_id


class GroupActor:
    def __init__(
        self,
        key: GroupKey,
        config: GroupConfig,
        coordinator_log: CoordinatorLog,
        *,
        group: AnyGroup = None,
        mailbox_size: int = 1024,
        topics: Callable[[int], TopicImage] = lambda _org: EMPTY_IMAGE,
        publish: Callable[[GroupKey, GroupSnapshot], None] = lambda _key, _snapshot: None,
        commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S,
        published: GroupSnapshot | None = None,
        base_config: GroupConfig | None = None,
        stored: Callable[[GroupKey, list[Any]], None] | None = None,
    ) -> None:
        """`publish(key, snapshot)` is called with each new snapshot (the registry keeps it
        for readers; `published`, the group's latest if it has one); `topics(org_id)` is the
        image of that org's topics."""
        self.key = key
        self.rrl = rrl(key.org_id, key.group_id)
        self.config = config  # the broker's, with this group's dynamic configs (issue 45)
        self._base_config = config if base_config is None else base_config
        self.log = coordinator_log
        self.group = group
        self.mailbox, self._inbox = trio.open_memory_channel[Envelope](mailbox_size)
        self._topics = topics
        self._publish = publish
        self._commit_timeout_s = commit_timeout_s
        self._stored = stored  # told each batch's stored records (the metrics' rebalances)
        self._waiters: dict[int, tuple[ReplyTo, Any]] = {}  # token -> (reply to, its op)
        self._next_token = 1
        self._deadline = machine.next_deadline(group)  # or earlier (machine.deadline_after)
        if published is None:
            published = snapshot_of(key.group_id, group)
            publish(key, published)
        self._snapshot = published

    @property
    def cgp_id(self) -> str:
        """The group's `cgp_` id; "" while there is no group."""
        return "" if self.group is None else self.group.cgp_id

    def _name(self) -> str:
        """The group as log lines name it: `<group id> (<cgp_ id> <RRL>)`."""
        return f"{self.key.group_id} ({self.cgp_id or 'no cgp_ id'} {self.rrl})"

    @property
    def idle(self) -> bool:
        """Nothing to stay for: no request held and a group that is exactly what its stored
        records say, with nothing to wait for (machine.passivable)."""
        return not self._waiters and machine.passivable(self.group)

    async def run(self) -> AnyGroup:
        """Serve the mailbox until idle with nothing queued; return the group then. Whatever
        ends it (idle, cancelled, a bug), every request still held or queued is answered."""
        try:
            while True:
                batch = await self._next_batch()
                if batch is None:
                    return self.group
                await self._step_batch(*batch)
                del batch  # (not kept alive while the actor waits for the next one)
        finally:
            self._drain()

    async def _next_batch(self) -> tuple[bool, list[Envelope]] | None:
        """Whether the group's deadline is due, and what is queued (at least one envelope
        unless the deadline came first); None if the actor is idle and may stop."""
        envelopes: list[Envelope] = []
        if self._due():
            await trio.lowlevel.checkpoint()  # a group whose timers keep firing still yields
        elif self.idle:
            try:  # (what is queued, or a sender waiting on a full mailbox)
                envelopes.append(self._inbox.receive_nowait())
            except trio.WouldBlock:
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

    def _due(self) -> bool:
        deadline = self._deadline
        return deadline is not None and trio.current_time() >= trio_time(deadline)

    async def _step_batch(self, timer_due: bool, envelopes: list[Envelope]) -> None:
        """Step the batch, store its records, then publish and answer."""
        # Every envelope is held from the start: if a step fails, everything it took out of
        # the mailbox is answered, stepped or not.
        tokens = [self._hold(envelope) for envelope in envelopes]
        now = now_ms()
        group = self.group
        records: list[Any] = []
        replies: list[tuple[int, Any]] = []
        events: list[tuple[Any, Context | None]] = []  # (event, the span it happened in)
        causes: list[Context | None] = []  # each op's request (None: the timer)
        op: Any = None
        try:
            if timer_due:  # due timers go first
                due = machine.next_deadline(group)
                if due is not None and now >= due - 1:  # (clock rounding: not early)
                    op = ops.TimerFired()
                    causes.append(None)
                    group = self._handle(
                        group, op, -1, max(now, due), records, replies, events, None
                    )
                else:
                    self._deadline = due
            for envelope, token in zip(envelopes, tokens, strict=True):
                op = envelope.op
                causes.append(envelope.context)
                group = self._handle(
                    group, op, token, now, records, replies, events, envelope.context
                )
            if records:
                await self._store(records, causes, group)
        except CoordinatorLogError as exc:  # the disk refused: Kafka's KAFKA_STORAGE_ERROR
            STORAGE_LOG.log("group %s: %s; restarting from its log", self._name(), exc)
            self._recover(now, ErrorCode.not_coordinator)
            return
        except StoreTimedOut as exc:  # Kafka's REQUEST_TIMED_OUT (a hung disk: budgeted too)
            STORAGE_LOG.log("group %s: %s; restarting from its log", self._name(), exc)
            self._recover(now, ErrorCode.coordinator_not_available)
            return
        except Exception:
            log.exception(
                "group %s: failed on %s; restarting from its log", self._name(), type(op).__name__
            )
            self._recover(now, ErrorCode.coordinator_not_available)
            return
        self._settle(group, bool(records), replies, events)
        if records and self._stored is not None:
            self._stored(self.key, records)

    def _hold(self, envelope: Envelope) -> int:
        """A waiter token for the envelope's reply, held until answered."""
        token = self._next_token
        self._next_token += 1
        self._waiters[token] = (envelope.reply, envelope.op)
        return token

    def _handle(
        self,
        group: AnyGroup,
        op: Any,
        token: int,
        now: int,
        records: list[Any],
        replies: list[tuple[int, Any]],
        events: list[tuple[Any, Context | None]],
        parent: Context | None,
    ) -> AnyGroup:
        if type(op) is ops.GroupConfigOp:  # issue 45: applies from the next step on
            self.config = group_configs.effective(self._base_config, op.overrides)
            replies.append((token, ops.GroupConfigOpResp(0)))
            return group
        # read only to create the group, so minted only for a step that may create it
        creates = group is None and machine.creates_group(op)
        with self._span(op, group, parent) as span:
            result = machine.handle(
                group,
                op,
                now,
                token,
                config=self.config,
                fresh_cgp_id=mint_group_uuid() if creates else "",
                topics=self._topics(self.key.org_id),
            )
            if group is None and result.group is not None:  # created just now
                span.set_attribute(CGP_ID_ATTRIBUTE, result.group.cgp_id)
        self._deadline = machine.deadline_after(result, op, self._deadline)
        records += result.records
        replies += result.replies
        if result.events:
            events += [(event, telemetry.context_of(span)) for event in result.events]
        return result.group

    async def _store(
        self, records: list[Any], causes: list[Context | None], group: AnyGroup
    ) -> None:
        """Append the batch's records: one span, under the one request the batch serves or
        linked to each of them (telemetry.batch_span)."""
        span = telemetry.NOT_TRACING
        if telemetry.tracing():
            span = telemetry.batch_span(
                "rafka.broker.coordinator.append",
                causes,
                group_id=self.key.group_id,
                org_id=self.key.org_id,
                records=len(records),
                **{CGP_ID_ATTRIBUTE: _cgp_id(group), RRL_ATTRIBUTE: self.rrl},
            )
        with span, trio.move_on_after(self._commit_timeout_s) as scope:
            await self.log.append(self.key, records)
        if scope.cancelled_caught:
            raise StoreTimedOut(f"coordinator log append took over {self._commit_timeout_s:g}s")

    def _settle(
        self,
        group: AnyGroup,
        stored: bool,
        replies: list[tuple[int, Any]],
        events: list[tuple[Any, Context | None]],
    ) -> None:
        """The batch's records are stored: take its group, publish, answer."""
        self.group = group
        summary = self._snapshot.summary
        offsets_from = None if stored else self._snapshot  # no records: no offset changed
        snapshot = snapshot_of(self.key.group_id, group, offsets_from=offsets_from)
        if stored or snapshot.summary != summary:
            self._snapshot = snapshot
            self._publish(self.key, snapshot)
        for token, response in replies:
            self._send(token, response)
        for event, parent in events:
            self._trace(event, parent)

    def _recover(self, now: int, code: ErrorCode) -> None:
        """A bug, or records that could not be stored: nothing of this batch may be
        acknowledged. Fail what we hold (with `code`) and rebuild from what the log has."""
        self._fail_all_waiters(code)
        self.group = stored_group(self.log, self.key, now, self.config)
        self._deadline = machine.next_deadline(self.group)
        self._snapshot = snapshot_of(self.key.group_id, self.group)
        self._publish(self.key, self._snapshot)

    def _send(self, token: int, response: Any) -> None:
        waiter = self._waiters.pop(token, None)
        if waiter is not None:
            waiter[0].send_nowait(response)  # a slot whose caller has gone drops it

    def _fail_all_waiters(self, code: ErrorCode = ErrorCode.coordinator_not_available) -> None:
        for token, (_, op) in list(self._waiters.items()):
            self._send(token, error_response(op, code))
        if isinstance(self.group, ClassicGroup):
            for member in self.group.members.values():
                self.group.set_awaiting_join(member, None)
                member.awaiting_sync = None

    def _drain(self) -> None:
        """Answer everything still held or queued, and close the mailbox: no caller waits
        forever, and a sender who comes too late learns the actor is gone."""
        self._fail_all_waiters()
        answer_queued_and_close(
            self._inbox, lambda op: error_response(op, ErrorCode.coordinator_not_available)
        )

    def _span(
        self, op: Any, group: AnyGroup, parent: Context | None
    ) -> AbstractContextManager[Span]:
        """The op's span, under its request's, naming the group as the batch has it so far."""
        if not telemetry.tracing():
            return telemetry.NOT_TRACING
        return telemetry.span_in(
            parent,
            _SPANS.get(type(op), "rafka.broker.group.timer"),
            group_id=self.key.group_id,
            org_id=self.key.org_id,
            **{CGP_ID_ATTRIBUTE: _cgp_id(group), RRL_ATTRIBUTE: self.rrl},
        )

    def _trace(self, event: Any, parent: Context | None) -> None:
        """Log a stored event; its span is a child of the op's span it happened in."""
        identity = {CGP_ID_ATTRIBUTE: self.cgp_id, RRL_ATTRIBUTE: self.rrl}
        if isinstance(event, TargetAssigned):
            with telemetry.span_in(
                parent,
                "rafka.broker.coordinator.target-assignment",
                group_id=event.group_id,
                assignment_epoch=event.assignment_epoch,
                assignor=event.assignor,
                members=event.members,
                **identity,
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
                "group %s: member %s %s; group epoch %d",
                self._name(),
                event.member_id,
                _departure(event.member_id, event.reason),
                event.group_epoch,
            )
        elif isinstance(event, MemberRemoved):
            log.info(
                "group %s: member %s %s",
                self._name(),
                event.member_id,
                _departure(event.member_id, event.why, "removed"),
            )
        elif isinstance(event, RebalanceCompleted):
            with telemetry.span_in(
                parent,
                "rafka.broker.coordinator.rebalance-complete",
                group_id=event.group_id,
                generation_id=event.generation,
                leader_id=event.leader_id or "",
                members=event.members,
                **identity,
            ):
                log.info(
                    "group %s: generation %d with %d members, leader %s",
                    self._name(),
                    event.generation,
                    event.members,
                    event.leader_id,
                )


def _departure(member_id: str, reason: str, dropped: str = "fenced") -> str:
    """How a member went, for the log line that names it already: "left", or "fenced
    (session timeout)". The reason is also stored in the group's record (and read by the
    metrics), where it names the member itself: "member X left"."""
    why = reason.removeprefix(f"member {member_id} ").removeprefix("the member ")
    return "left" if why == "left" else f"{dropped} ({why})"

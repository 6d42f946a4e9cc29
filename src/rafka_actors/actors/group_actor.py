"""A group's actor: the mailbox actor (mailbox_actor.py) over coordinator/machine.py.

`GroupMachine` wires the pure coordinator machine to one `(org_id, group_id)`: it steps each op
with the group's configs (the broker's, with the group's dynamic configs, which a
`GroupConfigOp` changes from its next step on) and its organisation's topic image; after a
stored turn it publishes the group's snapshot for readers (snapshot.py) and logs and traces
the turn's events (a target assignment, a fenced member, a completed rebalance).

A JoinGroup or SyncGroup that must wait for other members parks in the group as the waiter
token of its envelope; the machine answers the token when the rebalance gets there, which is
an event: the last member's join. A member whose caller gave up meanwhile is cleaned up by the
rebalance or session timeout, as in Kafka.

An idle group (`machine.passivable`: no member, no deadline) is exactly what its stored
records say: its actor stops and the registry keeps the group for its next request
(passivation, group_registry.py). A failed turn rebuilds the group from the log
(`stored_group`): the waiters it had parked are answered by the actor and are not in the
stored records.

Every log line and span that names the group also carries its identity: the `cgp_` id
(attribute `rafka.group.cgp_id`; empty while the group does not exist) and the RRL
(`rafka.group.rrl`). A `cgp_` id is minted only for a step that starts without a group and
may create one (`machine.creates_group`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.trace import Span

from .. import telemetry
from ..consumer_group import ops as consumer_ops
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
from ..share_group import ops as share_ops
from ..storage.coordinator_log import CoordinatorLog
from .mailbox_actor import DEFAULT_COMMIT_TIMEOUT_S, Batch, MailboxActor
from .share_fetch import ShareReader, no_reads, share_fetch
from .snapshot import GroupSnapshot, snapshot_of
from .stored_groups import stored_group

log = logging.getLogger(__name__)

CGP_ID_ATTRIBUTE = "rafka.group.cgp_id"
RRL_ATTRIBUTE = "rafka.group.rrl"

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
    consumer_ops.ConsumerGroupHeartbeatOp: "rafka.broker.group.consumer-heartbeat",
    consumer_ops.ConsumerGroupDescribeOp: "rafka.broker.group.consumer-describe",
    ops.TxnOffsetCommitOp: "rafka.broker.group.txn-offset-commit",
    ops.TxnMarkerOp: "rafka.broker.group.txn-marker",
    ops.TopicsChangedOp: "rafka.broker.group.topics-changed",
    share_ops.ShareGroupHeartbeatOp: "rafka.broker.group.share-heartbeat",
    share_ops.ShareGroupDescribeOp: "rafka.broker.group.share-describe",
    share_ops.ShareSessionOp: "rafka.broker.group.share-session",
    share_ops.ShareAcquireOp: "rafka.broker.group.share-acquire",
    share_ops.ShareFetchOp: "rafka.broker.group.share-fetch",
}


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What the actors of a registry's groups share."""

    config: GroupConfig  # the broker's; a group's dynamic configs apply over it (issue 45)
    log: CoordinatorLog
    topics: Callable[[int], TopicImage] = lambda _org: EMPTY_IMAGE  # an org's topic image
    publish: Callable[[GroupKey, GroupSnapshot], None] = lambda _key, _snapshot: None
    stored: Callable[[GroupKey, list[Any]], None] | None = None  # each turn's stored records
    mailbox_size: int = 1024
    commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S
    read_share: ShareReader = no_reads  # a ShareFetch's read of the partition logs


class GroupMachine:
    """coordinator/machine.py, wired to one group."""

    __slots__ = ("_settings", "_snapshot", "config", "key", "rrl")

    timer_op: Final = ops.TimerFired()
    follows_up: Final = False

    def __init__(
        self, key: GroupKey, settings: GroupSettings, config: GroupConfig, published: GroupSnapshot
    ) -> None:
        self.key = key
        self.rrl = rrl(key.org_id, key.group_id)
        self.config = config  # the broker's, with this group's dynamic configs
        self._settings = settings
        self._snapshot = published  # the latest published, for readers

    def describe(self, group: AnyGroup) -> str:
        """`group <group id> (<cgp_ id> <RRL>)`."""
        cgp_id = _cgp_id(group)
        return f"group {self.key.group_id} ({cgp_id or 'no cgp_ id'} {self.rrl})"

    def step(
        self, group: AnyGroup, op: Any, waiter: int, now: int, batch: Batch, cause: Context | None
    ) -> AnyGroup:
        if type(op) is ops.GroupConfigOp:  # issue 45: applies from the next step on
            self.config = group_configs.effective(self._settings.config, op.overrides)
            batch.replies.append((waiter, ops.GroupConfigOpResp(0)))
            return group
        if type(op) is share_ops.ShareFetchOp:  # read and acquire in this one step
            read = self._settings.read_share
            return share_fetch(
                self._step, read, self.key.org_id, group, op, waiter, now, batch, cause
            )
        return self._step(group, op, waiter, now, batch, cause)

    def _step(
        self, group: AnyGroup, op: Any, waiter: int, now: int, batch: Batch, cause: Context | None
    ) -> AnyGroup:
        # read only to create the group, so minted only for a step that may create it
        creates = group is None and machine.creates_group(op)
        with self._span(op, group, cause) as span:
            result = machine.handle(
                group,
                op,
                now,
                waiter,
                config=self.config,
                fresh_cgp_id=mint_group_uuid() if creates else "",
                topics=self._settings.topics(self.key.org_id),
            )
            if group is None and result.group is not None:  # created just now
                span.set_attribute(CGP_ID_ATTRIBUTE, result.group.cgp_id)
        batch.deadline = machine.deadline_after(result, op, batch.deadline)
        batch.records += result.records
        batch.replies += result.replies
        if result.events:
            context = telemetry.context_of(span)
            batch.events += [(event, context) for event in result.events]
        return result.group

    def next_deadline(self, group: AnyGroup) -> int | None:
        return machine.next_deadline(group)

    def span_attributes(self, group: AnyGroup) -> Mapping[str, Any]:
        return {
            "group_id": self.key.group_id,
            "org_id": self.key.org_id,
            CGP_ID_ATTRIBUTE: _cgp_id(group),
            RRL_ATTRIBUTE: self.rrl,
        }

    def idle(self, group: AnyGroup) -> bool:
        return machine.passivable(group)

    def rebuild(self, now: int) -> AnyGroup:
        return stored_group(self._settings.log, self.key, now, self.config)

    def settled(self, before: AnyGroup, after: AnyGroup, batch: Batch) -> None:
        stored = bool(batch.records)
        summary = self._snapshot.summary
        offsets_from = None if stored else self._snapshot  # no records: no offset changed
        snapshot = snapshot_of(self.key.group_id, after, offsets_from=offsets_from)
        if stored or snapshot.summary != summary:
            self._snapshot = snapshot
            self._settings.publish(self.key, snapshot)
        for event, parent in batch.events:
            self._trace(event, parent, after)
        if stored and self._settings.stored is not None:
            self._settings.stored(self.key, batch.records)

    def rebuilt(self, group: AnyGroup) -> None:
        self._snapshot = snapshot_of(self.key.group_id, group)
        self._settings.publish(self.key, self._snapshot)

    def follow_up(self, group: AnyGroup) -> None:
        return None

    def _span(
        self, op: Any, group: AnyGroup, parent: Context | None
    ) -> AbstractContextManager[Span]:
        """The op's span, under its request's, naming the group as the turn has it so far."""
        if not telemetry.tracing():
            return telemetry.NOT_TRACING
        return telemetry.span_in(
            parent, _SPANS.get(type(op), "rafka.broker.group.timer"), **self.span_attributes(group)
        )

    def _trace(self, event: Any, parent: Context | None, group: AnyGroup) -> None:
        """Log a stored event; its span is a child of the op's span it happened in."""
        name = self.describe(group)
        if isinstance(event, TargetAssigned):
            attributes = {
                "group_id": event.group_id,
                "assignment_epoch": event.assignment_epoch,
                "assignor": event.assignor,
                "members": event.members,
            }
            with self._event_span(parent, "target-assignment", group, attributes):
                log.info(
                    "%s: target assignment for epoch %d by %s over %d members",
                    name,
                    event.assignment_epoch,
                    event.assignor,
                    event.members,
                )
        elif isinstance(event, MemberFenced):
            log.info(
                "%s: member %s %s; group epoch %d",
                name,
                event.member_id,
                _departure(event.member_id, event.reason),
                event.group_epoch,
            )
        elif isinstance(event, MemberRemoved):
            why = _departure(event.member_id, event.why, "removed")
            log.info("%s: member %s %s", name, event.member_id, why)
        elif isinstance(event, RebalanceCompleted):
            attributes = {
                "group_id": event.group_id,
                "generation_id": event.generation,
                "leader_id": event.leader_id or "",
                "members": event.members,
            }
            with self._event_span(parent, "rebalance-complete", group, attributes):
                log.info(
                    "%s: generation %d with %d members, leader %s",
                    name,
                    event.generation,
                    event.members,
                    event.leader_id,
                )

    def _event_span(
        self, parent: Context | None, kind: str, group: AnyGroup, attributes: dict[str, Any]
    ) -> AbstractContextManager[Any]:
        """The span of a coordinator event, naming the group's identity too."""
        attributes[CGP_ID_ATTRIBUTE] = _cgp_id(group)
        attributes[RRL_ATTRIBUTE] = self.rrl
        return telemetry.span_in(parent, f"rafka.broker.coordinator.{kind}", **attributes)


def _cgp_id(group: AnyGroup) -> str:
    return "" if group is None else group.cgp_id


def _departure(member_id: str, reason: str, dropped: str = "fenced") -> str:
    """How a member went, for the log line that names it already: "left", or "fenced
    (session timeout)". The reason is also stored in the group's record (and read by the
    metrics), where it names the member itself: "member X left"."""
    why = reason.removeprefix(f"member {member_id} ").removeprefix("the member ")
    return "left" if why == "left" else f"{dropped} ({why})"


def new_group_actor(
    key: GroupKey,
    settings: GroupSettings,
    group: AnyGroup = None,
    *,
    config: GroupConfig | None = None,
    published: GroupSnapshot | None = None,
) -> MailboxActor[GroupKey, AnyGroup]:
    """The actor of one group, starting from `group` with `config` (the group's effective
    configs; default: the broker's) and `published`, the group's latest snapshot if it has
    one (else one is published now)."""
    if published is None:
        published = snapshot_of(key.group_id, group)
        settings.publish(key, published)
    wiring = GroupMachine(key, settings, config or settings.config, published)
    return MailboxActor(
        key,
        wiring,
        group,
        settings.log,
        mailbox_size=settings.mailbox_size,
        commit_timeout_s=settings.commit_timeout_s,
    )

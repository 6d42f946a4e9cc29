"""The classic group state machine: `handle(group, op, now_ms, waiter, ...) -> Result`.

Pure: no trio, no clock, no I/O, no randomness (ids to hand out come in with the op or the
call). The group actor calls `handle` for every mailbox command and for `TimerFired`, appends
`Result.records` to the coordinator log, and only then sends `Result.replies`, each to the
waiter token it names. `next_deadline(group)` tells the actor when to wake up next, and
`deadline_after` a cheap lower bound of it after an op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from kio.schema.errors import ErrorCode

from ..consumer_group import machine as consumer_machine
from ..consumer_group import timers as consumer_timers
from ..consumer_group.state import ConsumerGroup
from ..consumer_group.topic_image import EMPTY_IMAGE, TopicImage
from . import membership, offsets, timers
from .effects import Effects, GroupConfig
from .ops import (
    ConsumerGroupHeartbeatOp,
    DeleteGroupOp,
    DeleteGroupOpResp,
    DescribeGroupOp,
    DescribeGroupOpResp,
    ExpireOffsetsOp,
    HeartbeatOp,
    JoinGroupOp,
    LeaveGroupOp,
    OffsetCommitOp,
    OffsetDeleteOp,
    OffsetFetchOp,
    SyncGroupOp,
    TimerFired,
)
from .records import Record
from .state import ClassicGroup, GroupState

AnyGroup: TypeAlias = ClassicGroup | ConsumerGroup | None


def next_deadline(group: AnyGroup) -> int | None:
    if isinstance(group, ConsumerGroup):
        return consumer_timers.next_deadline(group)
    return timers.next_deadline(group)


def deadline_after(result: Result, op: Any, before: int | None) -> int | None:
    """The group's next deadline after `op` (whose outcome is `result`), or an earlier time:
    a lower bound is enough, because an actor that wakes early asks `next_deadline` and
    sleeps again if nothing is due.

    A classic op sets every deadline it sets through `Effects.deadline_in`, so each deadline
    after it is either one from before (not earlier than `before`, a bound of those) or one
    it set (not earlier than the earliest it set): O(1) per request instead of O(members),
    which a 1 000-member rebalance (2 000 JoinGroup and SyncGroup requests, and heartbeats)
    would pay a million times. A timer pass or a consumer group gets the exact answer."""
    group, earliest = result.group, result.earliest_deadline
    if type(group) is not ClassicGroup or isinstance(op, TimerFired):
        return next_deadline(group)
    if before is None or earliest is None:
        return earliest if before is None else before
    return min(before, earliest)


# The ops whose step may create a group, and so read `fresh_cgp_id` (JoinGroup, a simple
# consumer's first commit, a KIP-848 member's first heartbeat).
_CREATING = frozenset({JoinGroupOp, OffsetCommitOp, ConsumerGroupHeartbeatOp})


def creates_group(op: Any) -> bool:
    """Whether a step of `op` on no group may create one: only then need a caller mint a
    `cgp_` id for it (minting per request would cost every read of an unknown group)."""
    return type(op) in _CREATING


def passivable(group: AnyGroup) -> bool:
    """Exactly what its stored records say, with nothing to wait for: an Empty group with no
    deadline and no member id handed out (a passivated actor is rebuilt from the log)."""
    if group is None:
        return True
    if isinstance(group, ConsumerGroup):
        return group.is_empty() and group.assignment_deadline is None
    return group.is_empty() and not group.pending_members and timers.next_deadline(group) is None


@dataclass(slots=True)
class Result:
    group: AnyGroup
    records: list[Record] = field(default_factory=list)
    replies: list[tuple[int, Any]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    earliest_deadline: int | None = None  # the earliest deadline the op set (deadline_after)


def handle(
    group: AnyGroup,
    op: Any,
    now_ms: int,
    waiter: int = -1,
    *,
    config: GroupConfig,
    fresh_cgp_id: str = "",
    topics: TopicImage = EMPTY_IMAGE,
) -> Result:
    """`fresh_cgp_id` is the id of a group this op creates; it is read only when `group` is
    None and `creates_group(op)` (an existing group keeps its id, even when it changes
    type), so a caller need not mint one otherwise."""
    fx = Effects(now_ms, config, fresh_cgp_id, topics)
    new_group: AnyGroup
    if isinstance(group, ConsumerGroup) or type(op) in consumer_machine.CONSUMER_OPS:
        new_group = consumer_machine.handle(group, op, waiter, fx)
    else:
        new_group = _HANDLERS[type(op)](group, op, waiter, fx)
    return Result(new_group, fx.records, fx.replies, fx.events, fx.earliest_deadline)


def _timer(
    group: ClassicGroup | None, op: TimerFired, waiter: int, fx: Effects
) -> ClassicGroup | None:
    if group is not None:
        timers.fire_due(group, fx)
    return group


def describe(
    group: ClassicGroup | None, op: DescribeGroupOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    fx.reply(waiter, describe_group(group))
    return group


def describe_group(group: ClassicGroup | None) -> DescribeGroupOpResp:
    if group is None:
        return DescribeGroupOpResp(ErrorCode.none, GroupState.DEAD.value)
    stable = group.is_in(GroupState.STABLE)
    protocol = group.protocol_name or ""
    members = tuple(
        (
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.metadata(protocol) if stable else b"",
            m.assignment,  # Kafka's describeNoMetadata keeps the assignment
        )
        for m in group.members.values()
    )
    return DescribeGroupOpResp(
        ErrorCode.none,
        group.state.value,
        group.protocol_type or "",
        protocol if stable else "",
        members,
        group.cgp_id,
    )


def delete(
    group: ClassicGroup | None, op: DeleteGroupOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    if group is None or group.is_in(GroupState.DEAD):
        fx.reply(waiter, DeleteGroupOpResp(ErrorCode.group_id_not_found))
        return group
    if not group.is_in(GroupState.EMPTY):
        fx.reply(waiter, DeleteGroupOpResp(ErrorCode.non_empty_group))
        return group
    offsets.delete_group(group, fx)
    fx.reply(waiter, DeleteGroupOpResp(ErrorCode.none))
    return None


_HANDLERS: dict[type, Any] = {
    JoinGroupOp: membership.join,
    SyncGroupOp: membership.sync,
    HeartbeatOp: membership.heartbeat,
    LeaveGroupOp: membership.leave,
    OffsetCommitOp: offsets.commit,
    OffsetFetchOp: offsets.fetch,
    OffsetDeleteOp: offsets.delete_offsets,
    DescribeGroupOp: describe,
    DeleteGroupOp: delete,
    ExpireOffsetsOp: offsets.expire_offsets,
    TimerFired: _timer,
}

"""The coordinator's state machine over both group types: `handle(group, op, now_ms, ...)`.

Pure: no trio, no clock, no I/O, no randomness (ids to hand out come in with the op or the
call). The group actor calls `handle` for every mailbox command and for `TimerFired`, appends
`Result.records` to the coordinator log, and only then sends `Result.replies`, each to the
waiter token it names. `next_deadline(group)` tells the actor when to wake up next, and
`deadline_after` a cheap lower bound of it after an op.

An op goes to the machine of the group's type: a consumer group's (consumer_group/machine.py)
for a KIP-848 group or a KIP-848 op, a share group's (share_group/machine.py) for a KIP-932
group or a share op on no group, the classic machine (group/machine.py) otherwise. A share
group never changes type: a share op for another group type, and any other op for a share
group, is refused (share_group/machine.py). This
module changes the type of a classic or consumer group as Kafka does, keeping its offsets and
its `cgp_` id: whatever the migration policy, a JoinGroup turns an empty consumer group into a
classic group, and a new member's ConsumerGroupHeartbeat turns an empty classic group, with no
member id handed out, into a consumer group; groups with members change type as the policy
allows (migration.py): a classic group when a consumer-protocol member joins it, a consumer
group when its last consumer-protocol member goes and classic members remain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..classic_group import machine as classic_machine
from ..classic_group import timers as classic_timers
from ..classic_group.records import group_record
from ..classic_group.state import ClassicGroup
from ..consumer_group import machine as consumer_machine
from ..consumer_group import timers as consumer_timers
from ..consumer_group.ops import ConsumerGroupHeartbeatOp
from ..consumer_group.records import ConsumerStateTombstone, taking_over
from ..consumer_group.state import ConsumerGroup
from ..group_common.effects import Effects, GroupConfig
from ..group_common.ops import (
    JoinGroupOp,
    OffsetCommitOp,
    TimerFired,
    TopicsChangedOp,
    TxnOffsetCommitOp,
)
from ..group_common.records import Record
from ..group_common.topic_image import EMPTY_IMAGE, TopicImage
from ..share_group import machine as share_machine
from ..share_group.ops import ShareGroupHeartbeatOp
from ..share_group.state import ShareGroup
from . import migration
from .apply import AnyGroup, apply
from .topic_changes import topics_changed


def next_deadline(group: AnyGroup) -> int | None:
    if isinstance(group, ConsumerGroup):
        return consumer_timers.next_deadline(group)
    if isinstance(group, ShareGroup):
        return share_machine.next_deadline(group)
    return classic_timers.next_deadline(group)


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
# consumer's first commit, a KIP-848 member's first heartbeat, a share member's first
# heartbeat, a producer's first transactional commit for a group nobody joined).
_CREATING = frozenset(
    {
        JoinGroupOp,
        OffsetCommitOp,
        ConsumerGroupHeartbeatOp,
        ShareGroupHeartbeatOp,
        TxnOffsetCommitOp,
    }
)


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
    if isinstance(group, ShareGroup):
        return share_machine.passivable(group)
    return (
        group.is_empty()
        and not group.pending_members
        and classic_timers.next_deadline(group) is None
    )


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
    fx = Effects(now_ms, config, fresh_cgp_id, topics, apply)
    new_group: AnyGroup
    if type(op) is TopicsChangedOp:  # issue 45: deleted topics, added partitions
        topics_changed(group, op, waiter, fx)
        new_group = group
    elif isinstance(group, ShareGroup) or (group is None and type(op) in _SHARE_OPS):
        new_group = share_machine.handle(group, op, waiter, fx)
    elif type(op) in _SHARE_OPS:  # one group id, one type
        share_machine.refuse(op, waiter, fx)
        new_group = group
    elif isinstance(group, ConsumerGroup):
        if type(op) is JoinGroupOp and not group.members:
            new_group = classic_machine.handle(_to_classic(group, fx), op, waiter, fx)
        elif type(op) is JoinGroupOp and migration.downgrade_for_static_join(group, op, fx):
            classic = migration.downgrade(group, migration.downgrade_due(fx), fx)
            new_group = classic_machine.handle(classic, op, waiter, fx)
        else:
            new_group = consumer_machine.handle(group, op, waiter, fx)
            gone = migration.downgrade_due(fx)
            if gone and isinstance(new_group, ConsumerGroup) and new_group.members:
                new_group = migration.downgrade(new_group, gone, fx)
    elif type(op) in consumer_machine.CONSUMER_OPS:
        if group is not None and type(op) is ConsumerGroupHeartbeatOp and op.member_epoch == 0:
            return _heartbeat_to_classic(group, op, waiter, fx)
        new_group = consumer_machine.handle(group, op, waiter, fx)
    else:
        new_group = classic_machine.handle(group, op, waiter, fx)
    return Result(new_group, fx.records, fx.replies, fx.events, fx.earliest_deadline)


def _heartbeat_to_classic(
    group: ClassicGroup, op: ConsumerGroupHeartbeatOp, waiter: int, fx: Effects
) -> Result:
    """A joining consumer-protocol member's heartbeat to a classic group: the group becomes a
    consumer group if it is empty, or if the migration policy lets it upgrade; the
    conversion's records and answers stand only if the heartbeat is accepted."""
    successor: ConsumerGroup | migration.Refusal | None = _consumer_successor(group, fx)
    upgrade = None
    if successor is None and group.members:
        # member ids handed out but not yet joined with are dropped, as Kafka's are: such
        # a member joins the consumer group with its id as a classic member
        found = migration.upgrade(group, op.member_id or op.new_member_id, fx)
        if isinstance(found, migration.Upgrade):
            upgrade, successor = found, found.group
        else:
            successor = found
    new_group = consumer_machine.handle(group, op, waiter, fx, successor)
    if upgrade is not None and new_group is upgrade.group:
        fx.records[:0] = upgrade.records
        fx.replies[:0] = upgrade.replies
    return Result(new_group, fx.records, fx.replies, fx.events, fx.earliest_deadline)


_SHARE_OPS = frozenset(share_machine.SHARE_OPS)


def _to_classic(group: ConsumerGroup, fx: Effects) -> ClassicGroup:
    """The classic group an empty consumer group becomes (the classic machine then takes
    the JoinGroup that made it one)."""
    classic = ClassicGroup(group.group_id, group.cgp_id, state_timestamp_ms=fx.now)
    classic.offsets = group.offsets
    classic.txn = group.txn
    fx.write(group, ConsumerStateTombstone(group.group_id))
    fx.write_snapshot(group_record(classic, "empty consumer group became a classic group"))
    return classic


def _consumer_successor(group: ClassicGroup, fx: Effects) -> ConsumerGroup | None:
    """The consumer group that may take an empty classic group's place (if a new member's
    heartbeat asks for one), with its offsets and id; None while the group has members or
    has handed out a member id that may still join."""
    if not group.is_empty() or group.pending_members:
        return None
    successor = taking_over(group.group_id, group.cgp_id, group)
    successor.state_timestamp_ms = fx.now
    return successor

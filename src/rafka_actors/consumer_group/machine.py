"""The consumer-group state machine: every op a KIP-848 group (or a request for one) can get.

Called by `coordinator.machine.handle` for ConsumerGroupHeartbeat and ConsumerGroupDescribe
(whatever the group's type), and for any op sent to a group that is a consumer group. A group
serves classic members too, as Kafka 4.x does whatever the migration policy: their JoinGroup,
SyncGroup, Heartbeat and LeaveGroup go to classic_members.py. An empty consumer group that
gets a JoinGroup becomes a classic group before it gets here, and a group changing type while
it has members is coordinator/migration.py's business.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..group_common.effects import Effects
from ..group_common.offsets import delete_group
from ..group_common.ops import (
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
    TxnMarkerOp,
    TxnOffsetCommitOp,
)
from ..group_common.txn_offsets import apply_marker
from . import classic_members, offsets, timers
from .heartbeat import heartbeat, response_assignment
from .membership import Refusal
from .ops import (
    ConsumerGroupDescribeOp,
    ConsumerGroupDescribeOpResp,
    ConsumerGroupHeartbeatOp,
)
from .state import ConsumerGroup, OtherGroup
from .target import preferred_assignor

CONSUMER_OPS = (ConsumerGroupHeartbeatOp, ConsumerGroupDescribeOp)


def handle(
    group: ConsumerGroup | OtherGroup | None,
    op: Any,
    waiter: int,
    fx: Effects,
    successor: ConsumerGroup | Refusal | None = None,
) -> ConsumerGroup | OtherGroup | None:
    """An op for a consumer group, or a consumer-group op for any group. `successor`: for a
    group of another type, the consumer group that may take its place if a new member's
    heartbeat asks for one (None: it may not)."""
    if isinstance(op, ConsumerGroupHeartbeatOp):
        return heartbeat(group, op, waiter, fx, successor)
    if isinstance(op, ConsumerGroupDescribeOp):
        fx.reply(waiter, describe(group, op, fx))
        return group
    assert isinstance(group, ConsumerGroup)
    new_group: ConsumerGroup | None = _HANDLERS[type(op)](group, op, waiter, fx)
    return new_group


def describe(
    group: object, op: ConsumerGroupDescribeOp, fx: Effects
) -> ConsumerGroupDescribeOpResp:
    """ConsumerGroupDescribe of `group`: a consumer group, a group of another type, or None."""
    if group is None:
        return ConsumerGroupDescribeOpResp(
            ErrorCode.group_id_not_found, f"Group {op.group_id} not found."
        )
    if not isinstance(group, ConsumerGroup):
        return ConsumerGroupDescribeOpResp(
            ErrorCode.group_id_not_found, f"Group {op.group_id} is not a consumer group."
        )
    members = tuple(
        (
            m.member_id,
            m.subscription.instance_id,
            m.subscription.rack_id,
            m.member_epoch,
            m.subscription.client_id,
            m.subscription.client_host,
            m.subscription.topic_names,
            m.subscription.topic_regex,
            response_assignment(m.current.assigned),
            response_assignment(group.target.get(m.member_id, {})),
        )
        for m in group.members.values()
    )
    return ConsumerGroupDescribeOpResp(
        ErrorCode.none,
        state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=preferred_assignor(group, fx),
        members=members,
        cgp_id=group.cgp_id,
        classic_members=tuple(m for m, g in group.members.items() if g.classic is not None),
    )


def _describe_classic(
    group: ConsumerGroup, op: DescribeGroupOp, waiter: int, fx: Effects
) -> ConsumerGroup:
    # DescribeGroups describes classic groups only; Kafka says "Dead" for anything else (and,
    # from v6 on, GROUP_ID_NOT_FOUND: the gateway answers each version's way)
    fx.reply(waiter, DescribeGroupOpResp(ErrorCode.group_id_not_found, "Dead"))
    return group


def _delete(group: ConsumerGroup, op: DeleteGroupOp, waiter: int, fx: Effects) -> Any:
    if group.members:
        fx.reply(waiter, DeleteGroupOpResp(ErrorCode.non_empty_group))
        return group
    delete_group(group, fx)
    fx.reply(waiter, DeleteGroupOpResp(ErrorCode.none))
    return None


def _timer(group: ConsumerGroup, op: TimerFired, waiter: int, fx: Effects) -> ConsumerGroup:
    timers.fire_due(group, fx)
    return group


_HANDLERS: dict[type, Any] = {
    OffsetCommitOp: offsets.commit,
    OffsetFetchOp: offsets.fetch_offsets,
    OffsetDeleteOp: offsets.delete_offsets,
    ExpireOffsetsOp: offsets.expire_offsets,
    DescribeGroupOp: _describe_classic,
    DeleteGroupOp: _delete,
    TimerFired: _timer,
    # classic members inside a consumer group (an empty one became a classic group before a
    # JoinGroup got here: coordinator/machine.py)
    JoinGroupOp: classic_members.join,
    SyncGroupOp: classic_members.sync,
    HeartbeatOp: classic_members.heartbeat,
    LeaveGroupOp: classic_members.leave,
    TxnOffsetCommitOp: offsets.txn_commit,
    TxnMarkerOp: apply_marker,
}

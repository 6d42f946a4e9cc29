"""The classic group state machine: `handle(group, op, waiter, fx) -> group`.

Pure: no trio, no clock, no I/O, no randomness (the time, the configuration and ids to hand
out come in through `Effects`, or with the op). Every op a classic (or simple) group can get,
or that arrives where no group exists yet and is not a KIP-848 op, is stepped here; what the
step writes, answers and reports is collected in `fx`. coordinator/machine.py dispatches to
this machine or to consumer_group/machine.py by the group's type.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..group_common import offsets as common_offsets
from ..group_common.effects import Effects
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
from . import membership, offsets, timers
from .state import ClassicGroup, GroupState


def handle(group: ClassicGroup | None, op: Any, waiter: int, fx: Effects) -> ClassicGroup | None:
    """Step a classic group (None: it does not exist yet) by `op`; the group as it now is."""
    new_group: ClassicGroup | None = _HANDLERS[type(op)](group, op, waiter, fx)
    return new_group


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
    common_offsets.delete_group(group, fx)
    fx.reply(waiter, DeleteGroupOpResp(ErrorCode.none))
    return None


_HANDLERS: dict[type, Any] = {
    JoinGroupOp: membership.join,
    SyncGroupOp: membership.sync,
    HeartbeatOp: membership.heartbeat,
    LeaveGroupOp: membership.leave,
    OffsetCommitOp: offsets.commit,
    OffsetFetchOp: common_offsets.fetch,
    OffsetDeleteOp: offsets.delete_offsets,
    DescribeGroupOp: describe,
    DeleteGroupOp: delete,
    ExpireOffsetsOp: offsets.expire_offsets,
    TimerFired: _timer,
    TxnOffsetCommitOp: offsets.txn_commit,
    TxnMarkerOp: apply_marker,
}

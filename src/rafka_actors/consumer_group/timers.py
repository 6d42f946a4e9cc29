"""Deadlines of a consumer group and what happens when they pass.

Three kinds, all absolute milliseconds held in the state: each member's session deadline
(`group.consumer.session.timeout.ms` after its last heartbeat), each member's rebalance
deadline (armed while it holds partitions it was asked to revoke; it fires only if the member
is still on the epoch it was asked to move on from), a classic member's JoinGroup or SyncGroup
owed within its rebalance timeout (classic_members.py; its session deadline is its own
JoinGroup's session timeout), and the group's throttled assignment.
"""

from __future__ import annotations

from ..group_common.effects import Effects
from .membership import fence
from .state import ConsumerGroup, MemberState
from .target import maybe_assign


def next_deadline(group: ConsumerGroup) -> int | None:
    deadlines = [group.assignment_deadline] if group.assignment_deadline is not None else []
    for member in group.members.values():
        if member.session_deadline is not None:
            deadlines.append(member.session_deadline)
        if member.rebalance_deadline is not None:
            deadlines.append(member.rebalance_deadline)
        if member.classic_deadline is not None:
            deadlines.append(member.classic_deadline)
    return min(deadlines, default=None)


def fire_due(group: ConsumerGroup, fx: Effects) -> None:
    now = fx.now
    for member in list(group.members.values()):
        if member.session_deadline is not None and member.session_deadline <= now:
            fence(group, member, fx, f"member {member.member_id} session timeout")
        elif member.classic_deadline is not None and member.classic_deadline <= now:
            # a classic member owing a JoinGroup or SyncGroup past its rebalance timeout
            fence(group, member, fx, f"member {member.member_id} rebalance timeout")
        elif member.rebalance_deadline is not None and member.rebalance_deadline <= now:
            member.rebalance_deadline = None
            current = member.current
            if (
                current.state is MemberState.UNREVOKED_PARTITIONS
                and current.member_epoch == member.rebalance_epoch
            ):
                fence(group, member, fx, f"member {member.member_id} rebalance timeout")
    if group.assignment_deadline is not None and group.assignment_deadline <= now:
        group.assignment_deadline = None
        maybe_assign(group, fx)

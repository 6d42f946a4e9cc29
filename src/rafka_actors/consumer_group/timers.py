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


def on_loaded(group: ConsumerGroup, now_ms: int, session_timeout_ms: int) -> None:
    """A group rebuilt from its records (start-up, a failed actor), as Kafka's `onLoaded`:
    no deadline is stored, so every member gets a fresh session (a classic member its own
    JoinGroup's timeout), and one that was revoking a fresh rebalance deadline."""
    group.state_timestamp_ms = now_ms
    for member_id in [m for m in group.target if m not in group.members]:
        del group.target[member_id]  # a target slice whose member record was compacted away
    for member in group.members.values():
        classic = member.classic
        timeout = session_timeout_ms if classic is None else classic.session_timeout_ms
        member.session_deadline = now_ms + timeout
        if member.current.state is MemberState.UNREVOKED_PARTITIONS:
            member.rebalance_deadline = now_ms + max(member.subscription.rebalance_timeout_ms, 0)
            member.rebalance_epoch = member.member_epoch


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

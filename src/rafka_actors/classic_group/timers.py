"""Deadlines of a classic group, computed from its state, and what happens when they pass.

Four kinds, all absolute milliseconds held in the state: each member's heartbeat (session
timeout, or the new-member join timeout while a new member is parked in its first join),
each pending member's (a member id handed out with MEMBER_ID_REQUIRED that has not joined
yet), the join deadline (initial delay or rebalance timeout) and the sync deadline (members
that got their JoinGroup answer but never sent SyncGroup). The actor sleeps until
`next_deadline` and then feeds `TimerFired` through the same pure path as any request.
"""

from __future__ import annotations

from ..group_common.effects import Effects
from . import rebalance as rb
from .state import ClassicGroup


def next_deadline(group: ClassicGroup | None) -> int | None:
    if group is None:
        return None
    deadlines = [m.heartbeat_deadline for m in group.members.values()]
    deadlines += group.pending_members.values()
    deadlines += [group.join_deadline, group.sync_deadline]
    return min((d for d in deadlines if d is not None), default=None)


def on_loaded(group: ClassicGroup, now_ms: int) -> None:
    """A group rebuilt from its records (start-up, a failed actor): no deadline is stored,
    so every member gets a fresh session, as after a Kafka coordinator failover."""
    for member in group.members.values():
        member.heartbeat_deadline = now_ms + member.session_timeout_ms


def fire_due(group: ClassicGroup, fx: Effects) -> None:
    """Run every deadline that is due at `fx.now`, in a fixed order."""
    for member_id, deadline in list(group.pending_members.items()):
        if deadline <= fx.now:
            group.remove(member_id)
            if group.is_in(rb.P) and group.has_all_members_joined():
                rb.complete_join(group, fx)
    for member in list(group.members.values()):
        if member.heartbeat_deadline is None or member.heartbeat_deadline > fx.now:
            continue
        if group.members.get(member.member_id) is not member:
            continue  # removed by an earlier expiry in this same pass
        member.heartbeat_deadline = None
        if not member.has_satisfied_heartbeat():
            reason = f"member {member.member_id} session timeout"
            rb.remove_member_and_update_group(group, member, fx, reason, "session timeout")
    if group.join_deadline is not None and group.join_deadline <= fx.now:
        rb.on_join_deadline(group, fx)
    if group.sync_deadline is not None and group.sync_deadline <= fx.now:
        _expire_pending_sync(group, fx)


def _expire_pending_sync(group: ClassicGroup, fx: Effects) -> None:
    group.sync_deadline = None
    if not group.is_in(rb.C, rb.S) or not group.pending_sync:
        return
    for member_id in list(group.pending_sync):
        member = group.members.get(member_id)
        if member is not None:
            rb.drop_member(group, member, fx, "did not sync in time")
    rb.prepare_rebalance(group, fx, "members did not sync in time")

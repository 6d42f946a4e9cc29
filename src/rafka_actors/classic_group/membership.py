"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup of a classic group, with Kafka's answers.

Each handler takes the group (None if it does not exist yet), the op, the waiter token of the
request and the Effects to fill; it returns the group as it now is. Error precedence and
state-by-state behaviour follow Kafka's GroupMetadataManager (`classicGroupJoin…`,
`classicGroupSync…`, `classicGroupHeartbeat…`, `classicGroupLeave…`).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..group_common.effects import Effects
from ..group_common.ops import (
    HeartbeatOp,
    HeartbeatOpResp,
    JoinGroupOp,
    JoinGroupOpResp,
    LeaveGroupOp,
    LeaveGroupOpResp,
    SyncGroupOp,
    SyncGroupOpResp,
)
from . import rebalance as rb
from .records import store_group
from .state import C, ClassicGroup, D, E, Member, P, S


def validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
    if instance_id is not None:
        existing = group.static_member_id(instance_id)
        if existing is None:
            return ErrorCode.unknown_member_id
        if existing != member_id:
            return ErrorCode.fenced_instance_id
    if member_id not in group.members:
        return ErrorCode.unknown_member_id
    return ErrorCode.none


# -- JoinGroup ----------------------------------------------------------------------------
def join(
    group: ClassicGroup | None, op: JoinGroupOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    cfg = fx.config
    if not cfg.min_session_timeout_ms <= op.session_timeout_ms <= cfg.max_session_timeout_ms:
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.invalid_session_timeout, member_id=op.member_id))
        return group
    unknown = op.member_id == ""
    if group is None:
        if not unknown:
            fx.reply(waiter, JoinGroupOpResp(ErrorCode.unknown_member_id, member_id=op.member_id))
            return None
        group = ClassicGroup(op.group_id, fx.fresh_cgp_id, state_timestamp_ms=fx.now)
        store_group(fx, group, "group created")
    if not _accept_joining_member(group, op.member_id, cfg.max_size):
        # Kafka drops the refused member too, so late rejoiners make room when the limit shrinks
        refused = group.members.get(op.member_id)
        if refused is not None:
            rb.drop_member(group, refused, fx, "group full")
        group.pending_members.pop(op.member_id, None)
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.group_max_size_reached))
        # Everyone left may have joined by now: complete on this event, not at the timeout.
        rb.maybe_complete_join_phase(group, fx)
        return group
    if unknown:
        _join_new_member(group, op, waiter, fx)
    else:
        _join_existing_member(group, op, waiter, fx)
    return group


def _accept_joining_member(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    if group.is_in(E, D):
        return True
    member = group.members.get(member_id)
    if group.is_in(P):
        parked = member is not None and member.awaiting_join is not None
        return parked or group.awaiting_join_count() < max_size
    return member is not None or len(group.members) < max_size


def _join_new_member(group: ClassicGroup, op: JoinGroupOp, waiter: int, fx: Effects) -> None:
    names = [name for name, _ in op.protocols]
    if group.is_in(D):
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.coordinator_not_available))
    elif not group.supports_protocols(op.protocol_type, names):
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.inconsistent_group_protocol))
    elif op.group_instance_id is not None:
        existing = group.static_member_id(op.group_instance_id)
        if existing is not None:
            _replace_static_member(group, op, existing, waiter, fx)
        else:
            _add_member_and_rebalance(group, op, op.new_member_id, waiter, fx)
    elif op.require_known_member_id:
        group.pending_members[op.new_member_id] = fx.deadline_in(op.session_timeout_ms)
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.member_id_required, member_id=op.new_member_id))
    else:
        _add_member_and_rebalance(group, op, op.new_member_id, waiter, fx)


def _join_existing_member(group: ClassicGroup, op: JoinGroupOp, waiter: int, fx: Effects) -> None:
    names = [name for name, _ in op.protocols]
    if group.is_in(D):
        fx.reply(
            waiter, JoinGroupOpResp(ErrorCode.coordinator_not_available, member_id=op.member_id)
        )
        return
    if not group.supports_protocols(op.protocol_type, names):
        fx.reply(
            waiter, JoinGroupOpResp(ErrorCode.inconsistent_group_protocol, member_id=op.member_id)
        )
        return
    if op.member_id in group.pending_members:
        _add_member_and_rebalance(group, op, op.member_id, waiter, fx)
        return
    error = validate_member(group, op.member_id, op.group_instance_id)
    if error:
        fx.reply(waiter, JoinGroupOpResp(error, member_id=op.member_id))
        return
    member = group.members[op.member_id]
    if group.is_in(P):
        _update_member_and_rebalance(group, member, op, waiter, fx, "member rejoined")
    elif group.is_in(C) and member.matches(op.protocols):
        # It missed the JoinGroup response: hand it the current generation again.
        fx.reply(waiter, rb.join_response(group, member))
    elif group.is_in(C):
        _update_member_and_rebalance(group, member, op, waiter, fx, "member metadata changed")
    elif group.is_in(S) and (group.is_leader(op.member_id) or not member.matches(op.protocols)):
        reason = "leader rejoined" if group.is_leader(op.member_id) else "subscription changed"
        _update_member_and_rebalance(group, member, op, waiter, fx, reason)
    elif group.is_in(S):
        fx.reply(waiter, rb.join_response(group, member))  # follower, nothing changed
    else:
        fx.reply(waiter, JoinGroupOpResp(ErrorCode.unknown_member_id, member_id=op.member_id))


def _add_member_and_rebalance(
    group: ClassicGroup, op: JoinGroupOp, member_id: str, waiter: int, fx: Effects
) -> None:
    member = Member(
        member_id=member_id,
        instance_id=op.group_instance_id,
        client_id=op.client_id,
        client_host=op.client_host,
        rebalance_timeout_ms=_rebalance_timeout(op),
        session_timeout_ms=op.session_timeout_ms,
        protocol_type=op.protocol_type,
        protocols=op.protocols,
        awaiting_join=waiter,
        is_new=True,
    )
    if group.is_in(P) and group.previous_state is E:
        group.new_member_added = True
    group.add(member)
    # A parked new member can't heartbeat, and a disconnect goes unnoticed while it is
    # parked: time its join out so defunct members don't pile up (Kafka does the same).
    rb.reschedule_heartbeat(member, fx, fx.config.new_member_join_timeout_ms)
    rb.maybe_prepare_rebalance_or_complete_join(group, fx, f"member {member_id} joined")


def _rebalance_timeout(op: JoinGroupOp) -> int:
    # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
    return op.rebalance_timeout_ms if op.rebalance_timeout_ms >= 0 else op.session_timeout_ms


def _update_member_and_rebalance(
    group: ClassicGroup, member: Member, op: JoinGroupOp, waiter: int, fx: Effects, reason: str
) -> None:
    group.set_protocols(member, op.protocols)
    member.rebalance_timeout_ms = _rebalance_timeout(op)
    member.session_timeout_ms = op.session_timeout_ms
    if member.awaiting_join is not None and member.awaiting_join != waiter:
        # A retried JoinGroup supersedes the parked one: answer the old request.
        fx.reply(
            member.awaiting_join,
            JoinGroupOpResp(ErrorCode.rebalance_in_progress, member_id=member.member_id),
        )
    group.set_awaiting_join(member, waiter)
    rb.maybe_prepare_rebalance_or_complete_join(group, fx, reason)


def _replace_static_member(
    group: ClassicGroup, op: JoinGroupOp, old_id: str, waiter: int, fx: Effects
) -> None:
    current_leader = group.leader_id
    old = group.members.pop(old_id)
    # Fence whatever the old incarnation has parked.
    fx.reply(old.awaiting_join, JoinGroupOpResp(ErrorCode.fenced_instance_id, member_id=old_id))
    fx.reply(old.awaiting_sync, SyncGroupOpResp(ErrorCode.fenced_instance_id))
    group.set_awaiting_join(old, None)
    old.awaiting_sync = None
    old.member_id = op.new_member_id
    old.is_new = False  # Kafka builds a fresh, not-new member for the new id
    group.members[old.member_id] = old
    group.static_members[op.group_instance_id or ""] = old.member_id
    group.pending_sync.pop(old_id, None)
    group.depart(old_id, f"replaced by {old.member_id}")
    if group.leader_id == old_id:
        group.leader_id = old.member_id
    rb.reschedule_heartbeat(old, fx)
    old_protocol_choice = group.protocol_name
    group.set_protocols(old, op.protocols)
    old.rebalance_timeout_ms = _rebalance_timeout(op)
    old.session_timeout_ms = op.session_timeout_ms
    if group.is_in(S):
        if group.select_protocol() == old_protocol_choice:
            # Same protocol: no rebalance. The new id takes over the old one's slot.
            store_group(fx, group, f"static member {op.group_instance_id} replaced")
            # Before JoinGroup v9 (skip_assignment) Kafka names the leader as it was, so a
            # replaced leader acts as a follower and keeps its stored assignment.
            fx.reply(
                waiter,
                JoinGroupOpResp(
                    ErrorCode.none,
                    group.generation,
                    group.protocol_type,
                    group.protocol_name,
                    current_leader or "",
                    old.member_id,
                ),
            )
            return
        group.set_awaiting_join(old, waiter)
        rb.maybe_prepare_rebalance_or_complete_join(group, fx, "static member protocols changed")
    elif group.is_in(C):
        group.set_awaiting_join(old, waiter)
        rb.prepare_rebalance(group, fx, "static member rejoined during sync")
    else:  # PreparingRebalance
        group.set_awaiting_join(old, waiter)
        rb.maybe_complete_join_phase(group, fx)


# -- SyncGroup ----------------------------------------------------------------------------
def sync(
    group: ClassicGroup | None, op: SyncGroupOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    if group is None or group.is_in(E):
        fx.reply(waiter, SyncGroupOpResp(ErrorCode.unknown_member_id))
        return group
    error = _validate_sync(group, op)
    if error:
        fx.reply(waiter, SyncGroupOpResp(error))
    elif group.is_in(P):
        fx.reply(waiter, SyncGroupOpResp(ErrorCode.rebalance_in_progress))
    elif group.is_in(C):
        member = group.members[op.member_id]
        if member.awaiting_sync is not None and member.awaiting_sync != waiter:
            fx.reply(member.awaiting_sync, SyncGroupOpResp(ErrorCode.rebalance_in_progress))
        member.awaiting_sync = waiter
        group.pending_sync.pop(op.member_id, None)
        if group.is_leader(op.member_id):
            assignment = dict(op.assignments)
            rb.set_and_propagate_assignment(group, fx, assignment)
            group.transition_to(S, fx.now)
            store_group(fx, group, group.rebalance_reason)
    elif group.is_in(S):
        group.pending_sync.pop(op.member_id, None)
        member = group.members[op.member_id]
        fx.reply(
            waiter,
            SyncGroupOpResp(
                ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
            ),
        )
    return group


def _validate_generation_member(
    group: ClassicGroup, member_id: str, instance_id: str | None, generation: int
) -> int:
    """The checks SyncGroup and Heartbeat share, in Kafka's order."""
    if group.is_in(D):
        return ErrorCode.coordinator_not_available
    error = validate_member(group, member_id, instance_id)
    if error:
        return error
    if generation != group.generation:
        return ErrorCode.illegal_generation
    return ErrorCode.none


def _validate_sync(group: ClassicGroup, op: SyncGroupOp) -> int:
    error = _validate_generation_member(group, op.member_id, op.group_instance_id, op.generation_id)
    if error:
        return error
    if _inconsistent(op.protocol_type, group.protocol_type) or _inconsistent(
        op.protocol_name, group.protocol_name
    ):
        return ErrorCode.inconsistent_group_protocol
    return ErrorCode.none


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and actual is not None and asked != actual


# -- Heartbeat ----------------------------------------------------------------------------
def heartbeat(
    group: ClassicGroup | None, op: HeartbeatOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    fx.reply(waiter, HeartbeatOpResp(_heartbeat_error(group, op, fx)))
    return group


def _heartbeat_error(group: ClassicGroup | None, op: HeartbeatOp, fx: Effects) -> int:
    if group is None:
        return ErrorCode.unknown_member_id
    error = _validate_generation_member(group, op.member_id, op.group_instance_id, op.generation_id)
    if error:
        return error
    if group.is_in(E):
        return ErrorCode.unknown_member_id
    rb.reschedule_heartbeat(group.members[op.member_id], fx)
    if group.is_in(P):
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


# -- LeaveGroup ---------------------------------------------------------------------------
def leave(
    group: ClassicGroup | None, op: LeaveGroupOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    if group is None:  # Kafka: every member unknown, the request itself fine
        unknown = tuple((m, i, int(ErrorCode.unknown_member_id)) for m, i, _ in op.members)
        fx.reply(waiter, LeaveGroupOpResp(ErrorCode.none, unknown))
        return None
    if group.is_in(D):
        fx.reply(waiter, LeaveGroupOpResp(ErrorCode.coordinator_not_available))
        return group
    results = [_leave_one(group, m, i, fx) for m, i, _ in op.members]
    left = [member_id for member_id, _, error in results if error == ErrorCode.none]
    if left:
        reason = f"members left: {', '.join(left)}"
        if group.is_in(S, C):
            rb.maybe_prepare_rebalance_or_complete_join(group, fx, reason)
        elif group.is_in(P):
            rb.maybe_complete_join_phase(group, fx)
    fx.reply(waiter, LeaveGroupOpResp(ErrorCode.none, tuple(results)))
    return group


def _leave_one(
    group: ClassicGroup, member_id: str, instance_id: str | None, fx: Effects
) -> tuple[str, str | None, int]:
    if member_id == "":
        # Administrative removal of a static member by its instance id alone.
        existing = group.static_member_id(instance_id) if instance_id is not None else None
        if existing is None:
            return member_id, instance_id, ErrorCode.unknown_member_id
        rb.drop_member(group, group.members[existing], fx, "removed by an admin")
        return member_id, instance_id, ErrorCode.none
    if member_id in group.pending_members:
        group.remove(member_id)
        return member_id, instance_id, ErrorCode.none
    error = validate_member(group, member_id, instance_id)
    if error:
        return member_id, instance_id, error
    rb.drop_member(group, group.members[member_id], fx, "left")
    return member_id, instance_id, ErrorCode.none

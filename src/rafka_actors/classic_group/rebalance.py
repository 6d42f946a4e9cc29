"""The rebalance barrier of the classic protocol, as Kafka's GroupMetadataManager runs it.

PreparingRebalance parks every JoinGroup until all known members have rejoined (then the join
completes at once: an event, not a timer) or the rebalance timeout passes (then members that
did not rejoin are dropped). A group that was Empty waits `group.initial.rebalance.delay.ms`
first, extended by another delay each time a new member arrives, never beyond the rebalance
timeout. Completing the join bumps the generation, picks the protocol by vote, answers every
parked JoinGroup (the leader gets the member list) and moves to CompletingRebalance, where
SyncGroup waits for the leader's assignment; members that never sync within the rebalance
timeout are removed and the group rebalances again.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..group_common.effects import Effects, MemberRemoved, RebalanceCompleted
from ..group_common.ops import JoinGroupOpResp, SyncGroupOpResp
from .records import store_group
from .state import ClassicGroup, GroupState, Member

P, C, S, E, D = (
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.EMPTY,
    GroupState.DEAD,
)


def join_response(group: ClassicGroup, member: Member, *, skip: bool = False) -> JoinGroupOpResp:
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    if group.is_leader(member.member_id):
        members = tuple(
            (m.member_id, m.instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        )
    return JoinGroupOpResp(
        error_code=ErrorCode.none,
        generation_id=group.generation,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id or "",
        member_id=member.member_id,
        members=members,
        skip_assignment=skip,
    )


def drop_member(group: ClassicGroup, member: Member, fx: Effects, why: str) -> None:
    """Remove a member, answering any request it has parked (no waiter is ever left behind);
    `why` goes into the next group record (left, session timeout, did not rejoin, ...)."""
    fx.reply(member.awaiting_join, JoinGroupOpResp(ErrorCode.unknown_member_id))
    fx.reply(member.awaiting_sync, SyncGroupOpResp(ErrorCode.unknown_member_id))
    group.set_awaiting_join(member, None)
    member.awaiting_sync = None
    group.remove(member.member_id)
    group.depart(member.member_id, why)
    fx.events.append(MemberRemoved(group.group_id, member.member_id, why))


def reschedule_heartbeat(member: Member, fx: Effects, timeout_ms: int | None = None) -> None:
    member.heartbeat_deadline = fx.deadline_in(
        member.session_timeout_ms if timeout_ms is None else timeout_ms
    )


def maybe_prepare_rebalance_or_complete_join(group: ClassicGroup, fx: Effects, reason: str) -> None:
    if group.can_rebalance():
        prepare_rebalance(group, fx, reason)
    else:
        maybe_complete_join_phase(group, fx)


def prepare_rebalance(group: ClassicGroup, fx: Effects, reason: str) -> None:
    if group.is_in(C):
        reset_and_propagate_assignment_error(group, fx, ErrorCode.rebalance_in_progress)
    group.pending_sync.clear()
    group.sync_deadline = None
    group.rebalance_reason = reason
    group.rebalance_started_ms = fx.now
    if group.is_in(E):
        delay = fx.config.initial_rebalance_delay_ms
        group.initial_delay_ms = delay
        group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        group.join_deadline = fx.deadline_in(delay)
        group.join_timer_initial = True
        group.transition_to(P, fx.now)
        return
    group.transition_to(P, fx.now)
    maybe_complete_join_else_schedule(group, fx)


def maybe_complete_join_else_schedule(group: ClassicGroup, fx: Effects) -> None:
    if group.has_all_members_joined():
        complete_join(group, fx)
    else:
        group.join_deadline = fx.deadline_in(group.rebalance_timeout_ms())
        group.join_timer_initial = False


def maybe_complete_join_phase(group: ClassicGroup, fx: Effects) -> None:
    if not group.is_in(P) or group.previous_state is E:
        return  # not rebalancing, or an initial rebalance that waits out its delay
    if group.has_all_members_joined():
        complete_join(group, fx)


def on_join_deadline(group: ClassicGroup, fx: Effects) -> None:
    if not group.join_timer_initial:
        complete_join(group, fx)
        return
    remaining = group.initial_remaining_ms
    if group.new_member_added and remaining != 0:
        # A member arrived during the delay: wait once more, within the rebalance timeout.
        group.new_member_added = False
        delay = min(fx.config.initial_rebalance_delay_ms, remaining)
        group.initial_remaining_ms = max(remaining - group.initial_delay_ms, 0)
        group.initial_delay_ms = delay
        group.join_deadline = fx.deadline_in(delay)
    else:
        complete_join(group, fx)


def complete_join(group: ClassicGroup, fx: Effects) -> None:
    group.join_deadline = None
    group.join_timer_initial = False
    for member in list(group.members.values()):
        if member.awaiting_join is None and member.instance_id is None:
            drop_member(group, member, fx, "did not rejoin in time")
    if group.is_in(D):
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined: wait another rebalance timeout for the session timeouts to clear out.
        group.join_deadline = fx.deadline_in(group.rebalance_timeout_ms())
        return
    _init_next_generation(group, fx)
    if group.is_in(E):
        store_group(fx, group, group.rebalance_reason)
        return
    for member in group.members.values():
        fx.reply(member.awaiting_join, join_response(group, member))
        group.set_awaiting_join(member, None)
        reschedule_heartbeat(member, fx)
        member.is_new = False
        group.pending_sync[member.member_id] = None
    group.sync_deadline = fx.deadline_in(group.rebalance_timeout_ms())
    fx.events.append(
        RebalanceCompleted(group.group_id, group.generation, group.leader_id, len(group.members))
    )


def _init_next_generation(group: ClassicGroup, fx: Effects) -> None:
    group.generation += 1
    if group.members:
        group.protocol_name = group.select_protocol()
        group.transition_to(C, fx.now)
    else:
        group.protocol_name = None
        group.transition_to(E, fx.now)
    group.pending_sync.clear()


def reset_and_propagate_assignment_error(group: ClassicGroup, fx: Effects, error: int) -> None:
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(group, fx, error)


def set_and_propagate_assignment(
    group: ClassicGroup, fx: Effects, assignment: dict[str, bytes]
) -> None:
    for member in group.members.values():
        member.assignment = assignment.get(member.member_id, b"")
    propagate_assignment(group, fx, ErrorCode.none)


def propagate_assignment(group: ClassicGroup, fx: Effects, error: int) -> None:
    ok = error == ErrorCode.none
    for member in group.members.values():
        if member.awaiting_sync is None:
            continue
        fx.reply(
            member.awaiting_sync,
            SyncGroupOpResp(
                error_code=error,
                assignment=member.assignment,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
            ),
        )
        member.awaiting_sync = None
        reschedule_heartbeat(member, fx)


def remove_member_and_update_group(
    group: ClassicGroup, member: Member, fx: Effects, reason: str, why: str
) -> None:
    drop_member(group, member, fx, why)
    if group.is_in(S, C):
        maybe_prepare_rebalance_or_complete_join(group, fx, reason)
    elif group.is_in(P) and group.has_all_members_joined():
        complete_join(group, fx)

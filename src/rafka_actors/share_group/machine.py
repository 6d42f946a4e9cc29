"""The share-group state machine: every op a KIP-932 group (or a request for one) can get.

Called by `coordinator.machine.handle` for a share op (whatever the group's type) and for any
op sent to a share group. A group id has one type: a share op for a classic or consumer group
is GROUP_ID_NOT_FOUND "Group <id> is not a share group." (Kafka's `shareGroup` lookup), and a
classic or consumer op for a share group is refused the same way (JoinGroup:
INCONSISTENT_GROUP_PROTOCOL).

Every change of a share partition's state is written as that partition's whole snapshot
(`SharePartitionRecord`) before the reply goes out, so an acquisition, with its raised
delivery count, is stored before its records are handed out.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..group_common.effects import Effects, MemberFenced
from ..group_common.group_configs import READ_COMMITTED
from ..group_common.ops import (
    LEAVE_GROUP_MEMBER_EPOCH,
    DeleteGroupOp,
    DeleteGroupOpResp,
    JoinGroupOp,
    TimerFired,
    TxnMarkerOp,
    TxnMarkerOpResp,
)
from ..group_common.records import GroupTombstone
from .ops import (
    AlterShareOffsetsOp,
    AlterShareOffsetsOpResp,
    DeleteShareOffsetsOp,
    DeleteShareOffsetsOpResp,
    DescribeShareOffsetsOp,
    DescribeShareOffsetsOpResp,
    ShareAcquireOp,
    ShareAcquireOpResp,
    ShareFetchOp,
    ShareFetchOpResp,
    ShareGroupDescribeOp,
    ShareGroupDescribeOpResp,
    ShareGroupHeartbeatOp,
    ShareGroupHeartbeatOpResp,
    ShareSessionOp,
    ShareSessionOpResp,
)
from .partition import InvalidRecordState, SharePartition
from .records import ShareGroupMetadataRecord, SharePartitionRecord, SharePartitionTombstone
from .state import ASSIGNOR_NAME, ShareGroup, ShareMember, ShareSession, assignment_of

SHARE_OPS = (
    ShareGroupHeartbeatOp,
    ShareGroupDescribeOp,
    ShareSessionOp,
    ShareAcquireOp,
    ShareFetchOp,
    DescribeShareOffsetsOp,
    AlterShareOffsetsOp,
    DeleteShareOffsetsOp,
)
FINAL_SESSION_EPOCH = -1


def not_share(group_id: str) -> str:
    return f"Group {group_id} is not a share group."


def handle(group: ShareGroup | None, op: Any, waiter: int, fx: Effects) -> ShareGroup | None:
    """A share op for a share group or no group, or any op for a share group."""
    handler = _HANDLERS.get(type(op), _other)  # any other op is another type's
    result: ShareGroup | None = handler(group, op, waiter, fx)
    return result


def refuse(op: Any, waiter: int, fx: Effects) -> None:
    """A share op sent to a classic or consumer group."""
    fx.reply(waiter, op.error_reply(ErrorCode.group_id_not_found, not_share(op.group_id)))


def next_deadline(group: ShareGroup | None) -> int | None:
    if group is None:
        return None
    deadlines = [m.session_deadline for m in group.members.values()]
    for partition in group.partitions.values():
        due = partition.next_deadline()
        if due is not None:
            deadlines.append(due)
    return min(deadlines) if deadlines else None


def passivable(group: ShareGroup) -> bool:
    """No member and no lock: what is left of departed members' sessions holds nothing and
    may go (a late final acknowledgement then finds no session, and nothing to acknowledge)."""
    return not group.members and next_deadline(group) is None


# -- membership -----------------------------------------------------------------------------
def _fenced(op: ShareGroupHeartbeatOp, member: ShareMember) -> str:
    """Kafka's message for an epoch that is not the member's."""
    than = "greater" if op.member_epoch > member.member_epoch else "smaller"
    return (
        f"The share group member has a {than} member epoch ({op.member_epoch}) than the one "
        f"known by the group coordinator ({member.member_epoch}). The member must abandon all "
        "its partitions and rejoin."
    )


def _heartbeat(
    group: ShareGroup | None, op: ShareGroupHeartbeatOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    config = fx.config
    if not op.member_id.strip():
        # (Kafka 4.3.1 sends no message here, unlike for a consumer group's heartbeat)
        fx.reply(waiter, ShareGroupHeartbeatOpResp(ErrorCode.invalid_request, None))
        return group
    if op.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        return _leave(group, op, waiter, fx)
    if group is None:
        if op.member_epoch != 0:
            fx.reply(
                waiter,
                ShareGroupHeartbeatOpResp(
                    ErrorCode.group_id_not_found, f"Share group {op.group_id} not found."
                ),
            )
            return None
        group = ShareGroup(op.group_id, fx.fresh_cgp_id)
    member = group.members.get(op.member_id)
    if op.member_epoch == 0:
        if op.subscribed_topic_names is None or not op.subscribed_topic_names:
            fx.reply(
                waiter,
                ShareGroupHeartbeatOpResp(
                    ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
                ),
            )
            return group if group.members or group.group_epoch else None
        if member is None and len(group.members) >= config.share_max_size:
            fx.reply(
                waiter,
                ShareGroupHeartbeatOpResp(
                    ErrorCode.group_max_size_reached,
                    f"The share group has reached its maximum capacity of "
                    f"{config.share_max_size} members.",
                ),
            )
            return group if group.members or group.group_epoch else None
        if member is None:
            member = ShareMember(op.member_id, 0)
            group.members[op.member_id] = member
            _bump(group, fx)
        member.assignment = ()  # a (re)joining member is sent its assignment
    elif member is None:
        fx.reply(
            waiter,
            ShareGroupHeartbeatOpResp(
                ErrorCode.unknown_member_id,
                f"Member {op.member_id} is not a member of group {op.group_id}.",
            ),
        )
        return group
    elif op.member_epoch != member.member_epoch:
        fx.reply(
            waiter, ShareGroupHeartbeatOpResp(ErrorCode.fenced_member_epoch, _fenced(op, member))
        )
        return group
    member.client_id, member.client_host = op.client_id, op.client_host
    if op.rack_id is not None:
        member.rack_id = op.rack_id
    if op.subscribed_topic_names is not None:
        member.subscribed = tuple(op.subscribed_topic_names)
    member.session_deadline = fx.deadline_in(config.share_session_timeout_ms)
    assignment = assignment_of(member.subscribed, fx.topics)
    sent = None
    if assignment != member.assignment or member.member_epoch == 0:
        if assignment != member.assignment:
            member.assignment = assignment
            if member.member_epoch != 0 or not group.group_epoch:
                _bump(group, fx)
        sent = assignment
    member.member_epoch = group.group_epoch
    fx.reply(
        waiter,
        ShareGroupHeartbeatOpResp(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=config.share_heartbeat_interval_ms,
            assignment=sent,
        ),
    )
    return group


def _bump(group: ShareGroup, fx: Effects) -> None:
    fx.write(group, ShareGroupMetadataRecord(group.group_id, group.cgp_id, group.group_epoch + 1))


def _leave(
    group: ShareGroup | None, op: ShareGroupHeartbeatOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    if group is None or op.member_id not in group.members:
        code = ErrorCode.group_id_not_found if group is None else ErrorCode.unknown_member_id
        fx.reply(waiter, ShareGroupHeartbeatOpResp(code, member_id=op.member_id))
        return group
    # A leaving member closes its share session next (librdkafka sends the leave and the
    # session's last acknowledgements at the same time): what it holds stays acquired until
    # then, or until the locks expire, so those acknowledgements still count.
    _remove(group, op.member_id, "the member left", fx, release=op.member_id not in group.sessions)
    fx.reply(
        waiter,
        ShareGroupHeartbeatOpResp(
            ErrorCode.none, member_id=op.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
        ),
    )
    return group


def _remove(
    group: ShareGroup, member_id: str, reason: str, fx: Effects, *, release: bool = True
) -> None:
    """A member leaves; with `release`, its session ends and what it holds is released."""
    del group.members[member_id]
    if release:
        group.sessions.pop(member_id, None)
        _release_member(group, member_id, fx)
    _bump(group, fx)
    fx.events.append(MemberFenced(group.group_id, member_id, reason, group.group_epoch))


def _release_member(group: ShareGroup, member_id: str, fx: Effects) -> None:
    limit = fx.config.share_delivery_count_limit
    for key, partition in group.partitions.items():
        if partition.release_member(member_id, limit):
            _store(group, key, partition, fx)


def _timer(group: ShareGroup | None, op: TimerFired, waiter: int, fx: Effects) -> ShareGroup | None:
    if group is None:
        return None
    now = fx.now
    for member in [m for m in group.members.values() if m.session_deadline <= now]:
        _remove(group, member.member_id, "session timed out", fx)
    limit = fx.config.share_delivery_count_limit
    for key, partition in group.partitions.items():
        if partition.release_expired(now, limit):
            _store(group, key, partition, fx)
    return group


def _describe(
    group: ShareGroup | None, op: ShareGroupDescribeOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    if group is None:
        fx.reply(
            waiter,
            ShareGroupDescribeOpResp(
                ErrorCode.group_id_not_found, f"Group {op.group_id} not found."
            ),
        )
        return None
    members = tuple(
        (
            m.member_id,
            m.rack_id,
            m.member_epoch,
            m.client_id,
            m.client_host,
            m.subscribed,
            m.assignment,
        )
        for m in group.members.values()
    )
    fx.reply(
        waiter,
        ShareGroupDescribeOpResp(
            ErrorCode.none,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.group_epoch,
            assignor_name=ASSIGNOR_NAME,
            members=members,
            cgp_id=group.cgp_id,
        ),
    )
    return group


# -- fetching and acknowledging ---------------------------------------------------------------
def _session(
    group: ShareGroup | None, op: ShareSessionOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    group, answer = _open_session(group, op, fx)
    fx.reply(waiter, answer)
    return group


def _open_session(
    group: ShareGroup | None, op: ShareSessionOp, fx: Effects
) -> tuple[ShareGroup | None, ShareSessionOpResp]:
    epoch = op.session_epoch
    departed = group is not None and op.member_id not in group.members
    if group is None or (
        departed and not (epoch == FINAL_SESSION_EPOCH and op.member_id in group.sessions)
    ):
        return group, ShareSessionOpResp(ErrorCode.unknown_member_id, _not_member(op.member_id))
    session = group.sessions.get(op.member_id)
    if epoch == 0:
        if not op.fetching:  # a ShareAcknowledge cannot open a session
            return group, ShareSessionOpResp(ErrorCode.invalid_share_session_epoch)
        session = group.sessions[op.member_id] = ShareSession()
    elif session is None:
        return group, ShareSessionOpResp(ErrorCode.share_session_not_found)
    elif epoch != FINAL_SESSION_EPOCH and epoch != session.next_epoch:
        return group, ShareSessionOpResp(ErrorCode.invalid_share_session_epoch)
    if epoch != FINAL_SESSION_EPOCH:
        session.next_epoch = epoch + 1 if epoch < 2**31 - 1 else 1
    session.partitions.difference_update(op.forgotten)
    session.partitions.update(op.added)
    for topic, index, log_start, log_end in op.log_bounds:
        if (topic, index) not in group.partitions:
            _initialise(group, (topic, index), log_start, log_end, fx)
    ack_errors = _acknowledge(group, op, fx)
    if epoch == FINAL_SESSION_EPOCH:  # the session closes: what it still holds goes back
        del group.sessions[op.member_id]
        _release_member(group, op.member_id, fx)
        return group, ShareSessionOpResp(ErrorCode.none, ack_errors=ack_errors)
    committed = fx.config.share_isolation_level == READ_COMMITTED
    return group, ShareSessionOpResp(
        ErrorCode.none,
        partitions=_read_from(group, session),
        ack_errors=ack_errors,
        read_committed=committed,
    )


def _not_member(member_id: str) -> str:
    return f"Member {member_id} is not a member of the group."


def _read_from(group: ShareGroup, session: ShareSession) -> tuple[tuple[str, int, int], ...]:
    """The session's partitions, each with where its next read starts: its first Available
    record (-1: not initialised yet)."""
    return tuple(
        (
            topic,
            index,
            -1 if (sp := group.partitions.get((topic, index))) is None else sp.fetch_offset(),
        )
        for topic, index in sorted(session.partitions)
    )


def _fetch(
    group: ShareGroup | None, op: ShareFetchOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    """The first half of a ShareFetch, answered with where to read: the session step, or for
    a long poll's retry, the session's partitions as they stand. The actor reads them and
    steps the acquisition in the same turn (actors/share_fetch.py)."""
    if op.retry:
        fx.reply(waiter, _standing(group, op.member_id, fx))
        return group
    session = ShareSessionOp(
        op.group_id,
        op.member_id,
        op.session_epoch,
        op.added,
        op.forgotten,
        op.acks,
        fetching=True,
        log_bounds=op.log_bounds,
    )
    group, opened = _open_session(group, session, fx)
    fx.reply(
        waiter,
        ShareFetchOpResp(
            opened.error_code,
            opened.error_message,
            opened.partitions,
            opened.ack_errors,
            opened.read_committed,
        ),
    )
    return group


def _standing(group: ShareGroup | None, member_id: str, fx: Effects) -> ShareFetchOpResp:
    if group is None or member_id not in group.members:
        return ShareFetchOpResp(ErrorCode.unknown_member_id, _not_member(member_id))
    session = group.sessions.get(member_id)
    if session is None:
        return ShareFetchOpResp(ErrorCode.share_session_not_found)
    committed = fx.config.share_isolation_level == READ_COMMITTED
    return ShareFetchOpResp(
        ErrorCode.none, partitions=_read_from(group, session), read_committed=committed
    )


def _acknowledge(
    group: ShareGroup, op: ShareSessionOp, fx: Effects
) -> tuple[tuple[str, int, int], ...]:
    """Apply each partition's acknowledgements in order; the first bad batch of a partition
    makes that partition INVALID_RECORD_STATE (the batches before it stand)."""
    errors: dict[tuple[str, int], int] = {}
    changed: set[tuple[str, int]] = set()
    limit = fx.config.share_delivery_count_limit
    for topic, index, first, last, types in op.acks:
        key = (topic, index)
        partition = group.partitions.get(key)
        if partition is None:
            errors[key] = ErrorCode.invalid_record_state
            continue
        errors.setdefault(key, ErrorCode.none)
        if errors[key] != ErrorCode.none:
            continue
        try:
            partition.acknowledge(op.member_id, first, last, types, limit)
        except InvalidRecordState:
            errors[key] = ErrorCode.invalid_record_state
        else:
            changed.add(key)
    for key in sorted(changed):
        _store(group, key, group.partitions[key], fx)
    return tuple((topic, index, code) for (topic, index), code in errors.items())


def _acquire(
    group: ShareGroup | None, op: ShareAcquireOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    if group is None or op.member_id not in group.members:
        fx.reply(waiter, ShareAcquireOpResp(ErrorCode.unknown_member_id))
        return group
    config = fx.config
    budget = op.max_records
    acquired = []
    aborted = _by_partition(op.aborted)
    for topic, index, log_start, log_end, first, last in op.reads:
        key = (topic, index)
        partition = group.partitions.get(key)
        if partition is None:  # (its state was deleted during the session)
            _initialise(group, key, log_start, log_end, fx)
            continue  # the next fetch reads from the start just stored
        skipped = aborted.get(key, ())
        runs = partition.acquire(
            op.member_id,
            first,
            last,
            fx.now,
            config.share_record_lock_duration_ms,
            budget,
            config.share_partition_max_record_locks,
            skipped,
        )
        if skipped and not runs:  # aborted records archived, nothing acquired
            _store(group, key, partition, fx)
        if runs:
            budget -= sum(r[1] - r[0] + 1 for r in runs)
            fx.deadline_in(config.share_record_lock_duration_ms)
            _store(group, key, partition, fx)
            acquired.append((topic, index, tuple(runs)))
    release_in = -1
    if not acquired:  # a waiting fetch may retry when the first lock of these expires
        due = [_lock_due(group, topic, index) for topic, index, *_ in op.reads]
        known = [d for d in due if d is not None]
        release_in = max(0, min(known) - fx.now) if known else -1
    fx.reply(
        waiter,
        ShareAcquireOpResp(
            ErrorCode.none, tuple(acquired), config.share_record_lock_duration_ms, release_in
        ),
    )
    return group


def _by_partition(
    ranges: tuple[tuple[str, int, int, int], ...],
) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """(topic, partition, first, last) ranges, by partition."""
    found: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for topic, index, first, last in ranges:
        found.setdefault((topic, index), []).append((first, last))
    return found


def _lock_due(group: ShareGroup, topic: str, index: int) -> int | None:
    partition = group.partitions.get((topic, index))
    return None if partition is None else partition.next_deadline()


def _initialise(
    group: ShareGroup, key: tuple[str, int], log_start: int, log_end: int, fx: Effects
) -> None:
    """A partition the group has never read: share.auto.offset.reset says where it starts,
    stored before anything is read from it."""
    earliest = fx.config.share_auto_offset_reset == "earliest"
    partition = group.partitions[key] = SharePartition(log_start if earliest else log_end)
    _store(group, key, partition, fx)


def _store(group: ShareGroup, key: tuple[str, int], partition: SharePartition, fx: Effects) -> None:
    fx.write_snapshot(
        SharePartitionRecord(
            group.group_id, key[0], key[1], partition.start_offset, partition.snapshot()
        )
    )


# -- administration -------------------------------------------------------------------------
def _describe_offsets(
    group: ShareGroup | None, op: DescribeShareOffsetsOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    if group is None:
        fx.reply(
            waiter,
            DescribeShareOffsetsOpResp(
                ErrorCode.group_id_not_found, f"Group {op.group_id} not found."
            ),
        )
        return None
    keys = _all_partitions(group, fx) if op.partitions is None else op.partitions
    rows = []
    for topic, index in keys:
        partition = group.partitions.get((topic, index))
        if partition is None:
            rows.append((topic, index, -1, 0, -1))
        else:
            rows.append(
                (
                    topic,
                    index,
                    partition.start_offset,
                    partition.unacknowledged(partition.end_offset),
                    partition.end_offset,
                )
            )
    fx.reply(waiter, DescribeShareOffsetsOpResp(ErrorCode.none, offsets=tuple(rows)))
    return group


def _all_partitions(group: ShareGroup, fx: Effects) -> list[tuple[str, int]]:
    """The group's share partitions, and those of its members' topics not started yet (a
    start offset of -1, as Kafka lists a subscribed partition it has not initialised)."""
    keys = set(group.partitions)
    for name in {t for member in group.members.values() for t in member.subscribed}:
        info = fx.topics.by_name.get(name)
        keys.update((name, index) for index in range(info.partitions if info else 0))
    return sorted(keys)


def _alter_offsets(
    group: ShareGroup | None, op: AlterShareOffsetsOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    if group is None:
        fx.reply(
            waiter,
            AlterShareOffsetsOpResp(
                ErrorCode.group_id_not_found, f"Group {op.group_id} not found."
            ),
        )
        return None
    if group.members:
        fx.reply(
            waiter, AlterShareOffsetsOpResp(ErrorCode.non_empty_group, "The group is not empty.")
        )
        return group
    for topic, index, start in op.offsets:
        partition = group.partitions[(topic, index)] = SharePartition(start)
        _store(group, (topic, index), partition, fx)
    results = tuple((topic, index, ErrorCode.none) for topic, index, _ in op.offsets)
    fx.reply(waiter, AlterShareOffsetsOpResp(ErrorCode.none, results=results))
    return group


def _delete_offsets(
    group: ShareGroup | None, op: DeleteShareOffsetsOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    if group is None:
        fx.reply(
            waiter,
            DeleteShareOffsetsOpResp(
                ErrorCode.group_id_not_found, f"Group {op.group_id} not found."
            ),
        )
        return None
    if group.members:
        fx.reply(
            waiter, DeleteShareOffsetsOpResp(ErrorCode.non_empty_group, "The group is not empty.")
        )
        return group
    for topic, index in [k for k in group.partitions if k[0] in op.topics]:
        fx.write(group, SharePartitionTombstone(group.group_id, topic, index))
    results = tuple((topic, ErrorCode.none) for topic in op.topics)
    fx.reply(waiter, DeleteShareOffsetsOpResp(ErrorCode.none, results=results))
    return group


def _delete(group: ShareGroup | None, op: DeleteGroupOp, waiter: int, fx: Effects) -> Any:
    assert group is not None
    if group.members:
        fx.reply(waiter, DeleteGroupOpResp(ErrorCode.non_empty_group))
        return group
    gone = fx.write(group, GroupTombstone(group.group_id))
    fx.reply(waiter, DeleteGroupOpResp(ErrorCode.none))
    return gone


# -- requests of the other group types to a share group ---------------------------------------
# What they are refused with: GROUP_ID_NOT_FOUND (a classic describe: 'Dead', answered each
# DescribeGroups version's way by the gateway), but for a JoinGroup (Kafka's
# INCONSISTENT_GROUP_PROTOCOL).
_OTHER_CODES = {JoinGroupOp: ErrorCode.inconsistent_group_protocol}


def _other(group: ShareGroup | None, op: Any, waiter: int, fx: Effects) -> ShareGroup | None:
    """A classic or consumer request for a share group: one group id, one type."""
    code = _OTHER_CODES.get(type(op), ErrorCode.group_id_not_found)
    group_id = "" if group is None else group.group_id
    fx.reply(waiter, op.error_reply(code, f"Group {group_id} is not a consumer group."))
    return group


def _txn_marker(
    group: ShareGroup | None, op: TxnMarkerOp, waiter: int, fx: Effects
) -> ShareGroup | None:
    """A transaction's end marker: a share group takes no transactional offsets."""
    fx.reply(waiter, TxnMarkerOpResp(ErrorCode.none))
    return group


_HANDLERS: dict[type, Any] = {
    ShareGroupHeartbeatOp: _heartbeat,
    ShareGroupDescribeOp: _describe,
    ShareSessionOp: _session,
    ShareAcquireOp: _acquire,
    ShareFetchOp: _fetch,
    DescribeShareOffsetsOp: _describe_offsets,
    AlterShareOffsetsOp: _alter_offsets,
    DeleteShareOffsetsOp: _delete_offsets,
    DeleteGroupOp: _delete,
    TimerFired: _timer,
    TxnMarkerOp: _txn_marker,
}

"""OffsetCommit, OffsetFetch, OffsetDelete and offset expiry of a classic (or simple) group.

Commits follow Kafka's `ClassicGroup.validateOffsetCommit`: generation -1 with no member id is
accepted from tools and simple consumers while the group is Empty (and creates it if unknown);
otherwise the member and generation must match, and a commit during CompletingRebalance gets
REBALANCE_IN_PROGRESS. Commits from the current generation are accepted while a rebalance is
prepared, because consumers commit while they revoke. Topic existence is the gateway's
business (it knows topics). Storing, fetching, deleting and expiring the offsets themselves is
the same for every group type (group_common/offsets.py).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..group_common.committed import CommittedOffset
from ..group_common.effects import Effects
from ..group_common.offsets import (
    delete_unsubscribed,
    expire,
    store_offsets,
    unexpirable,
)
from ..group_common.ops import (
    ExpireOffsetsOp,
    ExpireOffsetsOpResp,
    OffsetCommitOp,
    OffsetDeleteOp,
    OffsetDeleteOpResp,
    TxnOffsetCommitOp,
)
from ..group_common.txn_offsets import store_pending
from . import rebalance as rb
from .consumer_protocol import subscribed_topics
from .membership import validate_member
from .records import store_group
from .state import ClassicGroup


def commit(
    group: ClassicGroup | None, op: OffsetCommitOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    if group is None:
        if op.generation_id >= 0:
            code = (
                ErrorCode.group_id_not_found
                if op.api_version >= 9
                else ErrorCode.illegal_generation
            )
            fx.reply(waiter, op.error_reply(code))
            return None
        group = ClassicGroup(op.group_id, fx.fresh_cgp_id, state_timestamp_ms=fx.now)
        store_group(fx, group, "simple group created by a commit")
    error = _validate_commit(group, op)
    if error:
        fx.reply(waiter, op.error_reply(error))
        return group
    member = group.members.get(op.member_id)
    if member is not None:
        rb.reschedule_heartbeat(member, fx)
    store_offsets(group, op, waiter, fx)
    return group


def _validate_commit(group: ClassicGroup, op: OffsetCommitOp) -> int:
    if group.is_in(rb.D):
        return ErrorCode.coordinator_not_available
    if op.generation_id < 0 and group.is_in(rb.E):
        return ErrorCode.none  # admin tools and simple consumers
    if op.generation_id >= 0 or op.member_id or op.group_instance_id is not None:
        error = validate_member(group, op.member_id, op.group_instance_id)
        if error:
            return error
        if op.generation_id != group.generation:
            return ErrorCode.illegal_generation
    elif not group.is_in(rb.E):
        return ErrorCode.unknown_member_id
    if group.is_in(rb.C):
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def txn_commit(
    group: ClassicGroup | None, op: TxnOffsetCommitOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    """TxnOffsetCommit (KIP-447): Kafka's validateTransactionalOffsetCommit. An unknown group
    with generation -1 becomes a simple group (producers that commit for a group they do not
    join); with a generation, ILLEGAL_GENERATION. The member checks are those of a commit,
    except that a commit without member id and generation (v0-v2) is accepted whatever the
    state, and the group's state is not enforced (no REBALANCE_IN_PROGRESS)."""
    if group is None:
        if op.generation_id >= 0:
            fx.reply(waiter, op.error_reply(ErrorCode.illegal_generation))
            return None
        group = ClassicGroup(op.group_id, fx.fresh_cgp_id, state_timestamp_ms=fx.now)
        store_group(fx, group, "simple group created by a transactional commit")
    error = _validate_txn_commit(group, op)
    if error:
        fx.reply(waiter, op.error_reply(error))
        return group
    store_pending(group, op, waiter, fx)
    return group


def _validate_txn_commit(group: ClassicGroup, op: TxnOffsetCommitOp) -> int:
    if group.is_in(rb.D):
        return ErrorCode.coordinator_not_available
    if op.generation_id < 0 and group.is_in(rb.E):
        return ErrorCode.none
    if op.generation_id >= 0 or op.member_id or op.group_instance_id is not None:
        error = validate_member(group, op.member_id, op.group_instance_id)
        if error:
            return error
        if op.generation_id != group.generation:
            return ErrorCode.illegal_generation
    return ErrorCode.none


def delete_offsets(
    group: ClassicGroup | None, op: OffsetDeleteOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    if group is None or group.is_in(rb.D):
        fx.reply(waiter, OffsetDeleteOpResp(ErrorCode.group_id_not_found))
        return group
    subscribed: set[str] = set()
    if not group.is_in(rb.E):
        if group.protocol_type != "consumer":
            fx.reply(waiter, OffsetDeleteOpResp(ErrorCode.non_empty_group))
            return group
        for member in group.members.values():
            subscribed |= subscribed_topics(member.metadata(group.protocol_name))
    delete_unsubscribed(group, op, subscribed, waiter, fx)
    return group


def expire_offsets(
    group: ClassicGroup | None, op: ExpireOffsetsOp, waiter: int, fx: Effects
) -> ClassicGroup | None:
    """Kafka's retention sweep for classic and simple groups (003, "Retention & cleanup").

    A group with a protocol expires its offsets only while Empty, all at once, once it has
    been Empty for the retention period; a simple group (no protocol: tools, manual
    assignment) expires each offset by its own commit time. An Empty group left without
    offsets is deleted, unless a member id it handed out is still expected to join.
    """
    if group is None or not group.is_in(rb.E):
        fx.reply(waiter, ExpireOffsetsOpResp(0, False))
        return group
    pending = unexpirable(group)
    expired = [
        tp
        for tp, committed in sorted(group.offsets.items())
        if _retention_base(group, committed) + op.retention_ms <= fx.now and tp not in pending
    ]
    return expire(group, expired, bool(group.pending_members), waiter, fx)


def _retention_base(group: ClassicGroup, committed: CommittedOffset) -> int:
    if group.protocol_type is None:
        return committed.commit_timestamp_ms
    return group.state_timestamp_ms

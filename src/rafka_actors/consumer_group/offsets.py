"""Offsets of a consumer group: commits fenced by member epoch, fetch, delete and expiry.

Kafka's `ConsumerGroup.validateOffsetCommit`: with no member (epoch -1) a commit is accepted
only while the group has no members (admin tools); otherwise the member must exist
(UNKNOWN_MEMBER_ID), use OffsetCommit v9+ (UNSUPPORTED_VERSION: older versions cannot carry a
member epoch) and commit with its current member epoch (STALE_MEMBER_EPOCH): a member that
was fenced, or is a step behind, cannot overwrite the progress of the partition's new owner.
OffsetFetch v9+ from a member is checked the same way (but any epoch mismatch is stale).

Expiry follows Kafka's consumer groups: an offset expires when no member subscribes to its
topic and it was committed more than the retention period ago; an empty group whose offsets
are all gone is deleted.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..group_common.effects import Effects
from ..group_common.offsets import (
    delete_unsubscribed,
    expire,
    fetch,
    store_offsets,
    unexpirable,
)
from ..group_common.ops import (
    ExpireOffsetsOp,
    OffsetCommitOp,
    OffsetDeleteOp,
    OffsetFetchOp,
    OffsetFetchOpResp,
    TxnOffsetCommitOp,
)
from ..group_common.txn_offsets import store_pending
from .state import ConsumerGroup, ConsumerMember
from .subscription import subscribed_names


def commit(group: ConsumerGroup, op: OffsetCommitOp, waiter: int, fx: Effects) -> ConsumerGroup:
    error = _validate_commit(group, op)
    if error:
        fx.reply(waiter, op.error_reply(error))
    else:
        store_offsets(group, op, waiter, fx)
    return group


def _validate_commit(group: ConsumerGroup, op: OffsetCommitOp) -> int:
    if op.generation_id < 0 and not group.members:
        return ErrorCode.none  # admin tools and simple consumers
    member = group.members.get(op.member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    # A classic member (migration: classic_members.py) commits with its generation, which is
    # its member epoch, through any version; a mismatch tells it to rejoin.
    if op.api_version < 9 and member.classic is None:
        return ErrorCode.unsupported_version
    if op.generation_id != member.member_epoch:
        return _epoch_mismatch(member)
    return ErrorCode.none


# TxnOffsetCommit v6+ (KIP-1319) answers a stale member epoch with STALE_MEMBER_EPOCH; older
# versions with ILLEGAL_GENERATION, which is all their clients know (Kafka maps it so).
STALE_EPOCH_TXN_VERSION = 6


def txn_commit(
    group: ConsumerGroup, op: TxnOffsetCommitOp, waiter: int, fx: Effects
) -> ConsumerGroup:
    """TxnOffsetCommit to a consumer group (Kafka's ConsumerGroup.validateOffsetCommit with
    isTransactional): no member and epoch -1 while the group has no members; otherwise the
    member must exist (UNKNOWN_MEMBER_ID) and name its current epoch. Any version may."""
    error: int = ErrorCode.none
    if not (op.generation_id < 0 and not group.members):
        member = group.members.get(op.member_id)
        if member is None:
            error = ErrorCode.unknown_member_id
        elif op.generation_id != member.member_epoch:
            error = _epoch_mismatch(member)
            if error == ErrorCode.stale_member_epoch and op.api_version < STALE_EPOCH_TXN_VERSION:
                error = ErrorCode.illegal_generation
    if error:
        fx.reply(waiter, op.error_reply(error))
    else:
        store_pending(group, op, waiter, fx)
    return group


def _epoch_mismatch(member: ConsumerMember) -> int:
    """Kafka's validateMemberEpoch: ILLEGAL_GENERATION for a classic member."""
    if member.classic is not None:
        return ErrorCode.illegal_generation
    return ErrorCode.stale_member_epoch


def fetch_offsets(
    group: ConsumerGroup, op: OffsetFetchOp, waiter: int, fx: Effects
) -> ConsumerGroup:
    # Kafka's validateOffsetFetch: only a request with neither a member id nor an epoch (admin
    # clients, and every version before 9) is not checked.
    if op.member_id is not None or op.member_epoch >= 0:
        member = group.members.get(op.member_id) if op.member_id is not None else None
        if member is None:
            fx.reply(waiter, OffsetFetchOpResp(ErrorCode.unknown_member_id))
            return group
        if member.member_epoch != op.member_epoch:
            fx.reply(waiter, OffsetFetchOpResp(_epoch_mismatch(member)))
            return group
    return fetch(group, op, waiter, fx)


def delete_offsets(
    group: ConsumerGroup, op: OffsetDeleteOp, waiter: int, fx: Effects
) -> ConsumerGroup:
    subscribed = subscribed_names(group.members.values(), fx.topics)
    delete_unsubscribed(group, op, subscribed, waiter, fx)
    return group


def expire_offsets(
    group: ConsumerGroup, op: ExpireOffsetsOp, waiter: int, fx: Effects
) -> ConsumerGroup | None:
    subscribed = subscribed_names(group.members.values(), fx.topics)
    pending = unexpirable(group)
    expired = [
        tp
        for tp, committed in sorted(group.offsets.items())
        if tp[0] not in subscribed
        and committed.commit_timestamp_ms + op.retention_ms <= fx.now
        and tp not in pending
    ]
    return expire(group, expired, bool(group.members), waiter, fx)

"""OffsetCommit, OffsetFetch and OffsetDelete of a classic (or simple) group.

Commits follow Kafka's `ClassicGroup.validateOffsetCommit`: generation -1 with no member id is
accepted from tools and simple consumers while the group is Empty (and creates it if unknown);
otherwise the member and generation must match, and a commit during CompletingRebalance gets
REBALANCE_IN_PROGRESS. Commits from the current generation are accepted while a rebalance is
prepared, because consumers commit while they revoke. Each partition's metadata is limited to
`offset.metadata.max.bytes`. Topic existence is the gateway's business (it knows topics).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from kio.schema.errors import ErrorCode

from . import rebalance as rb
from .consumer_protocol import subscribed_topics
from .effects import Effects
from .membership import validate_member
from .ops import (
    ExpireOffsetsOp,
    ExpireOffsetsOpResp,
    OffsetCommitOp,
    OffsetCommitOpResp,
    OffsetDeleteOp,
    OffsetDeleteOpResp,
    OffsetFetchOp,
    OffsetFetchOpResp,
)
from .records import GroupTombstone, OffsetCommitRecord, OffsetTombstone
from .state import ClassicGroup, CommittedOffset

if TYPE_CHECKING:
    from ..consumer_group.state import ConsumerGroup

GroupT = TypeVar("GroupT", bound="ClassicGroup | ConsumerGroup | None")

NO_OFFSET = -1
_OK = int(ErrorCode.none)  # the error of every stored or fetched partition, as an int


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
            fx.reply(waiter, all_failed(op, code))
            return None
        group = ClassicGroup(op.group_id, fx.fresh_cgp_id, state_timestamp_ms=fx.now)
        fx.store_group(group, "simple group created by a commit")
    error = _validate_commit(group, op)
    if error:
        fx.reply(waiter, all_failed(op, error))
        return group
    member = group.members.get(op.member_id)
    if member is not None:
        rb.reschedule_heartbeat(member, fx)
    store_offsets(group, op, waiter, fx)
    return group


def store_offsets(
    group: ClassicGroup | ConsumerGroup, op: OffsetCommitOp, waiter: int, fx: Effects
) -> None:
    """Commit a validated request's offsets (either group type), each within the metadata limit."""
    results = []
    for topic, partition, offset, epoch, metadata in op.offsets:
        if metadata is not None and len(metadata.encode()) > fx.config.offset_metadata_max_bytes:
            results.append((topic, partition, int(ErrorCode.offset_metadata_too_large)))
            continue
        metadata = metadata or ""  # Kafka stores a null metadata as "" (NO_METADATA)
        group.offsets[(topic, partition)] = CommittedOffset(offset, epoch, metadata, fx.now)
        fx.records.append(
            OffsetCommitRecord(op.group_id, topic, partition, offset, epoch, metadata, fx.now)
        )
        results.append((topic, partition, _OK))
    fx.reply(waiter, OffsetCommitOpResp(tuple(results)))


def all_failed(op: OffsetCommitOp, error: int) -> OffsetCommitOpResp:
    return OffsetCommitOpResp(tuple((t, p, int(error)) for t, p, *_ in op.offsets))


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


def fetch(group: GroupT, op: OffsetFetchOp, waiter: int, fx: Effects) -> GroupT:
    offsets = group.offsets if group is not None else {}
    wanted = sorted(offsets) if op.partitions is None else list(op.partitions)
    rows: list[tuple[str, int, int, int, str | None, int]] = []
    for topic, partition in wanted:
        found = offsets.get((topic, partition))
        if found is None:
            rows.append((topic, partition, NO_OFFSET, -1, "", _OK))
        else:
            rows.append(
                (
                    topic,
                    partition,
                    found.offset,
                    found.leader_epoch,
                    found.metadata,
                    _OK,
                )
            )
    fx.reply(waiter, OffsetFetchOpResp(ErrorCode.none, tuple(rows)))
    return group


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


def delete_unsubscribed(
    group: ClassicGroup | ConsumerGroup,
    op: OffsetDeleteOp,
    subscribed: set[str],
    waiter: int,
    fx: Effects,
) -> None:
    """OffsetDelete's partitions, except those of topics the group subscribes to (86)."""
    results = []
    for topic, partition in op.partitions:
        if topic in subscribed:
            results.append((topic, partition, int(ErrorCode.group_subscribed_to_topic)))
            continue
        if group.offsets.pop((topic, partition), None) is not None:
            fx.records.append(OffsetTombstone(op.group_id, topic, partition))
        results.append((topic, partition, _OK))
    fx.reply(waiter, OffsetDeleteOpResp(ErrorCode.none, tuple(results)))


def delete_group(group: ClassicGroup | ConsumerGroup, fx: Effects) -> None:
    """The records of deleting an empty group: its offsets, then the group itself."""
    for topic, partition in sorted(group.offsets):
        fx.records.append(OffsetTombstone(group.group_id, topic, partition))
    fx.records.append(GroupTombstone(group.group_id))


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
    expired = [
        tp
        for tp, committed in sorted(group.offsets.items())
        if _retention_base(group, committed) + op.retention_ms <= fx.now
    ]
    return expire(group, expired, bool(group.pending_members), waiter, fx)


def expire(
    group: GroupT, expired: list[tuple[str, int]], keep: bool, waiter: int, fx: Effects
) -> GroupT | None:
    """Tombstone the expired offsets; delete the group too if none are left and not `keep`."""
    assert group is not None
    for topic, partition in expired:
        del group.offsets[(topic, partition)]
        fx.records.append(OffsetTombstone(group.group_id, topic, partition))
    if group.offsets or keep:
        fx.reply(waiter, ExpireOffsetsOpResp(len(expired), False))
        return group
    fx.records.append(GroupTombstone(group.group_id))
    fx.reply(waiter, ExpireOffsetsOpResp(len(expired), True))
    return None


def _retention_base(group: ClassicGroup, committed: CommittedOffset) -> int:
    if group.protocol_type is None:
        return committed.commit_timestamp_ms
    return group.state_timestamp_ms

"""The steps of OffsetCommit, OffsetFetch, OffsetDelete and expiry that every group type
shares once its own protocol has validated the request.

A group of either type keeps its offsets (committed.py) in `offsets`; each protocol decides
who may commit, fetch, delete or expire (classic_group/offsets.py for classic and simple
groups, consumer_group/offsets.py for KIP-848 groups) and then calls these, which write
their records (`Effects.write` makes each one's change) and reply. Each partition's
metadata is limited to `offset.metadata.max.bytes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import TypeVar

from kio.schema.errors import ErrorCode

from .committed import CommittedOffset, OffsetHolder
from .effects import Effects
from .ops import (
    ExpireOffsetsOpResp,
    OffsetCommitOp,
    OffsetCommitOpResp,
    OffsetDeleteOp,
    OffsetDeleteOpResp,
    OffsetFetchOp,
    OffsetFetchOpResp,
)
from .records import GroupTombstone, OffsetCommitRecord, OffsetTombstone
from .txn_offsets import drop_pending, pending_of, pending_partitions

NO_OFFSET = -1
_OK = int(ErrorCode.none)  # the error of every stored or fetched partition, as an int
_UNSTABLE = int(ErrorCode.unstable_offset_commit)


GroupT = TypeVar("GroupT", bound="OffsetHolder | None")


def store_offsets(group: OffsetHolder, op: OffsetCommitOp, waiter: int, fx: Effects) -> None:
    """Commit a validated request's offsets, each within the metadata limit."""
    results = []
    for topic, partition, offset, epoch, metadata in op.offsets:
        if metadata is not None and len(metadata.encode()) > fx.config.offset_metadata_max_bytes:
            results.append((topic, partition, int(ErrorCode.offset_metadata_too_large)))
            continue
        metadata = metadata or ""  # Kafka stores a null metadata as "" (NO_METADATA)
        fx.write(
            group,
            OffsetCommitRecord(op.group_id, topic, partition, offset, epoch, metadata, fx.now),
        )
        results.append((topic, partition, _OK))
    fx.reply(waiter, OffsetCommitOpResp(tuple(results)))


def fetch(group: GroupT, op: OffsetFetchOp, waiter: int, fx: Effects) -> GroupT:
    if group is None:
        fx.reply(waiter, fetched({}, op.partitions))
        return group
    unstable = pending_partitions(group) if op.require_stable else frozenset()
    fx.reply(waiter, fetched(group.offsets, op.partitions, unstable))
    return group


def fetched(
    offsets: Mapping[tuple[str, int], CommittedOffset],
    partitions: tuple[tuple[str, int], ...] | None,
    unstable: Set[tuple[str, int]] = frozenset(),
) -> OffsetFetchOpResp:
    """OffsetFetch's answer from a group's offsets: each partition asked for (None: every one
    committed, in order), -1 where none is committed, and UNSTABLE_OFFSET_COMMIT (offset -1)
    for the `unstable` ones: those with a pending transactional offset, when the request
    requires stable offsets (Kafka's fetchOffsets). Also answers from a published snapshot
    (actors/snapshot.py)."""
    wanted = sorted(offsets) if partitions is None else partitions
    rows: list[tuple[str, int, int, int, str | None, int]] = []
    for topic, partition in wanted:
        found = offsets.get((topic, partition))
        if unstable and (topic, partition) in unstable:
            rows.append((topic, partition, NO_OFFSET, -1, "", _UNSTABLE))
        elif found is None:
            rows.append((topic, partition, NO_OFFSET, -1, "", _OK))
        else:
            rows.append((topic, partition, found.offset, found.leader_epoch, found.metadata, _OK))
    return OffsetFetchOpResp(ErrorCode.none, tuple(rows))


def unexpirable(group: OffsetHolder) -> frozenset[tuple[str, int]]:
    """The partitions retention must not expire: those with a pending transactional offset."""
    return pending_partitions(group)


def delete_unsubscribed(
    group: OffsetHolder,
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
        if (topic, partition) in group.offsets:
            fx.write(group, OffsetTombstone(op.group_id, topic, partition))
        # Kafka's tombstone removes the partition's pending offsets too
        drop_pending(group, (topic, partition), fx)
        results.append((topic, partition, _OK))
    fx.reply(waiter, OffsetDeleteOpResp(ErrorCode.none, tuple(results)))


def delete_group(group: OffsetHolder, fx: Effects) -> None:
    """The records of deleting an empty group: its offsets, then the group itself."""
    for topic, partition in sorted(group.offsets):
        fx.write(group, OffsetTombstone(group.group_id, topic, partition))
    fx.write(group, GroupTombstone(group.group_id))


def expire(
    group: GroupT, expired: list[tuple[str, int]], keep: bool, waiter: int, fx: Effects
) -> GroupT | None:
    """Tombstone the expired offsets; delete the group too if none are left and not `keep`
    (nor any transactional offset pending: retention leaves those alone)."""
    assert group is not None
    keep = keep or bool(pending_of(group))
    for topic, partition in expired:
        fx.write(group, OffsetTombstone(group.group_id, topic, partition))
    if group.offsets or keep:
        fx.reply(waiter, ExpireOffsetsOpResp(len(expired), False))
        return group
    gone: GroupT | None = fx.write(group, GroupTombstone(group.group_id))
    fx.reply(waiter, ExpireOffsetsOpResp(len(expired), True))
    return gone

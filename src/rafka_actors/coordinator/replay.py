"""Rebuild a group of either type from its records: start-up, and the restart of a failed actor.

This is a coordinator failover in Kafka's sense. The records are folded into the live view
(latest.py) first, so a replay of the whole history and of a compacted log agree. The group
record says which type the group is: a classic group is rebuilt by group/replay.py, a
consumer group assembled by consumer_group/replay.py; OffsetCommit records and tombstones give
the offsets of either. Offsets with no group record are a simple group's (a classic group
with no protocol), written before any group record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from ..classic_group.records import GroupMetadataRecord
from ..classic_group.replay import from_metadata
from ..classic_group.state import ClassicGroup
from ..consumer_group.records import ConsumerGroupMetadataRecord, ConsumerRecord
from ..consumer_group.replay import assemble
from ..consumer_group.state import ConsumerGroup
from ..group_common.committed import CommittedOffset, TxnOffsets
from ..group_common.records import OffsetCommitRecord, Record
from ..group_common.txn_offsets import (
    TxnOffsetCommitRecord,
    TxnProducerEpochRecord,
    replay_pending,
)
from ..share_group.records import ShareGroupMetadataRecord
from ..share_group.replay import assemble as assemble_share
from ..share_group.state import ShareGroup
from .latest import GroupRecords

CONSUMER_SESSION_TIMEOUT_MS = 45_000  # group.consumer.session.timeout.ms's default
SHARE_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit's default


def replay(
    records: Iterable[Record],
    now_ms: int,
    *,
    consumer_session_timeout_ms: int = CONSUMER_SESSION_TIMEOUT_MS,
    share_delivery_count_limit: int = SHARE_DELIVERY_COUNT_LIMIT,
) -> ClassicGroup | ConsumerGroup | ShareGroup | None:
    """The group its records describe (in log order; the live view's order is one)."""
    latest: GroupRecords[Record] = GroupRecords()
    latest.apply(list(records))
    head = latest.group
    if isinstance(head, ShareGroupMetadataRecord):  # commits no offsets
        return assemble_share(head, latest.consumer.values(), share_delivery_count_limit)
    group: ClassicGroup | ConsumerGroup
    if isinstance(head, ConsumerGroupMetadataRecord):
        consumer: list[ConsumerRecord] = list(latest.consumer.values())  # type: ignore[arg-type]
        group = assemble(head, consumer, now_ms, consumer_session_timeout_ms)
    elif isinstance(head, GroupMetadataRecord):
        group = from_metadata(head, now_ms)
    elif latest.offsets or latest.pending or latest.producers:  # a simple group's offsets,
        # written before any group record
        kept = [*latest.offsets.values(), *latest.pending.values(), *latest.producers.values()]
        group = ClassicGroup(kept[0].group_id, "", state_timestamp_ms=now_ms)
    else:
        return None
    offsets = cast(dict[tuple[str, int], OffsetCommitRecord], latest.offsets)
    group.offsets = {
        tp: CommittedOffset(r.offset, r.leader_epoch, r.metadata, r.commit_timestamp_ms)
        for tp, r in offsets.items()
    }
    if latest.pending or latest.producers:
        pending = cast(list[TxnOffsetCommitRecord], list(latest.pending.values()))
        epochs = cast(list[TxnProducerEpochRecord], list(latest.producers.values()))
        group.txn = TxnOffsets(
            replay_pending(pending, group.offsets),
            {r.producer_id: r.producer_epoch for r in epochs},
        )
    return group

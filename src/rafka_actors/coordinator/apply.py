"""`apply(group, record)`: the one way a coordinator record changes a group, live and at start-up.

A handler writes a record through `Effects.write`, which stores it and applies it here; start-up,
a passivated group's next request and the restart of a failed actor fold the stored records
through the same `apply` (`replay`), as Kafka's coordinator runtime replays each record it
writes through the `replay` it loads with. So what a step leaves and what a restart rebuilds
cannot drift apart. Each record type's change lives beside the record (group_common/records.py
and txn_offsets.py for offsets, classic_group/, consumer_group/ and share_group/records.py);
this module picks it by type and changes a group's type when a record says so:

- a group record of another type replaces the group, which keeps its offsets and `cgp_` id;
  a consumer group's member records may come first (a new group's first member), and make it;
- offsets with no group yet are a simple group's (a classic group with no protocol);
- a group tombstone leaves no group.

Two records are snapshots of state their handlers keep richer than the record (a classic
group's, a share partition's: `Effects.write_snapshot`); their apply runs at start-up only.
`replay` then sets what a restart does not keep (`on_loaded`: sessions, deadlines, locks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from ..classic_group import timers as classic_timers
from ..classic_group.records import GroupMetadataRecord, group_of
from ..classic_group.state import ClassicGroup
from ..consumer_group import records as consumer_records
from ..consumer_group import timers as consumer_timers
from ..consumer_group.records import (
    ConsumerMemberTombstone,
    ConsumerStateTombstone,
)
from ..consumer_group.state import ConsumerGroup
from ..group_common import txn_offsets
from ..group_common.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    apply_offset_commit,
    apply_offset_tombstone,
)
from ..share_group import records as share_records
from ..share_group.state import ShareGroup

AnyGroup: TypeAlias = ClassicGroup | ConsumerGroup | ShareGroup | None

CONSUMER_SESSION_TIMEOUT_MS = 45_000  # group.consumer.session.timeout.ms's default
SHARE_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit's default


def apply(group: AnyGroup, record: Record) -> AnyGroup:
    """The group `record` leaves of `group` (changed in place where it stays)."""
    return _APPLY[type(record)](group, record)


def replay(
    records: Iterable[Record],
    now_ms: int,
    *,
    consumer_session_timeout_ms: int = CONSUMER_SESSION_TIMEOUT_MS,
    share_delivery_count_limit: int = SHARE_DELIVERY_COUNT_LIMIT,
) -> AnyGroup:
    """The group its stored records describe (in log order, or a compacted log's), as a
    restarted coordinator holds it at `now_ms`."""
    group: AnyGroup = None
    for record in records:
        group = _APPLY[type(record)](group, record)
    if isinstance(group, ClassicGroup):
        classic_timers.on_loaded(group, now_ms)
    elif isinstance(group, ConsumerGroup):
        consumer_timers.on_loaded(group, now_ms, consumer_session_timeout_ms)
    elif isinstance(group, ShareGroup):
        share_records.on_loaded(group, share_delivery_count_limit)
    return group


def _offsets(change: Callable[[Any, Any], None]) -> Callable[[AnyGroup, Any], AnyGroup]:
    """An offset record's change, to a group of any type; one that adds something to no
    group makes a simple group for it."""

    def applied(group: AnyGroup, record: Any) -> AnyGroup:
        if group is None:
            group = ClassicGroup(record.group_id, "")
        change(group, record)
        return group

    return applied


def _deletion(change: Callable[[Any, Any], None]) -> Callable[[AnyGroup, Any], AnyGroup]:
    """A record that only deletes: to no group, nothing."""

    def applied(group: AnyGroup, record: Any) -> AnyGroup:
        if group is not None:
            change(group, record)
        return group

    return applied


def _classic_group(group: AnyGroup, record: GroupMetadataRecord) -> AnyGroup:
    return group_of(record, None if isinstance(group, ShareGroup) else group)


def _consumer(group: AnyGroup, record: Record) -> AnyGroup:
    if not isinstance(group, ConsumerGroup):
        if type(record) in _CONSUMER_DELETIONS:
            return group  # nothing consumer-specific to delete
        cgp_id = "" if group is None else group.cgp_id
        previous = group if isinstance(group, ClassicGroup) else None
        group = consumer_records.taking_over(record.group_id, cgp_id, previous)
    consumer_records.apply(group, record)
    return group


_CONSUMER_DELETIONS = (ConsumerMemberTombstone, ConsumerStateTombstone)


def _share(group: AnyGroup, record: Record) -> AnyGroup:
    if not isinstance(group, ShareGroup):
        group = ShareGroup(record.group_id, "" if group is None else group.cgp_id)
    share_records.apply(group, record)
    return group


def _gone(group: AnyGroup, record: GroupTombstone) -> AnyGroup:
    return None


_APPLY: dict[type, Callable[[AnyGroup, Any], AnyGroup]] = {
    OffsetCommitRecord: _offsets(apply_offset_commit),
    OffsetTombstone: _deletion(apply_offset_tombstone),
    txn_offsets.TxnOffsetCommitRecord: _offsets(txn_offsets.apply_txn_offset),
    txn_offsets.TxnOffsetTombstone: _deletion(txn_offsets.apply_txn_offset_tombstone),
    txn_offsets.TxnMarkerRecord: _deletion(txn_offsets.apply_txn_marker),
    txn_offsets.TxnProducerEpochRecord: _offsets(txn_offsets.apply_producer_epoch),
    GroupTombstone: _gone,
    GroupMetadataRecord: _classic_group,
    **{cls: _consumer for cls in consumer_records.CONSUMER_RECORDS},
    **{cls: _share for cls in share_records.SHARE_RECORDS},
}

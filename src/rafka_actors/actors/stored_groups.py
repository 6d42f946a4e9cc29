"""A group as its stored records say: at start-up, for passivated groups and failed actors."""

from __future__ import annotations

from ..coordinator.apply import replay
from ..coordinator.machine import AnyGroup
from ..group_common.effects import GroupConfig
from ..group_common.records import Record
from ..ids import GroupKey
from ..storage.coordinator_log import CoordinatorLog


def stored_group(
    log: CoordinatorLog, key: GroupKey, now_ms: int, config: GroupConfig | None = None
) -> AnyGroup:
    """The group as its stored records say: start-up, passivated groups, failed actors."""
    return _replayed(log.records_of(key), now_ms, config)


def stored_membership(
    log: CoordinatorLog, key: GroupKey, now_ms: int, config: GroupConfig
) -> AnyGroup:
    """`stored_group` without its offsets: who the members are, for start-up."""
    return _replayed(log.membership_of(key), now_ms, config)


def _replayed(records: list[Record], now_ms: int, config: GroupConfig | None) -> AnyGroup:
    if config is None:
        return replay(records, now_ms)
    return replay(
        records,
        now_ms,
        consumer_session_timeout_ms=config.consumer_session_timeout_ms,
        share_delivery_count_limit=config.share_delivery_count_limit,
    )

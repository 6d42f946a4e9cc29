"""Where group actors put their records before they answer.

`append` returns only once the records are as durable as the log promises; the actor sends
its replies after that. The broker uses `DurableCoordinatorLog` (durable_log.py: segment files,
group commit, replay at start-up); `MemoryCoordinatorLog` keeps the same compacted view in
memory only, for tests of the actors and the gateway.

The clock helpers live here too: the state machine keeps wall-clock milliseconds in its
records, and the actors wait on trio's clock.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

import trio

from ..coordinator.latest import LatestRecords
from ..coordinator.machine import AnyGroup
from ..coordinator.replay import replay
from ..group_common.effects import GroupConfig
from ..group_common.records import Record
from ..ids import GroupKey


class CoordinatorLog(Protocol):
    async def append(self, key: GroupKey, records: Sequence[Record]) -> None:
        """Return once ``records`` are stored; raise `CoordinatorLogError` if they could not
        be. A caller cancelled meanwhile does not withdraw them: they may still be stored."""
        ...

    def records_of(self, key: GroupKey) -> list[Record]:
        """The group's stored records, compacted (the latest of each key)."""
        ...

    def membership_of(self, key: GroupKey) -> list[Record]:
        """`records_of` without the offsets: enough to know the group's members."""
        ...

    def keys(self) -> list[GroupKey]:
        """Every group with stored records."""
        ...

    def stores(self, key: GroupKey) -> bool:
        """Whether the group has stored records."""
        ...


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


# The wall clock's offset from trio's, in ms: read once, at the first `now_ms`.
_wall_offset_ms: int | None = None


def now_ms(trio_now: float | None = None) -> int:
    """Wall-clock milliseconds that move with the trio clock (MockClock-friendly).

    The state machine persists times (commit timestamps for offset retention, the last
    assignment for its throttle), so they must mean the same after a restart: trio's own
    clock starts at a random offset in every run. The wall clock is read once per process
    and the trio clock's progress added to it, so deadlines stay monotonic and mock clocks
    still drive them. `trio_now`: trio.current_time(), if the caller has just read it."""
    global _wall_offset_ms
    trio_ms = round((trio.current_time() if trio_now is None else trio_now) * 1000)
    if _wall_offset_ms is None:
        _wall_offset_ms = round(time.time() * 1000) - trio_ms
    return trio_ms + _wall_offset_ms


def trio_time(deadline_ms: int) -> float:
    """A `now_ms` deadline on the trio clock, for `trio.move_on_at`."""
    return (deadline_ms - (_wall_offset_ms or 0)) / 1000


class MemoryCoordinatorLog:
    """The durable log's view (latest group record, latest record per offset) without disk."""

    def __init__(self) -> None:
        self._latest: LatestRecords[Record] = LatestRecords()

    async def append(self, key: GroupKey, records: Sequence[Record]) -> None:
        await trio.lowlevel.checkpoint()
        self._latest.apply(key, records)

    def records_of(self, key: GroupKey) -> list[Record]:
        return self._latest.records_of(key)

    def membership_of(self, key: GroupKey) -> list[Record]:
        return self._latest.membership_of(key)

    def keys(self) -> list[GroupKey]:
        return self._latest.keys()

    def stores(self, key: GroupKey) -> bool:
        return key in self._latest

"""Where group actors put their records before they answer.

`append` returns only once the records are as durable as the log promises; the actor sends
its replies after that. The broker uses `DurableCoordinatorLog` (durable_log.py: segment files,
group commit, replay at start-up); `MemoryCoordinatorLog` keeps the same compacted view in
memory only, for tests of the actors and the gateway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import trio

from ..group.effects import GroupConfig
from ..group.latest import LatestRecords
from ..group.machine import AnyGroup
from ..group.records import Record
from ..group.replay import replay
from ..ids import GroupKey


class CoordinatorLog(Protocol):
    async def append(self, key: GroupKey, records: Sequence[Record]) -> None: ...

    def records_of(self, key: GroupKey) -> list[Record]: ...

    def keys(self) -> list[GroupKey]: ...


def stored_group(
    log: CoordinatorLog, key: GroupKey, now_ms: int, config: GroupConfig | None = None
) -> AnyGroup:
    """The group as its stored records say: start-up, passivated groups, failed actors."""
    if config is None:
        return replay(log.records_of(key), now_ms)
    return replay(
        log.records_of(key),
        now_ms,
        consumer_session_timeout_ms=config.consumer_session_timeout_ms,
    )


def now_ms() -> int:
    """The trio clock in the state machine's unit (MockClock-friendly)."""
    return round(trio.current_time() * 1000)


class MemoryCoordinatorLog:
    """The durable log's view (latest group record, latest record per offset) without disk."""

    def __init__(self) -> None:
        self._latest = LatestRecords()

    async def append(self, key: GroupKey, records: Sequence[Record]) -> None:
        await trio.lowlevel.checkpoint()
        self._latest.apply(key, records)

    def records_of(self, key: GroupKey) -> list[Record]:
        return self._latest.records_of(key)

    def keys(self) -> list[GroupKey]:
        return self._latest.keys()

"""Where group actors put their records before they answer.

`append` returns only once the records are as durable as the log promises; the actor sends
its replies after that. `MemoryCoordinatorLog` keeps each group's records in memory (enough
to restart a failed actor from its last settled state); the durable, segment-file log that
survives restarts replaces it behind the same interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import trio

from ..group.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone, Record
from ..ids import GroupKey


class CoordinatorLog(Protocol):
    async def append(self, key: GroupKey, records: Sequence[Record]) -> None: ...

    def records_of(self, key: GroupKey) -> list[Record]: ...


class MemoryCoordinatorLog:
    """Compacted in memory: the latest group record and the latest record per offset."""

    def __init__(self) -> None:
        self._groups: dict[GroupKey, dict[object, Record]] = {}

    async def append(self, key: GroupKey, records: Sequence[Record]) -> None:
        await trio.lowlevel.checkpoint()
        latest = self._groups.setdefault(key, {})
        for record in records:
            if isinstance(record, GroupTombstone):
                latest.clear()
            elif isinstance(record, OffsetCommitRecord | OffsetTombstone):
                latest[(record.topic, record.partition)] = record
            else:
                latest["group"] = record
        if not latest:
            self._groups.pop(key, None)

    def records_of(self, key: GroupKey) -> list[Record]:
        latest = self._groups.get(key, {})
        group = [r for k, r in latest.items() if k == "group"]
        return group + [r for k, r in latest.items() if k != "group"]

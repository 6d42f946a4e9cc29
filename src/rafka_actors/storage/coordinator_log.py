"""Where group and transaction actors put their records before they answer, each under its
key (ids.LogKey: a GroupKey or a TxnKey).

`append` returns only once the records are as durable as the log promises; the actor sends
its replies after that. The broker uses `DurableCoordinatorLog` (durable_log.py: segment files,
group commit, replay at start-up); `MemoryCoordinatorLog` keeps the same compacted view in
memory only, for tests of the actors and the gateway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import trio

from ..coordinator.latest import LatestRecords
from ..group_common.records import Record
from ..ids import GroupKey, LogKey


class CoordinatorLog(Protocol):
    async def append(self, key: LogKey, records: Sequence[Record]) -> None:
        """Return once ``records`` are stored; raise `CoordinatorLogError` if they could not
        be. A caller cancelled meanwhile does not withdraw them: they may still be stored."""
        ...

    def records_of(self, key: LogKey) -> list[Record]:
        """The group's stored records, compacted (the latest of each key)."""
        ...

    def membership_of(self, key: LogKey) -> list[Record]:
        """`records_of` without the offsets: enough to know the group's members."""
        ...

    def keys(self) -> list[GroupKey]:
        """Every key with stored records (a transaction log's: its transactional ids')."""
        ...

    def stores(self, key: LogKey) -> bool:
        """Whether the group has stored records."""
        ...


class MemoryCoordinatorLog:
    """The durable log's view (latest group record, latest record per offset) without disk."""

    def __init__(self) -> None:
        self._latest: LatestRecords[Record] = LatestRecords()

    async def append(self, key: LogKey, records: Sequence[Record]) -> None:
        await trio.lowlevel.checkpoint()
        self._latest.apply(key, records)

    def records_of(self, key: LogKey) -> list[Record]:
        return self._latest.records_of(key)

    def membership_of(self, key: LogKey) -> list[Record]:
        return self._latest.membership_of(key)

    def keys(self) -> list[GroupKey]:
        return self._latest.keys()

    def stores(self, key: LogKey) -> bool:
        return key in self._latest

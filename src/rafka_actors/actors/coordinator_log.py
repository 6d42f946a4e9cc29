"""Where group actors put their records before they answer.

`append` returns only once the records are as durable as the log promises; the actor sends
its replies after that. The broker uses `DurableCoordinatorLog` (durable_log.py: segment files,
group commit, replay at start-up); `MemoryCoordinatorLog` keeps the same compacted view in
memory only, for tests of the actors and the gateway.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final, Protocol

import trio

from ..coordinator.latest import LatestRecords
from ..coordinator.machine import AnyGroup
from ..coordinator.replay import replay
from ..group_common.effects import GroupConfig
from ..group_common.records import Record
from ..ids import GroupKey


class CoordinatorLog(Protocol):
    async def append(
        self, key: GroupKey, records: Sequence[Record], *, shielded: bool = False
    ) -> None:
        """Return once ``records`` are stored. ``shielded``: a cancellation does not end the
        wait, as under a shielded cancel scope (it is raised at the caller's next
        checkpoint), without the scope's cost on every commit under fsync ``always``."""
        ...

    def writable_now(self) -> bool:
        """Whether `append_now` may be called now."""
        ...

    def append_now(self, key: GroupKey, records: Sequence[Record]) -> None:
        """`append` without waiting: stored (or raising) on return."""
        ...

    def hold_appends(self) -> None:
        """Until `write_held`, `append_now` may keep records to write them all at once."""
        ...

    def write_held(self) -> list[GroupKey]:
        """Store what `append_now` kept since `hold_appends`; the groups whose records could
        not be stored (their actors must forget those steps)."""
        ...

    def holds(self, key: GroupKey) -> bool:
        """Whether records of `key` appended since `hold_appends` are not stored yet: what
        is said of its group now may not go out before `write_held`."""
        ...

    def records_of(self, key: GroupKey) -> list[Record]: ...

    def membership_of(self, key: GroupKey) -> list[Record]:
        """`records_of` without the offsets: enough to know the group's members."""
        ...

    def keys(self) -> list[GroupKey]: ...


async def log_checkpoint(*, shielded: bool) -> None:
    """A checkpoint for `CoordinatorLog.append`: a shielded one cannot raise Cancelled."""
    if shielded:
        await trio.lowlevel.cancel_shielded_checkpoint()
    else:
        await trio.lowlevel.checkpoint()


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
    if not records:
        # A new group (every first commit asks): no call into replay.py, which is not
        # compiled and would build and fold an empty view to say the same
        return None
    if config is None:
        return replay(records, now_ms)
    return replay(records, now_ms, consumer_session_timeout_ms=config.consumer_session_timeout_ms)


class _WallClock:
    """The wall clock's offset from trio's (ms), once read. A field of a Final instance, not
    a module global: the compiled build looks a global up in the module's dict every time."""

    offset_ms: int | None = None


_WALL: Final = _WallClock()


def now_ms(trio_now: float | None = None) -> int:
    """Wall-clock milliseconds that move with the trio clock (MockClock-friendly).

    The state machine persists times (commit timestamps for offset retention, the last
    assignment for its throttle), so they must mean the same after a restart: trio's own
    clock starts at a random offset in every run. The wall clock is read once per process
    and the trio clock's progress added to it, so deadlines stay monotonic and mock clocks
    still drive them. `trio_now`: trio.current_time(), if the caller has just read it."""
    ms = (trio.current_time() if trio_now is None else trio_now) * 1000.0
    # Rounded half up (trio's clocks do not go below 0): round() is a call of the builtin in
    # the compiled build, and this runs once a commit (0.27 -> 0.03 us with the field above).
    trio_ms = int(ms + 0.5) if ms >= 0.0 else round(ms)
    offset = _WALL.offset_ms
    if offset is None:
        offset = _WALL.offset_ms = round(time.time() * 1000) - trio_ms
    return trio_ms + offset


def trio_time(deadline_ms: int) -> float:
    """A `now_ms` deadline on the trio clock, for `trio.move_on_at`."""
    return (deadline_ms - (_WALL.offset_ms or 0)) / 1000


class MemoryCoordinatorLog:
    """The durable log's view (latest group record, latest record per offset) without disk."""

    def __init__(self) -> None:
        self._latest: LatestRecords[Record] = LatestRecords()

    async def append(
        self, key: GroupKey, records: Sequence[Record], *, shielded: bool = False
    ) -> None:
        await log_checkpoint(shielded=shielded)
        self.append_now(key, records)

    def writable_now(self) -> bool:
        return True

    def append_now(self, key: GroupKey, records: Sequence[Record]) -> None:
        self._latest.apply(key, records)

    def hold_appends(self) -> None:
        pass  # appends cost nothing to batch here

    def write_held(self) -> list[GroupKey]:
        return []

    def holds(self, key: GroupKey) -> bool:
        return False

    def records_of(self, key: GroupKey) -> list[Record]:
        return self._latest.records_of(key)

    def membership_of(self, key: GroupKey) -> list[Record]:
        return self._latest.membership_of(key)

    def keys(self) -> list[GroupKey]:
        return self._latest.keys()

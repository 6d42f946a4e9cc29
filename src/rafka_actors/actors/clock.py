"""The clocks of the actors: wall-clock milliseconds for records, trio time for waiting.

The state machines keep wall-clock milliseconds in their records, and the actors wait on
trio's clock; `now_ms` ties the two together so that a MockClock drives both.
"""

from __future__ import annotations

import time

import trio

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

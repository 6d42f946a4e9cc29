"""A log line per event, up to a budget per interval; beyond it, one line saying how many.

A hostile client can make thousands of bad connections a second, and a full disk fails every
append. Each deserves its line, but not at a rate that fills the disk: the first
`per_interval` lines of an interval are written as they come, the rest are counted, and the
count is reported when the interval ends: by `flush` (the broker calls `flush_all` every
second, so a burst that stops is still reported) or by the first line of a later interval.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any, Final

import trio

FLUSH_EVERY_S: Final = 1.0

_BUDGETS: weakref.WeakSet[LogBudget] = weakref.WeakSet()


class LogBudget:
    def __init__(
        self,
        logger: logging.Logger,
        per_interval: int,
        interval_s: float = 10.0,
        *,
        level: int = logging.WARNING,
        counted: str = "more such lines were not logged",
    ):
        self._log = logger
        self._per_interval = per_interval
        self._interval = interval_s
        self._level = level
        self._counted = counted  # how the count line names what it counted
        self._start = -float("inf")
        self._written = 0
        self._suppressed = 0
        _BUDGETS.add(self)

    def warning(self, message: str, *args: Any) -> None:
        self.log(message, *args)

    def log(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._start >= self._interval:
            self._report()
            self._start, self._written = now, 0
        if self._written < self._per_interval:
            self._written += 1
            self._log.log(self._level, message, *args)
        else:
            self._suppressed += 1

    @property
    def suppressed(self) -> int:
        """Lines counted, not yet reported."""
        return self._suppressed

    def flush(self) -> None:
        """Report the count of an interval that has ended (nothing if none was counted)."""
        if self._suppressed and time.monotonic() - self._start >= self._interval:
            self._report()

    def reset(self) -> None:
        """Start afresh, as a new broker would: the next line is written (tests)."""
        self._start, self._written, self._suppressed = -float("inf"), 0, 0

    def _report(self) -> None:
        if self._suppressed:
            self._log.log(
                self._level, "%d %s in %gs", self._suppressed, self._counted, self._interval
            )
            self._suppressed = 0


def flush_all() -> None:
    """`flush` every budget alive."""
    for budget in list(_BUDGETS):
        budget.flush()


async def flush_forever() -> None:
    """Report the counts of ended intervals until cancelled (one task per broker)."""
    while True:
        await trio.sleep(FLUSH_EVERY_S)
        flush_all()

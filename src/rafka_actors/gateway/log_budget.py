"""A log line per event, up to a budget per interval; beyond it, one line saying how many.

A hostile client can make thousands of bad connections a second. Each deserves its close
logged, but not at a rate that fills the disk: the first `per_interval` lines of an interval
are written as they come, the rest are counted and reported by the first line of a later
interval.
"""

from __future__ import annotations

import logging
import time
from typing import Any


class LogBudget:
    def __init__(self, logger: logging.Logger, per_interval: int, interval_s: float = 10.0):
        self._log = logger
        self._per_interval = per_interval
        self._interval = interval_s
        self._start = -float("inf")
        self._written = 0
        self._suppressed = 0

    def warning(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._start >= self._interval:
            if self._suppressed:
                self._log.warning(
                    "%d more such lines were not logged in %.0fs", self._suppressed, self._interval
                )
            self._start, self._written, self._suppressed = now, 0, 0
        if self._written < self._per_interval:
            self._written += 1
            self._log.warning(message, *args)
        else:
            self._suppressed += 1

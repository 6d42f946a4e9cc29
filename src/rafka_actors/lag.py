"""Lag in records and in seconds: the arithmetic the live metric and the pipeline share.

Lag in seconds is klag-exporter's: the age of the record at the committed offset, i.e. the
first record the group has not consumed. Its "append time" is its batch's max timestamp (the
partition index's, pipeline/partition_index.py), read from the batch's 61-byte header. A group
that has consumed everything (committed offset at the log end) has no such record: its time
lag is 0.

"Now", for lag in seconds and for Burrow's STOP rule, is the wall clock when the figures are
computed (`wall_clock_ms`), as in Burrow: the scrape, for the broker's metrics; the job's start,
for the pipeline (which can be told another moment, e.g. the newest time in a copied data
dir: `pipeline lag --now`). So the two agree on a live broker's data dir.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wall_clock_ms(clock: Callable[[], float] = time.time) -> int:
    """Now, in epoch milliseconds, from a clock in seconds (the wall clock, or a test's)."""
    return int(clock() * 1000)


def lag_records(log_end_offset: int, committed: int) -> int:
    return max(0, log_end_offset - committed)


def lag_ms(now_ms: int, log_end_offset: int, committed: int, append_time_ms: int | None) -> int:
    """Now minus the append time of the record at `committed`; 0 when caught up or when the
    record's time is unknown (a batch without timestamps)."""
    if committed >= log_end_offset or append_time_ms is None or append_time_ms < 0:
        return 0
    return max(0, now_ms - append_time_ms)

"""The data dir's free space, read every few seconds: a warning before the disk is full.

`log.dir.free.space.warning.bytes` (default 1 GiB; 0 turns the warning off) is the threshold:
when the free space of the data dir's file system falls below it, one warning says how much is
left and what fills up first; when it climbs back, one line says so. The reading itself,
`DiskSpace.free_bytes` (bytes available to the broker's user, as `df` shows them), is there for
whoever wants it: a metric, an admin tool.

Kafka has no such setting (it takes a log dir offline once a write fails); the name follows
its `log.dir.*` settings for the data dir (`log.dir.failure.timeout.ms`, for one).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

import trio

log = logging.getLogger(__name__)

CHECK_EVERY_S: Final = 5.0


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def free_bytes(path: Path) -> int | None:
    """Bytes available to the broker's user on `path`'s file system; None if unreadable."""
    try:
        stat = os.statvfs(path)
    except OSError as exc:
        log.debug("cannot read the free space of %s: %s", path, exc)
        return None
    return stat.f_bavail * stat.f_frsize


class DiskSpace:
    def __init__(self, data_dir: Path, warn_below_bytes: int) -> None:
        self.data_dir = data_dir
        self.warn_below_bytes = warn_below_bytes
        self.free_bytes: int | None = None  # the last reading; None before the first
        self._low = False

    def check(self) -> int | None:
        """Read the free space now (and warn or clear the warning); None if it can't be read."""
        free = free_bytes(self.data_dir)
        if free is None:
            return None
        self.free_bytes = free
        low = self.warn_below_bytes > 0 and free < self.warn_below_bytes
        if low and not self._low:
            log.warning(
                "%s has %s free, below log.dir.free.space.warning.bytes (%s): when it is full, "
                "produce requests get KAFKA_STORAGE_ERROR and commits NOT_COORDINATOR until "
                "space is freed",
                self.data_dir,
                _mib(free),
                _mib(self.warn_below_bytes),
            )
        elif self._low and not low:
            log.info("%s has %s free again", self.data_dir, _mib(free))
        self._low = low
        return free

    async def run(self) -> None:
        """Check every few seconds until cancelled."""
        while True:
            self.check()
            await trio.sleep(CHECK_EVERY_S)

"""File-system helpers shared by the logs."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make created, renamed or deleted directory entries durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DamagedFile(ValueError):
    """A small JSON state file that cannot be read back (hand-edited, or damaged on disk)."""

    def __init__(self, path: Path, why: object) -> None:
        super().__init__(f"{path} is damaged: {why}")
        self.path = path

"""Swapping a cleaned segment in for the sealed segments it replaces, atomically.

The log cleaner (log_cleaner.py) rewrites a run of sealed segments, by base offset ``first``
to ``last``, into one file ``<first>.log.cleaned``, fsynced before the swap. The swap
(`commit_swap`, run by the partition's owner):

1. renames it ``<first>-<last>.swap`` and fsyncs the directory: the commit point;
2. deletes the replaced segments after ``first``, renames the swap file over ``<first>.log``
   and fsyncs the directory.

At open (once the broker may write: startup_writes.py; `swapped_listing` reads the segments
as it will leave them before), `finish_swaps` deletes every ``.cleaned`` file (a cleaning that
never committed: the segments it read are all still there) and completes every ``.swap``
(step 2 again, which is idempotent). A crash at any point thus leaves the original segments
or the cleaned one, never both and never a half-written file; the offsets the cleaned one
keeps are offsets the originals held, so no record is ever read twice.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from .fsutil import fsync_dir

__all__ = [
    "SUFFIX",
    "SegmentIndex",
    "cleaned_path",
    "commit_swap",
    "finish_swaps",
    "segment_name",
    "swapped_listing",
]

log = logging.getLogger(__name__)

SUFFIX = ".log"
CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".swap"


@dataclass(frozen=True, slots=True)
class SegmentIndex:
    """A rewritten segment's batch index, as partition_log keeps it (array('q') bytes)."""

    offsets: bytes
    next_offsets: bytes
    positions: bytes
    max_ts: bytes
    size: int


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def cleaned_path(directory: Path, first: int) -> Path:
    """Where the cleaner writes the output that replaces the segments from ``first`` on."""
    return directory / f"{first:020d}{CLEANED_SUFFIX}"


def commit_swap(directory: Path, first: int, last: int) -> Path:
    """Swap the cleaned file in for the segments ``first`` to ``last``; the segment path."""
    swap = directory / f"{first:020d}-{last:020d}{SWAP_SUFFIX}"
    os.rename(cleaned_path(directory, first), swap)
    fsync_dir(directory)
    return _finish(directory, swap, first, last)


def finish_swaps(directory: Path) -> None:
    """Undo the cleanings that never committed and finish the swaps that did (at open)."""
    for path in sorted(directory.iterdir()):
        name = path.name
        if name.endswith(CLEANED_SUFFIX):
            log.info("%s: removing the output of an interrupted cleaning", path)
            path.unlink()
        elif _swap_range(name)[0] >= 0:
            log.info("%s: finishing the swap of a cleaned segment", path)
            _finish(directory, path, *_swap_range(name))


def swapped_listing(
    directory: Path, segments: list[tuple[int, Path]]
) -> list[tuple[int, Path, Path]]:
    """The segments (base offset, path) as `finish_swaps` will leave them, changing nothing:
    (base offset, the file that holds it now, its path then), in order. An open reads them so
    before it may write (startup_writes.py)."""
    found = {base: (path, path) for base, path in segments}
    for path in sorted(directory.iterdir()):
        first, last = _swap_range(path.name)
        if first < 0:
            continue
        for base in [b for b in found if first < b <= last]:
            del found[base]
        found[first] = (path, directory / segment_name(first))
    return [(base, *found[base]) for base in sorted(found)]


def _swap_range(name: str) -> tuple[int, int]:
    """The (first, last) base offsets a swap file's name gives; (-1, -1) if not one."""
    if not name.endswith(SWAP_SUFFIX):
        return -1, -1
    first, _, last = name.removesuffix(SWAP_SUFFIX).partition("-")
    if len(first) == len(last) == 20 and (first + last).isdigit():
        return int(first), int(last)
    return -1, -1


def _finish(directory: Path, swap: Path, first: int, last: int) -> Path:
    for path in directory.iterdir():
        stem = path.name.removesuffix(SUFFIX)
        is_segment = path.name.endswith(SUFFIX) and len(stem) == 20 and stem.isdigit()
        if is_segment and first < int(stem) <= last:
            path.unlink()
    target = directory / segment_name(first)
    os.replace(swap, target)
    fsync_dir(directory)
    return target

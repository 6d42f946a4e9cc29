"""Committed offsets: what a group of either type keeps per (topic, partition).

Every group type holds them the same way, in a dict `offsets` keyed by (topic, partition), and
rebuilds them the same way at replay (from OffsetCommit records). The steps that change them
are in offsets.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


class OffsetHolder(Protocol):
    """A group of any type, as far as its offsets go."""

    group_id: str
    offsets: dict[tuple[str, int], CommittedOffset]

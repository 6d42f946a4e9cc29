"""Committed offsets: what a group of either type keeps per (topic, partition).

Every group type holds them the same way, in a dict `offsets` keyed by (topic, partition), and
rebuilds them the same way at replay (from OffsetCommit records). The steps that change them
are in offsets.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


@dataclass(slots=True)
class PendingTxn:
    """One producer's pending transactional offsets in one group (txn_offsets.py)."""

    producer_epoch: int
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # Partitions committed (non-transactionally) after this producer's pending offset: at a
    # commit marker the later regular commit wins, as in Kafka.
    superseded: set[tuple[str, int]] = field(default_factory=set)


@dataclass(slots=True)
class TxnOffsets:
    """A group's transactional offsets (txn_offsets.py): pending ones per producer, and the
    latest epoch of each producer's markers. Made at a group's first transactional op: most
    groups never have one, and each pays only an empty slot for it."""

    pending: dict[int, PendingTxn] = field(default_factory=dict)  # by producer id
    epochs: dict[int, int] = field(default_factory=dict)  # producer id -> latest marker's

    def supersede(self, tp: tuple[str, int], at_ms: int) -> None:
        """An offset of `tp` committed at `at_ms` (a regular commit, or one a marker merged)
        wins over the pending offsets of `tp` committed no later: Kafka keeps the most
        recent of the two at a marker (by log position; the commit time stands in for it)."""
        for txn in self.pending.values():
            pending = txn.offsets.get(tp)
            if pending is not None and pending.commit_timestamp_ms <= at_ms:
                txn.superseded.add(tp)


class OffsetHolder(Protocol):
    """A group of any type, as far as its offsets go."""

    group_id: str
    offsets: dict[tuple[str, int], CommittedOffset]
    txn: TxnOffsets | None  # None: no transactional op yet

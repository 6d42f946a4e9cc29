"""Retention: which whole segments of a partition go, by time, by size and by log start.

Kafka's rules (UnifiedLog.deleteOldSegments), checked every `log.retention.check.interval.ms`:

- time: from the oldest segment on, each whose largest record timestamp is more than
  `retention.ms` ago (-1: keep forever);
- size: from the oldest on, each whose removal still leaves at least `retention.bytes` in the
  partition (-1: no limit);
- log start: each that lies wholly below the log start offset (DeleteRecords moved it).

Only a prefix of segments is ever deleted, whole segments only; the active segment too when it
qualifies (the log rolls a new empty one first, so the log start becomes the log end). A
segment with no record timestamp (empty) is never deleted by time; an empty one the log
cleaner left goes with the segment after it, never alone (it holds the log start).

Time and size apply only to topics whose `cleanup.policy` has `delete`, as in Kafka; a
compacted topic (`compact` alone) or one with no policy keeps its segments (the log cleaner
of log_cleaner.py removes records from a compacted one).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from .partition_log import PartitionLog
from .topic_configs import cleanup_policies, effective_long
from .topics import Topic

if TYPE_CHECKING:
    from .data_plane import DataPlane

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    retention_ms: int  # -1: no time limit
    retention_bytes: int  # -1: no size limit


def deletable_prefix(
    segments: list[tuple[int, int, int, int]], log_start: int, policy: RetentionPolicy, now_ms: int
) -> int:
    """How many of the oldest segments (`PartitionLog.segment_stats`) may go."""
    count = empties = 0
    over = sum(size for _, _, size, _ in segments) - policy.retention_bytes
    for k, (_base, end, size, largest_ts) in enumerate(segments):
        if size == 0:
            if k == len(segments) - 1:
                break  # an empty (active) segment holds nothing to delete
            empties += 1  # (cleaned empty: it goes if the next one does)
            continue
        by_start = end <= log_start
        by_time = policy.retention_ms >= 0 and largest_ts >= 0
        by_time = by_time and now_ms - largest_ts > policy.retention_ms
        by_size = policy.retention_bytes >= 0 and over - size >= 0
        if not (by_start or by_time or by_size):
            break
        over -= size
        count += empties + 1
        empties = 0
    return count


def enforce(partition: PartitionLog, policy: RetentionPolicy, now_ms: int) -> int:
    """Delete what the policy lets go; returns how many segments went."""
    count = deletable_prefix(partition.segment_stats(), partition.log_start_offset, policy, now_ms)
    return partition.delete_oldest_segments(count) if count else 0


def policy_of(
    topic: Topic, default_ms: int, default_bytes: int, default_policy: str = "delete"
) -> RetentionPolicy:
    if "delete" not in cleanup_policies(topic.configs, default_policy):
        return RetentionPolicy(-1, -1)  # (the log start still applies)
    return RetentionPolicy(
        effective_long(topic.configs, "retention.ms", default_ms),
        effective_long(topic.configs, "retention.bytes", default_bytes),
    )


def enforce_all(
    topics: Iterable[Topic],
    default_ms: int,
    default_bytes: int,
    now_ms: int,
    default_policy: str = "delete",
) -> int:
    """One retention pass over the topics; returns how many segments went."""
    deleted = 0
    for topic in topics:
        policy = policy_of(topic, default_ms, default_bytes, default_policy)
        for index, partition in enumerate(topic.partitions):
            try:
                went = enforce(partition, policy, now_ms)
            except (OSError, ValueError) as exc:  # closed by a delete, or a disk fault
                log.warning("retention of %s-%d: %s", topic.name, index, exc)
                continue
            if went:
                deleted += went
                log.info(
                    "%s-%d: %d segment(s) deleted by retention, log start now %d",
                    topic.name,
                    index,
                    went,
                    partition.log_start_offset,
                )
    return deleted


async def retain_periodically(
    data: DataPlane,
    interval_ms: int,
    default_ms: int,
    default_bytes: int,
    default_policy: str = "delete",
) -> None:
    """Kafka's retention check (`log.retention.check.interval.ms`), over every org's topics;
    run in the broker's services nursery, which owns (and at shutdown cancels) it."""
    while True:
        await trio.sleep(interval_ms / 1000)
        now_ms = int(time.time() * 1000)
        for org_id in data.orgs():
            try:
                topics = data.topics_for(org_id)
                enforce_all(topics, default_ms, default_bytes, now_ms, default_policy)
            except Exception:  # a bug here must not stop the broker; the next pass retries
                log.exception("retention pass over org %d failed", org_id)

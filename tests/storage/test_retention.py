"""Retention and DeleteRecords on a real partition log (issue 45 §4): whole segments only,
oldest first, by time, by size and by log start; the log start is durable."""

from __future__ import annotations

from pathlib import Path

import pytest

from rafka_actors.storage.partition_log import PartitionLog
from rafka_actors.storage.retention import RetentionPolicy, deletable_prefix, enforce
from rafka_actors.storage.topic_configs import InvalidConfig, validate_topic_config
from tests.batch_builder import build_batch

KEEP = RetentionPolicy(-1, -1)


def _log(tmp_path: Path, batches: int, *, ts: int = 1000) -> PartitionLog:
    """One batch per segment (segment.bytes below a batch's size)."""
    log = PartitionLog.open(tmp_path / "p", segment_bytes=64)
    for i in range(batches):
        log.append([build_batch([(b"k", b"v" * 10)], base_timestamp=ts + i)])
    return log


def test_time_retention_deletes_the_expired_prefix_and_rolls_past_the_active(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path, 4)
    assert len(log.segment_stats()) == 4
    assert enforce(log, RetentionPolicy(100, -1), now_ms=1000 + 1 + 101) == 2  # ts 1000, 1001
    assert log.log_start_offset == 2
    assert enforce(log, RetentionPolicy(100, -1), now_ms=10_000) == 2  # the active one too
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    log.append([build_batch([(b"k", b"v")], base_timestamp=20_000)])  # goes on at 4
    assert log.read(4, 1000)
    log.close()
    assert PartitionLog.open(tmp_path / "p").log_start_offset == 4


def test_size_retention_keeps_at_least_retention_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path, 5)
    size = log.segment_stats()[0][2]
    assert enforce(log, RetentionPolicy(-1, 2 * size), now_ms=0) == 3
    assert log.size_bytes == 2 * size and log.log_start_offset == 3


def test_nothing_goes_without_a_limit_and_empty_segments_stay() -> None:
    stats = [(0, 1, 70, 5), (1, 2, 70, 6), (2, 2, 0, -1)]
    assert deletable_prefix(stats, 0, KEEP, now_ms=10**12) == 0
    assert deletable_prefix(stats, 2, KEEP, now_ms=0) == 2  # below the log start
    assert deletable_prefix(stats, 0, RetentionPolicy(0, -1), now_ms=10**12) == 2


def test_delete_records_moves_the_log_start_durably(tmp_path: Path) -> None:
    log = _log(tmp_path, 3)
    assert log.advance_log_start(1) == 1
    assert [s[0] for s in log.segment_stats()] == [1, 2]  # segment 0 went with it
    with pytest.raises(ValueError):
        log.read(0, 1000)
    assert log.advance_log_start(0) == 1  # never backwards
    assert log.advance_log_start(99) == 3  # at most the log end
    log.close()
    reopened = PartitionLog.open(tmp_path / "p")
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 3)
    reopened.close()


def test_topic_config_values_are_checked_as_kafka_does() -> None:
    assert validate_topic_config("retention.ms", " 5000 ") == "5000"
    assert validate_topic_config("cleanup.policy", "delete") == "delete"
    assert validate_topic_config("cleanup.policy", " compact , delete,compact") == "compact,delete"
    for name, value, message in (
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.bytes", "abc", "Not a number of type INT"),
        ("cleanup.policy", "compact,foo", "foo for configuration cleanup.policy: String must"),
        ("cleanup.policy", "compact,", "values must not be empty"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("dummy.doesntexist", "2", "Unknown topic config name"),
    ):
        with pytest.raises(InvalidConfig, match=message):
            validate_topic_config(name, value)


def test_pending_topic_deletions_are_durable(tmp_path: Path) -> None:
    from rafka_actors.storage.topic_deletions import PendingTopicDeletions

    pending = PendingTopicDeletions.open(tmp_path)
    pending.add((1, "orders", 1000))
    pending.add((2, "orders", 2000))
    pending.done((1, "orders", 1000))
    assert PendingTopicDeletions.open(tmp_path).pending() == [(2, "orders", 2000)]


def test_time_and_size_apply_only_under_the_delete_policy(tmp_path: Path) -> None:
    import uuid

    from rafka_actors.storage.retention import policy_of
    from rafka_actors.storage.topics import Topic

    def topic(**configs: str) -> Topic:
        named = {k.replace("_", "."): v for k, v in configs.items()}
        return Topic("t", uuid.uuid4(), [], {"retention.ms": "5", **named})

    assert policy_of(topic(), 7, 9) == RetentionPolicy(5, 9)
    assert policy_of(topic(cleanup_policy="compact,delete"), 7, 9) == RetentionPolicy(5, 9)
    assert policy_of(topic(cleanup_policy="compact"), 7, 9) == KEEP
    assert policy_of(topic(cleanup_policy=""), 7, 9) == KEEP
    assert policy_of(topic(), 7, 9, default_policy="compact") == KEEP


def test_an_empty_segment_the_cleaner_left_goes_with_the_next_only() -> None:
    empty, full = (0, 10, 0, -1), (10, 20, 100, 50)
    active = (20, 25, 100, 10_000)
    expired = RetentionPolicy(100, -1)
    assert deletable_prefix([empty, full, active], 0, expired, now_ms=1000) == 2
    assert deletable_prefix([empty, full, active], 0, expired, now_ms=100) == 0

"""The pure readers behind the data sources: rows of a small, known data dir (no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rafka_actors.pipeline.coordinator_rows import (
    at,
    commit_rows,
    coordinator_segments,
    group_rows,
    rows_of,
)
from rafka_actors.pipeline.partition_index import batch_rows, partition_segments

from .datadir import Small, plain, small_data_dir


@pytest.fixture
def small(tmp_path: Path) -> Small:
    return small_data_dir(tmp_path / "data")


def test_at_is_exact_and_utc() -> None:
    moment = at(1_700_000_000_123)
    assert moment == datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC)


def test_segments_are_listed_in_log_order(small: Small) -> None:
    assert coordinator_segments(small.root) == small.coordinator_files
    assert [p for _, _, p in partition_segments(small.root)] == small.partition_files
    assert coordinator_segments(small.root / "nowhere") == []
    assert partition_segments(small.root / "nowhere") == []


def test_commit_rows_include_tombstones_and_stop_at_the_torn_tail(small: Small) -> None:
    rows = [plain(row) for path in small.coordinator_files for row in commit_rows(path)]
    assert rows == small.commits
    size = small.coordinator_files[-1].stat().st_size
    list(commit_rows(small.coordinator_files[-1]))
    assert small.coordinator_files[-1].stat().st_size == size  # read-only: nothing truncated


def test_group_rows_classic_consumer_and_deleted(small: Small) -> None:
    rows = [plain(row) for path in small.coordinator_files for row in group_rows(path)]
    assert rows == small.groups


def test_batch_rows_hop_from_header_to_header(small: Small) -> None:
    segments = partition_segments(small.root)
    rows = [plain(row) for t, p, path in segments for row in batch_rows(t, p, path)]
    assert rows == small.index


def test_unknown_view_is_refused(small: Small) -> None:
    with pytest.raises(ValueError, match="unknown view"):
        rows_of("offsets", small.coordinator_files[0])


def test_a_segment_gone_before_it_is_read_has_no_rows(small: Small) -> None:
    assert list(commit_rows(small.root / "coordinator" / f"{99:020d}.log")) == []
    assert list(batch_rows("t", 0, small.root / "topics" / "t" / "0" / f"{99:020d}.log")) == []


def test_batch_rows_go_on_across_the_gaps_a_log_cleaner_leaves(tmp_path: Path) -> None:
    from rafka_actors.storage.record_batch import assign_offsets
    from tests.batch_builder import build_batch

    path = tmp_path / f"{0:020d}.log"
    batch = build_batch([(b"k", b"v")] * 2, base_timestamp=1000)
    path.write_bytes(assign_offsets(batch, 3) + assign_offsets(batch, 9) + assign_offsets(batch, 5))
    rows = [(row[2], row[3]) for row in batch_rows("t", 0, path)]
    assert rows == [(3, 4), (9, 10)]  # (a batch going back below 11 ends the segment)

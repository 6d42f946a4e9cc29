"""The pipeline sees a log start that DeleteRecords moved inside a segment (issue 45): the
batches alone still start at the segment's base, so the partition's own file must be read."""

from __future__ import annotations

from pathlib import Path

from rafka_actors.pipeline.partition_index import log_start_floors

from .datadir import T0, DataDir


def test_a_log_start_moved_inside_a_segment_is_a_floor(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    data.topic("events", 2)
    data.produce("events", 0, 10, T0)
    data.produce("events", 1, 10, T0)
    topic = data.topics.by_name("events")
    assert topic is not None
    assert log_start_floors(tmp_path / "data") == []  # nothing deleted: no floor
    assert topic.partitions[0].advance_log_start(7) == 7
    data.close()
    # partition 1 keeps its start at 0, which the batches already say
    assert log_start_floors(tmp_path / "data") == [(0, "events", 0, 7)]

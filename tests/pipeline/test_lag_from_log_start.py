"""The lag job counts a committed offset below the log start from the log start (issue 45):
retention deleted the segments it pointed into, and its consumer resumes at the log start.

Partition ``events``-0 has three segments, offsets 0-4, 5-9 and 10-14; group ``g`` committed 2;
then the first two segments go (the log start is 10). Burrow's current lag is 15 - 10 = 5, not
15 - 2 = 13. DeleteRecords may then move the start inside the last segment, to 12: lag 3.
Slow (a Spark job): the pure rule is tested in test_burrow.py, and the floors DeleteRecords
leaves in test_log_start_floors.py, by default.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .datadir import STEP, T0, DataDir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow


def test_current_lag_counts_from_the_log_start(spark: SparkSession, tmp_path: Path) -> None:
    from rafka_actors.pipeline.lag import compute_lag

    data = DataDir(tmp_path / "data", partition_segment_bytes=1)
    data.topic("events", 1)
    for i in range(3):
        data.produce("events", 0, 5, T0 + i)  # a segment each (segment.bytes 1)
    data.commit("g", "events", 0, 2, T0 + STEP)
    topic = data.topics.by_name("events")
    assert topic is not None
    assert topic.partitions[0].delete_oldest_segments(2) == 2
    data.close()

    result = compute_lag(spark, tmp_path / "data")
    (status,) = result.partition_status.collect()
    assert (status.log_end_offset, status.current_lag) == (15, 5)


def test_current_lag_counts_from_a_log_start_deleterecords_moved(
    spark: SparkSession, tmp_path: Path
) -> None:
    from rafka_actors.pipeline.lag import compute_lag

    data = DataDir(tmp_path / "data", partition_segment_bytes=1)
    data.topic("events", 1)
    for i in range(3):
        data.produce("events", 0, 5, T0 + i)
    data.commit("g", "events", 0, 2, T0 + STEP)
    topic = data.topics.by_name("events")
    assert topic is not None
    assert topic.partitions[0].advance_log_start(12) == 12  # inside the segment 10-14
    data.close()

    (status,) = compute_lag(spark, tmp_path / "data").partition_status.collect()
    assert (status.log_end_offset, status.current_lag) == (15, 3)

"""The Spark data sources: the same rows as the pure readers, one input partition per segment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .datadir import Small, plain, small_data_dir

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Small:
    return small_data_dir(tmp_path_factory.mktemp("small") / "data")


def rows(frame: DataFrame) -> list[tuple[object, ...]]:
    return [plain(tuple(row)) for row in frame.collect()]


def log_order(found: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return sorted(found, key=lambda r: (r[-2], r[-1]))  # (segment, position)


def test_commits_are_the_default_view(spark: SparkSession, small: Small) -> None:
    frame = spark.read.format("rafka-coordinator-log").load(str(small.root))
    assert frame.columns == [
        "org_id", "group_id", "topic", "partition", "offset", "leader_epoch", "metadata",
        "commit_time", "segment", "position",
    ]  # fmt: skip
    assert dict(frame.dtypes)["commit_time"] == "timestamp"
    assert log_order(rows(frame)) == small.commits
    assert frame.rdd.getNumPartitions() == len(small.coordinator_files) == 3


def test_groups_view(spark: SparkSession, small: Small) -> None:
    frame = (
        spark.read.format("rafka-coordinator-log").option("records", "groups").load(str(small.root))
    )
    types = dict(frame.dtypes)
    assert types["members"] == "array<string>"
    assert types["departed"] == "array<struct<member_id:string,why:string>>"
    assert (types["time"], types["rebalance_started"], types["deleted"]) == (
        "timestamp",
        "timestamp",
        "boolean",
    )
    assert log_order(rows(frame)) == small.groups


def test_partition_index(spark: SparkSession, small: Small) -> None:
    frame = spark.read.format("rafka-partition-index").load(str(small.root))
    assert frame.columns == [
        "topic", "partition", "base_offset", "last_offset", "append_time", "segment",
    ]  # fmt: skip
    found = sorted(rows(frame), key=lambda r: (r[0], r[1], r[2]))
    assert found == small.index
    assert frame.rdd.getNumPartitions() == len(small.partition_files) == 3


def test_a_bad_option_or_no_path_is_an_error(spark: SparkSession, small: Small) -> None:
    with pytest.raises(Exception, match="records='offsets'"):
        spark.read.format("rafka-coordinator-log").option("records", "offsets").load(
            str(small.root)
        ).collect()
    with pytest.raises(Exception, match="give the data dir"):
        spark.read.format("rafka-partition-index").load().collect()


def test_an_empty_dir_has_no_rows(spark: SparkSession, tmp_path: Path) -> None:
    assert spark.read.format("rafka-coordinator-log").load(str(tmp_path)).count() == 0
    assert spark.read.format("rafka-partition-index").load(str(tmp_path)).count() == 0

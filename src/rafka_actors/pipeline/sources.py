"""PySpark Python data sources over a broker's data dir (Spark 4's `pyspark.sql.datasource`).

    register(spark)
    spark.read.format("rafka-coordinator-log").load(data_dir)                 # commits
    spark.read.format("rafka-coordinator-log").option("records", "groups").load(data_dir)
    spark.read.format("rafka-partition-index").load(data_dir)

Each reader plans one `InputPartition` per segment file, listed on the driver; Spark runs one
task per partition, and the task (on an executor, in a Python worker) reads that one file with
the pure functions of coordinator_rows.py and partition_index.py. So the data dir must be
readable at the same path by the driver and every executor (a local dir for ``local[*]``, a
shared filesystem on a cluster), and the executors' Python must be able to import
``rafka_actors`` (Spark pickles these classes by reference).

The schemas are fixed (``schema()`` returns them as DDL): see coordinator_rows.py and
partition_index.py, and docs/pipeline.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .coordinator_rows import (
    COMMITS,
    COMMITS_SCHEMA,
    GROUPS_SCHEMA,
    VIEWS,
    coordinator_segments,
    rows_of,
)
from .partition_index import INDEX_SCHEMA, batch_rows, partition_segments

__all__ = ["CoordinatorLogSource", "PartitionIndexSource", "register"]

COORDINATOR_LOG = "rafka-coordinator-log"
PARTITION_INDEX = "rafka-partition-index"


def register(spark: SparkSession) -> None:
    """Make both formats known to ``spark`` (idempotent)."""
    spark.dataSource.register(CoordinatorLogSource)
    spark.dataSource.register(PartitionIndexSource)


def _data_dir(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise ValueError("give the data dir: spark.read.format(...).load(DATA_DIR)")
    return str(path)


class _Segment(InputPartition):
    """One segment file to read (picklable: it travels to an executor)."""

    def __init__(self, path: str, topic: str | None = None, partition: int = -1) -> None:
        super().__init__(path)
        self.path, self.topic, self.partition = path, topic, partition


class CoordinatorLogSource(DataSource):
    """``rafka-coordinator-log``: option ``records`` = ``commits`` (default) or ``groups``."""

    @classmethod
    def name(cls) -> str:
        return COORDINATOR_LOG

    def _view(self) -> str:
        view = str(self.options.get("records", COMMITS)).lower()
        if view not in VIEWS:
            raise ValueError(f"option records={view!r}: expected one of {', '.join(VIEWS)}")
        return view

    def schema(self) -> str:
        return COMMITS_SCHEMA if self._view() == COMMITS else GROUPS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _CoordinatorLogReader(_data_dir(self.options), self._view())


class _CoordinatorLogReader(DataSourceReader):
    def __init__(self, data_dir: str, view: str) -> None:
        self.data_dir, self.view = data_dir, view

    def partitions(self) -> list[InputPartition]:
        return [_Segment(str(p)) for p in coordinator_segments(self.data_dir)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if isinstance(partition, _Segment):  # else Spark's stand-in for "no partitions"
            yield from rows_of(self.view, Path(partition.path))


class PartitionIndexSource(DataSource):
    """``rafka-partition-index``: one row per record batch of every partition log."""

    @classmethod
    def name(cls) -> str:
        return PARTITION_INDEX

    def schema(self) -> str:
        return INDEX_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _PartitionIndexReader(_data_dir(self.options))


class _PartitionIndexReader(DataSourceReader):
    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir

    def partitions(self) -> list[InputPartition]:
        return [_Segment(str(p), t, n) for t, n, p in partition_segments(self.data_dir)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if isinstance(partition, _Segment) and partition.topic is not None:
            yield from batch_rows(partition.topic, partition.partition, Path(partition.path))

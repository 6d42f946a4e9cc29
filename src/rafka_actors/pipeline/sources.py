"""PySpark Python data sources over a broker's data dir (Spark 4's `pyspark.sql.datasource`).

    register(spark)
    spark.read.format("rafka-coordinator-log").load(data_dir)                 # commits
    spark.read.format("rafka-coordinator-log").option("records", "groups").load(data_dir)
    spark.read.format("rafka-partition-index").load(data_dir)                 # org 0's topics
    spark.read.format("rafka-partition-index").option("orgs", "all").load(data_dir)

Each reader plans one `InputPartition` per segment file, listed on the driver; Spark runs one
task per partition, and the task (on an executor, in a Python worker) reads that one file with
the pure functions of coordinator_rows.py and partition_index.py. So the data dir must be
readable at the same path by the driver and every executor (a local dir for ``local[*]``, a
shared filesystem on a cluster), and the executors' Python must be able to import
``rafka_actors`` (Spark pickles these classes by reference).

The schemas are fixed (``schema()`` returns them as DDL): see coordinator_rows.py and
partition_index.py, and docs/pipeline.md. Each org has its own topics; the partition index
reads org 0's (the single-tenant layout, and its historical schema) unless ``orgs`` is ``all``:
then every org's, with a leading ``org_id`` column so that a topic name in two orgs stays two
topics (the lag job joins on it).
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
from .partition_index import (
    INDEX_SCHEMA,
    ORG_INDEX_SCHEMA,
    batch_rows,
    org_partition_segments,
    partition_segments,
)

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

    def __init__(
        self, path: str, topic: str | None = None, partition: int = -1, org_id: int = 0
    ) -> None:
        super().__init__(path)
        self.path, self.topic, self.partition, self.org_id = path, topic, partition, org_id


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
    """``rafka-partition-index``: one row per record batch of every partition log of org 0,
    or, with option ``orgs`` = ``all``, of every org (and an ``org_id`` column)."""

    @classmethod
    def name(cls) -> str:
        return PARTITION_INDEX

    def _all_orgs(self) -> bool:
        orgs = str(self.options.get("orgs", "0")).lower()
        if orgs not in ("0", "all"):
            raise ValueError(f"option orgs={orgs!r}: expected 0 or all")
        return orgs == "all"

    def schema(self) -> str:
        return ORG_INDEX_SCHEMA if self._all_orgs() else INDEX_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _PartitionIndexReader(_data_dir(self.options), self._all_orgs())


class _PartitionIndexReader(DataSourceReader):
    def __init__(self, data_dir: str, all_orgs: bool) -> None:
        self.data_dir, self.all_orgs = data_dir, all_orgs

    def partitions(self) -> list[InputPartition]:
        if self.all_orgs:
            found = org_partition_segments(self.data_dir)
        else:
            found = [(0, *s) for s in partition_segments(self.data_dir)]
        return [_Segment(str(p), t, n, org_id) for org_id, t, n, p in found]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if isinstance(partition, _Segment) and partition.topic is not None:
            rows = batch_rows(partition.topic, partition.partition, Path(partition.path))
            if self.all_orgs:
                yield from ((partition.org_id, *row) for row in rows)
            else:
                yield from rows

"""Topics per organisation in the pipeline: each org's groups are judged on their org's logs.

Orgs 0 and 1 both have a topic ``events`` (one partition), with different log ends: org 0's
ends at 10, org 1's at 100. Group ``g`` of each org commits 10 at the same moment, so org 0's
lag is 0 and org 1's is 90. Org 2 has no topic at all: its commit sees a log end of 0.
Joined on the name alone, both orgs would see a log end of 100.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rafka_actors.pipeline.partition_index import org_partition_segments, partition_segments
from rafka_actors.storage.topics import TopicStore

from ..batch_builder import build_batch
from .datadir import STEP, T0, DataDir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _produce(store: TopicStore, records: int, at_ms: int) -> None:
    topic = store.by_name("events")
    assert topic is not None
    topic.partitions[0].append([build_batch([(None, b"x")] * records, base_timestamp=at_ms)])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("orgs") / "data"
    data = DataDir(root)  # org 0's topics and the coordinator log
    data.topic("events", 1)
    data.produce("events", 0, 10, T0)
    org_1 = TopicStore.open(root, org_id=1)
    org_1.create("events", 1)
    _produce(org_1, 100, T0)
    org_1.close()
    for org in (0, 1, 2):
        data.commit("g", "events", 0, 10, T0 + STEP, org=org)
    data.close()
    return root


def test_segments_of_every_org(root: Path) -> None:
    found = [(org, topic, partition) for org, topic, partition, _ in org_partition_segments(root)]
    assert found == [(0, "events", 0), (1, "events", 0)]
    assert [(t, p) for t, p, _ in partition_segments(root)] == [("events", 0)]  # org 0's
    assert [(t, p) for t, p, _ in partition_segments(root, 1)] == [("events", 0)]
    assert partition_segments(root, 2) == []


def test_the_partition_index_of_every_org(spark: SparkSession, root: Path) -> None:
    every = spark.read.format("rafka-partition-index").option("orgs", "all").load(str(root))
    assert every.columns[:3] == ["org_id", "topic", "partition"]
    ends = {(r.org_id, r.topic): r.last_offset for r in every.collect()}
    assert ends == {(0, "events"): 9, (1, "events"): 99}
    default = spark.read.format("rafka-partition-index").load(str(root))
    assert "org_id" not in default.columns
    assert [r.last_offset for r in default.collect()] == [9]  # org 0's, as before orgs existed
    with pytest.raises(Exception, match="orgs='some'"):
        spark.read.format("rafka-partition-index").option("orgs", "some").load(str(root)).collect()


def test_lag_is_computed_from_the_groups_own_org(spark: SparkSession, root: Path) -> None:
    from rafka_actors.pipeline.lag import compute_lag

    result = compute_lag(spark, root)
    lag = {r.org_id: (r.log_end_offset, r.lag) for r in result.lag.collect()}
    assert lag == {0: (10, 0), 1: (100, 90), 2: (0, 0)}
    current = {
        r.org_id: (r.log_end_offset, r.current_lag) for r in result.partition_status.collect()
    }
    assert current == {0: (10, 0), 1: (100, 90), 2: (0, 0)}
    totals = {r.org_id: r.total_lag for r in result.group_status.collect()}
    assert totals == {0: 0, 1: 90, 2: 0}

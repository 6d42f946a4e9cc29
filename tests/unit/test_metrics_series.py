"""The shape of the series (issue 51 §4): a partition's gauges once per partition, Burrow's
status one series per group valued by its code, label values of our own vocabulary in
snake_case, produced/fetched counters per topic, prometheus-client's process, platform and
GC collectors, and the data dir's free bytes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from rafka_actors.actors.snapshot import GroupSnapshot, GroupSummary
from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.group_common.committed import CommittedOffset
from rafka_actors.ids import GroupKey
from rafka_actors.metrics.collector import BrokerCollector
from rafka_actors.metrics.instruments import BrokerMetrics, LabelPolicy
from rafka_actors.metrics.traffic import TopicTraffic
from rafka_actors.storage.data_plane import DataPlane
from tests.batch_builder import build_batch

# Labels whose values are the users' names or numbers, not our vocabulary; `python_info`'s
# are prometheus-client's (its platform collector: implementation="CPython").
USERS_LABELS = {"org", "group", "topic", "partition", "le"}
SNAKE = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")


class Groups:
    """What the collector reads of the registry: these groups, each with these offsets."""

    def __init__(self, groups: dict[str, tuple[str, dict[tuple[str, int], CommittedOffset]]]):
        self._groups = groups

    def snapshots(
        self, wanted: Callable[[GroupKey], bool]
    ) -> Iterator[tuple[GroupKey, GroupSnapshot]]:
        for group_id, (state, offsets) in self._groups.items():
            key = GroupKey(0, group_id)
            if wanted(key):
                summary = GroupSummary(group_id, state, "consumer", "classic", "", 1, 1)
                yield key, GroupSnapshot(summary, MappingProxyType(offsets))


def _collect(
    tmp_path: Path, groups: Groups, metrics: BrokerMetrics | None = None, now_s: float = 100.0
) -> dict[str, Metric]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    topic = data.create_topic("t", 2)
    for index in range(2):  # offsets 0-3 at 1 s, 4-7 at 2 s
        for at in (1_000, 2_000):
            topic.partitions[index].append([build_batch([(b"k", b"v")] * 4, base_timestamp=at)])
    data.create_topic("unread", 1)
    metrics = metrics or BrokerMetrics(LabelPolicy())
    collector = BrokerCollector(
        metrics, cast(Any, groups), data, 10, clock=lambda: now_s, data_dir=tmp_path
    )
    try:
        return {f.name: f for f in collector.collect()}
    finally:
        data.close()


def _at(offset: int, time_ms: int) -> CommittedOffset:
    return CommittedOffset(offset, -1, None, time_ms)


def test_a_partitions_log_end_is_one_series_whatever_the_groups_reading_it(
    tmp_path: Path,
) -> None:
    """Mutation seen to fail: the log end labelled by group again (one series per group)."""
    offsets = {("t", 0): _at(1, 2_000), ("t", 1): _at(8, 2_000)}
    groups = Groups({"a": ("Empty", offsets), "b": ("Empty", offsets), "c": ("Empty", {})})
    families = _collect(tmp_path, groups)
    log_end = families["rafka_partition_log_end_offset"]
    assert sorted((s.labels["topic"], s.labels["partition"], s.value) for s in log_end.samples) == [
        ("t", "0", 8), ("t", "1", 8), ("unread", "0", 0),
    ]  # fmt: skip
    assert all(set(s.labels) == {"org", "topic", "partition"} for s in log_end.samples)
    # a group's own gauges per partition still name it
    lag = families["rafka_group_lag_records"]
    assert sorted((s.labels["group"], s.labels["partition"], s.value) for s in lag.samples) == [
        ("a", "0", 7), ("a", "1", 0), ("b", "0", 7), ("b", "1", 0),
    ]  # fmt: skip


def test_burrow_status_is_one_series_per_group_valued_by_its_code(tmp_path: Path) -> None:
    """The status is the value (1 ok, 2 warn, 3 err, said in HELP), never a label: a change
    of status moves the one series. Mutation seen to fail: the status as a label again."""
    groups = Groups(
        {
            "caught-up": ("Stable", {("t", 0): _at(8, 2_000)}),
            "stopped": ("Stable", {("t", 0): _at(1, 2_000), ("t", 1): _at(8, 2_000)}),
        }
    )
    family = _collect(tmp_path, groups)["rafka_group_burrow_status"]
    assert {s.labels["group"]: s.value for s in family.samples} == {"caught-up": 1, "stopped": 3}
    assert all(set(s.labels) == {"org", "group", "type"} for s in family.samples)
    assert "1 ok, 2 warn, 3 err" in family.documentation


def test_label_values_of_our_own_vocabulary_are_snake_case(tmp_path: Path) -> None:
    """Group states, rebalance causes, API names and SASL mechanisms, as a scrape shows
    them. Mutation seen to fail: `cause="member joined"`, `state="PreparingRebalance"`."""
    metrics = BrokerMetrics(LabelPolicy())
    metrics.observe_request(8, "OffsetCommit", 0, 0.001)
    metrics.auth_failed("SCRAM-SHA-256")
    metrics.auth_failed(None)
    record = GroupMetadataRecord(
        "g", "cgp_x", "consumer", 1, "range", None, 0, (), "member m-1 joined", 1, ()
    )
    metrics.settled(GroupKey(0, "g"), [record])
    families = _collect(tmp_path, Groups({"g": ("PreparingRebalance", {})}), metrics)
    for family in families.values():
        metrics.registry.register(_Fixed(family))
    text = generate_latest(metrics.registry).decode()
    values = {
        (name, value)
        for family in text_string_to_metric_families(text)
        if family.name != "python_info"
        for sample in family.samples
        for name, value in sample.labels.items()
        if name not in USERS_LABELS
    }
    assert {("state", "preparing_rebalance"), ("cause", "member_joined")} <= values
    assert {("api", "offset_commit"), ("mechanism", "scram_sha_256")} <= values
    assert ("mechanism", "unknown") in values
    assert [v for v in values if not SNAKE.fullmatch(v[1])] == []


class _Fixed:
    """A collector that yields one family it was given (the scrape above, registered)."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> Iterator[Metric]:
        yield self._family


def test_process_platform_and_gc_series_are_served() -> None:
    text = generate_latest(BrokerMetrics(LabelPolicy()).registry).decode()
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"):
        assert f"\n{name}" in text or text.startswith(name)
    assert "python_gc_collections_total" in text


def test_the_data_dirs_free_bytes_are_a_gauge(tmp_path: Path) -> None:
    (sample,) = _collect(tmp_path, Groups({}))["rafka_data_dir_free_bytes"].samples
    assert sample.value > 0 and sample.labels == {}


def test_topic_traffic_counts_per_topic_under_the_label_policy() -> None:
    metrics = BrokerMetrics(LabelPolicy.of("", "", "", "secret-.*", 2))
    traffic: TopicTraffic = metrics.traffic
    gone: set[tuple[int, str]] = set()
    traffic.exists = lambda org_id, topic: (org_id, topic) not in gone
    traffic.produced(0, "orders", 100, 3)
    traffic.produced(0, "orders", 50, 2)
    traffic.fetched(0, [("orders", 120, 4), ("payments", 10, 1)])
    traffic.produced(7, "orders", 1, 1)  # another org's: over the cap of 2
    traffic.produced(0, "secret-x", 5, 5)  # denied
    samples = {
        (s.name, s.labels["org"], s.labels["topic"]): s.value
        for family in traffic.collect()
        for s in family.samples
    }
    assert samples == {
        ("rafka_topic_produced_bytes_total", "0", "orders"): 150,
        ("rafka_topic_produced_records_total", "0", "orders"): 5,
        ("rafka_topic_fetched_bytes_total", "0", "orders"): 120,
        ("rafka_topic_fetched_records_total", "0", "orders"): 4,
        ("rafka_topic_produced_bytes_total", "0", "payments"): 0,
        ("rafka_topic_produced_records_total", "0", "payments"): 0,
        ("rafka_topic_fetched_bytes_total", "0", "payments"): 10,
        ("rafka_topic_fetched_records_total", "0", "payments"): 1,
    }
    text = generate_latest(metrics.registry).decode()
    assert 'rafka_metrics_series_dropped_total{kind="topic"} 1.0' in text
    gone.add((0, "payments"))  # deleted: its series go, and its place under the cap
    assert {s.labels["topic"] for f in traffic.collect() for s in f.samples} == {"orders"}
    traffic.produced(0, "later", 1, 1)
    assert {s.labels["topic"] for f in traffic.collect() for s in f.samples} == {"orders", "later"}

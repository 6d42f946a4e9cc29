"""The metrics' pure parts: lag arithmetic, the partition log's append times, rebalance
causes as bounded labels, and the label policy's allow/deny patterns and cap."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.ids import GroupKey
from rafka_actors.lag import lag_ms, lag_records
from rafka_actors.metrics.instruments import BrokerMetrics, LabelPolicy, cause_label
from rafka_actors.storage.partition_log import PartitionLog
from tests.batch_builder import build_batch


def test_lag_is_zero_when_caught_up_and_the_record_age_otherwise() -> None:
    assert lag_records(10, 3) == 7
    assert lag_records(10, 12) == 0
    assert lag_ms(5_000, 10, 10, 1_000) == 0  # caught up: no record at the committed offset
    assert lag_ms(5_000, 10, 3, 1_000) == 4_000
    assert lag_ms(5_000, 10, 3, None) == 0  # no timestamp known
    assert lag_ms(500, 10, 3, 1_000) == 0  # a producer clock ahead of ours: never negative


def test_partition_log_gives_the_append_time_of_the_batch_holding_an_offset(
    tmp_path: Path,
) -> None:
    log = PartitionLog.open(tmp_path / "p")
    try:
        log.append([build_batch([(b"a", b"1"), (b"b", b"2")], base_timestamp=1_000)])
        log.append([build_batch([(b"c", b"3")], base_timestamp=2_000)])
        log.append([build_batch([(b"d", b"4")], base_timestamp=3_000)])
        assert [log.batch_max_timestamp(o) for o in range(5)] == [1_000, 1_000, 2_000, 3_000, None]
        assert log.end_offset_at(999) == 0
        assert log.end_offset_at(1_000) == 2
        assert log.end_offset_at(2_500) == 3
        assert log.end_offset_at(9_999) == 4
    finally:
        log.close()


def test_rebalance_causes_are_a_few_words_without_member_ids() -> None:
    assert cause_label("member rdkafka-1234 joined") == "member_joined"
    assert cause_label("member consumer-7 left") == "member_left"
    assert cause_label("members left: a, b") == "member_left"
    assert cause_label("member m1 session timeout") == "session_timeout"
    assert cause_label("members did not sync in time") == "sync_timeout"
    assert cause_label("") == "unknown"
    assert cause_label("something new") == "other"


def _settle_rebalance(metrics: BrokerMetrics, group: str) -> None:
    record = GroupMetadataRecord(
        group, "cgp_x", "consumer", 1, "range", None, 0, (), "member m joined", 1, ()
    )
    metrics.settled(GroupKey(0, group), [record])


def test_label_policy_filters_groups_and_caps_them_counting_what_it_drops() -> None:
    policy = LabelPolicy.of("app-.*", "app-secret", "", "", 2)
    assert policy.admits_group("app-1") and not policy.admits_group("app-secret")
    assert not policy.admits_group("other")
    metrics = BrokerMetrics(policy)
    for group in ("app-1", "app-2", "app-3", "app-secret", "other", "app-1"):
        _settle_rebalance(metrics, group)
    text = generate_latest(metrics.registry).decode()
    assert 'group="app-1"' in text and 'group="app-2"' in text
    assert 'group="app-3"' not in text and "app-secret" not in text and "other" not in text
    assert 'rafka_metrics_series_dropped_total{kind="group"} 1.0' in text
    assert 'cause="member_joined",group="app-1",org="0",type="classic"} 2.0' in text


def test_loop_histogram_counts_a_value_on_a_bound_in_that_bucket() -> None:
    from rafka_actors.metrics.histograms import LoopHistogram

    family = LoopHistogram("h", "doc", ["api"], (0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 7.0):
        family.series("Fetch").observe(value)
    (metric,) = family.collect()
    samples = {(s.name, s.labels.get("le")): s.value for s in metric.samples}
    assert samples[("h_bucket", "0.1")] == 2
    assert samples[("h_bucket", "1.0")] == 3
    assert samples[("h_bucket", "+Inf")] == 4
    assert samples[("h_count", None)] == 4
    assert samples[("h_sum", None)] == 7.65


def test_metrics_stay_on_loopback_unless_a_host_is_named() -> None:
    from rafka_actors.config import BrokerConfig
    from rafka_actors.metrics.setup import metrics_address

    off = BrokerConfig()
    assert metrics_address(off, {}) is None
    assert metrics_address(off.with_values(metrics_listen=":9404"), {}) == ("127.0.0.1", 9404)
    assert metrics_address(off.with_values(metrics_listen="0.0.0.0:1"), {}) == ("0.0.0.0", 1)
    otel = {"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": "9999"}
    assert metrics_address(off, otel) == ("localhost", 9999)


async def test_the_endpoint_serves_get_metrics_only() -> None:
    import trio

    from rafka_actors.metrics.endpoint import open_metrics_listener, serve_metrics

    metrics = BrokerMetrics(LabelPolicy())
    metrics.observe_request(8, "OffsetCommit", 3, 0.001)
    listener = await open_metrics_listener("127.0.0.1", 0)
    port = listener.socket.getsockname()[1]

    async def ask(request: bytes) -> bytes:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request)
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
            return answer

    async with trio.open_nursery() as nursery:
        await nursery.start(serve_metrics, metrics, listener)
        text = await ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert text.startswith(b"HTTP/1.1 200 OK")
        assert b'rafka_request_duration_seconds_count{api="offset_commit",org="3"} 1.0' in text
        open_metrics = await ask(
            b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n"
        )
        assert b"Content-Type: application/openmetrics-text" in open_metrics
        assert open_metrics.rstrip().endswith(b"# EOF")
        assert (await ask(b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await ask(b"GET /other HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        nursery.cancel_scope.cancel()


def test_the_collector_caps_partition_series_and_counts_the_rest(tmp_path: Path) -> None:
    from collections.abc import Callable, Iterator
    from types import MappingProxyType
    from typing import Any, cast

    from rafka_actors.actors.snapshot import GroupSnapshot, GroupSummary
    from rafka_actors.group_common.committed import CommittedOffset
    from rafka_actors.metrics.collector import BrokerCollector
    from rafka_actors.storage.data_plane import DataPlane

    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    topic = data.create_topic("t", 3)
    for index in range(3):
        topic.partitions[index].append([build_batch([(b"k", b"v")] * 4, base_timestamp=1_000)])
    offsets = {("t", i): CommittedOffset(1, -1, None, 2_000) for i in range(3)}

    class Groups:  # what the collector reads of the registry
        def snapshots(
            self, wanted: Callable[[GroupKey], bool]
        ) -> Iterator[tuple[GroupKey, GroupSnapshot]]:
            for group_id in ("a", "b", "hidden"):
                key = GroupKey(0, group_id)
                if wanted(key):
                    summary = GroupSummary(group_id, "Empty", "consumer", "classic", "", 0, 1)
                    yield key, GroupSnapshot(summary, MappingProxyType(offsets))

    metrics = BrokerMetrics(LabelPolicy.of("", "hidden", "", "", 4))
    collector = BrokerCollector(metrics, cast(Any, Groups()), data, 10, clock=lambda: 5.0)
    try:
        families = {f.name: f for f in collector.collect()}
    finally:
        data.close()
    lag = families["rafka_group_lag_records"]
    assert [(s.labels["group"], s.labels["partition"], s.value) for s in lag.samples] == [
        ("a", "0", 3), ("a", "1", 3), ("a", "2", 3), ("b", "0", 3),
    ]  # fmt: skip
    # now 5 s, the record at offset 1 appended at 1 s
    assert {s.value for s in families["rafka_group_lag_seconds"].samples} == {4.0}
    text = generate_latest(metrics.registry).decode()
    assert 'rafka_metrics_series_dropped_total{kind="partition"} 2.0' in text

"""The counters and histograms of the broker, and prometheus-client's process, platform and
garbage-collector collectors (`process_*`, `python_info`, `python_gc_*`).

The request path pays one histogram observation per request: a dict lookup, a bisect over
the buckets and two additions (histograms.py; prometheus-client's own Histogram costs five
times as much); a Produce or Fetch also a dict lookup and two additions per topic-partition
(traffic.py). Rebalances are counted from what a group's actor stored (its records,
as the rebalance-history pipeline reads them), after the batch, never on the gateway's guess.

Cardinality: a group or topic gets series only if it matches `metrics.*.allow` (when set) and
not `metrics.*.deny`; and at most `metrics.max.partition.series` partitions (and as many groups
for the per-group counters) get series: what is left out is counted in
`rafka_metrics_series_dropped_total`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from ..classic_group.records import GroupMetadataRecord
from ..consumer_group.records import ConsumerGroupMetadataRecord
from ..ids import GroupKey
from ..share_group.records import ShareGroupMetadataRecord
from .histograms import Buckets, LoopHistogram
from .labels import LabelPolicy, cause_label, snake_case
from .traffic import TopicTraffic

# Request latency: 50 us .. 10 s (a long poll's Fetch waits up to its max wait).
REQUEST_BUCKETS: Final = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
LOG_BUCKETS: Final = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 1.0,
)  # fmt: skip
REBALANCE_BUCKETS: Final = (0.01, 0.05, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class BrokerMetrics:
    """Every instrument of one broker, in its own registry (two brokers in one process, as
    in tests, never share series)."""

    def __init__(self, policy: LabelPolicy) -> None:
        self.policy = policy
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        ProcessCollector(registry=r)  # process_cpu_seconds_total, ..._resident_memory_bytes
        PlatformCollector(registry=r)  # python_info
        GCCollector(registry=r)  # python_gc_*
        self.request_seconds = LoopHistogram(
            "rafka_request_duration_seconds",
            "Time from a request's decoding to its response, by API",
            ["org", "api"],
            REQUEST_BUCKETS,
        )
        r.register(self.request_seconds)
        self.rebalances = Counter(
            "rafka_group_rebalances",
            "Rebalances settled (classic) or group epochs bumped (consumer, share), by cause",
            ["org", "group", "type", "cause"],
            registry=r,
        )
        self.rebalance_seconds = Histogram(
            "rafka_group_rebalance_duration_seconds",
            "From a rebalance's start to its stored settlement",
            ["org", "group", "type"],
            buckets=REBALANCE_BUCKETS,
            registry=r,
        )
        log_append = LoopHistogram(
            "rafka_coordinator_log_append_duration_seconds",
            "Writing one batch of group records to the coordinator log (page cache)",
            [],
            LOG_BUCKETS,
        )
        log_fsync = LoopHistogram(
            "rafka_coordinator_log_fsync_duration_seconds",
            "One fsync of the coordinator log",
            [],
            LOG_BUCKETS,
        )
        r.register(log_append)
        r.register(log_fsync)
        self.log_append_seconds = log_append.series()
        self.log_fsync_seconds = log_fsync.series()
        self.auth_failures = Counter(
            "rafka_authentication_failures",
            "Failed SASL logins, by mechanism",
            ["mechanism"],
            registry=r,
        )
        self.dropped = Counter(
            "rafka_metrics_series_dropped",
            "Series left out by the label policy's cap (metrics.max.partition.series)",
            ["kind"],
            registry=r,
        )
        self.traffic = TopicTraffic(policy, self.dropped)  # (setup.py: which topics exist)
        r.register(self.traffic)
        self._request_series: dict[tuple[int, int], Buckets] = {}
        self._labelled_groups: set[GroupKey] = set()
        self.connections: dict[int, Any] = {}  # id -> ConnectionInfo of each open connection

    # -- the request path -----------------------------------------------------------------

    def observe_request(self, api_key: int, api_name: str, org_id: int, seconds: float) -> None:
        """One request answered: a dict lookup and a bucket count."""
        series = self._request_series.get((api_key, org_id))
        if series is None:
            series = self.request_seconds.series(str(org_id), snake_case(api_name))
            self._request_series[(api_key, org_id)] = series
        series.observe(seconds)

    def auth_failed(self, mechanism: str | None) -> None:
        self.auth_failures.labels(snake_case(mechanism or "")).inc()

    # -- the actors -----------------------------------------------------------------------

    def settled(self, key: GroupKey, records: Iterable[Any]) -> None:
        """A group's actor stored `records`: count the rebalances they settle (the same
        records the rebalance-history pipeline reads)."""
        for record in records:
            if type(record) is GroupMetadataRecord and record.rebalance_started_ms >= 0:
                if self._admits(key):
                    labels = (str(key.org_id), key.group_id, "classic")
                    self.rebalances.labels(*labels, cause_label(record.reason)).inc()
                    seconds = max(0.0, time.time() - record.rebalance_started_ms / 1000)
                    self.rebalance_seconds.labels(*labels).observe(seconds)
            elif type(record) is ConsumerGroupMetadataRecord and self._admits(key):
                labels = (str(key.org_id), key.group_id, "consumer")
                self.rebalances.labels(*labels, cause_label(record.reason)).inc()
                # KIP-848 has no barrier: the epoch moves and the target follows at once
                self.rebalance_seconds.labels(*labels).observe(0.0)
            elif type(record) is ShareGroupMetadataRecord and self._admits(key):
                labels = (str(key.org_id), key.group_id, "share")
                self.rebalances.labels(*labels, "unknown").inc()  # its record has no reason
                self.rebalance_seconds.labels(*labels).observe(0.0)

    def _admits(self, key: GroupKey) -> bool:
        if key in self._labelled_groups:
            return True
        if not self.policy.admits_group(key.group_id):
            return False
        if len(self._labelled_groups) >= self.policy.max_series:
            self.dropped.labels("group").inc()
            return False
        self._labelled_groups.add(key)
        return True

    # -- the coordinator log --------------------------------------------------------------

    def log_timed(self, append_s: float | None, fsync_s: float | None) -> None:
        if append_s is not None:
            self.log_append_seconds.observe(append_s)
        if fsync_s is not None:
            self.log_fsync_seconds.observe(fsync_s)

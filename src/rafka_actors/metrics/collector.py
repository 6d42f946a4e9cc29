"""The gauges, computed when Prometheus scrapes, from what the broker already publishes.

Groups are read from their snapshots (actors/snapshot.py: what each actor published after its
records were stored, or what the log says of a group without an actor), never from a live
group. Log ends and append times come from the partition logs' in-memory index and one
61-byte header read per lagging partition (storage/partition_log.py). A partition's own
gauges (`rafka_partition_log_end_offset`) are one series per partition, whatever number of
groups read it; a group's gauges per partition carry the group.

The live Burrow status runs the pipeline's evaluator (pipeline/burrow.py) over a window of the
latest `metrics.burrow.window` commits per partition, kept here: each scrape adds the
partition's committed offset if it was committed since the last one, with the lag it had then
(the log end as of the commit time, from the index, as the pipeline computes it). Commits
between two scrapes collapse into the latest, as Burrow's min-distance does. "Now", for lag in
seconds and for Burrow's STOP rule, is the wall clock at the scrape (lag.wall_clock_ms), as
the pipeline's is at the job's start.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..actors.group_registry import GroupRegistry
from ..ids import GroupKey
from ..lag import lag_ms, lag_records, wall_clock_ms
from ..pipeline.burrow import Commit, Status, evaluate, group_status
from ..storage.data_plane import DataPlane
from ..storage.disk_space import free_bytes
from .instruments import BrokerMetrics
from .labels import snake_case

PartitionId = tuple[GroupKey, str, int]
BURROW_HELP = (
    "Burrow's group status over the live window, as a code: 1 ok, 2 warn, 3 err "
    "(the worst partition; stop, stall and rewind count as err)"
)


class _Families:
    """The gauge families of one scrape."""

    def __init__(self) -> None:
        g = ["org", "group", "type"]
        p = ["org", "group", "topic", "partition"]
        gauge = GaugeMetricFamily
        self.state = gauge("rafka_group_state", "1 for the group's state", labels=[*g, "state"])
        self.members = gauge("rafka_group_members", "Members of the group", labels=g)
        self.generation = gauge(
            "rafka_group_generation", "Classic: generation; consumer: group epoch", labels=g
        )
        self.burrow = gauge("rafka_group_burrow_status", BURROW_HELP, labels=g)
        self.committed = gauge("rafka_group_committed_offset", "Committed offset", labels=p)
        self.lag = gauge("rafka_group_lag_records", "Log end minus committed", labels=p)
        self.lag_s = gauge(
            "rafka_group_lag_seconds",
            "Now minus the append time of the record at the committed offset (0: caught up)",
            labels=p,
        )
        self.log_end = gauge(
            "rafka_partition_log_end_offset",
            "Log-end offset (the high watermark)",
            labels=["org", "topic", "partition"],
        )

    def __iter__(self) -> Iterator[GaugeMetricFamily]:
        yield from (self.state, self.members, self.generation, self.burrow)
        yield from (self.committed, self.lag, self.lag_s, self.log_end)


class BrokerCollector(Collector):
    def __init__(
        self,
        metrics: BrokerMetrics,
        groups: GroupRegistry,
        data: DataPlane,
        window: int,
        *,
        clock: Callable[[], float] = time.time,
        data_dir: Path | None = None,
    ) -> None:
        self._clock = clock  # wall-clock seconds (lag.wall_clock_ms)
        self._metrics = metrics
        self._groups = groups
        self._data = data
        self._window = max(1, window)
        self._data_dir = data_dir  # for its free bytes
        self._commits: dict[PartitionId, deque[Commit]] = {}

    def collect(self) -> Iterator[Any]:
        families = _Families()
        self._collect_groups(families, wall_clock_ms(self._clock))
        self._collect_partitions(families.log_end)
        yield from families
        yield self._connections()
        if self._data_dir is not None:
            yield self._free_bytes(self._data_dir)

    def _collect_groups(self, families: _Families, now_ms: int) -> None:
        policy = self._metrics.policy
        series = dropped = groups_dropped = 0
        seen: set[PartitionId] = set()

        def wanted(key: GroupKey) -> bool:  # before a group is read from the log
            nonlocal groups_dropped
            if not policy.admits_group(key.group_id):
                return False
            if series >= policy.max_series:  # the cap is reached: not even read
                groups_dropped += 1
                return False
            return True

        for key, snapshot in self._groups.snapshots(wanted):
            summary = snapshot.summary
            if summary is None:
                continue
            labels = [str(key.org_id), key.group_id, summary.group_type]
            families.state.add_metric([*labels, snake_case(summary.state)], 1)
            families.members.add_metric(labels, summary.members)
            families.generation.add_metric(labels, summary.generation)
            statuses: list[Status] = []
            topics = self._data.topics_for(key.org_id)
            for (topic_name, index), offset in sorted(snapshot.offsets.items()):
                topic = topics.by_name(topic_name)
                if topic is None or not 0 <= index < len(topic.partitions):
                    continue
                if not policy.admits_topic(topic_name):
                    continue
                if series >= policy.max_series:
                    dropped += 1
                    continue
                series += 1
                pid = (key, topic_name, index)
                seen.add(pid)
                statuses.append(
                    self._partition(families, pid, offset, topic.partitions[index], now_ms)
                )
            if statuses:
                families.burrow.add_metric(labels, int(group_status(statuses)))
        for gone in self._commits.keys() - seen:
            del self._commits[gone]
        if dropped:
            self._metrics.dropped.labels("partition").inc(dropped)
        if groups_dropped:
            self._metrics.dropped.labels("group").inc(groups_dropped)

    def _partition(
        self, families: _Families, pid: PartitionId, offset: Any, plog: Any, now_ms: int
    ) -> Status:
        """One group's gauges of one partition; its Burrow status."""
        key, topic_name, index = pid
        end = plog.log_end_offset
        at = max(offset.offset, plog.log_start_offset)
        labels = [str(key.org_id), key.group_id, topic_name, str(index)]
        families.committed.add_metric(labels, offset.offset)
        families.lag.add_metric(labels, lag_records(end, offset.offset))
        appended = plog.batch_max_timestamp(at) if at < end else None
        families.lag_s.add_metric(labels, lag_ms(now_ms, end, at, appended) / 1000)
        window = self._window_of(pid, offset.commit_timestamp_ms, offset.offset, plog)
        return evaluate(window, now_ms=now_ms, log_end_offset=end).status

    def _collect_partitions(self, log_end: GaugeMetricFamily) -> None:
        """Each partition's log end, once (not per group), under the same label policy."""
        policy = self._metrics.policy
        series = dropped = 0
        for org_id in self._data.orgs():
            for topic in self._data.topics_for(org_id):
                if not policy.admits_topic(topic.name):
                    continue
                for index, plog in enumerate(topic.partitions):
                    if series >= policy.max_series:
                        dropped += 1
                        continue
                    series += 1
                    log_end.add_metric([str(org_id), topic.name, str(index)], plog.log_end_offset)
        if dropped:
            self._metrics.dropped.labels("topic_partition").inc(dropped)

    def _connections(self) -> GaugeMetricFamily:
        connections = GaugeMetricFamily(
            "rafka_connections", "Open client connections, by organisation", labels=["org"]
        )
        by_org = Tally(c.org_id for c in self._metrics.connections.values())
        for org_id in self._data.orgs():  # every known org, with 0 when none is connected
            by_org.setdefault(org_id, 0)
        for org_id, count in sorted(by_org.items()):
            connections.add_metric([str(org_id)], count)
        return connections

    @staticmethod
    def _free_bytes(data_dir: Path) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "rafka_data_dir_free_bytes",
            "Bytes free for the broker on the data dir's file system (as df shows them)",
        )
        free = free_bytes(data_dir)
        if free is not None:
            family.add_metric([], free)
        return family

    def _window_of(self, pid: PartitionId, time_ms: int, offset: int, plog: Any) -> deque[Commit]:
        window = self._commits.get(pid)
        if window is None:
            window = self._commits[pid] = deque(maxlen=self._window)
        if not window or window[-1].time_ms != time_ms or window[-1].offset != offset:
            window.append(Commit(time_ms, offset, lag_records(plog.end_offset_at(time_ms), offset)))
        return window

"""The gauges, computed when Prometheus scrapes, from what the broker already publishes.

Groups are read from their snapshots (actors/snapshot.py: what each actor published after its
records were stored, or what the log says of a group without an actor), never from a live
group. Log ends and append times come from the partition logs' in-memory index and one
61-byte header read per lagging partition (storage/partition_log.py).

The live Burrow status runs the pipeline's evaluator (pipeline/burrow.py) over a window of the
latest `metrics.burrow.window` commits per partition, kept here: each scrape adds the
partition's committed offset if it was committed since the last one, with the lag it had then
(the log end as of the commit time, from the index, as the pipeline computes it). Commits
between two scrapes collapse into the latest, as Burrow's min-distance does.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..actors.group_registry import GroupRegistry
from ..ids import GroupKey
from ..lag import lag_ms, lag_records
from ..pipeline.burrow import Commit, Status, evaluate, group_status
from ..storage.data_plane import DataPlane
from .instruments import BrokerMetrics

PartitionId = tuple[GroupKey, str, int]


class BrokerCollector(Collector):
    def __init__(
        self,
        metrics: BrokerMetrics,
        groups: GroupRegistry,
        data: DataPlane,
        window: int,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock  # wall-clock seconds: "now" of lag in seconds and Burrow's STOP
        self._metrics = metrics
        self._groups = groups
        self._data = data
        self._window = max(1, window)
        self._commits: dict[PartitionId, deque[Commit]] = {}

    def collect(self) -> Iterator[Any]:
        now_ms = int(self._clock() * 1000)
        policy = self._metrics.policy
        g = ["org", "group", "type"]
        p = ["org", "group", "topic", "partition"]
        state = GaugeMetricFamily(
            "rafka_group_state", "1 for the group's state", labels=[*g, "state"]
        )
        members = GaugeMetricFamily("rafka_group_members", "Members of the group", labels=g)
        generation = GaugeMetricFamily(
            "rafka_group_generation", "Classic: generation; consumer: group epoch", labels=g
        )
        burrow = GaugeMetricFamily(
            "rafka_group_burrow_status",
            "Burrow's group status over the live window: 1 OK, 2 WARN, 3 ERR",
            labels=[*g, "status"],
        )
        committed = GaugeMetricFamily("rafka_group_committed_offset", "Committed offset", labels=p)
        log_end = GaugeMetricFamily("rafka_partition_log_end_offset", "Log-end offset", labels=p)
        lag = GaugeMetricFamily("rafka_group_lag_records", "Log end minus committed", labels=p)
        lag_s = GaugeMetricFamily(
            "rafka_group_lag_seconds",
            "Now minus the append time of the record at the committed offset (0: caught up)",
            labels=p,
        )
        series = 0
        dropped = 0
        seen: set[PartitionId] = set()
        groups_dropped = 0

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
            state.add_metric([*labels, summary.state], 1)
            members.add_metric(labels, summary.members)
            generation.add_metric(labels, summary.generation)
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
                plog = topic.partitions[index]
                end = plog.log_end_offset
                at = max(offset.offset, plog.log_start_offset)
                plabels = [str(key.org_id), key.group_id, topic_name, str(index)]
                committed.add_metric(plabels, offset.offset)
                log_end.add_metric(plabels, end)
                lag.add_metric(plabels, lag_records(end, offset.offset))
                appended = plog.batch_max_timestamp(at) if at < end else None
                lag_s.add_metric(plabels, lag_ms(now_ms, end, at, appended) / 1000)
                pid = (key, topic_name, index)
                seen.add(pid)
                window = self._window_of(pid, offset.commit_timestamp_ms, offset.offset, plog)
                statuses.append(evaluate(window, now_ms=now_ms, log_end_offset=end).status)
            if statuses:
                worst = group_status(statuses)
                burrow.add_metric([*labels, worst.name], int(worst))
        for gone in self._commits.keys() - seen:
            del self._commits[gone]
        if dropped:
            self._metrics.dropped.labels("partition").inc(dropped)
        if groups_dropped:
            self._metrics.dropped.labels("group").inc(groups_dropped)
        connections = GaugeMetricFamily(
            "rafka_connections", "Open client connections, by organisation", labels=["org"]
        )
        by_org = Tally(c.org_id for c in self._metrics.connections.values())
        for org_id in self._data.orgs():  # every known org, with 0 when none is connected
            by_org.setdefault(org_id, 0)
        for org_id, count in sorted(by_org.items()):
            connections.add_metric([str(org_id)], count)
        yield from (state, members, generation, burrow, committed, log_end, lag, lag_s)
        yield connections

    def _window_of(self, pid: PartitionId, time_ms: int, offset: int, plog: Any) -> deque[Commit]:
        window = self._commits.get(pid)
        if window is None:
            window = self._commits[pid] = deque(maxlen=self._window)
        if not window or window[-1].time_ms != time_ms or window[-1].offset != offset:
            window.append(Commit(time_ms, offset, lag_records(plog.end_offset_at(time_ms), offset)))
        return window

"""The pipeline's lag in seconds agrees with the live metric's on the same data dir.

A real broker with metrics on gets two batches, appended a moment apart, and three groups:
one committed inside the first batch, one inside the second, one at the log end. Its
`rafka_group_lag_seconds` is scraped between two clock readings; then the broker stops and
`pipeline lag` runs over its data dir with "now" at the first reading. Lag in seconds grows
one second per second, so the metric must lie between the pipeline's figure and that plus
the time the scrape took; lag in records must be equal.
"""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from ..broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# the same agreement over a synthetic data dir is in the default run (test_lag_job.py); this
# one, on a real broker's data dir, starts a broker and a second Spark job: opt-in
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMMITS = {"early": 2, "late": 7, "done": 10}


def _scrape(url: str) -> dict[tuple[str, str], dict[str, float]]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found: dict[tuple[str, str], dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("rafka_group_lag_seconds", "rafka_group_lag_records"):
                key = (sample.labels["group"], sample.labels["topic"])
                found.setdefault(key, {})[sample.name] = sample.value
    return found


def test_pipeline_and_metric_agree(spark: SparkSession, tmp_path: Path) -> None:
    from rafka_actors.pipeline.lag import compute_lag

    data = tmp_path / "data"
    broker = BrokerProcess(data, "metrics.listen=127.0.0.1:0").start()
    try:
        metrics = next(m for m in map(re.compile(r"metrics on (\S+)").search, broker.lines) if m)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for values in (range(5), range(5, 10)):
            for i in values:
                producer.produce("aged", value=b"r%d" % i)
            assert producer.flush(15) == 0
            time.sleep(0.3)  # the two batches' append times differ
        for group, offset in COMMITS.items():
            committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
            committer.commit(offsets=[TopicPartition("aged", 0, offset)], asynchronous=False)
            committer.close()
        before = int(time.time() * 1000)
        live = _scrape(metrics.group(1))
        after = int(time.time() * 1000)
    finally:
        broker.stop()
    statuses = {
        row["group_id"]: row
        for row in compute_lag(spark, data, now_ms=before).partition_status.collect()
    }
    assert set(statuses) == set(COMMITS)
    for group in COMMITS:
        metric = live[(group, "aged")]
        batch = statuses[group]
        assert metric["rafka_group_lag_records"] == batch["current_lag"]
        pipeline_s = batch["current_time_lag_ms"] / 1000
        assert pipeline_s <= metric["rafka_group_lag_seconds"] <= pipeline_s + (after - before)
    assert statuses["done"]["current_time_lag_ms"] == 0
    assert statuses["early"]["current_time_lag_ms"] > statuses["late"]["current_time_lag_ms"] > 0

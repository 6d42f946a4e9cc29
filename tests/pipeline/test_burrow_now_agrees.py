"""The live Burrow status and the pipeline's agree on a real broker's data dir, because both
judge as of the wall clock (issue 51 §4; rafka_actors/lag.py).

A group commits twice, 0.3 s apart, while the log grows faster than it reads: its live window
says WARN. Then it stops committing; a second later the live status is ERR (Burrow's STOP:
silent for longer than its window spans). `pipeline lag` over the same data dir, with its
default "now", must say the same. Mutation seen to fail: the pipeline's old default "now",
the newest commit or batch in the data dir, under which the group had not stopped (WARN).
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

pytestmark = pytest.mark.e2e


def _burrow(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {
        sample.labels["group"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "rafka_group_burrow_status"
        for sample in family.samples
    }


def test_the_live_status_and_the_pipelines_agree_by_default(
    spark: SparkSession, tmp_path: Path
) -> None:
    from rafka_actors.pipeline.lag import compute_lag

    data = tmp_path / "data"
    broker = BrokerProcess(data, "metrics.listen=127.0.0.1:0").start()
    try:
        url = next(m for m in map(re.compile(r"metrics on (\S+)").search, broker.lines) if m)[1]
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "falling"})
        for round_, offset in enumerate((1, 3)):  # lag 4, then 7: falling behind
            for i in range(5):
                producer.produce("events", value=b"r%d" % i)
            assert producer.flush(15) == 0
            if round_:
                time.sleep(0.3)  # the window spans 0.3 s
            committer.commit(offsets=[TopicPartition("events", 0, offset)], asynchronous=False)
            live = _burrow(url)  # each scrape adds the commit to the live window
        assert live == {"falling": 2}  # WARN: offsets move, lag grows
        time.sleep(1.0)  # silent for longer than the window spans
        live = _burrow(url)
        assert live == {"falling": 3}  # ERR (STOP)
        committer.close()
    finally:
        broker.stop()
    (row,) = compute_lag(spark, data).group_status.collect()
    assert (row["group_id"], row["status_code"]) == ("falling", live["falling"])

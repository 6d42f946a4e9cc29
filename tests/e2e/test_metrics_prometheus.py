"""A real Prometheus (Debian's) scrapes a live broker with a lagging and a caught-up group,
and answers for them: exact lag in records, lag in seconds (above 0 / exactly 0), a
rebalance counter that rose after a member joined; the series of issue 51 §4 (one log-end
series per partition, one Burrow series per group valued by its code, snake_case label
values, produced and fetched bytes and records per topic, process and platform series, the
data dir's free bytes); then every panel query of the Grafana dashboard
(examples/grafana/rafka-actors.json), with its `org` and `group` variables at "All", returns
data."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ..broker_process import BrokerProcess
from .prometheus_process import BINARY, SKIP_REASON, PrometheusProcess

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(BINARY is None, reason=SKIP_REASON)]

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "grafana" / "rafka-actors.json"
METRICS_ON = re.compile(r"metrics on http://(\S+):(\d+)/metrics")
TOPIC = "watched"
RECORDS = 10
LAGGING_AT = 3
USERS_LABELS = {"__name__", "instance", "job", "org", "group", "topic", "partition", "le"}
SNAKE = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("metrics") / "data",
        "metrics.listen=127.0.0.1:0",
        "group.initial.rebalance.delay.ms=0",
    ).start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def prometheus(
    broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusProcess]:
    found = next(m for m in map(METRICS_ON.search, broker.lines) if m)
    server = PrometheusProcess(tmp_path_factory.mktemp("prometheus"), ":".join(found.groups()))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _consume_all(bootstrap: str, group: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    seen, deadline = 0, time.monotonic() + 30
    while seen < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen += 1
    assert seen == RECORDS
    consumer.commit(asynchronous=False)
    consumer.close()


def _value(result: list[dict]) -> float:  # type: ignore[type-arg]
    return float(result[0]["value"][1]) if result else 0.0


def test_prometheus_sees_lag_and_rebalances(
    broker: BrokerProcess, prometheus: PrometheusProcess
) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"r%d" % i)
    assert producer.flush(15) == 0
    lagging = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lagging"})
    lagging.commit(offsets=[TopicPartition(TOPIC, 0, LAGGING_AT)], asynchronous=False)
    lagging.close()
    prometheus.wait_for('rafka_group_lag_records{group="lagging"}')
    joins = 'sum(rafka_group_rebalances_total{group="caught", cause="member_joined"})'
    before = _value(prometheus.query(joins))

    _consume_all(broker.bootstrap, "caught")  # a member joins, consumes all, commits

    prometheus.wait_for(joins, lambda r: _value(r) > before)
    lag = prometheus.wait_for(f'rafka_group_lag_records{{topic="{TOPIC}"}}', lambda r: len(r) == 2)
    assert {s["metric"]["group"]: float(s["value"][1]) for s in lag} == {
        "lagging": RECORDS - LAGGING_AT,
        "caught": 0.0,
    }
    seconds = {
        s["metric"]["group"]: float(s["value"][1])
        for s in prometheus.query(f'rafka_group_lag_seconds{{topic="{TOPIC}"}}')
    }
    assert seconds["lagging"] > 0
    assert seconds["caught"] == 0


def _by(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {s["metric"].get(label, ""): float(s["value"][1]) for s in result}


def test_prometheus_sees_the_series_of_issue_51(
    broker: BrokerProcess, prometheus: PrometheusProcess
) -> None:
    """(after the lag test: the records are produced and consumed by "caught")"""
    log_end = prometheus.wait_for(f'rafka_partition_log_end_offset{{topic="{TOPIC}"}}')
    assert [(s["metric"].get("group"), float(s["value"][1])) for s in log_end] == [
        (None, RECORDS)
    ]  # one series for the partition, read by two groups
    burrow = prometheus.wait_for(
        'rafka_group_burrow_status{group=~"lagging|caught"}', lambda r: len(r) == 2
    )
    assert all("status" not in s["metric"] for s in burrow)
    assert set(_by(burrow, "group")) == {"lagging", "caught"}
    assert _by(burrow, "group")["caught"] == 1  # ok; the lagging one's depends on time
    assert set(_by(burrow, "group").values()) <= {1, 2, 3}
    traffic = '{__name__=~"rafka_topic_.*_total", topic="' + TOPIC + '"}'
    counts = _by(prometheus.wait_for(traffic, lambda r: len(r) == 4), "__name__")
    assert counts["rafka_topic_produced_records_total"] == RECORDS
    assert counts["rafka_topic_fetched_records_total"] == RECORDS  # "caught" read them once
    # the batches are stored and sent as they came: one read of everything is its bytes
    assert counts["rafka_topic_fetched_bytes_total"] == counts["rafka_topic_produced_bytes_total"]
    assert counts["rafka_topic_produced_bytes_total"] > RECORDS
    assert _value(prometheus.wait_for("rafka_data_dir_free_bytes")) > 0
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"):
        prometheus.wait_for(name)
    series = prometheus.query('{__name__=~"rafka_.+"}')
    values = {
        (label, value)
        for s in series
        for label, value in s["metric"].items()
        if label not in USERS_LABELS
    }
    assert ("cause", "member_joined") in values and ("state", "empty") in values
    assert ("api", "offset_commit") in values
    assert [v for v in values if not SNAKE.fullmatch(v[1])] == []


def test_every_dashboard_panel_returns_data(prometheus: PrometheusProcess) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"org", "group"} <= set(variables)
    for variable in variables.values():  # each one's choices come back
        query = variable["query"]["query"]
        parsed = re.fullmatch(r"label_values\((.*), (\w+)\)", query)
        assert parsed is not None, query
        metric, label = parsed.groups()
        found = prometheus.wait_for(_substituted(metric, variables))
        assert {s["metric"][label] for s in found}
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 4
    assert sum('org=~"$org"' in e for e in exprs) >= 8  # the panels follow the variables
    for expr in exprs:
        prometheus.wait_for(_substituted(expr, variables), timeout=30)


def _substituted(expr: str, variables: dict[str, Any]) -> str:
    """`expr` as Grafana sends it with every variable at "All" (its allValue), and
    $__rate_interval at least four scrape intervals (Prometheus scrapes every 1 s here)."""
    for name, variable in variables.items():
        expr = expr.replace(f"${name}", variable["allValue"])
    return expr.replace("$__rate_interval", "1m")

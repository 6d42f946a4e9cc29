"""A real Prometheus (Debian's) scrapes a live broker with a lagging and a caught-up group,
and answers for them: exact lag in records, lag in seconds (above 0 / exactly 0), a
rebalance counter that rose after a member joined; then every panel query of the Grafana
dashboard (examples/grafana/rafka-actors.json) returns data."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

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
    joins = 'sum(rafka_group_rebalances_total{group="caught", cause="member joined"})'
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


def test_every_dashboard_panel_returns_data(prometheus: PrometheusProcess) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 4
    for expr in exprs:
        # Grafana's $__rate_interval: at least four scrape intervals; Prometheus has 1s ones
        promql = expr.replace("$__rate_interval", "1m")
        prometheus.wait_for(promql, timeout=30)

"""Under tenancy the metrics say whose they are: a SASL user of org 7 connects and produces,
a wrong password fails; the endpoint shows org 7's connection, requests and produced records,
and counts the failed login."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import confluent_kafka
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ..broker_process import BrokerProcess
from .sasl_setup import Login, UserSpec, broker_settings, confluent_config, write_users

pytestmark = pytest.mark.e2e

DORA = UserSpec("dora", 7, "dora-secret")


def _samples(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def test_series_carry_the_org_and_failed_logins_are_counted(broker_factory, tmp_path: Path):  # type: ignore[no-untyped-def]
    users = write_users(tmp_path / "users.json", [DORA])
    broker: BrokerProcess = broker_factory(
        *broker_settings("SASL_PLAINTEXT", users), "metrics.listen=127.0.0.1:0"
    )
    url = next(m for m in map(re.compile(r"metrics on (\S+)").search, broker.lines) if m)[1]
    producer = confluent_kafka.Producer(
        confluent_config(broker.bootstrap, Login(DORA.name, DORA.password))
    )
    producer.produce("dora-topic", b"one")
    assert producer.flush(20) == 0
    intruder = confluent_kafka.Producer(
        confluent_config(broker.bootstrap, Login(DORA.name, "wrong"), **{"retries": 0})
    )
    intruder.produce("dora-topic", b"never")
    deadline = time.monotonic() + 20
    failures = 0.0
    while failures < 1 and time.monotonic() < deadline:
        intruder.poll(0.2)
        failures = sum(v for n, _, v in _samples(url) if n == "rafka_authentication_failures_total")
    assert failures >= 1
    samples = _samples(url)
    connections = {labels["org"]: v for n, labels, v in samples if n == "rafka_connections"}
    assert connections.get("7", 0) >= 1
    produced = [
        labels
        for n, labels, v in samples
        if n == "rafka_request_duration_seconds_count" and labels["api"] == "produce" and v
    ]
    assert produced and {labels["org"] for labels in produced} == {"7"}
    records = {
        (labels["org"], labels["topic"]): v
        for n, labels, v in samples
        if n == "rafka_topic_produced_records_total"
    }
    assert records == {("7", "dora-topic"): 1}  # the topic's counters are its org's
    producer.flush(1)

"""Fixtures of the tests that run Kafka's own tools and Java clients (peer.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ...broker_process import BrokerProcess
from .peer import KafkaPeer, NoPeer, find_peer

# Short group timers, so that Java consumers join at once and leave quickly.
BROKER_SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=100",
    "group.share.heartbeat.interval.ms=500",
    "group.share.min.heartbeat.interval.ms=100",
)


@pytest.fixture(scope="session")
def kafka_peer(tmp_path_factory: pytest.TempPathFactory) -> KafkaPeer:
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # all workers'
    try:
        return find_peer(shared)
    except NoPeer as reason:
        pytest.skip(str(reason))


@pytest.fixture(scope="module")
def rafka(
    kafka_peer: KafkaPeer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """Our broker, one for the module (after the peer is found: no broker for a skip)."""
    del kafka_peer
    process = BrokerProcess(tmp_path_factory.mktemp("rafka"), *BROKER_SETTINGS).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        process = item.funcargs.get("rafka")
        if isinstance(process, BrokerProcess):
            report.sections.append(("broker log", process.log_text()))

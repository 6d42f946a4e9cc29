"""The brokers of the differential check (one pair for the session), and its report: every
difference seen, judged against docs/kafka-differences.md, printed at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from ..e2e.kafka_tools.peer import NoPeer, find_peer
from .brokers import kafka, ours, tool_runner
from .differ import Verdict, table_row
from .probe import Broker

VERDICTS: list[Verdict] = []


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, Broker]]:
    try:
        peer = find_peer(tmp_path_factory.getbasetemp())
    except NoPeer as reason:
        pytest.skip(str(reason))
    if not (peer.home / "start-kafka").exists():
        pytest.skip(f"the Kafka peer in {peer.home} has no start-kafka")
    tool = tool_runner(peer)
    with ExitStack() as stack:
        host, port = stack.enter_context(kafka(peer, tmp_path_factory.mktemp("kafka")))
        process = stack.enter_context(ours(tmp_path_factory.mktemp("ours")))
        yield (
            Broker("kafka", host, port, tool),
            Broker("ours", process.host, process.port, tool),
        )


@pytest.fixture
def verdicts() -> list[Verdict]:
    return VERDICTS


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    if not VERDICTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("differences from Kafka 4.3.1")
    for verdict in VERDICTS:
        for difference in verdict.seen:
            tag = "NEW  " if difference in verdict.new else "known"
            write(f"{tag} {difference.scenario}: {difference.path}")
            write(f"        kafka {difference.kafka}")
            write(f"        ours  {difference.ours}")
        for known in verdict.gone:
            write(f"GONE  {known.difference.scenario}: {known.difference.path} (listed as kept)")
        for known in verdict.back:
            write(f"BACK  {known.difference.scenario}: {known.difference.path} (listed as fixed)")
    new = [d for v in VERDICTS for d in v.new]
    seen = sum(len(v.seen) for v in VERDICTS)
    write(f"{seen} differences seen, {len(new)} of them new")
    if new:
        write("rows for docs/kafka-differences.md (give each its reason):")
        for difference in new:
            write(table_row(difference))

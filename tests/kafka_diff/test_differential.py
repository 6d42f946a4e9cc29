"""The differential check (issue 54 §3): each scenario against Apache Kafka 4.3.1 and against
us; what differs must be what docs/kafka-differences.md lists (`just test-kafka`)."""

from __future__ import annotations

import pytest

from . import scenarios  # noqa: F401 (registers them)
from .differ import Verdict, differences, judge, known_differences
from .probe import SCENARIOS, Broker, run

# (kafka_tools runs some fifty JVMs: seconds each on a loaded 2-core machine)
pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_differs_only_as_listed(
    name: str, brokers: tuple[Broker, Broker], verdicts: list[Verdict]
) -> None:
    kafka, ours = brokers
    seen = differences(name, run(SCENARIOS[name], kafka), run(SCENARIOS[name], ours))
    verdict = judge(name, seen, known_differences())
    verdicts.append(verdict)
    assert verdict.matches, verdict.explain()

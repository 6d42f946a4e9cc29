"""Kafka's dynamic group configs (issue 45 §2): checks, and the config a group runs with."""

from __future__ import annotations

import pytest

from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.group_configs import (
    GroupConfigBounds,
    InvalidGroupConfig,
    effective,
    validate,
)

BASE = GroupConfig(consumer_session_timeout_ms=45000, consumer_heartbeat_interval_ms=5000)
BOUNDS = GroupConfigBounds()


def test_valid_overrides_are_normalised_and_applied() -> None:
    stored = validate({"consumer.session.timeout.ms": " 50000"}, BASE, BOUNDS)
    assert stored == {"consumer.session.timeout.ms": "50000"}
    config = effective(BASE, stored.items())
    assert config.consumer_session_timeout_ms == 50000
    assert config.consumer_heartbeat_interval_ms == 5000
    assert effective(BASE, ()) is BASE


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"consumer.session.timeout.ms": "44999"}, "greater than or equal to"),
        ({"consumer.session.timeout.ms": "60001"}, "less than or equal to"),
        ({"consumer.heartbeat.interval.ms": "4999"}, "greater than or equal to"),
        ({"consumer.heartbeat.interval.ms": "x"}, "Not a number of type INT"),
        ({"consumer.heartbeat.interval.ms": "0"}, "Value must be at least 1"),
        ({"session.timeout.ms": "10000"}, "Unknown group config name: session.timeout.ms"),
    ],
)
def test_kafkas_refusals(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidGroupConfig, match=message):
        validate(overrides, BASE, BOUNDS)


def test_session_must_exceed_the_heartbeat_interval() -> None:
    wide = GroupConfigBounds(1000, 60000, 100, 15000)
    with pytest.raises(InvalidGroupConfig, match=r"must be greater than consumer\.heartbeat"):
        validate(
            {"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "3000"},
            BASE,
            wide,
        )

"""Kafka's dynamic group configs (issue 45 §2, issue 54 §1): checks, and the config a group
runs with. The messages are Kafka 4.3.1's, as kafka-configs prints them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rafka_actors.config import FIELDS, BrokerConfig, field_name
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.group_configs import (
    DEFINITIONS,
    GROUP_CONFIG_NAMES,
    BrokerLookup,
    InvalidGroupConfig,
    broker_default,
    effective,
    validate,
)

BASE = GroupConfig(consumer_session_timeout_ms=45000, consumer_heartbeat_interval_ms=5000)


def broker(**settings: Any) -> BrokerLookup:
    config = BrokerConfig(**settings)

    def lookup(key: str) -> int | str | None:
        name = field_name(key)
        return getattr(config, name) if name in FIELDS else None

    return lookup


KAFKA = broker()


def test_valid_overrides_are_normalised_and_applied() -> None:
    stored = validate({"consumer.session.timeout.ms": " 50000"}, KAFKA)
    assert stored == {"consumer.session.timeout.ms": "50000"}
    config = effective(BASE, stored.items())
    assert config.consumer_session_timeout_ms == 50000
    assert config.consumer_heartbeat_interval_ms == 5000
    assert effective(BASE, ()) is BASE


def test_every_share_config_reaches_its_field() -> None:
    overrides = {
        "share.auto.offset.reset": "earliest",
        "share.isolation.level": "read_committed",
        "share.record.lock.duration.ms": "15000",
        "share.delivery.count.limit": "2",
        "share.session.timeout.ms": "60000",
        "share.heartbeat.interval.ms": "15000",
        "share.partition.max.record.locks": "100",
        "consumer.assignment.interval.ms": "0",
    }
    config = effective(GroupConfig(), validate(overrides, KAFKA).items())
    assert config == dataclasses.replace(
        GroupConfig(),
        share_auto_offset_reset="earliest",
        share_isolation_level="read_committed",
        share_record_lock_duration_ms=15000,
        share_delivery_count_limit=2,
        share_session_timeout_ms=60000,
        share_heartbeat_interval_ms=15000,
        share_partition_max_record_locks=100,
        consumer_assignment_interval_ms=0,
    )


def test_kafkas_names_defaults_and_synonyms() -> None:
    """What `kafka-configs --describe --entity-type groups --all` lists for a group of a
    broker on its defaults (Kafka 4.3.1 also lists share.renew.acknowledge.enable,
    share.assignment.interval.ms and the streams.* configs: not served here)."""
    assert {
        n: (DEFINITIONS[n].synonym, broker_default(DEFINITIONS[n], KAFKA))
        for n in GROUP_CONFIG_NAMES
    } == {
        "consumer.assignment.interval.ms": ("group.consumer.assignment.interval.ms", "1000"),
        "consumer.heartbeat.interval.ms": ("group.consumer.heartbeat.interval.ms", "5000"),
        "consumer.session.timeout.ms": ("group.consumer.session.timeout.ms", "45000"),
        "share.auto.offset.reset": ("share.auto.offset.reset", "latest"),
        "share.delivery.count.limit": ("group.share.delivery.count.limit", "5"),
        "share.heartbeat.interval.ms": ("group.share.heartbeat.interval.ms", "5000"),
        "share.isolation.level": ("share.isolation.level", "read_uncommitted"),
        "share.partition.max.record.locks": ("group.share.partition.max.record.locks", "2000"),
        "share.record.lock.duration.ms": ("group.share.record.lock.duration.ms", "30000"),
        "share.session.timeout.ms": ("group.share.session.timeout.ms", "45000"),
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"consumer.session.timeout.ms": "44999"}, "greater than or equal to"),
        ({"consumer.session.timeout.ms": "60001"}, "less than or equal to"),
        ({"consumer.heartbeat.interval.ms": "4999"}, "greater than or equal to"),
        ({"consumer.heartbeat.interval.ms": "x"}, "Not a number of type INT"),
        ({"consumer.heartbeat.interval.ms": "0"}, "Value must be at least 1"),
        ({"session.timeout.ms": "10000"}, "Unknown group config name: session.timeout.ms"),
        (
            {"share.delivery.count.limit": "1"},
            "Invalid value 1 for configuration share.delivery.count.limit: "
            "Value must be at least 2",
        ),
        (
            {"share.delivery.count.limit": "11"},
            "share.delivery.count.limit must be less than or equal to "
            "group.share.max.delivery.count.limit",
        ),
        (
            {"share.record.lock.duration.ms": "100"},
            "Invalid value 100 for configuration share.record.lock.duration.ms: "
            "Value must be at least 1000",
        ),
        (
            {"share.record.lock.duration.ms": "70000"},
            "share.record.lock.duration.ms must be less than or equal to "
            "group.share.max.record.lock.duration.ms",
        ),
        (
            {"share.record.lock.duration.ms": "2000"},
            "share.record.lock.duration.ms must be greater than or equal to "
            "group.share.min.record.lock.duration.ms",
        ),
        (
            {"share.session.timeout.ms": "1000"},
            "share.session.timeout.ms must be greater than or equal to "
            "group.share.min.session.timeout.ms",
        ),
        (
            {"share.heartbeat.interval.ms": "20000"},
            "share.heartbeat.interval.ms must be less than or equal to "
            "group.share.max.heartbeat.interval.ms",
        ),
        (
            {"share.partition.max.record.locks": "20000"},
            "share.partition.max.record.locks must be less than or equal to "
            "group.share.max.partition.max.record.locks",
        ),
        (
            {"share.isolation.level": "READ_COMMITTED"},
            "Invalid value READ_COMMITTED for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ),
        (
            {"share.auto.offset.reset": "EARLIEST"},
            "Invalid value EARLIEST for configuration share.auto.offset.reset: ",
        ),
        ({"share.auto.offset.reset": "by_duration:PT1H"}, "by_duration is not supported"),
        ({"share.session.timeout.ms": "99999999999"}, "Not a number of type INT"),
        (
            {"share.session.timeout.ms": "1", "nope": "1"},
            "Unknown group config name: nope",  # names before values, as Kafka
        ),
    ],
)
def test_kafkas_refusals(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidGroupConfig) as refused:
        validate(overrides, KAFKA)
    assert message in str(refused.value)


def test_session_must_exceed_the_heartbeat_interval() -> None:
    wide = broker(
        group_consumer_min_session_timeout_ms=1000, group_consumer_min_heartbeat_interval_ms=100
    )
    with pytest.raises(InvalidGroupConfig, match=r"must be greater than consumer\.heartbeat"):
        validate(
            {"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "3000"},
            wide,
        )
    # against the broker's heartbeat interval when the group sets only its session
    short = broker(group_share_min_session_timeout_ms=1000, group_share_heartbeat_interval_ms=4000)
    with pytest.raises(InvalidGroupConfig, match=r"must be greater than share\.heartbeat"):
        validate({"share.session.timeout.ms": "4000"}, short)


def test_bounds_are_the_brokers() -> None:
    loose = broker(group_share_min_record_lock_duration_ms=1000)
    assert validate({"share.record.lock.duration.ms": "1000"}, loose) == {
        "share.record.lock.duration.ms": "1000"
    }

"""Kafka's dynamic group configs (GroupConfig): names, checks, and the config they make.

A group config overrides, for one group, a broker setting of the same meaning (its synonym):
`consumer.session.timeout.ms` (group.consumer.session.timeout.ms) and
`consumer.heartbeat.interval.ms` (group.consumer.heartbeat.interval.ms). Kafka checks each
against the broker's min/max bounds and requires the session to be longer than the heartbeat
interval; refusals are INVALID_CONFIG with Kafka's messages. Kafka has no per-group configs for
classic groups. The share.* and streams.* group configs belong to group types served elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .effects import GroupConfig

SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
BROKER_SYNONYMS = {
    SESSION: "group.consumer.session.timeout.ms",
    HEARTBEAT: "group.consumer.heartbeat.interval.ms",
}
GROUP_CONFIG_NAMES = (HEARTBEAT, SESSION)  # Kafka lists them sorted
DOCS = {  # Kafka's
    SESSION: "The timeout to detect client failures when using the consumer group protocol.",
    HEARTBEAT: "The heartbeat interval given to the members of a consumer group.",
}
_FIELDS = {SESSION: "consumer_session_timeout_ms", HEARTBEAT: "consumer_heartbeat_interval_ms"}


class InvalidGroupConfig(ValueError):
    """INVALID_CONFIG, with Kafka's message."""


@dataclass(frozen=True, slots=True)
class GroupConfigBounds:
    """The broker's bounds of the group configs (group.consumer.min/max.*)."""

    min_session_timeout_ms: int = 45000
    max_session_timeout_ms: int = 60000
    min_heartbeat_interval_ms: int = 5000
    max_heartbeat_interval_ms: int = 15000


def broker_value(config: GroupConfig, name: str) -> int:
    """The broker-wide value a group gets when it has no override of `name`."""
    value: int = getattr(config, _FIELDS[name])
    return value


def validate(
    overrides: Mapping[str, str], base: GroupConfig, bounds: GroupConfigBounds
) -> dict[str, str]:
    """The overrides as stored (numbers normalised), or InvalidGroupConfig."""
    values: dict[str, int] = {}
    for name, raw in overrides.items():
        if name not in _FIELDS:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
        try:
            values[name] = int(raw.strip())
        except (AttributeError, ValueError):
            raise InvalidGroupConfig(
                f"Invalid value {raw} for configuration {name}: Not a number of type INT"
            ) from None
        if values[name] < 1:
            raise InvalidGroupConfig(
                f"Invalid value {values[name]} for configuration {name}: Value must be at least 1"
            )
    heartbeat = values.get(HEARTBEAT, base.consumer_heartbeat_interval_ms)
    session = values.get(SESSION, base.consumer_session_timeout_ms)
    if heartbeat < bounds.min_heartbeat_interval_ms:
        raise InvalidGroupConfig(
            f"{HEARTBEAT} must be greater than or equal to group.consumer.min.heartbeat.interval.ms"
        )
    if heartbeat > bounds.max_heartbeat_interval_ms:
        raise InvalidGroupConfig(
            f"{HEARTBEAT} must be less than or equal to group.consumer.max.heartbeat.interval.ms"
        )
    if session < bounds.min_session_timeout_ms:
        raise InvalidGroupConfig(
            f"{SESSION} must be greater than or equal to group.consumer.min.session.timeout.ms"
        )
    if session > bounds.max_session_timeout_ms:
        raise InvalidGroupConfig(
            f"{SESSION} must be less than or equal to group.consumer.max.session.timeout.ms"
        )
    if session <= heartbeat:
        raise InvalidGroupConfig(f"{SESSION} must be greater than {HEARTBEAT}")
    return {name: str(value) for name, value in values.items()}


def effective(base: GroupConfig, overrides: Iterable[tuple[str, str]]) -> GroupConfig:
    """The config of a group with these (validated) overrides of the broker's."""
    values = {name: int(value) for name, value in overrides if name in _FIELDS}
    if not values:
        return base
    return dataclasses.replace(
        base,
        consumer_session_timeout_ms=values.get(SESSION, base.consumer_session_timeout_ms),
        consumer_heartbeat_interval_ms=values.get(HEARTBEAT, base.consumer_heartbeat_interval_ms),
    )

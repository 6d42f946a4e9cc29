"""The topic configs this broker honours, their types, limits and broker-wide defaults.

Kafka's names and rules (LogConfig): each topic config has a broker setting that supplies its
default (its synonym in DescribeConfigs), and a value set on the topic overrides it. A value is
checked as Kafka checks it, and refused with its message (INVALID_CONFIG). Configs a topic was
created with that we do not know are kept verbatim (and shown) but cannot be altered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# DescribeConfigs' config types and sources (Kafka's ConfigType and ConfigSource ids)
TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST = 2, 3, 5, 7
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 1, 4, 5, 8


class InvalidConfig(ValueError):
    """A config name or value Kafka would refuse (INVALID_CONFIG), with Kafka's message."""


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    kind: int  # a TYPE_* above
    broker_key: str  # the broker setting that gives the default (config.py's kafka key)
    minimum: int | None = None
    doc: str = ""


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy",
            TYPE_LIST,
            "log.cleanup.policy",
            doc="delete: old segments are deleted by retention (compact is not served here)",
        ),
        TopicConfigDef(
            "max.message.bytes", TYPE_INT, "message.max.bytes", 0, "the largest record batch"
        ),
        TopicConfigDef(
            "retention.bytes",
            TYPE_LONG,
            "log.retention.bytes",
            None,
            "bytes a partition keeps before its oldest segments are deleted (-1: no limit)",
        ),
        TopicConfigDef(
            "retention.ms",
            TYPE_LONG,
            "log.retention.ms",
            -1,
            "how long a segment is kept after its newest record (-1: forever)",
        ),
        TopicConfigDef(
            "segment.bytes", TYPE_INT, "log.segment.bytes", 14, "the size of a segment file"
        ),
    )
}
_TYPE_NAMES = {TYPE_INT: "INT", TYPE_LONG: "LONG"}
_LIMITS = {TYPE_INT: 2**31 - 1, TYPE_LONG: 2**63 - 1}


def validate_topic_config(name: str, value: str | None) -> str:
    """The value to store for `name`, or InvalidConfig with Kafka's message."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    if value is None:
        raise InvalidConfig(f"Null value not supported for topic configs: {name}")
    text = value.strip()
    if definition.kind == TYPE_LIST:
        policies = [p.strip() for p in text.split(",") if p.strip()]
        if "compact" in policies:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: compaction is not supported "
                "by this broker"
            )
        if policies != ["delete"]:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: String must be one of: "
                "compact, delete"
            )
        return "delete"
    return str(_number(definition, text))


def _number(definition: TopicConfigDef, text: str) -> int:
    kind = _TYPE_NAMES[definition.kind]
    try:
        number = int(text)
    except ValueError:
        raise InvalidConfig(
            f"Invalid value {text} for configuration {definition.name}: Not a number of type {kind}"
        ) from None
    if abs(number) > _LIMITS[definition.kind]:
        raise InvalidConfig(
            f"Invalid value {text} for configuration {definition.name}: Not a number of type {kind}"
        )
    if definition.minimum is not None and number < definition.minimum:
        raise InvalidConfig(
            f"Invalid value {number} for configuration {definition.name}: Value must be at "
            f"least {definition.minimum}"
        )
    return number


def effective_long(configs: Mapping[str, str], name: str, default: int) -> int:
    """The topic's value of a numeric config, or `default` (the broker's) if unset or bad."""
    raw = configs.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        return default

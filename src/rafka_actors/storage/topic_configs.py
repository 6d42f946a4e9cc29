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
TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 2, 3, 5, 6, 7
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
    maximum: float | None = None


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy",
            TYPE_LIST,
            "log.cleanup.policy",
            doc="delete: old segments are deleted by retention; compact: the log cleaner keeps "
            "the latest record of each key (both may be given; none: keep everything)",
        ),
        TopicConfigDef(
            "delete.retention.ms",
            TYPE_LONG,
            "log.cleaner.delete.retention.ms",
            0,
            "how long the cleaner keeps a tombstone (and an empty transaction's marker) after "
            "it first cleaned it",
        ),
        TopicConfigDef(
            "max.compaction.lag.ms",
            TYPE_LONG,
            "log.cleaner.max.compaction.lag.ms",
            1,
            "a record stays uncleaned at most this long in a sealed segment, whatever the "
            "dirty ratio",
        ),
        TopicConfigDef(
            "min.cleanable.dirty.ratio",
            TYPE_DOUBLE,
            "log.cleaner.min.cleanable.ratio",
            0,
            "the share of a compacted log's bytes not yet cleaned above which it is cleaned",
            1,
        ),
        TopicConfigDef(
            "min.compaction.lag.ms",
            TYPE_LONG,
            "log.cleaner.min.compaction.lag.ms",
            0,
            "a record stays uncleaned at least this long",
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
_TYPE_NAMES = {TYPE_INT: "INT", TYPE_LONG: "LONG", TYPE_DOUBLE: "DOUBLE"}
CLEANUP_POLICIES = ("compact", "delete")
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
        return _cleanup_policy(name, text)
    if definition.kind == TYPE_DOUBLE:
        return _ratio(definition, text)
    return str(_number(definition, text))


def _cleanup_policy(name: str, text: str) -> str:
    """Kafka's list of policies: each of compact and delete at most once, in the order
    given; an empty list keeps everything."""
    if not text:
        return ""
    policies = [p.strip() for p in text.split(",")]
    if "" in policies:
        raise InvalidConfig(f"Configuration '{name}' values must not be empty.")
    for policy in policies:
        if policy not in CLEANUP_POLICIES:
            raise InvalidConfig(
                f"Invalid value {policy} for configuration {name}: String must be one of: "
                + ", ".join(CLEANUP_POLICIES)
            )
    return ",".join(dict.fromkeys(policies))


def _ratio(definition: TopicConfigDef, text: str) -> str:
    try:
        number = float(text)
    except ValueError:
        raise InvalidConfig(
            f"Invalid value {text} for configuration {definition.name}: Not a number of type DOUBLE"
        ) from None
    if definition.minimum is not None and number < definition.minimum:
        raise InvalidConfig(
            f"Invalid value {text} for configuration {definition.name}: Value must be at "
            f"least {definition.minimum}"
        )
    if definition.maximum is not None and number > definition.maximum:
        raise InvalidConfig(
            f"Invalid value {text} for configuration {definition.name}: Value must be no "
            f"more than {definition.maximum:g}"
        )
    return text


def check_compaction_lags(configs: Mapping[str, str]) -> None:
    """Kafka's one rule across configs: min.compaction.lag.ms <= max.compaction.lag.ms
    (checked when the topic sets both; the broker's defaults are 0 and the largest long)."""
    low, high = configs.get("min.compaction.lag.ms"), configs.get("max.compaction.lag.ms")
    if low is not None and high is not None and int(low) > int(high):
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


def cleanup_policies(configs: Mapping[str, str], default: str) -> frozenset[str]:
    """The topic's cleanup policies (its own, or the broker's `log.cleanup.policy`)."""
    raw = configs.get("cleanup.policy", default)
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


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


def effective_float(configs: Mapping[str, str], name: str, default: float) -> float:
    """The topic's value of a DOUBLE config, or `default` (the broker's) if unset or bad."""
    try:
        return float(configs[name])
    except (KeyError, ValueError):
        return default


def effective_long(configs: Mapping[str, str], name: str, default: int) -> int:
    """The topic's value of a numeric config, or `default` (the broker's) if unset or bad."""
    raw = configs.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        return default

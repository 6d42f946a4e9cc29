"""Kafka's dynamic group configs (GroupConfig): names, checks, and the config they make.

A group config overrides, for one group, a broker setting of the same meaning (its synonym):
`consumer.session.timeout.ms` overrides `group.consumer.session.timeout.ms`,
`share.record.lock.duration.ms` overrides `group.share.record.lock.duration.ms`, and so on.
Kafka has no broker setting for `share.auto.offset.reset` and `share.isolation.level`; their
synonym is their own name, with Kafka's default (here `share.auto.offset.reset` is also a
broker setting, the default of every share group). Each value is parsed and checked as Kafka's
ConfigDef does (a type, a least value, a list of choices), then against the broker's bounds
(`group.share.min.record.lock.duration.ms` ...), and a session must be longer than its
heartbeat interval; every refusal is INVALID_CONFIG with Kafka's message. Kafka has no
per-group configs for classic groups; the streams.* configs belong to a group type not served
here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .effects import GroupConfig

INT, STRING = "INT", "STRING"  # Kafka's ConfigDef types of the group configs

# A broker setting's value by its Kafka key; None where this broker has no such setting.
BrokerLookup = Callable[[str], "int | str | None"]


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    field: str  # of GroupConfig
    synonym: str  # the broker setting it overrides (its own name where Kafka has none)
    doc: str  # Kafka's
    kind: str = INT
    default: int | str = 0  # Kafka's, for a synonym this broker has no setting for
    at_least: int | None = None  # ConfigDef's Range.atLeast
    choices: tuple[str, ...] = ()  # ConfigDef's ValidString
    bounds: tuple[str, str] | None = None  # the broker's (min, max) settings


def _share(name: str, least: int | None, doc: str, *, bounded: bool = True) -> GroupConfigDef:
    """A share.* config whose synonym is group.share.*, bounded by group.share.min/max.*."""
    rest = name.removeprefix("share.")
    return GroupConfigDef(
        name,
        "share_" + rest.replace(".", "_"),
        "group." + name,
        doc,
        at_least=least,
        bounds=(f"group.share.min.{rest}", f"group.share.max.{rest}") if bounded else None,
    )


def _consumer(name: str, least: int, doc: str) -> GroupConfigDef:
    rest = name.removeprefix("consumer.")
    return GroupConfigDef(
        name,
        "consumer_" + rest.replace(".", "_"),
        "group." + name,
        doc,
        at_least=least,
        bounds=(f"group.consumer.min.{rest}", f"group.consumer.max.{rest}"),
    )


AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
AUTO_OFFSET_RESET_CHOICES = ("earliest", "latest")

DEFINITIONS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        _consumer(
            "consumer.assignment.interval.ms",
            0,
            "The amount of time in milliseconds between two target assignment computations "
            "in a consumer group.",
        ),
        _consumer(
            "consumer.heartbeat.interval.ms",
            1,
            "The heartbeat interval given to the members of a consumer group.",
        ),
        _consumer(
            "consumer.session.timeout.ms",
            1,
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigDef(
            AUTO_OFFSET_RESET,
            "share_auto_offset_reset",
            AUTO_OFFSET_RESET,
            "The strategy to initialize the share-partition start offset.",
            kind=STRING,
            default="latest",
            choices=AUTO_OFFSET_RESET_CHOICES,
        ),
        _share(
            "share.delivery.count.limit",
            2,
            "The maximum number of delivery attempts for a record delivered to a share group.",
        ),
        _share(
            "share.heartbeat.interval.ms",
            1,
            "The heartbeat interval given to the members of a share group.",
        ),
        GroupConfigDef(
            ISOLATION_LEVEL,
            "share_isolation_level",
            ISOLATION_LEVEL,
            "Controls how to read records written transactionally. If set to "
            '"read_committed", the share group will only deliver transactional records which '
            'have been committed. If set to "read_uncommitted", the share group will return '
            "all messages, even transactional messages which have been aborted. "
            "Non-transactional records will be returned unconditionally in either mode.",
            kind=STRING,
            default=READ_UNCOMMITTED,
            choices=(READ_COMMITTED, READ_UNCOMMITTED),
        ),
        _share(
            "share.partition.max.record.locks",
            100,
            "Share-group record lock limit per share-partition.",
        ),
        _share(
            "share.record.lock.duration.ms",
            1000,
            "The record acquisition lock duration in milliseconds for share groups.",
        ),
        _share(
            "share.session.timeout.ms",
            1,
            "The timeout to detect client failures when using the share group protocol.",
        ),
    )
}
GROUP_CONFIG_NAMES = tuple(sorted(DEFINITIONS))  # Kafka lists them sorted
DOCS = {name: d.doc for name, d in DEFINITIONS.items()}
# (session, heartbeat interval): the session must be the longer
_SESSIONS = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)


class InvalidGroupConfig(ValueError):
    """INVALID_CONFIG, with Kafka's message."""


def broker_default(definition: GroupConfigDef, broker: BrokerLookup) -> str:
    """The value a group gets when it has no override: its synonym's, as Kafka prints it."""
    value = broker(definition.synonym)
    return str(definition.default if value is None else value)


def validate(overrides: Mapping[str, str], broker: BrokerLookup) -> dict[str, str]:
    """The overrides as stored (numbers normalised), or InvalidGroupConfig."""
    for name in overrides:  # Kafka names every unknown one before it parses any value
        if name not in DEFINITIONS:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
    values = {name: _parsed(DEFINITIONS[name], raw) for name, raw in overrides.items()}
    for name, value in values.items():
        bounds = DEFINITIONS[name].bounds
        if bounds is not None:
            _check_bounds(name, int(value), bounds, broker)
    for session, heartbeat in _SESSIONS:
        if session in values or heartbeat in values:
            long = int(values.get(session, broker_default(DEFINITIONS[session], broker)))
            short = int(values.get(heartbeat, broker_default(DEFINITIONS[heartbeat], broker)))
            if long <= short:
                raise InvalidGroupConfig(f"{session} must be greater than {heartbeat}")
    return {name: str(value) for name, value in values.items()}


def _parsed(definition: GroupConfigDef, raw: str | None) -> int | str:
    name = definition.name
    if definition.kind == STRING:
        value = "" if raw is None else raw.strip()
        if value not in definition.choices:
            raise InvalidGroupConfig(_invalid_choice(definition, value))
        return value
    try:
        number = int((raw or "").strip())
    except ValueError:
        raise InvalidGroupConfig(
            f"Invalid value {raw} for configuration {name}: Not a number of type INT"
        ) from None
    if not -(2**31) <= number < 2**31:
        raise InvalidGroupConfig(
            f"Invalid value {raw} for configuration {name}: Not a number of type INT"
        )
    if definition.at_least is not None and number < definition.at_least:
        raise InvalidGroupConfig(
            f"Invalid value {number} for configuration {name}: "
            f"Value must be at least {definition.at_least}"
        )
    return number


def _invalid_choice(definition: GroupConfigDef, value: str) -> str:
    name = definition.name
    prefix = f"Invalid value {value} for configuration {name}: "
    if name == AUTO_OFFSET_RESET:
        if value.startswith("by_duration:"):  # Kafka's third strategy, not served here
            return prefix + "by_duration is not supported by this broker; use earliest or latest"
        return (
            prefix + f"Invalid value `{value}` for configuration {name}. The value must be "
            "either 'earliest' or 'latest'."
        )
    return prefix + "String must be one of: " + ", ".join(definition.choices)


def _check_bounds(name: str, value: int, bounds: tuple[str, str], broker: BrokerLookup) -> None:
    least, most = (broker(key) for key in bounds)
    if isinstance(least, int) and value < least:
        raise InvalidGroupConfig(f"{name} must be greater than or equal to {bounds[0]}")
    if isinstance(most, int) and value > most:
        raise InvalidGroupConfig(f"{name} must be less than or equal to {bounds[1]}")


def effective(base: GroupConfig, overrides: Iterable[tuple[str, str]]) -> GroupConfig:
    """The config of a group with these (validated) overrides of the broker's."""
    changes: dict[str, Any] = {}  # GroupConfig's fields: int or str, as DEFINITIONS says
    for name, value in overrides:
        definition = DEFINITIONS.get(name)
        if definition is not None:
            changes[definition.field] = value if definition.kind == STRING else int(value)
    return dataclasses.replace(base, **changes) if changes else base

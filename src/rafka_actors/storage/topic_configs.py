"""Kafka 4.3's topic configs: their types, checks, defaults, and which of them act here.

Kafka's names and rules (LogConfig): each topic config has a default, given by a broker setting
(its synonym in DescribeConfigs) where Kafka has one, and a value set on the topic overrides
it. CreateTopics, AlterConfigs and IncrementalAlterConfigs all check a topic's configs with
`validate_topic_configs`: an unknown name, or a value Kafka would refuse, is INVALID_CONFIG with
Kafka's message. Every name Kafka 4.3 accepts is accepted; those marked `acted_on=False` are
stored and shown but change nothing here (`why_not` says why; docs/kafka-differences.md lists
them, and DescribeConfigs' documentation field says so). Configs a topic was created with
before this check existed, and that no Kafka knows, are kept verbatim and shown read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .config_values import (
    LONG_MAX,
    TYPE_BOOLEAN,
    TYPE_DOUBLE,
    TYPE_INT,
    TYPE_LIST,
    TYPE_LONG,
    TYPE_STRING,
    Check,
    InvalidConfig,
    Rule,
    at_least,
    between,
    one_of,
    parse,
)

__all__ = [
    "CLEANUP_POLICIES",
    "COMPRESSION_TYPES",
    "TOPIC_CONFIGS",
    "InvalidConfig",
    "TopicConfigDef",
    "cleanup_policies",
    "effective_float",
    "effective_long",
    "topic_defaults",
    "validate_topic_config",
    "validate_topic_configs",
]

# DescribeConfigs' config sources (Kafka's ConfigSource ids)
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 1, 4, 5, 8

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # Kafka's order
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
_ONE_REPLICA = "there is one replica per partition here"
_NO_TIERED = "there is no tiered storage here"
_NO_INDEX_FILES = "the offset and time indexes are kept in memory, not in index files"


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    rule: Rule
    default: str  # Kafka's default, used where the broker has no setting named `broker_key`
    broker_key: str | None  # the broker setting that gives the default (its synonym)
    doc: str
    why_not: str = ""  # why the value changes nothing here ("" if it acts)
    internal: bool = False  # shown only when set (Kafka's internal configs)

    @property
    def kind(self) -> int:
        return self.rule.kind

    @property
    def acted_on(self) -> bool:
        return not self.why_not


def _gzip_level(value: object) -> str | None:
    ok = value == -1 or 1 <= value <= 9  # type: ignore[operator]
    return None if ok else "Value must be between 1 and 9 or equal to -1"


def _throttled_replicas(value: object) -> str | None:
    items = value if isinstance(value, list) else []
    if items == ["*"] or all(_is_replica(item) for item in items):
        return None
    return (
        "leader.replication.throttled.replicas must be the literal '*' or a list of replicas "
        "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def _is_replica(item: str) -> bool:
    partition, _, broker = item.partition(":")
    return partition.strip().isdigit() and broker.strip().isdigit()


def _cleanup_policy(name: str, text: str) -> str:
    """Kafka's list of policies: each of compact and delete at most once, in the order
    given; an empty list keeps everything."""
    if not text.strip():
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


def _def(
    name: str,
    kind: int,
    default: str,
    broker_key: str | None,
    doc: str,
    check: Check | None = None,
    why_not: str = "",
    per_item: bool = False,
) -> TopicConfigDef:
    return TopicConfigDef(name, Rule(kind, check, per_item), default, broker_key, doc, why_not)


_DEFS = (
    _def("cleanup.policy", TYPE_LIST, "delete", "log.cleanup.policy",
         "delete: old segments are deleted by retention; compact: the log cleaner keeps the "
         "latest record of each key (both may be given; none: keep everything)"),
    _def("compression.type", TYPE_STRING, "producer", "compression.type",
         "the codec batches are stored with; 'producer' keeps the producer's, any other is "
         "applied on append (a batch is recompressed only if its codec differs)",
         one_of(COMPRESSION_TYPES)),
    _def("compression.gzip.level", TYPE_INT, "-1", "compression.gzip.level",
         "the gzip level of batches the broker compresses", _gzip_level),
    _def("compression.lz4.level", TYPE_INT, "9", "compression.lz4.level",
         "the lz4 level of batches the broker compresses", between(1, 17)),
    _def("compression.zstd.level", TYPE_INT, "3", "compression.zstd.level",
         "the zstd level of batches the broker compresses", between(-131072, 22)),
    _def("delete.retention.ms", TYPE_LONG, "86400000", "log.cleaner.delete.retention.ms",
         "how long the cleaner keeps a tombstone (and an empty transaction's marker) after it "
         "first cleaned it", at_least(0)),
    _def("file.delete.delay.ms", TYPE_LONG, "60000", "log.segment.delete.delay.ms",
         "the wait before a deleted segment's file is removed", at_least(0),
         "a segment's file is removed at once"),
    _def("flush.messages", TYPE_LONG, str(LONG_MAX), "log.flush.interval.messages",
         "records appended between two fsyncs of the partition", at_least(1),
         "partitions are fsynced every log.flush.interval.ms, broker-wide"),
    _def("flush.ms", TYPE_LONG, str(LONG_MAX), "log.flush.interval.ms",
         "the longest time between two fsyncs of the partition", at_least(0),
         "partitions are fsynced every log.flush.interval.ms, broker-wide"),
    _def("follower.replication.throttled.replicas", TYPE_LIST, "", None,
         "replicas whose replication is throttled on the follower", _throttled_replicas,
         _ONE_REPLICA),
    _def("index.interval.bytes", TYPE_INT, "4096", "log.index.interval.bytes",
         "bytes between two offset index entries", at_least(0), _NO_INDEX_FILES),
    _def("leader.replication.throttled.replicas", TYPE_LIST, "", None,
         "replicas whose replication is throttled on the leader", _throttled_replicas,
         _ONE_REPLICA),
    _def("local.retention.bytes", TYPE_LONG, "-2", "log.local.retention.bytes",
         "bytes kept locally when segments are tiered", at_least(-2), _NO_TIERED),
    _def("local.retention.ms", TYPE_LONG, "-2", "log.local.retention.ms",
         "time segments are kept locally when tiered", at_least(-2), _NO_TIERED),
    _def("max.compaction.lag.ms", TYPE_LONG, str(LONG_MAX), "log.cleaner.max.compaction.lag.ms",
         "a record stays uncleaned at most this long in a sealed segment, whatever the dirty "
         "ratio", at_least(1)),
    _def("max.message.bytes", TYPE_INT, "1048588", "message.max.bytes",
         "the largest record batch (after compression)", at_least(0)),
    _def("message.timestamp.after.max.ms", TYPE_LONG, "3600000",
         "log.message.timestamp.after.max.ms",
         "how far ahead of the broker's clock a CreateTime timestamp may be (INVALID_TIMESTAMP "
         "beyond)", at_least(0)),
    _def("message.timestamp.before.max.ms", TYPE_LONG, str(LONG_MAX),
         "log.message.timestamp.before.max.ms",
         "how far behind the broker's clock a CreateTime timestamp may be (INVALID_TIMESTAMP "
         "beyond)", at_least(0)),
    _def("message.timestamp.type", TYPE_STRING, "CreateTime", "log.message.timestamp.type",
         "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the "
         "broker's clock on append", one_of(TIMESTAMP_TYPES)),
    _def("min.cleanable.dirty.ratio", TYPE_DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio",
         "the share of a compacted log's bytes not yet cleaned above which it is cleaned",
         between(0, 1)),
    _def("min.compaction.lag.ms", TYPE_LONG, "0", "log.cleaner.min.compaction.lag.ms",
         "a record stays uncleaned at least this long", at_least(0)),
    _def("min.insync.replicas", TYPE_INT, "1", "min.insync.replicas",
         "replicas that must have a batch before acks=all is answered", at_least(1),
         "Kafka caps it at the replication factor, and every partition here has one replica"),
    _def("preallocate", TYPE_BOOLEAN, "false", "log.preallocate",
         "preallocate a new segment's file", None, "segment files grow as they are written"),
    _def("remote.log.copy.disable", TYPE_BOOLEAN, "false", None,
         "stop copying segments to tiered storage", None, _NO_TIERED),
    _def("remote.log.delete.on.disable", TYPE_BOOLEAN, "false", None,
         "delete tiered data when tiered storage is disabled", None, _NO_TIERED),
    _def("remote.storage.enable", TYPE_BOOLEAN, "false", None,
         "tiered storage for the topic: refused when true, as by a Kafka broker without it"),
    _def("retention.bytes", TYPE_LONG, "-1", "log.retention.bytes",
         "bytes a partition keeps before its oldest segments are deleted (-1: no limit)"),
    _def("retention.ms", TYPE_LONG, "604800000", "log.retention.ms",
         "how long a segment is kept after its newest record (-1: forever)", at_least(-1)),
    _def("segment.bytes", TYPE_INT, "1073741824", "log.segment.bytes",
         "the size of a segment file", at_least(1024 * 1024)),
    _def("segment.index.bytes", TYPE_INT, "10485760", "log.index.size.max.bytes",
         "the size of a segment's offset index file", at_least(4), _NO_INDEX_FILES),
    _def("segment.jitter.ms", TYPE_LONG, "0", None,
         "random jitter subtracted from segment.ms", at_least(0),
         "segments roll by size only"),
    _def("segment.ms", TYPE_LONG, "604800000", None,
         "the age at which the active segment is rolled", at_least(1),
         "segments roll by size only"),
    _def("unclean.leader.election.enable", TYPE_BOOLEAN, "false",
         "unclean.leader.election.enable",
         "let an out-of-sync replica become leader", None, _ONE_REPLICA),
)  # fmt: skip

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}
TOPIC_CONFIGS[INTERNAL_SEGMENT_BYTES] = TopicConfigDef(
    INTERNAL_SEGMENT_BYTES,
    Rule(TYPE_INT),
    "",
    None,
    "the size of a segment file, overriding segment.bytes without its 1 MiB minimum (Kafka's "
    "internal config, for tests)",
    internal=True,
)


def validate_topic_config(name: str, value: str | None) -> str:
    """The value to store for `name`, or InvalidConfig with Kafka's message."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    if value is None:
        raise InvalidConfig(f"Null value not supported for topic configs: {name}")
    if name == "cleanup.policy":  # (its messages and de-duplication are its own)
        return _cleanup_policy(name, value)
    return parse(name, definition.rule, value)


def validate_topic_configs(
    configs: Mapping[str, str], defaults: Mapping[str, str]
) -> dict[str, str]:
    """A topic's configs as stored (each value checked and normalised), then checked
    together as Kafka checks them, over the topic's values and the broker's `defaults`
    (topic_defaults); InvalidConfig with Kafka's message."""
    checked = {name: validate_topic_config(name, value) for name, value in configs.items()}
    if checked.get("remote.storage.enable") == "true":
        raise InvalidConfig(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage."
        )
    lags = [
        effective_long({**defaults, **checked}, f"{kind}.compaction.lag.ms", 0)
        for kind in ("min", "max")
    ]
    if lags[0] > lags[1]:
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({lags[0]}) > "
            f"max.compaction.lag.ms ({lags[1]})"
        )
    return checked


def topic_defaults(broker_value: Callable[[str], str | None]) -> dict[str, str]:
    """Each topic config's broker-wide default: the broker's setting of its synonym where it
    has one (`broker_value(key)`, None if it has not), else Kafka's default."""
    defaults: dict[str, str] = {}
    for name, definition in TOPIC_CONFIGS.items():
        value = broker_value(definition.broker_key) if definition.broker_key else None
        if not definition.internal:
            defaults[name] = definition.default if value is None else value
    return defaults


KAFKA_DEFAULTS: Mapping[str, str] = topic_defaults(lambda _key: None)


def cleanup_policies(configs: Mapping[str, str], default: str) -> frozenset[str]:
    """The topic's cleanup policies (its own, or the broker's `log.cleanup.policy`)."""
    raw = configs.get("cleanup.policy", default)
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


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

"""Broker configuration, named with Apache Kafka's keys where Kafka has one.

Every setting is a field of `BrokerConfig`; its Kafka key is the field name with dots for
underscores (`num_partitions` <-> `num.partitions`). Values are layered, later wins:

1. the defaults below (Kafka's own defaults unless a comment says why not);
2. a config file in Java-properties form (`key=value`, `#` comments), as Kafka's server.properties;
3. environment variables `RAFKA_<KEY>` with dots as underscores, upper case
   (`RAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0`); one that names no setting but is close to
   one is refused with a "did you mean", as a misspelled key or flag is (`RAFKA_NUM_PARTITONS`);
   other `RAFKA_` variables (a test's or a tool's) are left alone;
4. command-line flags (`--listen`, `--data-dir`, `--override key=value`).

`RAFKA_KAFKA_CLIENT_HOST` / `RAFKA_KAFKA_CLIENT_PORT` set the advertised endpoint (the address
Metadata and FindCoordinator hand to clients), as in the design notes; they default to the
listen address.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .group_common.effects import ASSIGNOR_NAMES, MIGRATION_POLICIES
from .storage.coordinator_segments import DEFAULT_PREALLOCATE_BYTES, DEFAULT_SEGMENT_BYTES
from .storage.topic_configs import TOPIC_CONFIGS, InvalidConfig, validate_topic_config

log = logging.getLogger(__name__)

ENV_PREFIX = "RAFKA_"


class ConfigError(ValueError):
    """A setting that can't be parsed or is out of range."""


class ConfigFileMissing(ConfigError):
    """The --config file cannot be read (a missing file, not a bad setting)."""


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    listen: str = field(default="127.0.0.1:9092", metadata=_doc("HOST:PORT to listen on"))
    data_dir: Path = field(default=Path("rafka-data"), metadata=_doc("where all logs live"))
    kafka_client_host: str = field(default="", metadata=_doc("advertised host; default listen"))
    kafka_client_port: int = field(default=0, metadata=_doc("advertised port; default listen"))
    node_id: int = field(default=0, metadata=_doc("this broker's node id"))
    cluster_id: str = field(default="rafka-actors", metadata=_doc("cluster id in Metadata"))
    # Topics and partition logs.
    num_partitions: int = field(default=1, metadata=_doc("partitions of auto-created topics"))
    auto_create_topics_enable: bool = field(default=True, metadata=_doc("Metadata creates"))
    log_segment_bytes: int = field(default=1 << 30, metadata=_doc("partition segment size"))
    log_flush_interval_ms: int = field(
        # Kafka leaves flushing to the OS; an acknowledged record survives a process kill
        # either way, since it is in the page cache. We also fsync on a timer.
        default=1000,
        metadata=_doc("fsync partition logs at least this often (0 = every append)"),
    )
    message_max_bytes: int = field(default=1048588, metadata=_doc("largest record batch"))
    # Topics' defaults of the topic configs of the same meaning (storage/topic_configs.py).
    log_message_timestamp_type: str = field(
        default="CreateTime", metadata=_doc("CreateTime|LogAppendTime: message.timestamp.type")
    )
    log_message_timestamp_before_max_ms: int = field(
        default=2**63 - 1, metadata=_doc("message.timestamp.before.max.ms")
    )
    log_message_timestamp_after_max_ms: int = field(
        default=3_600_000, metadata=_doc("message.timestamp.after.max.ms")
    )
    compression_type: str = field(
        default="producer", metadata=_doc("topics' compression.type (producer: as produced)")
    )
    # Idempotent and transactional producers' state in the partition logs (issue 43 §3).
    producer_id_expiration_ms: int = field(
        default=86_400_000,
        metadata=_doc("forget a producer idle this long, without an open transaction"),
    )
    producer_id_expiration_check_interval_ms: int = field(
        default=600_000, metadata=_doc("how often idle producers are looked for")
    )
    # Network.
    socket_request_max_bytes: int = field(default=104857600, metadata=_doc("largest frame"))
    connections_max_idle_ms: int = field(default=600000, metadata=_doc("idle conn close"))
    queued_max_request_bytes: int = field(
        # Kafka's default is -1 (no bound); a Python broker reading a few 100 MiB frames at once
        # would stall and could run out of memory, so we bound it (-1 still means no bound)
        default=209715200,
        metadata=_doc("bytes of big frames (> 1 MiB) held at once, broker-wide"),
    )
    max_connections: int = field(default=2**31 - 1, metadata=_doc("open connections in all"))
    max_connections_per_ip: int = field(default=2**31 - 1, metadata=_doc("from one address"))
    max_connections_per_user: int = field(
        # not a Kafka setting (Kafka has per-IP limits and quotas); checked at authentication
        default=2**31 - 1,
        metadata=_doc("authenticated connections of one user"),
    )
    max_in_flight_requests_per_connection: int = field(
        # 1 is Kafka's behaviour: a connection is muted until its current request is answered
        default=1,
        metadata=_doc("requests read ahead of the reply being awaited, +1"),
    )
    # Authentication (SASL) and TLS.
    listener_security_protocol: str = field(
        default="PLAINTEXT", metadata=_doc("PLAINTEXT|SASL_PLAINTEXT|SASL_SSL")
    )
    sasl_enabled_mechanisms: str = field(
        default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", metadata=_doc("offered in SaslHandshake")
    )
    sasl_users_file: str = field(
        default="",
        metadata=_doc("users and orgs (rafka-actors users); default DATA/users.json"),
    )
    connection_failed_authentication_delay_ms: int = field(
        default=100, metadata=_doc("failed logins are answered this late (slows guessing)")
    )
    sasl_server_max_receive_size: int = field(
        default=524288, metadata=_doc("frame size before auth")
    )
    ssl_certificate_location: str = field(default="", metadata=_doc("PEM cert chain"))
    ssl_key_location: str = field(default="", metadata=_doc("PEM private key"))
    ssl_key_password: str = field(default="", metadata=_doc("if the key is encrypted"))
    # Consumer groups (classic protocol).
    group_initial_rebalance_delay_ms: int = field(default=3000, metadata=_doc("first join wait"))
    group_min_session_timeout_ms: int = field(default=6000, metadata=_doc("lowest session"))
    group_max_session_timeout_ms: int = field(default=1800000, metadata=_doc("highest session"))
    group_max_size: int = field(default=2**31 - 1, metadata=_doc("members per group"))
    offset_metadata_max_bytes: int = field(default=4096, metadata=_doc("commit metadata size"))
    group_passivation_idle_ms: int = field(
        # not a Kafka setting: an Empty group's actor is dropped (and rebuilt from the log on
        # its next request) after this long without one; 0 drops it at once
        default=10_000,
        metadata=_doc("an idle Empty group's actor stops after this long"),
    )
    group_actor_idle_grace_ms: int = field(
        # not a Kafka setting: an idle group's actor, asked again within this long of its group
        # coming to rest, waits this long for more requests before it stops; 0: never waits
        default=1000,
        metadata=_doc("an idle group's actor waits this long for mail before it stops"),
    )
    # KIP-848 consumer groups (group.protocol=consumer)
    group_consumer_session_timeout_ms: int = field(default=45000, metadata=_doc("member session"))
    group_consumer_heartbeat_interval_ms: int = field(
        default=5000, metadata=_doc("heartbeat cadence told to members")
    )
    group_consumer_rebalance_heartbeat_interval_ms: int = field(
        # not a Kafka setting: the cadence told to a member with a rebalance step ahead (see
        # consumer_group/cadence.py); set it to the heartbeat interval for Kafka's behaviour
        default=250,
        metadata=_doc("heartbeat cadence told to members while their group rebalances"),
    )
    group_consumer_assignors: str = field(
        default="uniform,range", metadata=_doc("server assignors; the first is the default")
    )
    group_consumer_assignment_interval_ms: int = field(
        default=1000, metadata=_doc("least time between target assignments")
    )
    group_consumer_max_size: int = field(default=2**31 - 1, metadata=_doc("members per group"))
    # Online migration between the classic and consumer protocols (coordinator/migration.py)
    group_consumer_migration_policy: str = field(
        default="bidirectional",
        metadata=_doc("disabled, upgrade, downgrade or bidirectional: groups with members"),
    )
    # KIP-932 share groups (share_group/, docs/share-groups.md), Kafka's names and defaults
    group_share_session_timeout_ms: int = field(default=45000, metadata=_doc("member session"))
    group_share_heartbeat_interval_ms: int = field(
        default=5000, metadata=_doc("heartbeat cadence told to share members")
    )
    group_share_max_size: int = field(default=200, metadata=_doc("members per share group"))
    group_share_record_lock_duration_ms: int = field(
        default=30000, metadata=_doc("how long an acquired record stays locked")
    )
    group_share_delivery_count_limit: int = field(
        default=5, metadata=_doc("deliveries of a record before it is archived")
    )
    group_share_partition_max_record_locks: int = field(
        default=2000, metadata=_doc("records in flight per share partition")
    )
    share_auto_offset_reset: str = field(
        # Kafka's group config; here the default of every share group
        default="latest",
        metadata=_doc("where a share group starts on a partition: latest|earliest"),
    )
    offsets_retention_minutes: int = field(default=10080, metadata=_doc("empty groups' offsets"))
    offsets_commit_timeout_ms: int = field(
        # Kafka's: how long a coordinator write may take before the request is answered
        # COORDINATOR_NOT_AVAILABLE (the write may still land)
        default=5000,
        metadata=_doc("coordinator log write timeout"),
    )
    offsets_retention_check_interval_ms: int = field(
        default=600_000, metadata=_doc("how often offsets are checked for expiry")
    )
    # Transactions (the transaction coordinator, actors/txn_actor.py): Kafka's keys and defaults.
    transaction_max_timeout_ms: int = field(
        default=900_000, metadata=_doc("the longest transaction.timeout.ms a producer may ask")
    )
    transactional_id_expiration_ms: int = field(
        default=604_800_000, metadata=_doc("idle transactional ids are forgotten after this")
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = field(
        default=3_600_000, metadata=_doc("how often idle transactional ids are looked for")
    )
    transaction_version: int = field(
        # Kafka's transaction.version feature, which Kafka finalizes at format time (2 from
        # 4.0) and changes with kafka-features; here a setting (see docs/kafka-differences.md)
        default=2,
        metadata=_doc("finalized transaction.version: 2 serves transactions v2 (KIP-890)"),
    )
    transaction_partition_verification_enable: bool = field(
        default=True,
        metadata=_doc("verify a v1 client's transactional batch with the coordinator first"),
    )
    add_partitions_to_txn_retry_backoff_ms: int = field(
        default=20, metadata=_doc("a v2 produce's add retried this often while markers are due")
    )
    add_partitions_to_txn_retry_backoff_max_ms: int = field(
        default=100, metadata=_doc("and for this long at most (then CONCURRENT_TRANSACTIONS)")
    )
    # Retention, and the bounds of dynamic group configs (issue 45: topics and group configs).
    log_retention_ms: int = field(
        default=604_800_000, metadata=_doc("topics' default retention.ms (-1: forever)")
    )
    log_retention_bytes: int = field(
        default=-1, metadata=_doc("topics' default retention.bytes per partition (-1: no limit)")
    )
    log_retention_check_interval_ms: int = field(
        default=300_000, metadata=_doc("how often segments are checked for deletion")
    )
    # Compacted topics and the log cleaner (storage/log_cleaner.py): the topics' defaults.
    log_cleanup_policy: str = field(
        default="delete", metadata=_doc("topics' default cleanup.policy: delete, compact or both")
    )
    log_cleaner_enable: bool = field(
        default=True, metadata=_doc("run the log cleaner over compacted topics")
    )
    log_cleaner_min_cleanable_ratio: float = field(
        default=0.5, metadata=_doc("topics' default min.cleanable.dirty.ratio")
    )
    log_cleaner_min_compaction_lag_ms: int = field(
        default=0, metadata=_doc("topics' default min.compaction.lag.ms")
    )
    log_cleaner_max_compaction_lag_ms: int = field(
        default=2**63 - 1, metadata=_doc("topics' default max.compaction.lag.ms")
    )
    log_cleaner_delete_retention_ms: int = field(
        default=86_400_000, metadata=_doc("topics' default delete.retention.ms")
    )
    log_cleaner_backoff_ms: int = field(
        default=15_000, metadata=_doc("the cleaner's pause when no log needs cleaning")
    )
    log_cleaner_dedupe_buffer_size: int = field(
        default=128 << 20, metadata=_doc("memory for the keys of one cleaning (more: partial)")
    )
    group_consumer_min_session_timeout_ms: int = field(
        default=45000, metadata=_doc("lowest consumer.session.timeout.ms a group may set")
    )
    group_consumer_max_session_timeout_ms: int = field(
        default=60000, metadata=_doc("highest consumer.session.timeout.ms a group may set")
    )
    group_consumer_min_heartbeat_interval_ms: int = field(
        default=5000, metadata=_doc("lowest consumer.heartbeat.interval.ms a group may set")
    )
    group_consumer_max_heartbeat_interval_ms: int = field(
        default=15000, metadata=_doc("highest consumer.heartbeat.interval.ms a group may set")
    )
    group_consumer_min_assignment_interval_ms: int = field(
        default=0, metadata=_doc("lowest consumer.assignment.interval.ms a group may set")
    )
    group_consumer_max_assignment_interval_ms: int = field(
        default=15000, metadata=_doc("highest consumer.assignment.interval.ms a group may set")
    )
    group_share_min_session_timeout_ms: int = field(
        default=45000, metadata=_doc("lowest share.session.timeout.ms a group may set")
    )
    group_share_max_session_timeout_ms: int = field(
        default=60000, metadata=_doc("highest share.session.timeout.ms a group may set")
    )
    group_share_min_heartbeat_interval_ms: int = field(
        default=5000, metadata=_doc("lowest share.heartbeat.interval.ms a group may set")
    )
    group_share_max_heartbeat_interval_ms: int = field(
        default=15000, metadata=_doc("highest share.heartbeat.interval.ms a group may set")
    )
    group_share_min_record_lock_duration_ms: int = field(
        default=15000, metadata=_doc("lowest share.record.lock.duration.ms a group may set")
    )
    group_share_max_record_lock_duration_ms: int = field(
        default=60000, metadata=_doc("highest share.record.lock.duration.ms a group may set")
    )
    group_share_min_delivery_count_limit: int = field(
        default=2, metadata=_doc("lowest share.delivery.count.limit a group may set")
    )
    group_share_max_delivery_count_limit: int = field(
        default=10, metadata=_doc("highest share.delivery.count.limit a group may set")
    )
    group_share_min_partition_max_record_locks: int = field(
        default=100, metadata=_doc("lowest share.partition.max.record.locks a group may set")
    )
    group_share_max_partition_max_record_locks: int = field(
        default=4000, metadata=_doc("highest share.partition.max.record.locks a group may set")
    )
    # The coordinator log (see storage/durable_log.py for what each fsync policy promises).
    coordinator_log_fsync: str = field(default="always", metadata=_doc("always|interval|never"))
    coordinator_log_fsync_interval_ms: int = field(default=1000, metadata=_doc("for interval"))
    coordinator_log_segment_bytes: int = field(
        default=DEFAULT_SEGMENT_BYTES, metadata=_doc("segment size")
    )
    coordinator_log_preallocate_bytes: int = field(
        # like Kafka's log.preallocate, but on by default and a chunk at a time: an fsync that
        # finds the file's size unchanged skips a journal commit (storage/coordinator_segments.py)
        default=DEFAULT_PREALLOCATE_BYTES,
        metadata=_doc("space reserved ahead of the log's writes (0: none)"),
    )
    coordinator_log_compaction_interval_ms: int = field(
        default=60_000, metadata=_doc("how often sealed segments are compacted")
    )
    coordinator_log_tombstone_retention_ms: int = field(
        default=86_400_000, metadata=_doc("Kafka's log.cleaner.delete.retention.ms")
    )
    coordinator_log_skip_corruption: bool = field(
        default=False, metadata=_doc("start even if the middle of the log is corrupt")
    )
    # Metrics endpoint (metrics/): off unless metrics.listen is set; labels bounded.
    metrics_listen: str = field(
        default="", metadata=_doc("HOST:PORT of the Prometheus endpoint (off if empty)")
    )
    metrics_group_allow: str = field(default="", metadata=_doc("regex of groups with series"))
    metrics_group_deny: str = field(default="", metadata=_doc("regex of groups without series"))
    metrics_topic_allow: str = field(default="", metadata=_doc("regex of topics with series"))
    metrics_topic_deny: str = field(default="", metadata=_doc("regex of topics without series"))
    metrics_max_partition_series: int = field(
        default=10_000, metadata=_doc("partition lag series per scrape at most (then dropped)")
    )
    metrics_burrow_window: int = field(
        default=10, metadata=_doc("commits per partition in the live Burrow window")
    )
    # -- when the disk fills (issue 47) --
    log_dir_free_space_warning_bytes: int = field(
        default=1 << 30, metadata=_doc("warn when the data dir has less free space; 0: never")
    )

    @property
    def sasl_enabled(self) -> bool:
        return self.listener_security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def ssl_enabled(self) -> bool:
        return self.listener_security_protocol == "SASL_SSL"

    @property
    def users_file(self) -> Path:
        return Path(self.sasl_users_file) if self.sasl_users_file else self.data_dir / "users.json"

    @property
    def listen_host(self) -> str:
        return split_host_port(self.listen)[0]

    @property
    def listen_port(self) -> int:
        return split_host_port(self.listen)[1]

    def with_values(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)


FIELDS = {f.name: f for f in dataclasses.fields(BrokerConfig)}


def kafka_key(field_name: str) -> str:
    return field_name.replace("_", ".")


def field_name(key: str) -> str:
    return key.strip().replace(".", "_").replace("-", "_").lower()


def split_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _convert(name: str, raw: Any) -> Any:
    kind = FIELDS[name].type
    try:
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text in ("true", "1", "yes")
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "Path":
            return Path(raw)
        return str(raw)
    except ValueError as exc:
        raise ConfigError(f"{kafka_key(name)}: can't use {raw!r} ({kind})") from exc


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties subset: `key=value` or `key: value` lines, `#`/`!` comments."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigError(f"not a key=value line: {line!r}")
        values[line[:sep].strip()] = line[sep + 1 :].strip()
    return values


def _apply(values: dict[str, Any], source: Mapping[str, Any], origin: str) -> None:
    for key, raw in source.items():
        name = field_name(key)
        if name not in FIELDS:  # a typo must not pass for a default silently
            close = difflib.get_close_matches(name, FIELDS, n=1)
            hint = f" (did you mean {kafka_key(close[0])}?)" if close else ""
            raise ConfigError(f"unknown setting {key!r} from {origin}{hint}")
        values[name] = _convert(name, raw)


def _from_env(environ: Mapping[str, str]) -> dict[str, str]:
    found = {}
    for env_name, value in environ.items():
        if not env_name.startswith(ENV_PREFIX):
            continue
        name = env_name.removeprefix(ENV_PREFIX).lower()
        if name in FIELDS:
            found[name] = value
            continue
        close = difflib.get_close_matches(name, FIELDS, n=1)
        if close:  # a typo must not pass for a default silently; others are not ours
            suggestion = ENV_PREFIX + close[0].upper()
            raise ConfigError(
                f"unknown setting {env_name!r} from environment (did you mean {suggestion}, "
                f"that is {kafka_key(close[0])}?)"
            )
    return found


def load_config(
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> BrokerConfig:
    """Layer defaults, file, environment and flags (see the module docstring)."""
    values: dict[str, Any] = {}
    if config_file is not None:
        try:
            text = config_file.read_text()
        except OSError as exc:
            message = f"cannot read the config file {config_file}: {exc.strerror}"
            raise ConfigFileMissing(message) from exc
        _apply(values, parse_properties(text), str(config_file))
    _apply(values, _from_env(os.environ if environ is None else environ), "environment")
    _apply(values, overrides or {}, "command line")
    config = BrokerConfig(**values)
    split_host_port(config.listen)  # fail early on a bad address
    if config.socket_request_max_bytes <= 0:
        raise ConfigError("socket.request.max.bytes must be positive")
    _check_consumer_group_settings(config)
    _check_share_group_settings(config)
    _check_network_settings(config)
    _check_topic_defaults(config)
    if config.coordinator_log_fsync not in ("always", "interval", "never"):
        raise ConfigError("coordinator.log.fsync must be always, interval or never")
    if config.log_retention_check_interval_ms <= 0:
        raise ConfigError("log.retention.check.interval.ms must be positive")
    _check_cleaner_settings(config)
    if config.coordinator_log_preallocate_bytes < 0:
        raise ConfigError("coordinator.log.preallocate.bytes must be >= 0")
    if config.log_dir_free_space_warning_bytes < 0:
        raise ConfigError("log.dir.free.space.warning.bytes must be >= 0")
    return config


def kafka_value(config: BrokerConfig, key: str) -> str | None:
    """Setting `key` as Kafka prints it (booleans in lower case); None if it is not ours."""
    name = field_name(key)
    if name not in FIELDS:
        return None
    value = getattr(config, name)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _check_topic_defaults(config: BrokerConfig) -> None:
    """The broker settings that are topics' defaults obey the topic configs' rules."""
    for name, definition in TOPIC_CONFIGS.items():
        value = kafka_value(config, definition.broker_key) if definition.broker_key else None
        if value is None:
            continue
        try:
            validate_topic_config(name, value)
        except InvalidConfig as exc:
            raise ConfigError(f"{definition.broker_key}: {exc}") from None


def _check_cleaner_settings(config: BrokerConfig) -> None:
    policies = [p.strip() for p in config.log_cleanup_policy.split(",") if p.strip()]
    if any(p not in ("compact", "delete") for p in policies):
        raise ConfigError("log.cleanup.policy: a list of compact and delete")
    if not 0 <= config.log_cleaner_min_cleanable_ratio <= 1:
        raise ConfigError("log.cleaner.min.cleanable.ratio must be between 0 and 1")
    if config.log_cleaner_min_compaction_lag_ms < 0 or config.log_cleaner_delete_retention_ms < 0:
        raise ConfigError("log.cleaner.min.compaction.lag.ms and delete.retention.ms: >= 0")
    if config.log_cleaner_max_compaction_lag_ms < 1:
        raise ConfigError("log.cleaner.max.compaction.lag.ms must be positive")
    if config.log_cleaner_backoff_ms <= 0 or config.log_cleaner_dedupe_buffer_size <= 0:
        raise ConfigError("log.cleaner.backoff.ms and log.cleaner.dedupe.buffer.size: > 0")


def _check_share_group_settings(config: BrokerConfig) -> None:
    if config.share_auto_offset_reset not in ("latest", "earliest"):
        raise ConfigError("share.auto.offset.reset must be latest or earliest")
    for name in (
        "group_share_session_timeout_ms",
        "group_share_heartbeat_interval_ms",
        "group_share_max_size",
        "group_share_record_lock_duration_ms",
        "group_share_delivery_count_limit",
        "group_share_partition_max_record_locks",
    ):
        if getattr(config, name) <= 0:
            raise ConfigError(f"{kafka_key(name)} must be positive")
    if config.group_share_heartbeat_interval_ms >= config.group_share_session_timeout_ms:
        raise ConfigError(
            "group.share.heartbeat.interval.ms must be lower than group.share.session.timeout.ms"
        )
    _check_group_config_bounds(config)


def _check_group_config_bounds(config: BrokerConfig) -> None:
    """Each min/max pair that bounds a group config (group_common/group_configs.py) is in
    order. The broker's own default need not be within them (Kafka requires it): the bounds
    only limit what a group may set, and tests run with short timers."""
    for name in FIELDS:
        if "_min_" not in name or not name.startswith(("group_share_", "group_consumer_")):
            continue
        upper = name.replace("_min_", "_max_", 1)
        if upper in FIELDS and getattr(config, name) > getattr(config, upper):
            raise ConfigError(f"{kafka_key(name)} must be at most {kafka_key(upper)}")


def _check_consumer_group_settings(config: BrokerConfig) -> None:
    names = consumer_assignors(config)
    unknown = [n for n in names if n not in ASSIGNOR_NAMES]
    if not names or unknown:
        raise ConfigError(
            f"group.consumer.assignors: {unknown or 'empty'}; known: {', '.join(ASSIGNOR_NAMES)}"
        )
    if config.group_consumer_migration_policy not in MIGRATION_POLICIES:
        raise ConfigError(
            f"group.consumer.migration.policy: {config.group_consumer_migration_policy!r}; "
            f"one of {', '.join(MIGRATION_POLICIES)}"
        )
    if config.group_consumer_heartbeat_interval_ms <= 0:
        raise ConfigError("group.consumer.heartbeat.interval.ms must be positive")
    if config.group_consumer_rebalance_heartbeat_interval_ms <= 0:
        raise ConfigError("group.consumer.rebalance.heartbeat.interval.ms must be positive")
    if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms:
        # Kafka's rule: members must get several chances to heartbeat within a session
        raise ConfigError(
            "group.consumer.heartbeat.interval.ms must be lower than "
            "group.consumer.session.timeout.ms"
        )


SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _check_network_settings(config: BrokerConfig) -> None:
    for name in (
        "max_connections",
        "max_connections_per_ip",
        "max_connections_per_user",
        "max_in_flight_requests_per_connection",
        "sasl_server_max_receive_size",
        "connections_max_idle_ms",
    ):
        if getattr(config, name) <= 0:
            raise ConfigError(f"{kafka_key(name)} must be positive")
    if config.group_share_heartbeat_interval_ms >= config.group_share_session_timeout_ms:
        raise ConfigError(
            "group.share.heartbeat.interval.ms must be lower than group.share.session.timeout.ms"
        )
    if config.offsets_commit_timeout_ms <= 0:
        raise ConfigError("offsets.commit.timeout.ms must be positive")
    if config.group_passivation_idle_ms < 0:
        raise ConfigError("group.passivation.idle.ms must be >= 0")
    if config.group_actor_idle_grace_ms < 0:
        raise ConfigError("group.actor.idle.grace.ms must be >= 0")
    for name in (
        "transaction_max_timeout_ms",
        "transactional_id_expiration_ms",
        "transaction_remove_expired_transaction_cleanup_interval_ms",
        "add_partitions_to_txn_retry_backoff_ms",
    ):
        if getattr(config, name) <= 0:
            raise ConfigError(f"{kafka_key(name)} must be positive")
    if not 0 <= config.transaction_version <= 2:
        raise ConfigError("transaction.version must be 0, 1 or 2")
    if config.add_partitions_to_txn_retry_backoff_max_ms < 0:
        raise ConfigError("add.partitions.to.txn.retry.backoff.max.ms must be >= 0")
    if config.queued_max_request_bytes == 0 or config.queued_max_request_bytes < -1:
        raise ConfigError("queued.max.request.bytes must be positive or -1 (no bound)")
    if config.connection_failed_authentication_delay_ms < 0:
        raise ConfigError("connection.failed.authentication.delay.ms must be >= 0")
    if config.listener_security_protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"listener.security.protocol must be one of {SECURITY_PROTOCOLS}")
    mechanisms = sasl_mechanisms(config)
    unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if not mechanisms or unknown:
        raise ConfigError(
            f"sasl.enabled.mechanisms: {unknown or 'empty'}; known: {', '.join(SASL_MECHANISMS)}"
        )
    if config.ssl_enabled and not (config.ssl_certificate_location and config.ssl_key_location):
        raise ConfigError("SASL_SSL needs ssl.certificate.location and ssl.key.location")


def sasl_mechanisms(config: BrokerConfig) -> tuple[str, ...]:
    return tuple(m.strip() for m in config.sasl_enabled_mechanisms.split(",") if m.strip())


def consumer_assignors(config: BrokerConfig) -> tuple[str, ...]:
    return tuple(n.strip() for n in config.group_consumer_assignors.split(",") if n.strip())


def describe_settings() -> list[tuple[str, str, str]]:
    """(kafka key, default, doc) for every setting, for `serve --help-config`."""
    return [
        (kafka_key(f.name), str(f.default), f.metadata.get("doc", ""))
        for f in dataclasses.fields(BrokerConfig)
    ]

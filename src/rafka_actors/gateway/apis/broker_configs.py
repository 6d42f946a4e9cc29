"""The broker's configs in DescribeConfigs, and the dynamic broker configs the alter APIs set.

Every setting of this broker (config.py) is static: read-only in DescribeConfigs, with its
source (the default, or STATIC_BROKER_CONFIG), and an alter of one is refused as Kafka refuses
a config it cannot update dynamically. So is a broker setting that is a topic config's default
(its synonym, storage/topic_configs.py): a topic's config must act, and these set at start-up.

Any other name is one of Kafka's broker configs that has no meaning here (a SASL/Kerberos
timing, a thread pool size) or a custom one; Kafka takes those dynamically, so this broker
does too: it keeps them (storage/group_configs.py's store, in ``broker-configs.json``) and
shows them as DYNAMIC_BROKER_CONFIG (for this node) or DYNAMIC_DEFAULT_BROKER_CONFIG (the
cluster default, resource name ""), and they change nothing, as docs/kafka-differences.md says.
Listener and security configs can only be set per broker, as in Kafka. Only a connection
without a user (the operator's, on a listener without SASL) may alter them: an authenticated
user gets CLUSTER_AUTHORIZATION_FAILED, Kafka's answer when ALTER_CONFIGS on the cluster is
denied, since a tenant must not change what every org shares.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from ...config import FIELDS, BrokerConfig, field_name, kafka_key, kafka_value
from ...storage.config_values import TYPE_BOOLEAN, TYPE_DOUBLE, TYPE_INT, TYPE_STRING
from ...storage.topic_configs import SOURCE_DEFAULT, SOURCE_STATIC_BROKER, TOPIC_CONFIGS

SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER = 2, 3
SENSITIVE = frozenset({"ssl_key_password"})
_TYPES = {"int": TYPE_INT, "bool": TYPE_BOOLEAN, "float": TYPE_DOUBLE}  # else STRING
_PER_BROKER = ("listener.", "listeners", "advertised.listeners", "sasl.", "ssl.")
# the topic configs' defaults: static here, as they must act
_TOPIC_DEFAULTS = frozenset(d.broker_key for d in TOPIC_CONFIGS.values() if d.broker_key)
# the list-typed broker configs an incremental APPEND/SUBTRACT may change (none is dynamic)
LISTS: Mapping[str, str] = {}

Entry = tuple[str, str | None, int, bool, int, tuple[tuple[str, str | None, int], ...]]
# (name, value, source, read only, config type, synonyms (name, value, source))


def broker_setting(
    config: BrokerConfig, key: str, fallback: str | None = None
) -> tuple[str | None, int]:
    """A broker setting's value as Kafka prints it, and its source (the default, or set);
    `fallback` (Kafka's default) for a Kafka setting we do not have, fixed here."""
    text = kafka_value(config, key)
    if text is None:
        return fallback, SOURCE_DEFAULT
    name = field_name(key)
    value = getattr(config, name)
    return (None if name in SENSITIVE else text), (
        SOURCE_DEFAULT if value == FIELDS[name].default else SOURCE_STATIC_BROKER
    )


def broker_entries(
    config: BrokerConfig, cluster: Mapping[str, str], node: Mapping[str, str]
) -> list[Entry]:
    """Every setting, read-only, then the dynamic configs: this node's over the cluster's."""
    entries: list[Entry] = []
    for f in dataclasses.fields(config):
        key = kafka_key(f.name)
        value, source = broker_setting(config, key)
        kind = _TYPES.get(str(f.type), TYPE_STRING)
        entries.append((key, value, source, True, kind, ((key, value, source),)))
    for name in sorted(set(cluster) | set(node)):
        synonyms = [(name, node[name], SOURCE_DYNAMIC_BROKER)] if name in node else []
        if name in cluster:
            synonyms.append((name, cluster[name], SOURCE_DYNAMIC_DEFAULT_BROKER))
        _, value, source = synonyms[0]
        entries.append((name, value, source, False, TYPE_STRING, tuple(synonyms)))
    return entries


def alter_refusal(
    resource_name: str, names: Iterable[str], authenticated: bool
) -> tuple[ErrorCode, str] | None:
    """Why a dynamic change of these broker configs is refused, Kafka's way; None if not."""
    if authenticated:
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    names = sorted(names)
    static = [n for n in names if field_name(n) in FIELDS or n in _TOPIC_DEFAULTS]
    if static:
        return (
            ErrorCode.invalid_request,
            f"Cannot update these configs dynamically: [{', '.join(static)}] (this broker "
            "reads them at start-up)",
        )
    per_broker = [n for n in names if n.startswith(_PER_BROKER)]
    if not resource_name and per_broker:
        return (
            ErrorCode.invalid_request,
            "Cannot update these configs at default cluster level, broker id must be "
            f"specified: [{', '.join(per_broker)}]",
        )
    return None

"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Three resource types, as Kafka names them (ConfigResource.Type):

- broker (4), named "" or this node's id: every setting, read-only, with its source (the
  default, or set at start-up: STATIC_BROKER_CONFIG);
- topic (2): the topic configs of storage/topic_configs.py, each the topic's own value
  (DYNAMIC_TOPIC_CONFIG) or the broker's default through its synonym;
- group (32): Kafka's dynamic group configs (group_common/group_configs.py), GROUP_CONFIG when
  set for the group. A change is stored (storage/group_configs.py), then sent to the group's
  actor as a `GroupConfigOp`, so a live group uses it from its next step on.

Everything is within the connection's organisation: a topic or group is looked up in the org's
own namespace, and a name outside the user's prefixes is refused (TOPIC_ / GROUP_AUTHORIZATION_
FAILED) before anything else, as CreateTopics does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kio.schema.errors import ErrorCode

from ...config import FIELDS, BrokerConfig, field_name
from ...group_common import group_configs
from ...group_common.ops import GroupConfigOp
from ...storage.config_values import TYPE_INT, TYPE_LIST, TYPE_STRING
from ...storage.topic_configs import (
    SOURCE_DEFAULT,
    SOURCE_GROUP,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    TOPIC_CONFIGS,
    InvalidConfig,
    validate_topic_configs,
)
from ...storage.topics import InvalidTopicName, Topic, validate_topic_name
from ..context import BrokerContext, ConnectionInfo, file_io
from ..steps import ask_each
from ._build import NO_THROTTLE, make, schema
from .broker_configs import LISTS, SENSITIVE, Entry, alter_refusal, broker_entries, broker_setting

log = logging.getLogger(__name__)

DESCRIBE_KEY, ALTER_KEY, INCREMENTAL_KEY = 32, 33, 44
TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


# -- DescribeConfigs ------------------------------------------------------------------------
def describe_configs(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(DESCRIBE_KEY, version)
    results = tuple(
        _describe_one(
            ctx,
            conn,
            mod,
            resource,
            request.include_synonyms,
            getattr(request, "include_documentation", False),  # v3+
        )
        for resource in request.resources
    )
    return make(mod.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=results)


def _describe_one(
    ctx: BrokerContext, conn: ConnectionInfo, mod: Any, resource: Any, synonyms: bool, docs: bool
) -> Any:
    try:
        entries = _entries(ctx, conn, resource.resource_type, resource.resource_name)
        code, message = ErrorCode.none, None
    except Refused as refused:
        entries, code, message = [], refused.code, refused.message
    wanted = resource.configuration_keys
    if wanted:
        entries = [e for e in entries if e[0] in wanted]
    return make(
        mod.DescribeConfigsResult,
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=tuple(_config(mod, entry, synonyms, docs) for entry in entries),
    )


def _config(mod: Any, entry: Entry, synonyms: bool, docs: bool) -> Any:
    name, value, source, read_only, kind, alternatives = entry
    return make(
        mod.DescribeConfigsResourceResult,
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_default=source == SOURCE_DEFAULT,
        is_sensitive=field_name(name) in SENSITIVE,
        synonyms=tuple(
            make(mod.DescribeConfigsSynonym, name=n, value=v, source=s) for n, v, s in alternatives
        )
        if synonyms
        else (),
        config_type=kind,
        documentation=_documentation(name) if docs else None,
    )


def _documentation(name: str) -> str | None:
    """What a config does (DescribeConfigs v3+ with IncludeDocumentation); a topic config
    that changes nothing here says so, and why."""
    if name in TOPIC_CONFIGS:
        definition = TOPIC_CONFIGS[name]
        if definition.acted_on:
            return definition.doc
        return f"{definition.doc}. Accepted and stored, not acted on here: {definition.why_not}."
    if name in group_configs.DOCS:
        return group_configs.DOCS[name]
    setting = FIELDS.get(field_name(name))
    return None if setting is None else setting.metadata.get("doc")


def _entries(ctx: BrokerContext, conn: ConnectionInfo, kind: int, name: str) -> list[Entry]:
    if kind == BROKER:
        _check_broker(ctx, name)
        store = ctx.broker_configs
        if store is None:
            return broker_entries(ctx.config, {}, {})
        return broker_entries(ctx.config, store.get(0, ""), store.get(0, str(ctx.node_id)))
    if kind == TOPIC:
        return topic_entries(ctx.config, _topic(ctx, conn, name).configs)
    if kind == GROUP:
        _check_group(conn, name)
        return group_entries(ctx.config, _group_store(ctx).get(conn.org_id, name))
    raise Refused(ErrorCode.invalid_request, f"Unsupported resource type: {kind}")


def _check_broker(ctx: BrokerContext, name: str) -> None:
    if name not in ("", str(ctx.node_id)):
        raise Refused(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {ctx.node_id} or empty string, but received {name}",
        )


def _topic(ctx: BrokerContext, conn: ConnectionInfo, name: str) -> Topic:
    if not conn.may_use_topic(name):
        raise Refused(ErrorCode.topic_authorization_failed, "Authorization failed.")
    try:
        validate_topic_name(name)
    except InvalidTopicName as exc:
        raise Refused(ErrorCode.invalid_topic_exception, str(exc)) from None
    topic = ctx.data.topics_for(conn.org_id).by_name(name)
    if topic is None:
        raise Refused(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
    return topic


def _check_group(conn: ConnectionInfo, name: str) -> None:
    if not name:
        raise Refused(ErrorCode.invalid_request, "Group name must not be empty")
    if not conn.may_use_group(name):
        raise Refused(ErrorCode.group_authorization_failed, "Authorization failed.")


def _group_store(ctx: BrokerContext) -> Any:
    if ctx.group_configs is None:
        raise Refused(ErrorCode.invalid_request, "This broker keeps no group configs.")
    return ctx.group_configs


def topic_entries(config: BrokerConfig, configs: Mapping[str, str]) -> list[Entry]:
    """Every topic config (an internal one only if set), as Kafka lists them: the topic's
    value, else its broker synonym's, else Kafka's default; the synonyms that have a value."""
    entries: list[Entry] = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        if definition.internal and name not in configs:
            continue
        broker_value: str | None = definition.default
        broker_source, alternatives = SOURCE_DEFAULT, []
        if definition.broker_key is not None:
            broker_value, broker_source = broker_setting(
                config, definition.broker_key, definition.default
            )
            alternatives.append((definition.broker_key, broker_value, broker_source))
        value: str | None
        if name in configs:
            value, source = configs[name], SOURCE_TOPIC
            alternatives.insert(0, (name, value, source))
        else:
            value, source = broker_value, broker_source
        entries.append((name, value, source, False, definition.kind, tuple(alternatives)))
    for name, kept in sorted(configs.items()):  # kept from CreateTopics, not honoured here
        if name not in TOPIC_CONFIGS:
            entries.append((name, kept, SOURCE_TOPIC, True, TYPE_STRING, ((name, kept, 1),)))
    return entries


def group_entries(config: BrokerConfig, overrides: Mapping[str, str]) -> list[Entry]:
    """Each group config: the group's own value (GROUP_CONFIG), or the broker's through its
    synonym, as Kafka lists them (the group's name is a synonym only when it is set)."""
    broker = broker_lookup(config)
    entries: list[Entry] = []
    for name in group_configs.GROUP_CONFIG_NAMES:
        definition = group_configs.DEFINITIONS[name]
        broker_key = definition.synonym
        broker_value = group_configs.broker_default(definition, broker)
        broker_source = broker_setting(config, broker_key)[1]  # (a key not here: DEFAULT)
        alternatives = [(broker_key, broker_value, broker_source)]
        if broker_source == SOURCE_STATIC_BROKER:  # Kafka lists the default under it
            default = FIELDS[field_name(broker_key)].default
            alternatives.append((broker_key, str(default), SOURCE_DEFAULT))
        value: str | None
        if name in overrides:
            value, source = overrides[name], SOURCE_GROUP
            alternatives.insert(0, (name, value, source))
        else:
            value, source = broker_value, broker_source
        kind = TYPE_INT if definition.kind == group_configs.INT else TYPE_STRING
        entries.append((name, value, source, False, kind, tuple(alternatives)))
    return entries


def broker_lookup(config: BrokerConfig) -> group_configs.BrokerLookup:
    """A broker setting's value by its Kafka key (None: no such setting here)."""

    def lookup(key: str) -> int | str | None:
        name = field_name(key)
        value = getattr(config, name) if name in FIELDS else None
        return value if isinstance(value, int | str) else None

    return lookup


# -- AlterConfigs and IncrementalAlterConfigs -------------------------------------------------
@file_io
def alter_configs(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    """The legacy API: each resource's configs are replaced by those given."""
    return _alter(ctx, conn, schema(ALTER_KEY, version), request, incremental=False)


@file_io
def incremental_alter_configs(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    return _alter(ctx, conn, schema(INCREMENTAL_KEY, version), request, incremental=True)


def _alter(
    ctx: BrokerContext, conn: ConnectionInfo, mod: Any, request: Any, *, incremental: bool
) -> Any:
    outcomes: list[tuple[ErrorCode, str | None]] = []
    asks: list[tuple[str | None, Any]] = []
    for resource in request.resources:
        try:
            op = _alter_one(ctx, conn, resource, incremental, request.validate_only)
            outcomes.append((ErrorCode.none, None))
        except Refused as refused:
            op = None
            outcomes.append((refused.code, refused.message))
        asks.append((resource.resource_name if op is not None else None, op))

    def respond(answers: list[Any]) -> Any:
        responses = []
        # A group's configs are stored before its actor is told: an actor that could not take
        # them now (it failed) reads them when it starts again, so its answer changes nothing.
        del answers
        for resource, (code, message) in zip(request.resources, outcomes, strict=True):
            responses.append(
                make(
                    mod.AlterConfigsResourceResponse,
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        response = getattr(mod, "IncrementalAlterConfigsResponse", None)
        if response is None:
            response = mod.AlterConfigsResponse
        return make(response, throttle_time=NO_THROTTLE, responses=tuple(responses))

    return ask_each(conn.org_id, asks, respond)


def _alter_one(
    ctx: BrokerContext, conn: ConnectionInfo, resource: Any, incremental: bool, validate_only: bool
) -> GroupConfigOp | None:
    """Check and store one resource's change; the op to send its group's actor, if any."""
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    kind, name = resource.resource_type, resource.resource_name
    if kind == BROKER:
        _check_broker(ctx, name)
        refusal = alter_refusal(name, names, conn.user is not None)
        if refusal is not None:
            raise Refused(*refusal)
        if ctx.broker_configs is None:
            raise Refused(ErrorCode.invalid_request, "This broker keeps no dynamic configs.")
        current = ctx.broker_configs.get(0, name)
        wanted = _changed(current, resource.configs, incremental, LISTS)
        if not validate_only:
            with _storage_errors(name or "the cluster"):
                ctx.broker_configs.set(0, name, wanted)
        return None
    if kind == TOPIC:
        topic = _topic(ctx, conn, name)
        defaults = ctx.data.topic_defaults
        lists = {n: defaults[n] for n, d in TOPIC_CONFIGS.items() if d.kind == TYPE_LIST}
        wanted = _changed(topic.configs, resource.configs, incremental, lists)
        given = {c.name for c in resource.configs}
        # (names no Kafka knows, kept from before configs were checked, stay as they were)
        kept = {n: v for n, v in wanted.items() if n not in TOPIC_CONFIGS and n not in given}
        try:
            checked = validate_topic_configs(
                {n: v for n, v in wanted.items() if n not in kept}, defaults
            )
        except InvalidConfig as exc:
            raise Refused(ErrorCode.invalid_config, str(exc)) from None
        if not validate_only:
            with _storage_errors(name):
                ctx.data.topics_for(conn.org_id).alter_configs(topic.name, checked | kept)
        return None
    if kind == GROUP:
        _check_group(conn, name)
        store = _group_store(ctx)
        wanted = _changed(store.get(conn.org_id, name), resource.configs, incremental, None)
        try:
            checked = group_configs.validate(wanted, broker_lookup(ctx.config))
        except group_configs.InvalidGroupConfig as exc:
            raise Refused(ErrorCode.invalid_config, str(exc)) from None
        if validate_only:
            return None
        with _storage_errors(name):
            store.set(conn.org_id, name, checked)
        return GroupConfigOp(tuple(sorted(checked.items())))
    raise Refused(ErrorCode.invalid_request, f"Unexpected resource type {kind}")


@contextmanager
def _storage_errors(name: str) -> Iterator[None]:
    """A change that could not be stored is KAFKA_STORAGE_ERROR, not a closed connection."""
    try:
        yield
    except OSError as exc:
        log.error("could not store the configs of %s: %s", name, exc)
        raise Refused(ErrorCode.kafka_storage_error, f"Could not store the change: {exc}") from None


def _changed(
    current: Mapping[str, str],
    changes: Any,
    incremental: bool,
    lists: Mapping[str, str] | None,
) -> dict[str, str]:
    """The resource's configs after the request: replaced by those given (AlterConfigs), or
    each set, deleted, appended to or subtracted from (IncrementalAlterConfigs). `lists`
    names the resource's list configs, each with the default a first APPEND extends."""
    if not incremental:
        return {c.name: c.value for c in changes if c.value is not None}
    result = dict(current)
    for change in changes:
        operation = change.config_operation
        if operation == SET:
            if change.value is None:
                raise Refused(
                    ErrorCode.invalid_request, f"Null value not supported for : {change.name}"
                )
            result[change.name] = change.value
        elif operation == DELETE:
            result.pop(change.name, None)
        elif operation in (APPEND, SUBTRACT):
            verb = "APPEND" if operation == APPEND else "SUBTRACT"
            if lists is None:
                raise Refused(
                    ErrorCode.invalid_config,
                    f"Config value {verb.lower()} is not allowed for config key: {change.name}",
                )
            if change.name not in lists:
                raise Refused(
                    ErrorCode.invalid_config,
                    f"Can't {verb} to key {change.name} because its type is not LIST.",
                )
            base = result.get(change.name, lists[change.name])
            items = [p.strip() for p in base.split(",") if p.strip()]
            given = [p.strip() for p in (change.value or "").split(",") if p.strip()]
            if operation == APPEND:
                items += [p for p in given if p not in items]
            else:
                items = [p for p in items if p not in given]
            result[change.name] = ",".join(items)
        else:
            raise Refused(ErrorCode.invalid_request, f"Unknown config operation {operation}")
    return result

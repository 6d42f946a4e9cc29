"""CreateTopics (19) and DeleteTopics (20).

One broker, so the only replication factor is 1 (-1 means the default, also 1); explicit
replica assignments are accepted when they name this broker alone. Topic configs are checked as
AlterConfigs checks them (storage/topic_configs.py: Kafka's names and rules, INVALID_CONFIG
otherwise) and stored with the topic.

Topics are created in, and deleted from, the connection's org (data_plane.py). A topic outside
the user's prefixes gets TOPIC_AUTHORIZATION_FAILED before any other check, so the answer says
nothing about whether it exists; a topic deleted by id that the user may not use is answered
with its id and a null name (Kafka: ids are not secret, names are).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...group_common.ops import TopicsChangedOp
from ...storage.topic_configs import InvalidConfig, validate_topic_configs
from ...storage.topics import (
    InvalidTopicName,
    TopicExists,
    validate_topic_name,
)
from ..context import BrokerContext, ConnectionInfo, file_io
from ._build import NO_THROTTLE, make, schema
from .configs import topic_entries
from .partitions_admin import TellGroups

log = logging.getLogger(__name__)

CREATE_KEY = 19
DELETE_KEY = 20


@file_io
def create_topics(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(CREATE_KEY, version)
    results = tuple(_create_one(ctx, conn, mod, t, request.validate_only) for t in request.topics)
    return make(mod.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=results)


def _create_one(
    ctx: BrokerContext, conn: ConnectionInfo, mod: Any, wanted: Any, validate_only: bool
) -> Any:
    partitions = wanted.num_partitions
    if wanted.assignments:
        partitions = len(wanted.assignments)
    elif partitions == -1:
        partitions = ctx.config.num_partitions
    code, message = _check_create(ctx, conn, wanted, partitions)
    created = None
    configs: dict[str, str] = {}
    if code is ErrorCode.none:
        given = {c.name: c.value for c in wanted.configs if c.value is not None}
        try:  # stored as Kafka prints them
            configs = validate_topic_configs(given, ctx.data.topic_defaults)
        except InvalidConfig as exc:
            code, message = ErrorCode.invalid_config, str(exc)
    if code is ErrorCode.none and not validate_only:
        try:
            created = ctx.data.create_topic(wanted.name, partitions, configs, org_id=conn.org_id)
        except TopicExists as exc:
            code, message = ErrorCode.topic_already_exists, str(exc)
    ok = code is ErrorCode.none
    return make(
        mod.CreatableTopicResult,
        name=wanted.name,
        topic_id=created.topic_id if created else None,
        error_code=code,
        error_message=message,
        # Kafka also refuses DESCRIBE_CONFIGS there (the same prefixes decide both)
        topic_config_error_code=code if code is ErrorCode.topic_authorization_failed else 0,
        num_partitions=partitions if ok else -1,
        replication_factor=1 if ok else -1,
        configs=_created_configs(ctx, mod, configs) if ok else (),  # (Kafka: [], not null)
    )


def _created_configs(ctx: BrokerContext, mod: Any, configs: dict[str, str]) -> tuple[Any, ...]:
    """The new topic's configs with their sources, as Kafka answers (v5+)."""
    entry = getattr(mod, "CreatableTopicConfigs", None)
    if entry is None:
        return ()
    return tuple(
        make(entry, name=n, value=v, read_only=ro, config_source=src, is_sensitive=False)
        for n, v, src, ro, _kind, _synonyms in topic_entries(ctx.config, configs)
    )


def _check_create(
    ctx: BrokerContext, conn: ConnectionInfo, wanted: Any, partitions: int
) -> tuple[ErrorCode, str | None]:
    if not conn.may_use_topic(wanted.name):
        return ErrorCode.topic_authorization_failed, "Authorization failed."
    try:
        validate_topic_name(wanted.name)
    except InvalidTopicName as exc:
        return ErrorCode.invalid_topic_exception, str(exc)
    if ctx.data.topics_for(conn.org_id).by_name(wanted.name) is not None:
        return ErrorCode.topic_already_exists, f"Topic '{wanted.name}' already exists."
    factor = wanted.replication_factor
    if factor < 1 and factor != -1:
        return (
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if factor not in (-1, 1):  # (Kafka's message, one broker registered)
        return (
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {factor} time(s): The target replication factor"
            f" of {factor} cannot be reached because only 1 broker(s) are registered or some"
            " brokers have all their log directories cordoned.",
        )
    if partitions < 1:
        return (
            ErrorCode.invalid_partitions,
            "Number of partitions was set to an invalid non-positive value.",
        )
    if partitions > 100_000:
        return ErrorCode.invalid_partitions, f"Number of partitions {partitions} is invalid."
    for assignment in wanted.assignments:
        if tuple(assignment.broker_ids) != (ctx.node_id,):
            return ErrorCode.invalid_replica_assignment, "Replicas must be this broker alone."
    return ErrorCode.none, None


@file_io
def delete_topics(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(DELETE_KEY, version)
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    # Every group of the org tombstones the offsets committed until the deletion before the
    # answer, so a topic re-created under the same name starts clean (issue 45); the deletion
    # is kept as pending (storage/topic_deletions.py) until every group was visited.
    pending = ctx.topic_deletions
    at_ms = ctx.groups.now_ms() if ctx.groups is not None else -1
    results = tuple(_delete_one(ctx, conn, mod, name, topic_id, at_ms) for name, topic_id in wanted)
    response = make(mod.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=results)
    deleted = tuple(r.name for r in results if r.error_code is ErrorCode.none)
    if not deleted:
        return response

    def visited() -> None:
        if pending is not None:
            for name in deleted:
                pending.done((conn.org_id, name, at_ms))

    op = TopicsChangedOp(deleted, at_ms)
    return TellGroups(conn.org_id, op, True, lambda _answers: response, visited)


def _delete_one(
    ctx: BrokerContext,
    conn: ConnectionInfo,
    mod: Any,
    name: str | None,
    topic_id: Any,
    at_ms: int,
) -> Any:
    if name and not conn.may_use_topic(name):
        return _deleted(mod, name, topic_id, ErrorCode.topic_authorization_failed)
    store = ctx.data.topics_for(conn.org_id)
    topic = store.by_name(name) if name else None
    if topic is None and topic_id is not None and topic_id.int:
        topic = store.by_id(topic_id)
        if topic is not None and not conn.may_use_topic(topic.name):
            return _deleted(mod, None, topic_id, ErrorCode.topic_authorization_failed)
    if topic is None:
        code = ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
        return _deleted(mod, name, topic_id, code)
    if ctx.topic_deletions is not None:
        try:
            ctx.topic_deletions.add((conn.org_id, topic.name, at_ms))
        except OSError as exc:
            log.error("could not record the deletion of %s: %s", topic.name, exc)
            return _deleted(mod, topic.name, topic.topic_id, ErrorCode.kafka_storage_error)
    ctx.data.delete_topic(topic.name, org_id=conn.org_id)
    return _deleted(mod, topic.name, topic.topic_id, ErrorCode.none)


def _deleted(mod: Any, name: str | None, topic_id: Any, code: ErrorCode) -> Any:
    return make(
        mod.DeletableTopicResult,
        name=name,
        topic_id=topic_id,
        error_code=code,
        error_message=_DELETE_MESSAGES.get(code),
    )


# the messages Kafka 4.3.1 sends with these errors (the errors' own descriptions)
_DELETE_MESSAGES = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
}

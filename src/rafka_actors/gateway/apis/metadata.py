"""Metadata (3): this one broker, and the topics asked for (auto-created when allowed).

Every partition is led by this broker (node id from `node.id`) at leader epoch 0. Topic ids
are stable non-zero UUIDs (librdkafka fetches by id from Fetch v13). In v0 an empty topic list
means "all topics"; from v1 on that is a null list, and an empty one means none.

Topics are the connection's org's (data_plane.py). A user whose topic prefixes exclude a topic
is answered as Kafka answers a principal without DESCRIBE: "all topics" leaves it out, a topic
asked for by name gets TOPIC_AUTHORIZATION_FAILED whether or not it exists (and is never
auto-created), one asked for by id gets it with its id and a null name.

Authorized operations (v8+), when the client asks, as KafkaApis fills them: each topic answered
for a name the user may use (found, unknown or invalid) gets every topic operation (tenancy
grants them all: auth/acl_operations.py); refused topics and unknown topic ids keep the field's
default. The cluster's (v8-10) is that of DescribeCluster.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import is_optional

from ...auth.acl_operations import cluster_authorized_operations, topic_operations
from ...storage.failures import StorageError
from ...storage.topics import Topic, TopicError, TopicStore, validate_topic_name
from ..context import BrokerContext, ConnectionInfo, file_io
from ._build import NO_THROTTLE, make, schema

KEY = 3
_NULL_ID = uuid.UUID(int=0)


@file_io
def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    if request.topics is None or (version == 0 and not request.topics):
        topics = [_describe(mod, t, ctx.node_id) for t in store if conn.may_use_topic(t.name)]
    else:
        auto_create = ctx.config.auto_create_topics_enable and getattr(
            request, "allow_auto_topic_creation", True
        )
        topics = [_lookup(ctx, conn, store, mod, e, auto_create) for e in request.topics]
    if getattr(request, "include_topic_authorized_operations", False):
        topics = [_with_operations(conn, topic) for topic in topics]
    cluster = {}  # v8-10 only; the field's default is "not asked for"
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster["cluster_authorized_operations"] = cluster_authorized_operations(conn.user)
    broker = make(
        mod.MetadataResponseBroker,
        node_id=ctx.node_id,
        host=ctx.advertised_host,
        port=ctx.advertised_port,
        rack=None,
    )
    return make(
        mod.MetadataResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        brokers=(broker,),
        cluster_id=ctx.config.cluster_id,
        controller_id=ctx.node_id,
        topics=tuple(topics),
        **cluster,
    )


_NOT_DESCRIBED = (ErrorCode.topic_authorization_failed, ErrorCode.unknown_topic_id)


def _with_operations(conn: ConnectionInfo, topic: Any) -> Any:
    if topic.error_code in _NOT_DESCRIBED:
        return topic
    operations = topic_operations(conn.user, topic.name)
    return dataclasses.replace(topic, topic_authorized_operations=operations)


def _lookup(
    ctx: BrokerContext,
    conn: ConnectionInfo,
    store: TopicStore,
    mod: Any,
    entry: Any,
    auto_create: bool,
) -> Any:
    name = entry.name
    topic_id = getattr(entry, "topic_id", None)
    if name is None and topic_id not in (None, _NULL_ID):
        found = store.by_id(topic_id)
        if found is None:
            return _error(mod, None, ErrorCode.unknown_topic_id, topic_id)
        if not conn.may_use_topic(found.name):  # ids are not secret; the name is
            return _error(mod, None, ErrorCode.topic_authorization_failed, topic_id)
        return _describe(mod, found, ctx.node_id)
    if name is not None and not conn.may_use_topic(name):
        # Checked before existence, so the answer does not disclose whether it exists.
        return _error(mod, name, ErrorCode.topic_authorization_failed)
    topic = store.by_name(name) if name is not None else None
    if topic is not None:
        return _describe(mod, topic, ctx.node_id)
    try:
        validate_topic_name(name)
    except TopicError:
        return _error(mod, name, ErrorCode.invalid_topic_exception)
    if not auto_create:
        return _error(mod, name, ErrorCode.unknown_topic_or_partition)
    try:
        topic = ctx.data.create_topic(name, ctx.config.num_partitions, org_id=conn.org_id)
    except TopicError:
        return _error(mod, name, ErrorCode.unknown_topic_or_partition)
    except StorageError:  # a full disk: retriable
        return _error(mod, name, ErrorCode.kafka_storage_error)
    return _describe(mod, topic, ctx.node_id)


def _error(mod: Any, name: str | None, code: ErrorCode, topic_id: uuid.UUID = _NULL_ID) -> Any:
    if name is None and not _name_is_nullable(mod.MetadataResponseTopic):
        name = ""  # before v12 a response topic name can't be null (the fuzzer found this)
    return make(
        mod.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
    )


@functools.cache
def _name_is_nullable(topic_cls: type) -> bool:
    name = next(f for f in dataclasses.fields(topic_cls) if f.name == "name")
    return is_optional(name)


def _describe(mod: Any, topic: Topic, node: int) -> Any:
    partitions = tuple(
        make(
            mod.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=index,
            leader_id=node,
            leader_epoch=0,
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
        for index in range(len(topic.partitions))
    )
    return make(
        mod.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=False,
        partitions=partitions,
    )

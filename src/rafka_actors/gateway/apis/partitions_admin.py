"""CreatePartitions (37), DeleteRecords (21), DescribeLogDirs (35) and DescribeCluster (60).

The partition logs change in storage (storage/topics.py, storage/partition_log.py); groups
learn of new partitions through a `TopicsChangedOp` to every running actor of the org, so a
KIP-848 group computes its new target assignment without waiting for a member
(coordinator/topic_changes.py). Classic groups see the new count in Metadata, and their
clients rejoin, as with Kafka.

Tenancy as in topics_admin.py: the org's own topics; names outside the user's prefixes are
TOPIC_AUTHORIZATION_FAILED before anything else.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ...auth.acl_operations import OMITTED, cluster_authorized_operations
from ...group_common.ops import TopicsChangedOp
from ..context import BrokerContext, ConnectionInfo, file_io
from ..steps import Step
from ._build import NO_THROTTLE, make, schema

log = logging.getLogger(__name__)

CREATE_PARTITIONS_KEY, DELETE_RECORDS_KEY, LOG_DIRS_KEY, CLUSTER_KEY = 37, 21, 35, 60
HIGH_WATERMARK = -1  # DeleteRecords: "up to the high watermark"
MAX_PARTITIONS = 100_000  # as CreateTopics
BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


@dataclass(frozen=True, slots=True)
class TellGroups(Step):
    """Send `op` to the org's groups (every stored one if `stored_too`, else those whose
    actor runs) and wait for their answers; `then` gets them."""

    org_id: int
    op: Any
    stored_too: bool
    then: Callable[[list[Any]], Any]
    finished: Callable[[], None] | None = None  # once every group was asked

    async def take(self, ctx: BrokerContext) -> Any:
        registry = ctx.groups
        if registry is None:
            return self.then([])
        answers = await registry.ask_groups_of(
            self.org_id, self.op, stored_too=self.stored_too, finished=self.finished
        )
        return self.then(answers)


# -- CreatePartitions -----------------------------------------------------------------------
@file_io
def create_partitions(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(CREATE_PARTITIONS_KEY, version)
    names = [t.name for t in request.topics]
    results = []
    grown = False
    for wanted in request.topics:
        code: ErrorCode
        message: str | None
        if names.count(wanted.name) > 1:
            code, message = ErrorCode.invalid_request, "Duplicate topic name."
        else:
            code, message = _grow(ctx, conn, wanted, request.validate_only)
            grown |= code is ErrorCode.none and not request.validate_only
        results.append(
            make(
                mod.CreatePartitionsTopicResult,
                name=wanted.name,
                error_code=code,
                error_message=message,
            )
        )
    response = make(mod.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
    if not grown:
        return response
    return TellGroups(conn.org_id, TopicsChangedOp(), False, lambda _answers: response)


def _grow(
    ctx: BrokerContext, conn: ConnectionInfo, wanted: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    if not conn.may_use_topic(wanted.name):
        return ErrorCode.topic_authorization_failed, "Authorization failed."
    store = ctx.data.topics_for(conn.org_id)
    topic = store.by_name(wanted.name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, None  # (Kafka sends no message)
    current = len(topic.partitions)
    if wanted.count < current:
        return (
            ErrorCode.invalid_partitions,
            f"The topic {wanted.name} currently has {current} partition(s); {wanted.count} "
            "would not be an increase.",
        )
    if wanted.count == current:
        return ErrorCode.invalid_partitions, f"Topic already has {current} partition(s)."
    if wanted.count > MAX_PARTITIONS:
        return ErrorCode.invalid_partitions, f"Number of partitions {wanted.count} is invalid."
    if wanted.assignments is not None:
        added = wanted.count - current
        if len(wanted.assignments) != added:
            return (
                ErrorCode.invalid_replica_assignment,
                f"Attempted to add {added} additional partition(s), but only "
                f"{len(wanted.assignments)} assignment(s) were specified.",
            )
        for assignment in wanted.assignments:
            if tuple(assignment.broker_ids) != (ctx.node_id,):
                return ErrorCode.invalid_replica_assignment, "Replicas must be this broker alone."
    if not validate_only:
        try:
            store.add_partitions(topic.name, wanted.count)
        except OSError as exc:
            log.error("could not add partitions to %s: %s", topic.name, exc)
            return ErrorCode.kafka_storage_error, f"Could not store the change: {exc}"
    return ErrorCode.none, None


# -- DeleteRecords --------------------------------------------------------------------------
@file_io
def delete_records(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(DELETE_RECORDS_KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    topics = []
    for wanted in request.topics:
        allowed = conn.may_use_topic(wanted.name)
        topic = store.by_name(wanted.name) if allowed else None
        partitions = []
        for asked in wanted.partitions:
            low, code = -1, ErrorCode.topic_authorization_failed
            if allowed:
                low, code = _delete_below(topic, asked.partition_index, asked.offset)
            partitions.append(
                make(
                    mod.DeleteRecordsPartitionResult,
                    partition_index=asked.partition_index,
                    low_watermark=low,
                    error_code=code,
                )
            )
        topics.append(
            make(mod.DeleteRecordsTopicResult, name=wanted.name, partitions=tuple(partitions))
        )
    return make(mod.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _delete_below(topic: Any, index: int, offset: int) -> tuple[int, ErrorCode]:
    """Move the partition's log start to `offset` (durably); (new log start, error)."""
    if topic is None or not 0 <= index < len(topic.partitions):
        return -1, ErrorCode.unknown_topic_or_partition
    partition = topic.partitions[index]
    high = partition.log_end_offset
    if offset == HIGH_WATERMARK:
        offset = high
    if offset < 0 or offset > high:
        return -1, ErrorCode.offset_out_of_range
    try:
        return partition.advance_log_start(offset), ErrorCode.none
    except OSError as exc:
        log.error("could not move the log start of %s-%d: %s", topic.name, index, exc)
        return -1, ErrorCode.kafka_storage_error


# -- DescribeLogDirs ------------------------------------------------------------------------
def describe_log_dirs(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    """One log dir, the data dir; the org's topics (those asked for, or all), sizes in bytes."""
    mod = schema(LOG_DIRS_KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    wanted: list[tuple[Any, list[int]]]
    if request.topics is None:
        wanted = [(t, list(range(len(t.partitions)))) for t in store if conn.may_use_topic(t.name)]
    else:
        wanted = []
        for asked in request.topics:
            topic = store.by_name(asked.topic) if conn.may_use_topic(asked.topic) else None
            if topic is not None:
                indexes = [i for i in asked.partitions if 0 <= i < len(topic.partitions)]
                wanted.append((topic, indexes))
    topics = tuple(
        make(
            mod.DescribeLogDirsTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    mod.DescribeLogDirsPartition,
                    partition_index=i,
                    partition_size=topic.partitions[i].size_bytes,
                    offset_lag=0,
                    is_future_key=False,
                )
                for i in indexes
            ),
        )
        for topic, indexes in wanted
    )
    usage = shutil.disk_usage(ctx.config.data_dir)
    result = make(
        mod.DescribeLogDirsResult,
        error_code=ErrorCode.none,
        log_dir=str(ctx.config.data_dir.resolve()),
        topics=topics,
        total_bytes=usage.total,
        usable_bytes=usage.free,
        is_cordoned=False,
    )
    return make(
        mod.DescribeLogDirsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=(result,),
    )


# -- DescribeCluster ------------------------------------------------------------------------
def describe_cluster(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    """This broker, as Kafka's AuthHelper.computeDescribeClusterResponse answers a broker
    endpoint; the cluster's authorized operations when asked (auth/acl_operations.py)."""
    mod = schema(CLUSTER_KEY, version)
    endpoint = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    if endpoint != BROKERS_ENDPOINT:
        if endpoint == CONTROLLERS_ENDPOINT:
            code = ErrorCode.mismatched_endpoint_type
            message = (
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                "of type CONTROLLER"
            )
        else:
            code = ErrorCode.unsupported_endpoint_type
            message = f"Unsupported endpoint type {endpoint}"
        return make(
            mod.DescribeClusterResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message,
            endpoint_type=BROKERS_ENDPOINT,
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=OMITTED,
        )
    broker = make(
        mod.DescribeClusterBroker,
        broker_id=ctx.node_id,
        host=ctx.advertised_host,
        port=ctx.advertised_port,
        rack=None,
        is_fenced=False,
    )
    wanted = request.include_cluster_authorized_operations
    return make(
        mod.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=endpoint,
        cluster_id=ctx.config.cluster_id,
        controller_id=ctx.node_id,
        brokers=(broker,),
        cluster_authorized_operations=(
            cluster_authorized_operations(conn.user) if wanted else OMITTED
        ),
    )

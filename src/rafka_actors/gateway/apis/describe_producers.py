"""DescribeProducers (61): the producers a partition knows (kafka-transactions.sh
describe-producers and find-hanging ask it): id, epoch, last sequence and timestamp, the
coordinator epoch of its last marker, and where its open transaction starts.

Read from the data plane's producer state (storage/producer_state.py). Topics are the
connection's org's; one outside the user's prefixes gets TOPIC_AUTHORIZATION_FAILED per
partition (Kafka: READ denied), an unknown one UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo, file_io
from ._build import NO_THROTTLE, make, schema

KEY = 61


@file_io
def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    topics = []
    for wanted in request.topics:
        allowed = conn.may_use_topic(wanted.name)
        topic = store.by_name(wanted.name) if allowed else None
        partitions = []
        for index in wanted.partition_indexes:
            active: list[Any] = []
            if not allowed:
                code = ErrorCode.topic_authorization_failed
            elif topic is None or not 0 <= index < len(topic.partitions):
                code = ErrorCode.unknown_topic_or_partition
            else:
                code = ErrorCode.none
                active = [
                    make(
                        mod.ProducerState,
                        producer_id=producer_id,
                        producer_epoch=entry.epoch,
                        last_sequence=entry.last_seq(),
                        last_timestamp=entry.last_timestamp,
                        coordinator_epoch=entry.coordinator_epoch,
                        current_txn_start_offset=entry.txn_first_offset,
                    )
                    for producer_id, entry in ctx.data.producers(topic, index)
                ]
            partitions.append(
                make(
                    mod.PartitionResponse,
                    partition_index=index,
                    error_code=code,
                    error_message=None,
                    active_producers=tuple(active),
                )
            )
        topics.append(make(mod.TopicResponse, name=wanted.name, partitions=tuple(partitions)))
    return make(mod.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))

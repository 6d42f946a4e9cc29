"""The requests behind `rafka-actors topics` and the configs part of `groups describe`.

Versions are fixed, ones this broker serves: Metadata v12, CreateTopics v7, DeleteTopics v6,
CreatePartitions v3, DescribeConfigs v4, IncrementalAlterConfigs v1, DescribeLogDirs v4 and
ListOffsets (calls.py). Every error code in an answer becomes a `BrokerError` naming what was
asked.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.create_partitions.v3 import request as create_partitions
from kio.schema.create_topics.v7 import request as create_topics
from kio.schema.delete_topics.v6 import request as delete_topics
from kio.schema.describe_configs.v4 import request as describe_configs
from kio.schema.describe_log_dirs.v4 import request as log_dirs
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as incremental
from kio.schema.metadata.v12 import request as metadata
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta

from . import calls
from .client import BrokerError, KafkaClient

TOPIC, GROUP = 2, 32  # ConfigResource types
DESCRIBE_CONFIGS = 32  # the api key
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))
SOURCES = {
    1: "topic",
    2: "dynamic broker",
    3: "dynamic default",
    4: "broker (static)",
    5: "default",
    8: "group",
}


@dataclass(frozen=True)
class ConfigValue:
    name: str
    value: str | None
    source: str
    read_only: bool


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    log_start_offset: int | None
    log_end_offset: int | None
    size_bytes: int | None


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: list[PartitionInfo] = field(default_factory=list)
    configs: list[ConfigValue] = field(default_factory=list)


def topic_names(client: KafkaClient) -> dict[str, int]:
    """Every topic the user may see, with its partition count."""
    request = metadata.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    return {t.name: len(t.partitions) for t in client.call(request).topics if not t.error_code}


def describe_topic(client: KafkaClient, name: str) -> TopicInfo:
    request = metadata.MetadataRequest(
        topics=(metadata.MetadataRequestTopic(topic_id=None, name=TopicName(name)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (topic,) = client.call(request).topics
    if topic.error_code != ErrorCode.none:
        raise BrokerError(topic.error_code, f"describing topic {name!r}")
    indexes = sorted(p.partition_index for p in topic.partitions)
    tps = [(name, i) for i in indexes]
    starts = calls.log_offsets(client, tps, calls.EARLIEST, strict=False)
    ends = calls.log_offsets(client, tps, calls.LATEST, strict=False)
    sizes = _sizes(client, name, indexes)
    partitions = [
        PartitionInfo(i, starts.get((name, i)), ends.get((name, i)), sizes.get(i)) for i in indexes
    ]
    return TopicInfo(name, str(topic.topic_id), partitions, configs(client, TOPIC, name))


def _sizes(client: KafkaClient, name: str, indexes: list[int]) -> dict[int, int]:
    request = log_dirs.DescribeLogDirsRequest(
        topics=(
            log_dirs.DescribableLogDirTopic(
                topic=TopicName(name), partitions=tuple(i32(i) for i in indexes)
            ),
        )
    )
    sizes: dict[int, int] = {}
    for result in client.call(request).results:
        for topic in result.topics:
            for p in topic.partitions:
                sizes[p.partition_index] = sizes.get(p.partition_index, 0) + p.partition_size
    return sizes


def configs(client: KafkaClient, kind: int, name: str) -> list[ConfigValue]:
    """A topic's or group's configs, each with its value and where it comes from."""
    request = describe_configs.DescribeConfigsRequest(
        resources=(
            describe_configs.DescribeConfigsResource(
                resource_type=i8(kind), resource_name=name, configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    (result,) = client.call(request).results
    if result.error_code != ErrorCode.none:
        raise BrokerError(result.error_code, f"describing the configs of {name!r}")
    return [
        ConfigValue(c.name, c.value, SOURCES.get(c.config_source, "?"), c.read_only)
        for c in result.configs
    ]


def create_topic(client: KafkaClient, name: str, partitions: int, configs: dict[str, str]) -> None:
    request = create_topics.CreateTopicsRequest(
        topics=(
            create_topics.CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(partitions),
                replication_factor=i16(-1),
                assignments=(),
                configs=tuple(
                    create_topics.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()
                ),
            ),
        ),
        timeout=TIMEOUT,
        validate_only=False,
    )
    (result,) = client.call(request).topics
    _check(result, f"creating topic {name!r}")


def alter_configs(
    client: KafkaClient, kind: int, name: str, set_: dict[str, str], delete: Iterable[str]
) -> None:
    changes = [
        incremental.AlterableConfig(name=k, config_operation=i8(SET), value=v)
        for k, v in set_.items()
    ] + [
        incremental.AlterableConfig(name=k, config_operation=i8(DELETE), value=None) for k in delete
    ]
    request = incremental.IncrementalAlterConfigsRequest(
        resources=(
            incremental.AlterConfigsResource(
                resource_type=i8(kind), resource_name=name, configs=tuple(changes)
            ),
        ),
        validate_only=False,
    )
    (result,) = client.call(request).responses
    _check(result, f"altering the configs of {name!r}")


def add_partitions(client: KafkaClient, name: str, total: int) -> None:
    request = create_partitions.CreatePartitionsRequest(
        topics=(
            create_partitions.CreatePartitionsTopic(
                name=TopicName(name), count=i32(total), assignments=None
            ),
        ),
        timeout=TIMEOUT,
        validate_only=False,
    )
    (result,) = client.call(request).results
    _check(result, f"adding partitions to {name!r}")


def delete_topic(client: KafkaClient, name: str) -> None:
    request = delete_topics.DeleteTopicsRequest(
        topics=(delete_topics.DeleteTopicState(name=TopicName(name), topic_id=None),),
        timeout=TIMEOUT,
    )
    (result,) = client.call(request).responses
    _check(result, f"deleting topic {name!r}")


def _check(result: Any, what: str) -> None:
    if result.error_code != ErrorCode.none:
        hint = result.error_message or ""
        raise BrokerError(result.error_code, what, hint)

"""The issue-45 handlers as plain functions: a group config change is stored, then asked of
the group's actor; the refusals are Kafka's; partitions grow and records go in storage."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.apis.configs import group_entries
from rafka_actors.gateway.apis.partitions_admin import TellGroups
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import Ask
from rafka_actors.group_common.ops import (
    GroupConfigOp,
    GroupConfigOpResp,
    TopicsChangedOp,
)
from rafka_actors.ids import GroupKey
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.group_configs import GroupConfigStore
from tests.batch_builder import build_batch

DESCRIBE, INCREMENTAL, CREATE_PARTITIONS, DELETE_RECORDS, CLUSTER = 32, 44, 37, 21, 60
ORG = 7


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("t", 2, org_id=ORG)
    config = BrokerConfig(data_dir=tmp_path, group_consumer_min_session_timeout_ms=1000)
    yield BrokerContext(
        config,
        data,
        "127.0.0.1",
        9092,
        API_TABLE,
        group_configs=GroupConfigStore.open(tmp_path),
    )
    data.close()


CONN = ConnectionInfo("10.0.0.7", 4242, org_id=ORG)


def _nested(key: int, version: int, cls: str, **values: Any) -> Any:
    return make(getattr(sys.modules[request_class(key, version).__module__], cls), **values)


def _call(ctx: BrokerContext, key: int, version: int, **values: Any) -> Any:
    return API_TABLE[key].handler(ctx, CONN, version, make(request_class(key, version), **values))


def _describe(ctx: BrokerContext, kind: int, name: str) -> Any:
    resource = _nested(
        DESCRIBE,
        4,
        "DescribeConfigsResource",
        resource_type=kind,
        resource_name=name,
        configuration_keys=None,
    )
    (result,) = _call(
        ctx,
        DESCRIBE,
        4,
        resources=(resource,),
        include_synonyms=True,
        include_documentation=True,
    ).results
    return result


def test_a_group_config_is_stored_then_asked_of_the_group_s_actor(ctx: BrokerContext) -> None:
    change = _nested(
        INCREMENTAL,
        1,
        "AlterableConfig",
        name="consumer.session.timeout.ms",
        config_operation=0,
        value="6000",
    )
    resource = _nested(
        INCREMENTAL,
        1,
        "AlterConfigsResource",
        resource_type=32,
        resource_name="g",
        configs=(change,),
    )
    step = _call(ctx, INCREMENTAL, 1, resources=(resource,), validate_only=False)
    assert isinstance(step, Ask)
    assert step.asks == (
        (GroupKey(ORG, "g"), GroupConfigOp((("consumer.session.timeout.ms", "6000"),))),
    )
    (response,) = step.then([GroupConfigOpResp(0)]).responses
    assert response.error_code == ErrorCode.none
    assert GroupConfigStore.open(ctx.config.data_dir).get(ORG, "g") == {
        "consumer.session.timeout.ms": "6000"
    }
    entry = {c.name: c for c in _describe(ctx, 32, "g").configs}["consumer.session.timeout.ms"]
    assert (entry.value, entry.config_source) == ("6000", 8)
    assert [s.name for s in entry.synonyms] == [
        "consumer.session.timeout.ms",
        "group.consumer.session.timeout.ms",
    ]
    others = {c.name: c.value for c in _describe(ctx, 32, "g-other").configs}
    assert others["consumer.session.timeout.ms"] == "45000"  # others: the default
    assert "consumer group protocol" in entry.documentation


def test_share_group_configs_are_described_and_sent_to_the_group(ctx: BrokerContext) -> None:
    """Kafka's share configs (issue 54): STRING or INT, each with its broker synonym (Kafka's
    own default where the broker has no setting); a change goes to the group's actor."""
    described = {c.name: c for c in _describe(ctx, 32, "jobs").configs}
    isolation = described["share.isolation.level"]
    assert (isolation.value, isolation.config_source, isolation.config_type) == (
        "read_uncommitted",
        5,  # DEFAULT_CONFIG
        2,  # STRING
    )
    assert [(s.name, s.value) for s in isolation.synonyms] == [
        ("share.isolation.level", "read_uncommitted")
    ]
    lock = described["share.record.lock.duration.ms"]
    assert (lock.value, lock.config_type) == ("30000", 3)  # INT
    assert [s.name for s in lock.synonyms] == ["group.share.record.lock.duration.ms"]
    changes = tuple(
        _nested(INCREMENTAL, 1, "AlterableConfig", name=n, config_operation=0, value=v)
        for n, v in (
            ("share.isolation.level", "read_committed"),
            ("share.delivery.count.limit", "3"),
        )
    )
    resource = _nested(
        INCREMENTAL,
        1,
        "AlterConfigsResource",
        resource_type=32,
        resource_name="jobs",
        configs=changes,
    )
    step = _call(ctx, INCREMENTAL, 1, resources=(resource,), validate_only=False)
    assert step.asks == (
        (
            GroupKey(ORG, "jobs"),
            GroupConfigOp(
                (("share.delivery.count.limit", "3"), ("share.isolation.level", "read_committed"))
            ),
        ),
    )
    too_many = _nested(
        INCREMENTAL,
        1,
        "AlterableConfig",
        name="share.delivery.count.limit",
        config_operation=0,
        value="11",
    )
    refused = _call(
        ctx,
        INCREMENTAL,
        1,
        resources=(
            _nested(
                INCREMENTAL,
                1,
                "AlterConfigsResource",
                resource_type=32,
                resource_name="jobs",
                configs=(too_many,),
            ),
        ),
        validate_only=False,
    )
    (response,) = refused.responses  # answered at once: nothing for the actor
    assert response.error_code == ErrorCode.invalid_config
    assert response.error_message == (
        "share.delivery.count.limit must be less than or equal to "
        "group.share.max.delivery.count.limit"
    )


def test_every_describe_version_is_answered(ctx: BrokerContext) -> None:
    for version in (1, 2, 3, 4):  # librdkafka asks v1, kafka-python v2, Java v4
        values = {"include_synonyms": True, "include_documentation": True}
        resource = _nested(
            DESCRIBE,
            version,
            "DescribeConfigsResource",
            resource_type=2,
            resource_name="t",
            configuration_keys=None,
        )
        response = _call(ctx, DESCRIBE, version, resources=(resource,), **values)
        assert response.results[0].error_code == ErrorCode.none
        assert len(response.results[0].configs) == 33  # as Kafka 4.3.1 lists a new topic's


def test_describe_refusals(ctx: BrokerContext) -> None:
    assert _describe(ctx, 4, "3").error_code == ErrorCode.invalid_request  # not this broker
    assert _describe(ctx, 16, "x").error_code == ErrorCode.invalid_request  # client metrics
    assert _describe(ctx, 2, "nope").error_code == ErrorCode.unknown_topic_or_partition
    assert _describe(ctx, 32, "").error_code == ErrorCode.invalid_request


def test_create_partitions_grows_the_topic_and_tells_the_running_groups(
    ctx: BrokerContext,
) -> None:
    def grow(count: int) -> Any:
        topic = _nested(
            CREATE_PARTITIONS, 3, "CreatePartitionsTopic", name="t", count=count, assignments=None
        )
        return _call(ctx, CREATE_PARTITIONS, 3, topics=(topic,), timeout=0, validate_only=False)

    (refused,) = grow(2).results
    assert refused.error_code == ErrorCode.invalid_partitions
    assert refused.error_message == "Topic already has 2 partition(s)."
    step = grow(3)
    assert isinstance(step, TellGroups)
    assert (step.org_id, step.op, step.stored_too) == (ORG, TopicsChangedOp(), False)
    assert step.then([]).results[0].error_code == ErrorCode.none
    assert len(ctx.data.topics_for(ORG).by_name("t").partitions) == 3  # type: ignore[union-attr]


def test_delete_records_moves_the_log_start_within_the_log(ctx: BrokerContext) -> None:
    topic = ctx.data.topics_for(ORG).by_name("t")
    assert topic is not None
    for _ in range(4):
        ctx.data.append(topic, 0, [memoryview(build_batch([(b"k", b"v")]))])

    def delete(offset: int) -> Any:
        partition = _nested(
            DELETE_RECORDS, 2, "DeleteRecordsPartition", partition_index=0, offset=offset
        )
        wanted = _nested(DELETE_RECORDS, 2, "DeleteRecordsTopic", name="t", partitions=(partition,))
        (result,) = _call(ctx, DELETE_RECORDS, 2, topics=(wanted,), timeout=0).topics
        return result.partitions[0]

    assert delete(5).error_code == ErrorCode.offset_out_of_range
    assert (delete(2).low_watermark, delete(1).low_watermark) == (2, 2)
    assert delete(-1).low_watermark == 4  # the high watermark
    assert topic.partitions[0].log_start_offset == 4


def test_describe_cluster_names_this_broker(ctx: BrokerContext) -> None:
    response = _call(ctx, CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    assert response.error_code == ErrorCode.none
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(0, "127.0.0.1", 9092)]
    assert response.controller_id == 0


def test_alter_configs_replaces_a_topic_s_configs(ctx: BrokerContext) -> None:
    store = ctx.data.topics_for(ORG)
    store.alter_configs("t", {"segment.bytes": "4096", "retention.ms": "1000"})
    given = _nested(33, 2, "AlterableConfig", name="retention.bytes", value="5000")
    resource = _nested(
        33, 2, "AlterConfigsResource", resource_type=2, resource_name="t", configs=(given,)
    )
    step = _call(ctx, 33, 2, resources=(resource,), validate_only=False)
    (response,) = step.responses if not isinstance(step, Ask) else step.then([None]).responses
    assert response.error_code == ErrorCode.none
    assert store.by_name("t").configs == {"retention.bytes": "5000"}  # type: ignore[union-attr]


def test_a_change_that_cannot_be_stored_is_a_storage_error(
    ctx: BrokerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*_args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("rafka_actors.storage.group_configs.os.replace", full_disk)
    change = _nested(
        INCREMENTAL,
        1,
        "AlterableConfig",
        name="consumer.session.timeout.ms",
        config_operation=0,
        value="6000",
    )
    resource = _nested(
        INCREMENTAL,
        1,
        "AlterConfigsResource",
        resource_type=32,
        resource_name="g",
        configs=(change,),
    )
    response = _call(ctx, INCREMENTAL, 1, resources=(resource,), validate_only=False)
    assert not isinstance(response, Ask)  # nothing stored: the group is not told
    assert response.responses[0].error_code == ErrorCode.kafka_storage_error
    assert ctx.group_configs is not None and ctx.group_configs.get(ORG, "g") == {}


def test_the_oldest_versions_served_are_answered(ctx: BrokerContext) -> None:
    """Fields come and go between versions: the handlers read only what each version has."""
    assert _call(ctx, CLUSTER, 0, include_cluster_authorized_operations=False).brokers
    logs = _call(ctx, 35, 1, topics=None).results[0]
    assert sorted(p.partition_index for p in logs.topics[0].partitions) == [0, 1]
    grow = _nested(
        CREATE_PARTITIONS, 0, "CreatePartitionsTopic", name="t", count=2, assignments=None
    )
    (result,) = _call(
        ctx, CREATE_PARTITIONS, 0, topics=(grow,), timeout=0, validate_only=True
    ).results
    assert result.error_code == ErrorCode.invalid_partitions
    below = _nested(DELETE_RECORDS, 0, "DeleteRecordsPartition", partition_index=0, offset=0)
    wanted = _nested(DELETE_RECORDS, 0, "DeleteRecordsTopic", name="t", partitions=(below,))
    (topic,) = _call(ctx, DELETE_RECORDS, 0, topics=(wanted,), timeout=0).topics
    assert topic.partitions[0].low_watermark == 0
    for key in (33, INCREMENTAL):
        config = _nested(
            key, 0, "AlterableConfig", name="retention.ms", config_operation=0, value="5"
        )
        resource = _nested(
            key, 0, "AlterConfigsResource", resource_type=2, resource_name="t", configs=(config,)
        )
        (response,) = _call(ctx, key, 0, resources=(resource,), validate_only=True).responses
        assert response.error_code == ErrorCode.none


def test_create_topics_answers_with_the_new_topic_s_configs(ctx: BrokerContext) -> None:
    config = _nested(19, 7, "CreatableTopicConfig", name="retention.ms", value=" 60000")
    topic = _nested(
        19,
        7,
        "CreatableTopic",
        name="fresh",
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=(config,),
    )
    (result,) = _call(ctx, 19, 7, topics=(topic,), timeout=0, validate_only=False).topics
    assert result.error_code == ErrorCode.none
    configs = {c.name: (c.value, c.config_source) for c in result.configs}
    assert configs["retention.ms"] == ("60000", 1)  # as Kafka prints it, set on the topic
    assert configs["segment.bytes"] == (str(1 << 30), 5)
    stored = ctx.data.topics_for(ORG).by_name("fresh")
    assert stored is not None and stored.configs == {"retention.ms": "60000"}


@pytest.mark.parametrize(
    ("name", "partitions", "factor", "code", "message"),
    [
        ("bad name!", 1, 1, ErrorCode.invalid_topic_exception,
         "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII"
         " alphanumerics, '.', '_' and '-'"),
        ("..", 1, 1, ErrorCode.invalid_topic_exception,
         "Topic name is invalid: '..' is not allowed"),
        ("t" * 250, 1, 1, ErrorCode.invalid_topic_exception,
         f"Topic name is invalid: the length of '{'t' * 250}' is longer than the max allowed"
         " length 249"),
        ("z", 0, 1, ErrorCode.invalid_partitions,
         "Number of partitions was set to an invalid non-positive value."),
        ("z", 1, 3, ErrorCode.invalid_replication_factor,
         "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot"
         " be reached because only 1 broker(s) are registered or some brokers have all their log"
         " directories cordoned."),
        ("z", 1, 0, ErrorCode.invalid_replication_factor,
         "Replication factor must be larger than 0, or -1 to use the default value."),
    ],
)  # fmt: skip
def test_create_topics_refuses_as_kafka_does(
    ctx: BrokerContext, name: str, partitions: int, factor: int, code: ErrorCode, message: str
) -> None:
    """Kafka 4.3.1's codes and messages (seen side by side by tests/kafka_diff), and an empty
    list of configs, not null."""
    topic = _nested(
        19, 7, "CreatableTopic", name=name, num_partitions=partitions,
        replication_factor=factor, assignments=(), configs=(),
    )  # fmt: skip
    (result,) = _call(ctx, 19, 7, topics=(topic,), timeout=0, validate_only=False).topics
    assert (result.error_code, result.error_message) == (code, message)
    assert result.configs == ()


def test_unknown_topics_to_delete_or_grow_are_answered_as_kafka_does(ctx: BrokerContext) -> None:
    wanted = _nested(20, 6, "DeleteTopicState", name="nope", topic_id=None)
    (deleted,) = _call(ctx, 20, 6, topics=(wanted,), topic_names=(), timeout=0).responses
    assert deleted.error_code == ErrorCode.unknown_topic_or_partition
    assert deleted.error_message == "This server does not host this topic-partition."
    grow = _nested(
        CREATE_PARTITIONS, 3, "CreatePartitionsTopic", name="nope", count=3, assignments=None
    )
    (grown,) = _call(
        ctx, CREATE_PARTITIONS, 3, topics=(grow,), timeout=0, validate_only=False
    ).results
    assert (grown.error_code, grown.error_message) == (ErrorCode.unknown_topic_or_partition, None)


def test_a_group_config_over_a_broker_setting_set_at_start_up() -> None:
    """As Kafka 4.3.1 describes it: the group's value, then the static broker setting, then
    the broker's default, each a synonym."""
    entries = {
        e[0]: e
        for e in group_entries(
            BrokerConfig(group_share_delivery_count_limit=7), {"share.delivery.count.limit": "3"}
        )
    }
    _, value, source, _, _, synonyms = entries["share.delivery.count.limit"]
    assert (value, source) == ("3", 8)  # DYNAMIC_GROUP_CONFIG
    assert synonyms == (
        ("share.delivery.count.limit", "3", 8),
        ("group.share.delivery.count.limit", "7", 4),  # STATIC_BROKER_CONFIG
        ("group.share.delivery.count.limit", "5", 5),  # DEFAULT_CONFIG
    )
    assert entries["share.record.lock.duration.ms"][5] == (
        ("group.share.record.lock.duration.ms", "30000", 5),
    )

"""Topic configs validated one way everywhere, and compression.type applied (issue 55 §5).

* CreateTopics (confluent-kafka, kafka-python), AlterConfigs and IncrementalAlterConfigs take
  every topic config Kafka 4.3 has, and refuse an unknown name or a bad value with
  INVALID_CONFIG and Kafka's message, changing nothing;
* DescribeConfigs' documentation says which configs change nothing here;
* `compression.type` is applied on append: a batch whose codec differs is recompressed, one
  whose codec matches is stored byte for byte, and every client (Java's too, where it is
  installed) reads what was recompressed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import kafka.admin
import kafka.errors
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.describe_configs.v4 import request as describe_req
from kio.schema.describe_configs.v4 import response as describe_resp

from rafka_actors.storage.batch_records import recompressed

from ..batch_builder import build_batch
from ..broker_process import BrokerProcess
from ..raw_client import RawClient
from .clients import AioKafka, Confluent, KafkaPython

pytestmark = [
    pytest.mark.e2e,
    # librdkafka's admin test sets configs with the legacy AlterConfigs too
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),
]
SET = AlterConfigOpType.SET

WAIT = 20.0
KAFKA_TOPIC_CONFIGS = Path(__file__).parents[1] / "storage" / "kafka_4_3_topic_configs.json"
# a valid value, not the default, for every topic config of Kafka 4.3
EVERY_CONFIG = {
    "cleanup.policy": "delete",
    "compression.type": "lz4",
    "compression.gzip.level": "5",
    "compression.lz4.level": "10",
    "compression.zstd.level": "7",
    "delete.retention.ms": "900",
    "file.delete.delay.ms": "1000",
    "flush.messages": "1000",
    "flush.ms": "12345678",
    "follower.replication.throttled.replicas": "*",
    "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "0:0",
    "local.retention.bytes": "-1",
    "local.retention.ms": "-1",
    "max.compaction.lag.ms": "3600000",
    "max.message.bytes": "2000000",
    "message.timestamp.after.max.ms": "7200000",
    "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "2",
    "preallocate": "true",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "remote.storage.enable": "false",
    "retention.bytes": "100000000",
    "retention.ms": "86400000",
    "segment.bytes": "2097152",
    "segment.index.bytes": "4096",
    "segment.jitter.ms": "10",
    "segment.ms": "3600000",
    "unclean.leader.election.enable": "true",
}
# (configs, Kafka 4.3.1's message for them)
REFUSED = [
    ({"dummy.doesntexist": "broker is verifying this"}, "Unknown topic config name"),
    ({"compression.type": "GZIP"}, "String must be one of: uncompressed, zstd, lz4"),
    ({"segment.bytes": "1000"}, "Value must be at least 1048576"),
    ({"flush.ms": "soon"}, "Not a number of type LONG"),
    ({"preallocate": "yes"}, "Expected value to be either true or false"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config"),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("configs") / "data").start()
    yield process
    if process.alive():
        process.kill()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: futures outlive calls


def _name(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


def _create(admin: AdminClient, topic: str, configs: dict[str, str]) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(WAIT)


def _described(admin: AdminClient, topic: str) -> dict[str, tuple[str, int]]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(WAIT)
    return {name: (entry.value, entry.source) for name, entry in entries.items()}


def _refusal(call: object) -> confluent_kafka.KafkaError:
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        call.result(WAIT)  # type: ignore[attr-defined]
    error: confluent_kafka.KafkaError = refused.value.args[0]
    return error


def test_every_kafka_topic_config_is_taken_at_creation(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    kafka_names = {name for name, _default, _kind in json.loads(KAFKA_TOPIC_CONFIGS.read_text())}
    assert set(EVERY_CONFIG) == kafka_names
    topic = _name("every")
    _create(admin, topic, EVERY_CONFIG)
    described = _described(admin, topic)
    assert {n: described[n] for n in EVERY_CONFIG} == {n: (v, 1) for n, v in EVERY_CONFIG.items()}
    legacy = kafka.admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        legacy.create_topics([kafka.admin.NewTopic(_name("kp"), 1, 1, topic_configs=EVERY_CONFIG)])
        refused = kafka.admin.NewTopic(_name("kp"), 1, 1, topic_configs={"dummy.x": "1"})
        with pytest.raises(kafka.errors.InvalidConfigurationError, match="Unknown topic config"):
            legacy.create_topics([refused])
    finally:
        legacy.close()


@pytest.mark.parametrize(("configs", "message"), REFUSED)
def test_unknown_names_and_bad_values_are_refused_by_every_api(
    admin: AdminClient, configs: dict[str, str], message: str
) -> None:
    topic = _name("refused")
    error = _refusal(admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert message in error.str()
    _create(admin, topic, {"flush.ms": "1000"})
    before = _described(admin, topic)
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config=configs)
    error = _refusal(admin.alter_configs([resource])[resource])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert message in error.str()
    entries = [ConfigEntry(n, v, incremental_operation=SET) for n, v in configs.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    error = _refusal(admin.incremental_alter_configs([resource])[resource])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert message in error.str()
    assert _described(admin, topic) == before  # nothing changed


def test_the_alter_apis_take_what_librdkafkas_admin_test_sets(admin: AdminClient) -> None:
    topic = _name("alter")
    _create(admin, topic, {"compression.type": "lz4", "delete.retention.ms": "900"})
    resource = ConfigResource(
        ResourceType.TOPIC, topic, set_config={"compression.type": "gzip", "flush.ms": "12345678"}
    )
    admin.alter_configs([resource])[resource].result(WAIT)
    described = _described(admin, topic)
    assert described["compression.type"] == ("gzip", 1)
    assert described["delete.retention.ms"][1] == 5  # AlterConfigs replaces them all
    changes = [
        ConfigEntry("compression.type", "lz4", incremental_operation=SET),
        ConfigEntry("max.compaction.lag.ms", "3600000", incremental_operation=SET),
        ConfigEntry("flush.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry(
            "leader.replication.throttled.replicas",
            "0:0",
            incremental_operation=AlterConfigOpType.APPEND,
        ),
    ]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=changes)
    admin.incremental_alter_configs([resource])[resource].result(WAIT)
    described = _described(admin, topic)
    assert described["compression.type"] == ("lz4", 1)
    assert described["max.compaction.lag.ms"] == ("3600000", 1)
    assert described["flush.ms"][1] == 5
    assert described["leader.replication.throttled.replicas"] == ("0:0", 1)
    append = ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.APPEND)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[append])
    error = _refusal(admin.incremental_alter_configs([resource])[resource])
    assert "Can't APPEND to key compression.type because its type is not LIST" in error.str()


def test_the_documentation_says_which_configs_change_nothing(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    topic = _name("docs")
    _create(admin, topic, {})
    request = describe_req.DescribeConfigsRequest(
        resources=(
            describe_req.DescribeConfigsResource(
                resource_type=2, resource_name=topic, configuration_keys=None
            ),
        ),
        include_synonyms=True,
        include_documentation=True,
    )
    client = RawClient(broker.host, broker.port)
    try:
        response = client._call(request, describe_resp.DescribeConfigsResponse, header_version=1)
    finally:
        client.close()
    docs = {c.name: c.documentation for c in response.results[0].configs}
    assert "not acted on here" in docs["flush.ms"]
    assert "not acted on here" in docs["segment.ms"]
    assert "not acted on here" not in docs["compression.type"]
    assert "not acted on here" not in docs["message.timestamp.type"]


# -- compression.type ----------------------------------------------------------------------------
CODEC_IDS = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSIONS = [  # (the topic's compression.type, the producer's codec)
    ("gzip", "none"),
    ("snappy", "none"),
    ("lz4", "gzip"),
    ("zstd", "snappy"),
    ("uncompressed", "lz4"),
    ("producer", "zstd"),
]
RECORDS = [(b"key-%d" % i, b"value-%d-" % i + b"x" * (i % 7) * 100) for i in range(200)]


def _stored_codecs(broker: BrokerProcess, topic: str) -> set[int]:
    client = RawClient(broker.host, broker.port)
    try:
        return {header.attributes & 0x07 for header in client.stored_batches(topic, 0)}
    finally:
        client.close()


@pytest.mark.parametrize(("topic_codec", "producer_codec"), COMPRESSIONS)
def test_compression_type_is_applied_on_append(
    broker: BrokerProcess, admin: AdminClient, topic_codec: str, producer_codec: str
) -> None:
    topic = _name(f"codec-{topic_codec}")
    _create(admin, topic, {"compression.type": topic_codec})
    assert Confluent(broker.bootstrap).produce(topic, RECORDS, producer_codec) == len(RECORDS)
    stored = producer_codec if topic_codec == "producer" else topic_codec
    assert _stored_codecs(broker, topic) == {CODEC_IDS[stored]}
    for client in (Confluent, KafkaPython, AioKafka):
        got = client(broker.bootstrap).read_all(topic, 1, len(RECORDS))
        assert got[0] == [value for _key, value in RECORDS], client.name


def test_a_batch_in_the_topics_codec_is_stored_byte_for_byte(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    topic = _name("kept")
    _create(admin, topic, {"compression.type": "lz4"})
    sent = recompressed(build_batch([(b"k", b"v" * 500)] * 20), 3, None)
    client = RawClient(broker.host, broker.port)
    try:
        assert client.produce(topic, 0, sent) == (0, 0)
        stored = client.fetch(topic, 0, 0, 0).records
    finally:
        client.close()
    assert stored[12:16] == b"\x00\x00\x00\x00"  # (the leader epoch is stamped, as ever)
    assert stored[:12] + stored[16:] == sent[:12] + sent[16:]


@pytest.mark.skipif(
    shutil.which("java") is None
    or not (Path.home() / ".cache" / "kafka-ref" / "kafka-tool").exists(),
    reason="Kafka's Java tools are not installed here",
)
def test_javas_consumer_reads_every_codec_the_broker_wrote(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    """Java is the strict reader (LZ4 frames of independent blocks, xerial snappy)."""
    prefix = _name("java")
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        _create(admin, f"{prefix}-{codec}", {"compression.type": codec})
        Confluent(broker.bootstrap).produce(f"{prefix}-{codec}", RECORDS, "none")
    started = time.monotonic()
    tool = Path.home() / ".cache" / "kafka-ref" / "kafka-tool"
    result = subprocess.run(
        [str(tool), "console-consumer", "--bootstrap-server", broker.bootstrap,
         "--include", f"{prefix}-.*", "--from-beginning", "--max-messages", str(4 * len(RECORDS)),
         "--timeout-ms", "20000"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"},
    )  # fmt: skip
    values = result.stdout.splitlines()
    assert len(values) == 4 * len(RECORDS), (result.stderr[-2000:], time.monotonic() - started)
    assert sorted(values) == sorted(v.decode() for _k, v in RECORDS for _ in range(4))


def test_kafkas_dynamic_broker_configs_are_taken_and_kept(admin: AdminClient) -> None:
    """librdkafka's admin test sets one with each alter API and expects NO_ERROR."""
    broker = ConfigResource(
        ResourceType.BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
    )
    admin.alter_configs([broker])[broker].result(WAIT)
    change = ConfigEntry("background.threads", "9", incremental_operation=SET)
    broker = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[change])
    admin.incremental_alter_configs([broker])[broker].result(WAIT)
    described = admin.describe_configs([broker])[broker].result(WAIT)
    assert (described["background.threads"].value, described["background.threads"].source) == (
        "9",
        2,  # DYNAMIC_BROKER_CONFIG
    )
    ours = ConfigResource(ResourceType.BROKER, "0", set_config={"log.retention.ms": "1000"})
    error = _refusal(admin.alter_configs([ours])[ours])
    assert error.code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: [log.retention.ms]" in error.str()

"""Kafka's admin tools against our broker, each asserted on what it prints: kafka-topics
(create with a config, describe, alter partitions, list, delete), kafka-configs on topics and
on the broker, kafka-delete-records and kafka-get-offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ...broker_process import BrokerProcess
from .peer import KafkaPeer

# a JVM start takes seconds on a loaded machine: more than the default 120 s a test
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_kafka_topics_creates_describes_alters_lists_and_deletes(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    topic = ("--topic", "admin-topic")
    created = kafka_peer.ok(
        "topics",
        *server,
        "--create",
        *topic,
        "--partitions",
        "3",
        "--config",
        "retention.ms=3600000",
    )
    assert created.strip() == "Created topic admin-topic."
    kafka_peer.ok("topics", *server, "--alter", *topic, "--partitions", "4")
    described = kafka_peer.ok("topics", *server, "--describe", *topic).splitlines()
    head = described[0].split("\t")
    assert head[0] == "Topic: admin-topic" and head[1].startswith("TopicId: ")
    assert head[2:] == [
        "PartitionCount: 4",
        "ReplicationFactor: 1",
        "Configs: retention.ms=3600000",
    ]
    assert [line.split("\t")[2:6] for line in described[1:]] == [
        [f"Partition: {p}", "Leader: 0", "Replicas: 0", "Isr: 0"] for p in range(4)
    ]
    assert "admin-topic" in kafka_peer.ok("topics", *server, "--list").split()
    kafka_peer.ok("topics", *server, "--delete", *topic)
    assert "admin-topic" not in kafka_peer.ok("topics", *server, "--list").split()


def test_kafka_configs_alters_and_describes_a_topic_and_describes_the_broker(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    kafka_peer.ok("topics", *server, "--create", "--topic", "configured-topic")
    entity = ("--entity-type", "topics", "--entity-name", "configured-topic")
    altered = kafka_peer.ok(
        "configs",
        *server,
        "--alter",
        *entity,
        "--add-config",
        "retention.ms=7200000,max.message.bytes=2000000",
    )
    assert altered.strip() == "Completed updating config for topic configured-topic."
    kafka_peer.ok("configs", *server, "--alter", *entity, "--delete-config", "max.message.bytes")
    assert kafka_peer.ok("configs", *server, "--describe", *entity).splitlines() == [
        "Dynamic configs for topic configured-topic are:",
        "  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "retention.ms=7200000, DEFAULT_CONFIG:log.retention.ms=604800000}",
    ]
    refused = kafka_peer.run(
        "configs", *server, "--alter", *entity, "--add-config", "retention.ms=x"
    )
    assert refused.returncode != 0
    assert "InvalidConfigurationException" in refused.stdout + refused.stderr, refused.explain()
    broker = kafka_peer.ok(
        "configs", *server, "--describe", "--all", "--entity-type", "brokers", "--entity-name", "0"
    ).splitlines()
    assert broker[0] == "All configs for broker 0 are:"
    assert (
        "  group.initial.rebalance.delay.ms=0 sensitive=false "
        "synonyms={STATIC_BROKER_CONFIG:group.initial.rebalance.delay.ms=0}"
    ) in broker


def test_kafka_delete_records_moves_the_log_start_that_get_offsets_shows(
    kafka_peer: KafkaPeer, rafka: BrokerProcess, tmp_path: Path
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    kafka_peer.ok("topics", *server, "--create", "--topic", "trimmed")
    kafka_peer.ok("console-producer", *server, "--topic", "trimmed", input="a\nb\nc\nd\ne\n")
    wanted = tmp_path / "delete.json"
    wanted.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "trimmed", "partition": 0, "offset": 2}]}
        )
    )
    deleted = kafka_peer.ok("delete-records", *server, "--offset-json-file", str(wanted))
    assert deleted.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: trimmed-0\tlow_watermark: 2",
    ]
    earliest = kafka_peer.ok("get-offsets", *server, "--topic", "trimmed", "--time", "-2")
    latest = kafka_peer.ok("get-offsets", *server, "--topic", "trimmed", "--time", "-1")
    assert (earliest.split(), latest.split()) == (["trimmed:0:2"], ["trimmed:0:5"])

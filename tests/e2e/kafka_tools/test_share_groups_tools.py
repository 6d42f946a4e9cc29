"""Kafka's share-group quickstart, as written, against our broker (issue 54's acceptance), and
Kafka's share-group tools: kafka-configs on group configs, kafka-console-share-consumer,
kafka-share-groups (describe, members, state, offsets, reset, delete-offsets, delete).

Kafka's quickstart: create a topic, write events with the console producer, set
`share.auto.offset.reset=earliest` on the share group, read them with the console share
consumer, and describe the group. Without the per-group config (issue 54 §1) the first step
failed with "Unknown group config name", and the consumer saw nothing already written.
"""

from __future__ import annotations

import re

import pytest

from ...broker_process import BrokerProcess
from .peer import KafkaPeer

# a JVM start takes seconds on a loaded machine: more than the default 120 s a test
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TOPIC, GROUP = "quickstart-events", "share-group"
EVENTS = ("This is my first event", "This is my second event")


def _row(output: str, *cells: str) -> list[str]:
    """The table row of `output` whose leading cells are `cells` (whitespace-separated)."""
    for line in output.splitlines():
        words = line.split()
        if words[: len(cells)] == list(cells):
            return words
    raise AssertionError(f"no row {cells} in:\n{output}")


def test_kafkas_share_group_quickstart(kafka_peer: KafkaPeer, rafka: BrokerProcess) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    created = kafka_peer.ok("topics", "--create", "--topic", TOPIC, *server)
    assert created.strip() == f"Created topic {TOPIC}."
    kafka_peer.ok("console-producer", "--topic", TOPIC, *server, input="\n".join(EVENTS) + "\n")
    altered = kafka_peer.ok(
        "configs",
        *server,
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        GROUP,
        "--add-config",
        "share.auto.offset.reset=earliest",
    )
    assert altered.strip() == f"Completed updating config for group {GROUP}."

    consumer = kafka_peer.start(
        "console-share-consumer", "--topic", TOPIC, "--group", GROUP, *server
    )
    try:
        assert consumer.wait_for_lines(2) == list(EVENTS)
        members = kafka_peer.ok(
            "share-groups", *server, "--describe", "--members", "--group", GROUP
        )
        row = _row(members, "GROUP", "CONSUMER-ID")
        assert row == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        member = _row(members, GROUP)
        assert member[-2:] == ["1", f"{TOPIC}:0"]  # one partition, this one
    finally:
        stopped = consumer.stop()
    assert "Processed a total of 2 messages" in stopped.stderr + stopped.stdout

    described = kafka_peer.ok("share-groups", *server, "--describe", "--group", GROUP)
    assert _row(described, "GROUP") == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    # both events acknowledged (the consumer's close sends them): nothing left to deliver
    assert _row(described, GROUP) == [GROUP, TOPIC, "0", "2", "0"]
    _the_quickstart_group_is_reset_and_deleted(kafka_peer, server)


def test_kafka_configs_sets_describes_refuses_and_deletes_share_group_configs(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    entity = ("--entity-type", "groups", "--entity-name", "configured")
    kafka_peer.ok(
        "configs",
        *server,
        "--alter",
        *entity,
        "--add-config",
        "share.record.lock.duration.ms=20000,share.delivery.count.limit=3,"
        "share.isolation.level=read_committed",
    )
    refused = kafka_peer.run(
        "configs", *server, "--alter", *entity, "--add-config", "share.delivery.count.limit=11"
    )
    assert refused.returncode != 0
    assert (
        "InvalidConfigurationException: share.delivery.count.limit must be less than or "
        "equal to group.share.max.delivery.count.limit"
    ) in refused.stdout + refused.stderr
    kafka_peer.ok(
        "configs", *server, "--alter", *entity, "--delete-config", "share.isolation.level"
    )
    described = kafka_peer.ok("configs", *server, "--describe", *entity)
    assert described.splitlines() == [
        "Dynamic configs for group configured are:",
        "  share.delivery.count.limit=3 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "share.delivery.count.limit=3, DEFAULT_CONFIG:group.share.delivery.count.limit=5}",
        "  share.record.lock.duration.ms=20000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "share.record.lock.duration.ms=20000, "
        "DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}",
    ]
    everything = kafka_peer.ok("configs", *server, "--describe", "--all", *entity)
    assert (
        "  share.isolation.level=read_uncommitted sensitive=false "
        "synonyms={DEFAULT_CONFIG:share.isolation.level=read_uncommitted}"
    ) in everything.splitlines()


def _the_quickstart_group_is_reset_and_deleted(
    kafka_peer: KafkaPeer, server: tuple[str, ...]
) -> None:
    """kafka-share-groups on the quickstart's group, once it has read its events and left."""
    group = ("--group", GROUP)
    state = kafka_peer.ok("share-groups", *server, "--describe", "--state", *group)
    assert re.search(rf"^{GROUP}\s+127\.0\.0\.1:\d+\s+\(0\)\s+Empty\s+0$", state, re.M), state
    reset = kafka_peer.ok(
        "share-groups",
        *server,
        "--reset-offsets",
        "--to-earliest",
        "--execute",
        "--topic",
        TOPIC,
        *group,
    )
    assert _row(reset, GROUP) == [GROUP, TOPIC, "0", "0"]
    offsets = kafka_peer.ok("share-groups", *server, "--describe", "--offsets", *group)
    assert _row(offsets, GROUP)[-2:] == ["0", "2"]  # from the start again: both to deliver
    deleted = kafka_peer.ok("share-groups", *server, "--delete-offsets", "--topic", TOPIC, *group)
    assert _row(deleted, TOPIC) == [TOPIC, "Successful"]
    gone = kafka_peer.ok("share-groups", *server, "--delete", *group)
    assert gone.strip() == f"Deletion of requested share groups ('{GROUP}') was successful."
    missing = kafka_peer.run("share-groups", *server, "--describe", *group)
    assert f"GroupIdNotFoundException: Group {GROUP} not found." in missing.stdout + missing.stderr

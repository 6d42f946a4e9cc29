"""Kafka's Java console producer and consumer (the classic protocol and KIP-848's
`group.protocol=consumer`) and kafka-consumer-groups (list, describe, state, members, reset,
delete-offsets, delete) against our broker, each asserted on what it prints."""

from __future__ import annotations

import re

import pytest

from ...broker_process import BrokerProcess
from .peer import KafkaPeer

# a JVM start takes seconds on a loaded machine: more than the default 120 s a test
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TOPIC = "words"
RECORDS = {"k1": "alpha", "k2": "beta", "k3": "gamma", "k4": "delta"}


def _rows(output: str, first: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.split()[:1] == [first]]


@pytest.fixture(scope="module")
def words(kafka_peer: KafkaPeer, rafka: BrokerProcess) -> str:
    """The module's topic: two partitions, four keyed records written by the console producer."""
    server = ("--bootstrap-server", rafka.bootstrap)
    kafka_peer.ok("topics", *server, "--create", "--topic", TOPIC, "--partitions", "2")
    kafka_peer.ok(
        "console-producer",
        *server,
        "--topic",
        TOPIC,
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
        input="".join(f"{key}:{value}\n" for key, value in RECORDS.items()),
    )
    return TOPIC


def _consume(kafka_peer: KafkaPeer, rafka: BrokerProcess, group: str, *extra: str) -> list[str]:
    run = kafka_peer.run(
        "console-consumer",
        "--bootstrap-server",
        rafka.bootstrap,
        "--topic",
        TOPIC,
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        str(len(RECORDS)),
        "--timeout-ms",
        "30000",
        "--formatter-property",
        "print.key=true",
        *extra,
    )
    assert run.returncode == 0, run.explain()
    assert f"Processed a total of {len(RECORDS)} messages" in run.stderr, run.explain()
    return sorted(run.lines)


@pytest.mark.parametrize(
    ("group", "protocol"),
    [
        ("classic-readers", ()),
        ("kip848-readers", ("--command-property", "group.protocol=consumer")),
    ],
    ids=["classic", "consumer-protocol"],
)
def test_the_java_console_consumer_reads_every_record_and_commits(
    kafka_peer: KafkaPeer, rafka: BrokerProcess, words: str, group: str, protocol: tuple[str, ...]
) -> None:
    expected = sorted(f"{key}\t{value}" for key, value in RECORDS.items())
    assert _consume(kafka_peer, rafka, group, *protocol) == expected
    described = kafka_peer.ok(
        "consumer-groups", "--bootstrap-server", rafka.bootstrap, "--describe", "--group", group
    )
    # both partitions committed to their ends (2 records each), no member left
    rows = sorted(row[:6] for row in _rows(described, group))
    assert rows == [[group, words, "0", "2", "2", "0"], [group, words, "1", "2", "2", "0"]]
    state = kafka_peer.ok(
        "consumer-groups",
        "--bootstrap-server",
        rafka.bootstrap,
        "--describe",
        "--state",
        "--group",
        group,
    )
    strategy = "uniform" if protocol else "-"  # the server's assignor, for KIP-848 groups
    assert re.search(
        rf"^{group}\s+127\.0\.0\.1:\d+\s+\(0\)\s+{strategy}\s+Empty\s+0$", state, re.M
    ), state


def test_kafka_consumer_groups_members_reset_delete_offsets_and_delete(
    kafka_peer: KafkaPeer, rafka: BrokerProcess, words: str
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    group = ("--group", "live")
    consumer = kafka_peer.start(
        "console-consumer",
        *server,
        "--topic",
        words,
        *group,
        "--from-beginning",
        "--command-property",
        "group.protocol=consumer",
    )
    try:
        assert len(consumer.wait_for_lines(len(RECORDS))) == len(RECORDS)
        members = kafka_peer.ok(
            "consumer-groups", *server, "--describe", "--members", "--verbose", *group
        )
        (member,) = _rows(members, "live")
        # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT
        # TARGET-EPOCH TARGET-ASSIGNMENT: both partitions, reconciled to the target
        (_, _, host, client, count, epoch, current, target_epoch, target) = member
        # (the host as Kafka 4.3.1 prints it, Java's "/address": seen by tests/kafka_diff)
        assert (host, client, count) == ("/127.0.0.1", "console-consumer", "2"), members
        assert (current, target, epoch) == (f"{words}:0,1", f"{words}:0,1", target_epoch)
        refused = kafka_peer.run(
            "consumer-groups",
            *server,
            "--reset-offsets",
            "--to-earliest",
            "--execute",
            "--topic",
            words,
            *group,
        )
        assert (
            "Assignments can only be reset if the group 'live' is inactive, but the current "
            "state is Stable."
        ) in refused.stdout + refused.stderr, refused.explain()
    finally:
        stopped = consumer.stop()
    assert f"Processed a total of {len(RECORDS)} messages" in stopped.stderr

    reset = kafka_peer.ok(
        "consumer-groups",
        *server,
        "--reset-offsets",
        "--to-earliest",
        "--execute",
        "--topic",
        words,
        *group,
    )
    assert sorted(row[1:] for row in _rows(reset, "live")) == [[words, "0", "0"], [words, "1", "0"]]
    described = kafka_peer.ok("consumer-groups", *server, "--describe", *group)
    assert sorted(row[3:6] for row in _rows(described, "live")) == [["0", "2", "2"]] * 2
    deleted = kafka_peer.ok(
        "consumer-groups", *server, "--delete-offsets", "--topic", words, *group
    )
    assert sorted(row for row in _rows(deleted, words)) == [
        [words, "0", "Successful"],
        [words, "1", "Successful"],
    ]
    gone = kafka_peer.ok("consumer-groups", *server, "--delete", *group)
    assert "Deletion of requested consumer groups ('live') was successful." in gone
    assert "live" not in kafka_peer.ok("consumer-groups", *server, "--list").split()

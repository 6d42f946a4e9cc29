"""Share groups (KIP-932) with the real client: confluent-kafka 2.16's ShareConsumer.

One broker for the module, with short locks and heartbeats: queue semantics over one partition
(three consumers, every record accepted exactly once), explicit RELEASE / REJECT and the
delivery limit, a killed consumer's records reaching the others once its lock expires, and a
broker SIGKILLed mid-stream (its own broker: no accepted record delivered again, none lost,
delivery counts carried on). Each test has its own topic and group.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import AdminClient, NewTopic

from rafka_actors.cli import main

from ..broker_process import BrokerProcess
from .group_clients import wait_until

pytestmark = pytest.mark.e2e

LOCK_MS = 1500
SETTINGS = (
    "share.auto.offset.reset=earliest",
    f"group.share.record.lock.duration.ms={LOCK_MS}",
    "group.share.heartbeat.interval.ms=300",
    "group.share.session.timeout.ms=6000",
    "group.share.delivery.count.limit=3",
)


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("share"), *SETTINGS).start()
    try:
        yield broker
    finally:
        broker.stop()


def _topic(bootstrap: str, name: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    _produce(bootstrap, name, records)


def _produce(bootstrap: str, name: str, records: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(name, str(i).encode())
    assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str, **extra: object) -> confluent_kafka.ShareConsumer:
    consumer = confluent_kafka.ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **extra}
    )
    return consumer


def _poll(
    consumer: confluent_kafka.ShareConsumer, timeout: float = 0.5
) -> list[confluent_kafka.Message]:
    return [m for m in consumer.poll(timeout) if m.error() is None]


def test_three_consumers_share_one_partition_and_accept_each_record_once(
    share_broker: BrokerProcess,
) -> None:
    total = 3000
    _topic(share_broker.bootstrap, "queue", 0)
    received: dict[int, list[int]] = {0: [], 1: [], 2: []}
    polled = [threading.Event() for _ in range(3)]
    done = threading.Event()
    errors: list[BaseException] = []

    def consume(index: int) -> None:
        consumer = _consumer(share_broker.bootstrap, "queue-group", **{"max.poll.records": 50})
        try:
            consumer.subscribe(["queue"])
            while not done.is_set():
                got = _poll(consumer, 0.3)
                polled[index].set()
                received[index] += [message.offset() for message in got]
                consumer.commit_sync()  # implicit mode: what the last poll returned, accepted
                if got:
                    time.sleep(0.02)  # "processing": the others get a turn at the partition
        except BaseException as exc:
            errors.append(exc)
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    assert all(event.wait(30) for event in polled)
    _produce(share_broker.bootstrap, "queue", total)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and sum(map(len, received.values())) < total:
        time.sleep(0.2)
    time.sleep(0.5)  # anything delivered twice would show up now
    done.set()
    for thread in threads:
        thread.join(30)
    assert not errors
    every = sorted(o for offsets in received.values() for o in offsets)
    assert every == list(range(total))  # each record once, none lost
    assert all(received[i] for i in range(3)), {i: len(v) for i, v in received.items()}


def test_release_redelivers_with_a_raised_count_reject_never_and_the_limit_archives(
    share_broker: BrokerProcess,
) -> None:
    _topic(share_broker.bootstrap, "explicit", 3)
    consumer = _consumer(
        share_broker.bootstrap, "explicit-group", **{"share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe(["explicit"])
    deliveries: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for message in _poll(consumer):
                deliveries.append((message.offset(), message.delivery_count()))
                kind = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}.get(
                    message.offset(), AcknowledgeType.ACCEPT
                )
                consumer.acknowledge(message, kind)
            consumer.commit_sync()
            if [d for d in deliveries if d[0] == 0] == [(0, 1), (0, 2), (0, 3)]:
                break
        # offset 0: released three times, the limit: archived, never delivered again
        for _ in range(4):
            for message in _poll(consumer):
                deliveries.append((message.offset(), message.delivery_count()))
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            consumer.commit_sync()
    finally:
        consumer.close()
    assert [d for d in deliveries if d[0] == 0] == [(0, 1), (0, 2), (0, 3)]
    assert [d for d in deliveries if d[0] == 1] == [(1, 1)]  # rejected: once only
    assert [d for d in deliveries if d[0] == 2] == [(2, 1)]


def test_a_killed_consumers_records_reach_the_others_after_the_lock_expires(
    share_broker: BrokerProcess, tmp_path: Path
) -> None:
    _topic(share_broker.bootstrap, "killed", 20)
    # The victim runs in a child process that is SIGKILLed while it holds its records.
    script = tmp_path / "victim.py"
    script.write_text(
        "import sys, time, confluent_kafka\n"
        "c = confluent_kafka.ShareConsumer({'bootstrap.servers': sys.argv[1],"
        " 'group.id': 'killed-group', 'share.acknowledgement.mode': 'explicit'})\n"
        "c.subscribe(['killed'])\n"
        "while True:\n"
        "    got = [m for m in c.poll(0.5) if m.error() is None]\n"
        "    if got:\n"
        "        print(' '.join(str(m.offset()) for m in got), flush=True)\n"
        "        time.sleep(600)\n"
    )
    import subprocess
    import sys

    victim = subprocess.Popen(
        [sys.executable, str(script), share_broker.bootstrap], stdout=subprocess.PIPE, text=True
    )
    try:
        assert victim.stdout is not None
        held = [int(o) for o in victim.stdout.readline().split()]
    finally:
        victim.kill()
        victim.wait()
    assert held
    survivor = _consumer(share_broker.bootstrap, "killed-group")
    survivor.subscribe(["killed"])
    redelivered: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(redelivered) < 20:
            for message in _poll(survivor):  # accepted on the next poll, with its ShareFetch
                redelivered[message.offset()] = message.delivery_count()
    finally:
        survivor.close()
    assert sorted(redelivered) == list(range(20))
    assert all(redelivered[o] == 2 for o in held)  # the victim's delivery, then this one
    assert all(redelivered[o] == 1 for o in set(range(20)) - set(held))


def test_a_sigkilled_broker_redelivers_nothing_accepted_and_keeps_delivery_counts(
    broker_factory: type[BrokerProcess],
) -> None:
    broker = broker_factory(*SETTINGS)
    total = 400
    _topic(broker.bootstrap, "durable", total)
    accepted: set[int] = set()
    held: list[int] = []
    consumer = _consumer(
        broker.bootstrap,
        "durable-group",
        **{"share.acknowledgement.mode": "explicit", "max.poll.records": 50},
    )
    consumer.subscribe(["durable"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(accepted) < total // 2:
        for message in _poll(consumer):
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            accepted.add(message.offset())
        results = consumer.commit_sync()
        assert all(error is None for error in results.values()), results
    # now hold one batch, acquired and not acknowledged, and kill the broker under it
    while time.monotonic() < deadline and not held:
        held = [m.offset() for m in _poll(consumer)]
    assert held and not set(held) & accepted
    broker.kill()
    consumer.close()
    broker.start()

    after: dict[int, list[int]] = {}
    again = _consumer(broker.bootstrap, "durable-group")
    again.subscribe(["durable"])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(after) < total - len(accepted):
            for message in _poll(again):
                after.setdefault(message.offset(), []).append(message.delivery_count())
            again.commit_sync()
    finally:
        again.close()
    assert not set(after) & accepted  # nothing accepted is delivered again
    assert sorted(after) == sorted(set(range(total)) - accepted)  # and nothing is lost
    assert all(after[o] == [2] for o in held)  # the count carries on across the restart


def _groups(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(["groups", *argv, "--output", "json", "--bootstrap", bootstrap])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def test_the_groups_cli_lists_describes_shows_share_lag_resets_and_deletes(
    share_broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = share_broker.bootstrap
    _topic(bootstrap, "admin", 10)
    consumer = _consumer(bootstrap, "admin-group", **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["admin"])
    accepted = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and accepted < 4:
        for message in _poll(consumer):  # four accepted, what else was acquired released
            kind = AcknowledgeType.ACCEPT if accepted < 4 else AcknowledgeType.RELEASE
            accepted += kind == AcknowledgeType.ACCEPT
            consumer.acknowledge(message, kind)
        consumer.commit_sync()
    try:
        code, listed = _groups(capsys, bootstrap, "list", "--type", "share")
        assert code == 0
        assert ("admin-group", "share") in [(g["group"], g["type"]) for g in listed]
        assert {g["type"] for g in listed} == {"share"}  # the other tests' groups are too
        code, described = _groups(capsys, bootstrap, "describe", "admin-group")
        assert code == 0 and described["type"] == "share" and described["state"] == "Stable"
        (member,) = described["members"]
        assert member["assignment"] == {"admin": [0]}
        code, (offsets,) = _groups(capsys, bootstrap, "offsets", "admin-group")
        (row,) = offsets["partitions"]
        assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (4, 10, 6)
        code, _ = _groups(
            capsys,
            bootstrap,
            "reset-offsets",
            "admin-group",
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
        assert code == 1  # the group has a member: Kafka's rule
    finally:
        consumer.close()
    wait_until(
        lambda: _groups(capsys, bootstrap, "describe", "admin-group")[1]["state"] == "Empty",
        "the share group to be empty",
    )
    code, _ = _groups(
        capsys,
        bootstrap,
        "reset-offsets",
        "admin-group",
        "--all-topics",
        "--to-earliest",
        "--execute",
    )
    assert code == 0
    code, (offsets,) = _groups(capsys, bootstrap, "offsets", "admin-group")
    assert [(r["current_offset"], r["lag"]) for r in offsets["partitions"]] == [(0, 10)]
    code, _ = _groups(capsys, bootstrap, "delete", "admin-group")
    assert code == 0
    listed = _groups(capsys, bootstrap, "list", "--type", "share")[1]
    assert "admin-group" not in [g["group"] for g in listed]


def test_a_group_id_has_one_type(share_broker: BrokerProcess) -> None:
    """A classic consumer of a share group's id: INCONSISTENT_GROUP_PROTOCOL; a share
    consumer of a classic group's id: GROUP_ID_NOT_FOUND (fatal, as librdkafka takes it)."""
    bootstrap = share_broker.bootstrap
    _topic(bootstrap, "typed", 0)
    share = _consumer(bootstrap, "typed-share")
    share.subscribe(["typed"])
    share.poll(0.5)
    errors: list[confluent_kafka.KafkaError] = []
    classic = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "typed-share", "error_cb": errors.append}
    )
    classic.subscribe(["typed"])
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        message = classic.poll(0.2)
        if message is not None and message.error():
            errors.append(message.error())
    classic.close()
    share.close()
    assert errors[0].code() == confluent_kafka.KafkaError.INCONSISTENT_GROUP_PROTOCOL

    committer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "typed-classic"}
    )
    committer.commit(offsets=[confluent_kafka.TopicPartition("typed", 0, 0)], asynchronous=False)
    committer.close()
    refused = _consumer(bootstrap, "typed-classic")
    refused.subscribe(["typed"])
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        while time.monotonic() < deadline:
            refused.poll(0.2)
    refused.close()
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND

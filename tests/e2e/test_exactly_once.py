"""Exactly-once consume-transform-produce across SIGKILLs (issue 43's acceptance test).

An application (tests/e2e/txn_copier.py, its own process) copies an input topic of 3
partitions to an output topic in transactions that carry its consumed offsets. Mid-stream the
application is killed with SIGKILL and started again (its new producer fences the old one and
aborts its open transaction), and later the broker is killed with SIGKILL and restarted on the
same port and data directory (prepared transactions complete their markers, open ones time
out). An application that exits with an error, or makes no progress for STALL_S, is started
again, as a supervisor would. Then:

* a read_committed consumer of the output sees every input record exactly once;
* the group's committed offsets equal the input's end offsets.

Each of the three Python clients copies 3 000 records (about 32 s for the three on a quiet
2-core machine), on transactions v1 (none of them speaks v2). Kafka's Java client copies
them on v2 and on v1 in kafka_tools/test_exactly_once_java.py.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

PARTITIONS = 3
DEADLINE = 240.0
# A copier that makes no progress this long is killed and started again, as a supervisor's
# liveness check would (a safety net: see NO_REBOOTSTRAP in txn_copier.py for the stall seen).
STALL_S = 20.0
REPO = Path(__file__).resolve().parents[2]
BROKER_SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
    "transaction.max.timeout.ms=60000",
)


class App:
    """The copier process, restarted whenever it dies before it is done. `command` runs a
    copier given (bootstrap, input, output, group, transactional id); its stderr goes to
    `log` when given."""

    def __init__(self, command: list[str], bootstrap: str, tag: str, log: Path | None) -> None:
        names = [f"in-{tag}", f"out-{tag}", f"copier-{tag}", f"txn-{tag}"]
        self.args = [*command, bootstrap, *names]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        stderr = None if self.log is None else self.log.open("ab")
        self.proc = subprocess.Popen(
            self.args, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stderr=stderr
        )
        if stderr is not None:
            stderr.close()  # (the child holds its own copy)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def done(self) -> bool:
        """Whether it finished; restarts it if it died with an error."""
        assert self.proc is not None
        code = self.proc.poll()
        if code is None:
            return False
        if code == 0:
            return True
        assert self.starts < 8, f"the copier keeps failing (exit {code})"
        self.start()
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


def produced(bootstrap: str, topic: str) -> int:
    """Records and markers in the topic so far (its high watermarks): the copier's progress."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "watcher"})
    try:
        return sum(
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10)[1]
            for p in range(PARTITIONS)
        )
    except confluent_kafka.KafkaException:
        return 0  # the broker is restarting
    finally:
        consumer.close()


def wait_until(app: App, bootstrap: str, topic: str, count: int, deadline: float) -> None:
    while produced(bootstrap, topic) < count:
        assert not app.done(), "the copier finished before it could be interrupted"
        assert time.monotonic() < deadline, f"no progress to {count} in {topic}"
        time.sleep(0.1)


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(PARTITIONS)
        ]
    )
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error():
                    if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise AssertionError(msg.error())
                values.append(msg.value())
    finally:
        consumer.close()
    assert len(at_end) == PARTITIONS
    return values


def python_copier(client: str) -> list[str]:
    return [sys.executable, "-m", "tests.e2e.txn_copier", client]


def copy_across_kills(
    broker: BrokerProcess, command: list[str], tag: str, records: int, log: Path | None = None
) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    for topic in (f"in-{tag}", f"out-{tag}"):
        admin.create_topics([confluent_kafka.admin.NewTopic(topic, PARTITIONS, 1)])[topic].result(
            30
        )
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(records):
        producer.produce(f"in-{tag}", str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    deadline = time.monotonic() + DEADLINE
    app = App(command, broker.bootstrap, tag, log)
    app.start()
    try:
        wait_until(app, broker.bootstrap, f"out-{tag}", records // 4, deadline)
        app.kill()  # the application dies mid-transaction
        app.start()
        wait_until(app, broker.bootstrap, f"out-{tag}", records // 2, deadline)
        broker.kill()  # and so does the broker
        broker.start()
        progress, since = -1, time.monotonic()
        while not app.done():
            assert time.monotonic() < deadline, "the copier did not finish"
            now_at = produced(broker.bootstrap, f"out-{tag}")
            if now_at != progress:
                progress, since = now_at, time.monotonic()
            elif time.monotonic() - since > STALL_S:  # a liveness check, as a supervisor's
                app.kill()
                app.start()
                since = time.monotonic()
            time.sleep(0.2)
    finally:
        app.stop()

    copied = collections.Counter(read_committed(broker.bootstrap, f"out-{tag}"))
    expected = collections.Counter(str(i).encode() for i in range(records))
    assert copied == expected, (
        f"missing {len(expected - copied)}, duplicated {len(copied - expected)}"
    )
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"copier-{tag}"}
    )
    committed = consumer.committed(
        [confluent_kafka.TopicPartition(f"in-{tag}", p) for p in range(PARTITIONS)], 30
    )
    ends = [
        consumer.get_watermark_offsets(confluent_kafka.TopicPartition(f"in-{tag}", p), 30)[1]
        for p in range(PARTITIONS)
    ]
    consumer.close()
    assert [tp.offset for tp in committed] == ends


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_each_client_copies_3000_records_exactly_once_across_sigkills(  # type: ignore[no-untyped-def]
    broker_factory, client: str
) -> None:
    tag = client.replace("-", "")
    copy_across_kills(broker_factory(*BROKER_SETTINGS), python_copier(client), tag, 3000)

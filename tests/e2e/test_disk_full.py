"""A full disk, for real: the broker's data dir on a 6 MiB tmpfs, filled up with a ballast file.

While the disk is full: a kafka-python producer with retries=0 gets KafkaStorageError (not a
dropped connection); a confluent-kafka producer keeps retrying (nothing is delivered, nothing
fails); a commit is still stored (the coordinator log's segment has its space preallocated);
the broker stays up, logs a handful of lines (not a traceback per request), has warned that
free space ran low, and its RSS stays within 20 MB of its healthy level. Once the ballast is
deleted, production resumes on its own; after a SIGKILL and a restart, every acknowledged
record and commit is there.

Mounting needs root (CI runs as root); elsewhere the test skips, saying so.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaStorageError
from kafka.structs import OffsetAndMetadata

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

TOPIC, GROUP = "full", "g"
VALUE = b"v" * 1000
REFUSED = b"refused" * 1200
RSS_BOUND_MB = 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk: Path) -> Path:
    ballast = disk / "ballast"
    with open(ballast, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return ballast


def rss_mb(broker: BrokerProcess) -> float:
    assert broker.proc is not None
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def wait_for(condition, what: str, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_full_disk_gets_error_codes_quiet_logs_and_bounded_memory(
    small_disk: Path, broker_factory
) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(
        "num.partitions=1",
        "log.dir.free.space.warning.bytes=1000000000",
        data_dir=small_disk / "data",
    )
    acked: list[bytes] = []
    failed: list[str] = []

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append(msg.value())
        else:
            failed.append(err.name())

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "message.timeout.ms": 120_000}
    )

    def produce(label: str, count: int) -> None:
        for i in range(count):
            producer.produce(TOPIC, VALUE + f"{label}{i}".encode(), on_delivery=delivered)
        producer.poll(0)

    produce("healthy", 400)
    assert producer.flush(30) == 0 and len(acked) == 400
    committer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=GROUP)
    partition = TopicPartition(TOPIC, 0)
    committer.commit({partition: OffsetAndMetadata(100, None, -1)})
    healthy_rss = rss_mb(broker)

    ballast = fill(small_disk)
    lines_before = len(broker.lines)
    strict = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    with pytest.raises(KafkaStorageError):  # (8 KB: past the segment file's last page)
        strict.send(TOPIC, REFUSED).get(timeout=30)
    for step in range(4):  # 800 records a second, none stored
        produce(f"full{step}-", 400)
        time.sleep(0.5)
        producer.poll(0)
    assert len(acked) == 400 and not failed  # confluent-kafka retries, and retries
    committer.commit({partition: OffsetAndMetadata(200, None, -1)})  # preallocated space
    assert broker.alive()
    during = broker.lines[lines_before:]
    assert len(during) <= 6, "\n".join(during)
    assert not any("Traceback" in line for line in during)
    assert any("No space left on device" in line for line in during)
    assert rss_mb(broker) < healthy_rss + RSS_BOUND_MB
    assert any("below log.dir.free.space.warning.bytes" in line for line in broker.lines)

    ballast.unlink()  # production resumes by itself
    assert producer.flush(60) == 0 and not failed
    assert len(acked) == 400 + 4 * 400
    strict.send(TOPIC, b"stored").get(timeout=30)
    strict.close()
    committer.close()

    broker.stop(signal.SIGKILL)
    broker.start()
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    reader.assign([ConfluentPartition(TOPIC, 0, OFFSET_BEGINNING)])
    stored: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(stored) < len(acked) + 1 and time.monotonic() < deadline:
        for message in reader.consume(1000, timeout=1):
            if message.error() is None:
                stored.add(message.value())
    reader.close()
    assert set(acked) <= stored and b"stored" in stored and REFUSED not in stored
    checker = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=GROUP)
    assert checker.committed(partition) == 200
    checker.close()

"""`rafka-actors groups offsets G --watch SECONDS` redraws the offsets table with lag in
records and in seconds until interrupted (Ctrl-C: exit 0)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

WATCH = [
    sys.executable,
    "-m",
    "rafka_actors",
    "groups",
    "offsets",
    "behind",
    "done",
    "--watch",
    "0.2",
]


def test_watch_redraws_lag_in_records_and_seconds(broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("watched", value=b"r%d" % i)
    assert producer.flush(15) == 0
    admin = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "behind"})
    admin.commit(offsets=[TopicPartition("watched", 0, 4)], asynchronous=False)
    admin.close()
    admin = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "done"})
    admin.commit(offsets=[TopicPartition("watched", 0, 10)], asynchronous=False)
    admin.close()
    time.sleep(0.2)  # some age for the record at offset 4 (shown to 0.1 s)
    watcher = subprocess.Popen(
        [*WATCH, "--bootstrap", broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert watcher.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 30
    while sum(line.startswith("every 0.2s") for line in lines) < 2:
        assert time.monotonic() < deadline, lines
        lines.append(watcher.stdout.readline())
    watcher.send_signal(signal.SIGINT)
    assert watcher.wait(10) == 0
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(("behind", "done"))}
    header = next(line.split() for line in lines if line.startswith("GROUP"))
    assert header[5:7] == ["LAG", "LAG-SECONDS"]
    assert rows["behind"][3:6] == ["4", "10", "6"]
    assert float(rows["behind"][6]) > 0
    assert rows["done"][3:7] == ["10", "10", "0", "0.0"]

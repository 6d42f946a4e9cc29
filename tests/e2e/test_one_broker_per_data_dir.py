"""One broker per data dir (issue 51): a second `rafka-actors serve` on a live broker's data dir
is refused in one line naming the dir and the holder's PID, exit 75 (EX_TEMPFAIL), whatever
port it asks for; once the holder is SIGKILLed, the kernel has dropped its lock and the second
broker starts, with every record and commit the first one acknowledged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import confluent_kafka
import pytest

from ..broker_process import BrokerProcess
from .clients import Confluent

pytestmark = pytest.mark.e2e

SERVE = (sys.executable, "-m", "rafka_actors", "serve", "--listen", "127.0.0.1:0")


def committed(bootstrap: str, group: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        (tp,) = consumer.committed([confluent_kafka.TopicPartition("t", 0)], timeout=30)
        return int(tp.offset)
    finally:
        consumer.close()


def test_a_second_broker_is_refused_until_the_first_is_killed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = BrokerProcess(data).start()
    second = BrokerProcess(data)
    try:
        client = Confluent(first.bootstrap)
        client.create_topic("t", 1)
        assert client.produce("t", [(b"k", b"v%d" % i) for i in range(20)], "none") == 20
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": first.bootstrap, "group.id": "g", "enable.auto.commit": False}
        )
        consumer.commit(offsets=[confluent_kafka.TopicPartition("t", 0, 11)], asynchronous=False)
        consumer.close()

        done = subprocess.run(
            [*SERVE, "--data-dir", str(data)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert done.returncode == 75, done.stderr
        line = done.stderr.splitlines()[0]
        assert first.proc is not None
        assert f"cannot start: the data dir {data} is in use by another broker" in line
        assert f"PID {first.proc.pid} holds its .lock" in line
        assert committed(first.bootstrap, "g") == 11  # the first broker is untouched

        first.kill()
        second.start()  # the lock died with its holder
        assert Confluent(second.bootstrap).read_all("t", 1, 20)[0] == [
            b"v%d" % i for i in range(20)
        ]
        assert committed(second.bootstrap, "g") == 11
    finally:
        for broker in (first, second):
            if broker.alive():
                broker.kill()

"""A start that is refused leaves the data dir as it found it, and says why in its first line.

The data dir is one a broker used and was SIGKILLed on (issue 51): partition logs, a group's
commits, a transaction, the coordinator and transaction logs grown ahead of their writes
(preallocated), and things a start repairs: a torn partition tail, a damaged producer-state
snapshot, a half-made topic, a compaction's leftover. A start that goes through repairs them
(`test_a_start_that_goes_through_repairs`, so the check below can see a change); a start refused
for a taken port, a held lock, a bad setting or a damaged log leaves every file byte for byte
(size and SHA-256) and every mode as it was, and its refusal is the first line it prints. The
held lock is a live broker's, which goes on serving, its preallocated logs untouched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from ..broker_process import BrokerProcess
from .clients import Confluent

pytestmark = pytest.mark.e2e

Snapshot = dict[str, tuple[int, str, int]]  # relative path -> (size, sha256, mode); dirs: -1


def snapshot(root: Path) -> Snapshot:
    files: Snapshot = {}
    for path in sorted(root.rglob("*")):
        mode = path.stat().st_mode
        if path.is_dir():
            files[str(path.relative_to(root)) + "/"] = (-1, "", mode)
        else:
            data = path.read_bytes()
            files[str(path.relative_to(root))] = (len(data), hashlib.sha256(data).hexdigest(), mode)
    return files


def serve(
    data_dir: Path, *args: str, listen: str = "127.0.0.1:0"
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rafka_actors", "serve", "--listen", listen]
    return subprocess.run(
        [*command, "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def first_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert lines, "nothing printed"
    assert " ERROR " in lines[0] and "cannot start: " in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def _use(bootstrap: str) -> None:
    """Records from an idempotent producer, a committed transaction, a group's commits."""
    Confluent(bootstrap).create_topic("orders", 2)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(40):
        producer.produce("orders", f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "etl"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(10):
        txn.produce("orders", f"t{i}".encode(), partition=i % 2)
    txn.commit_transaction(30)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "billing", "enable.auto.commit": False}
    )
    consumer.commit(
        offsets=[confluent_kafka.TopicPartition("orders", p, 17 + p) for p in (0, 1)],
        asynchronous=False,
    )
    consumer.close()


@pytest.fixture(scope="module")
def used(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir as a SIGKILLed broker leaves it, with what a start repairs added."""
    data = tmp_path_factory.mktemp("used") / "data"
    broker = BrokerProcess(data).start()
    try:
        _use(broker.bootstrap)
    finally:
        broker.kill()
    for name in ("coordinator", "transactions"):
        (active,) = (data / name).glob("*.log")
        assert active.stat().st_size >= 1 << 20, f"the {name} log is no longer preallocated"
    executable = [p for p in data.rglob("*") if p.is_file() and p.stat().st_mode & 0o111]
    assert not executable, executable  # issue 51: segments were created 0755
    orders = data / "topics" / "orders"
    with open(orders / "0" / f"{0:020d}.log", "ab") as segment:
        segment.write(b"\x00\x00\x00\x00\x00\x00\x00\x30\x00\x00\x00\x40torn")  # a torn batch
    (orders / "1" / "producer-state.snapshot").write_bytes(b"not a snapshot")
    (data / "topics" / "half-made" / "0").mkdir(parents=True)  # no topic.json: a failed create
    (data / "coordinator" / f"{0:020d}.log.compacting").write_bytes(b"leftover")
    return data


@pytest.fixture
def data_dir(used: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(used, copy)
    return copy


def test_a_start_that_goes_through_repairs(data_dir: Path) -> None:
    """The control: what a start does to this data dir is what a refused one must not do."""
    before = snapshot(data_dir)
    broker = BrokerProcess(data_dir).start()
    broker.stop()
    after = snapshot(data_dir)
    gone = set(before) - set(after)
    assert "topics/half-made/" in gone and f"coordinator/{0:020d}.log.compacting" in gone
    assert "topics/orders/1/producer-state.snapshot" not in after or (
        after["topics/orders/1/producer-state.snapshot"]
        != before["topics/orders/1/producer-state.snapshot"]
    )
    torn = f"topics/orders/0/{0:020d}.log"
    assert after[torn][0] == before[torn][0] - 16  # the torn batch cut off
    active = f"coordinator/{0:020d}.log"
    assert after[active][0] < before[active][0]  # the preallocated zeros trimmed


def test_a_taken_port(data_dir: Path) -> None:
    before = snapshot(data_dir)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(data_dir, listen=f"127.0.0.1:{port}")
    assert done.returncode == 69, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in first_line(done)
    assert snapshot(data_dir) == before


@pytest.fixture
def running(data_dir: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(data_dir).start()
    yield broker
    if broker.alive():
        broker.kill()


def test_a_held_lock(data_dir: Path, running: BrokerProcess) -> None:
    before = snapshot(data_dir)  # as the running broker's own start left it
    done = serve(data_dir)
    assert done.returncode == 75, done.stderr
    line = first_line(done)
    assert f"the data dir {data_dir} is in use by another broker" in line
    assert running.proc is not None and f"PID {running.proc.pid} holds its .lock" in line
    assert snapshot(data_dir) == before
    # the running broker's logs are whole and it goes on serving
    client = Confluent(running.bootstrap)
    assert client.produce("orders", [(b"k", b"after")], "none") == 1
    records = client.read_all("orders", 2, 51)
    assert b"after" in [value for values in records.values() for value in values]


BAD_SETTINGS = {
    "a misspelled key": ("-o", "group.min.sesion.timeout.ms=6000"),
    "a bad metrics regex": ("-o", "metrics.listen=127.0.0.1:0", "-o", "metrics.group.allow=("),
}


@pytest.mark.parametrize("setting", list(BAD_SETTINGS))
def test_a_bad_setting(data_dir: Path, setting: str) -> None:
    before = snapshot(data_dir)
    done = serve(data_dir, *BAD_SETTINGS[setting])
    assert done.returncode == 78, done.stderr
    assert "bad setting" in first_line(done)
    assert snapshot(data_dir) == before


def test_a_damaged_users_file(data_dir: Path, tmp_path: Path) -> None:
    """Read once the dir is locked: refused all the same, and no SASL secret written."""
    users = tmp_path / "users.json"
    users.write_text("[]")
    before = snapshot(data_dir)
    sasl = ("-o", "listener.security.protocol=SASL_PLAINTEXT", "-o", f"sasl.users.file={users}")
    done = serve(data_dir, *sasl)
    assert done.returncode == 78, done.stderr
    assert f"sasl.users.file: {users}" in first_line(done)
    assert snapshot(data_dir) == before


def _flip_first_frame(log: Path) -> None:
    """A byte of the first frame's payload flipped: damage with good frames after it."""
    data = bytearray(log.read_bytes())
    length = int.from_bytes(data[0:4], "big")
    data[8 + length - 1] ^= 0x01
    log.write_bytes(bytes(data))


def test_a_damaged_log(data_dir: Path) -> None:
    """The transaction log is opened last: every other log was read (and would have been
    repaired) before the damage is found."""
    _flip_first_frame(data_dir / "transactions" / f"{0:020d}.log")
    before = snapshot(data_dir)
    done = serve(data_dir)
    assert done.returncode == 65, done.stderr
    assert "the transactions log is damaged" in first_line(done)
    assert snapshot(data_dir) == before


def test_a_damaged_topic_file(data_dir: Path) -> None:
    meta = data_dir / "topics" / "orders" / "topic.json"
    meta.write_text('{"id": "not a uuid"')
    before = snapshot(data_dir)
    done = serve(data_dir)
    assert done.returncode == 65, done.stderr
    assert f"{meta} is damaged" in first_line(done)
    assert snapshot(data_dir) == before

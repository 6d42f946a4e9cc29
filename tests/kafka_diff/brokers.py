"""The two brokers of the check: Apache Kafka 4.3.1 (the peer's start-kafka, on a random free
high port with its own data dir) and ours (a child process on a free port, a temp data dir),
set alike where a setting shows in what a client sees, and each made ready as a client would
find it: coordinators that answer. The peer is found (and set up) as the tests of Kafka's
tools find it (tests/e2e/kafka_tools/peer.py), and its tools run through it."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kio.schema.errors import ErrorCode

from ..broker_process import BrokerProcess
from ..e2e.kafka_tools.peer import KafkaPeer
from ..raw_client import RawClient
from . import calls

# Kafka's start-kafka sets these; ours gets the same, and Kafka's node id
OUR_SETTINGS = ("node.id=1", "num.partitions=1", "group.initial.rebalance.delay.ms=100")
_NOT_YET = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
}


def _free_port() -> int:
    """A random port in 20000-39999 free with the one above it (Kafka's controller)."""
    while True:
        port = random.randrange(20000, 39998)
        try:
            for candidate in (port, port + 1):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port


@contextmanager
def kafka(peer: KafkaPeer, data_dir: Path) -> Iterator[tuple[str, int]]:
    port = _free_port()
    subprocess.run(
        [str(peer.home / "start-kafka"), str(port), str(data_dir)],
        check=True,
        capture_output=True,
        env={**os.environ, "START_TIMEOUT": "180"},
    )
    try:
        wait_ready("127.0.0.1", port)
        yield "127.0.0.1", port
    finally:
        subprocess.run([str(peer.home / "stop-kafka"), str(data_dir)], capture_output=True)


@contextmanager
def ours(data_dir: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(data_dir, *OUR_SETTINGS).start()
    try:
        wait_ready(process.host, process.port)
        yield process
    finally:
        process.stop()


def wait_ready(host: str, port: int, timeout: float = 120.0) -> None:
    """Until the group and transaction coordinators answer (Kafka creates their topics on
    the first FindCoordinator, then loads them): a transactional id `kafka-diff-ready` is
    left behind, the same on both brokers."""
    client = RawClient(host, port)
    deadline = time.monotonic() + timeout
    try:
        for request in (
            calls.find_coordinator(0, "kafka-diff-ready"),
            calls.find_coordinator(1, "kafka-diff-ready"),
            calls.describe_groups("kafka-diff-ready"),
            calls.init_producer_id("kafka-diff-ready"),
        ):
            while _not_yet(client.send(request)):
                assert time.monotonic() < deadline, f"{host}:{port} not ready: {request}"
                time.sleep(0.2)
    finally:
        client.close()


def _not_yet(response: object) -> bool:
    if getattr(response, "error_code", None) in _NOT_YET:
        return True
    for attribute in ("coordinators", "groups", "transaction_states"):
        for item in getattr(response, attribute, ()):
            if item.error_code in _NOT_YET:
                return True
    return False


def tool_runner(peer: KafkaPeer) -> Callable[..., str]:
    """(bootstrap, tool, *args) -> what one of Kafka's tools (kafka-tool's alias, e.g.
    `consumer-groups`) prints against a broker: its errors after its output, its exit code
    if not 0."""

    def tool(bootstrap: str, name: str, *args: str) -> str:
        done = peer.run(name, "--bootstrap-server", bootstrap, *args, timeout=120.0)
        errors = "".join(f"(stderr) {line}\n" for line in done.stderr.splitlines() if line.strip())
        code = f"(exit {done.returncode})\n" if done.returncode else ""
        return done.stdout + errors + code

    return tool

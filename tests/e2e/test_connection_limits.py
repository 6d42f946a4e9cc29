"""max.connections and max.connections.per.ip on the real broker: a connection over a limit is
closed at once with a (rate-limited) log line, the ones within it keep being served, and a slot
freed by a closed connection is usable again."""

from __future__ import annotations

import socket
import time

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from ..broker_process import BrokerProcess
from ..wire import request_frame

pytestmark = pytest.mark.e2e

API_VERSIONS = request_frame(
    ApiVersionsRequest(client_software_name="t", client_software_version="1")
)


def served(sock: socket.socket) -> bool:
    """Whether an ApiVersions request on `sock` is answered (False: closed without a reply)."""
    try:
        sock.sendall(API_VERSIONS)
        return len(sock.recv(4)) == 4
    except (ConnectionResetError, BrokenPipeError):
        return False


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=10)


def wait_for_log(broker: BrokerProcess, text: str) -> None:
    deadline = time.monotonic() + 10
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the broker log"
        time.sleep(0.05)


@pytest.mark.parametrize("setting", ["max.connections", "max.connections.per.ip"])
def test_connections_over_the_limit_are_closed_and_slots_come_back(
    broker_factory, setting: str
) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(f"{setting}=3")
    held = [connect(broker) for _ in range(3)]
    try:
        assert all(served(sock) for sock in held)
        with connect(broker) as extra:
            assert not served(extra)
        wait_for_log(broker, f"{setting} (3) reached")
        assert served(held[0])  # the ones within the limit are untouched
        held.pop().close()
        deadline = time.monotonic() + 10
        while True:  # the broker notices the close asynchronously
            with connect(broker) as again:
                if served(again):
                    break
            assert time.monotonic() < deadline, "a freed slot never became usable"
            time.sleep(0.05)
    finally:
        for sock in held:
            sock.close()

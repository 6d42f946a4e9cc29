"""200 random garbage frames and 300 half-open connections leave the broker serving a real
client, and bad connections are closed with log lines (up to a budget per interval) rather than
crashing anything. So do peers that reset their connection mid-frame or before reading their
reply."""

from __future__ import annotations

import random
import socket
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from ..broker_process import BrokerProcess
from ..wire import request_frame
from .clients import Confluent

pytestmark = pytest.mark.e2e


def _garbage_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:  # pure noise, including absurd or negative lengths
        return rng.randbytes(rng.randrange(1, 64))
    if kind == 1:  # a plausible header for a real api, then a random body
        api_key = rng.choice([0, 1, 2, 3, 10, 18, 19, 20, 22])
        body = struct.pack(">hhi", api_key, rng.randrange(0, 14), rng.randrange(2**31))
        body += struct.pack(">h", -1) + rng.randbytes(rng.randrange(0, 200))
        return struct.pack(">i", len(body)) + body
    if kind == 2:  # an unknown api key
        body = struct.pack(">hhih", rng.randrange(1000, 30000), 0, 1, -1)
        return struct.pack(">i", len(body)) + body
    length = rng.choice([-1, 0, 2**31 - 1, 104857601])
    return struct.pack(">i", length) + rng.randbytes(8)


def _send_and_close(address: tuple[str, int], payload: bytes) -> None:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        try:
            while sock.recv(65536):
                pass
        except (ConnectionResetError, TimeoutError):
            pass


def test_garbage_and_half_open_connections(broker: BrokerProcess) -> None:
    rng = random.Random(20261122)
    address = (broker.host, broker.port)
    half_open = []
    try:
        for i in range(300):
            sock = socket.create_connection(address, timeout=10)
            # a length prefix promising more than ever arrives, or nothing at all
            sock.sendall(struct.pack(">i", 64) + b"\x00\x03" if i % 2 else b"")
            half_open.append(sock)
        for _ in range(200):
            _send_and_close(address, _garbage_frame(rng))

        client = Confluent(broker.bootstrap)
        client.create_topic("still-serving", 2)
        items = [(b"k%d" % i, b"v%d" % i) for i in range(500)]
        assert client.produce("still-serving", items, "none") == 500
        got = client.read_all("still-serving", 2, 500)
        assert sorted(v for vs in got.values() for v in vs) == sorted(v for _, v in items)
        assert broker.alive()
    finally:
        for sock in half_open:
            sock.close()
    assert "Traceback" not in broker.log_text()
    # Closes are logged 50 per 10 s, the rest counted (log_budget.py): a garbage flood
    # must not flood the log.
    assert broker.log_text().count("closing connection") >= 50


def test_peers_that_reset_mid_frame_or_before_their_reply(broker: BrokerProcess) -> None:
    address = (broker.host, broker.port)
    request = request_frame(
        ApiVersionsRequest(client_software_name="reset", client_software_version="1")
    )
    for i in range(60):
        sock = socket.create_connection(address, timeout=10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # a whole request (its reply meets the reset) or part of one; then RST, not FIN
        sock.sendall(request if i % 2 else request[:7])
        sock.close()

    client = Confluent(broker.bootstrap)
    client.create_topic("after-resets", 1)
    assert client.produce("after-resets", [(b"k", b"v")], "none") == 1
    assert broker.alive()
    assert "Traceback" not in broker.log_text()

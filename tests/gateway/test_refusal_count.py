"""Connections refused by a limit are logged once per interval with a count, and the count of
a burst is reported when its interval ends, even if no refusal follows (docs/tenancy.md).

The broker's own accept path (server.serve_client) on a real loopback listener, with a short
interval so the test need not wait the broker's 10 s.
"""

from __future__ import annotations

import logging
import socket
from functools import partial
from pathlib import Path

import pytest
import trio

from rafka_actors import log_budget
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway import server
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.context import SERVER_LOGGER, BrokerContext
from rafka_actors.gateway.limits import ConnectionLimits
from rafka_actors.log_budget import LogBudget
from rafka_actors.storage.data_plane import DataPlane


async def test_a_bursts_refusal_count_is_flushed_when_its_interval_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_budget, "FLUSH_EVERY_S", 0.05)
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    ctx = BrokerContext(
        BrokerConfig(data_dir=tmp_path),
        data,
        "127.0.0.1",
        9092,
        API_TABLE,
        limits=ConnectionLimits(1, 100, 100),
        refusal_log=LogBudget(logging.getLogger(SERVER_LOGGER), per_interval=1, interval_s=0.5),
    )

    def refusals() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == SERVER_LOGGER]

    try:
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                partial(trio.serve_tcp, partial(server.serve_client, ctx), 0, host="127.0.0.1")
            )
            port = listeners[0].socket.getsockname()[1]
            nursery.start_soon(log_budget.flush_forever)
            held = await trio.open_tcp_stream("127.0.0.1", port)
            while ctx.limits.total < 1:  # noqa: ASYNC110 (a plain counter: polled)
                await trio.sleep(0.01)

            def burst() -> None:  # four refused in a row, then none
                for _ in range(4):
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                        assert sock.recv(1) == b""  # closed at once

            await trio.to_thread.run_sync(burst)
            with trio.fail_after(10):
                while len(refusals()) < 2:  # noqa: ASYNC110 (log records: polled)
                    await trio.sleep(0.05)
            first, count = refusals()
            assert "max.connections (1) reached" in first
            assert count == "3 more such lines were not logged in 0.5s"
            await held.aclose()
            nursery.cancel_scope.cancel()
    finally:
        data.close()

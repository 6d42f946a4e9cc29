"""A connection that ends with an exception (an idle peer, garbage, a bad frame) leaves no
reference cycle: `run_beside` re-raised its work's exception from a local, so the exception's
traceback held the frame that held the exception. Each closed connection's frames and buffers
then waited for the cycle collector, which the broker runs rarely (gc_policy.py)."""

from __future__ import annotations

import gc

import pytest
import trio

from rafka_actors.gateway.background import run_beside
from rafka_actors.gateway.idle import CloseConnection


async def test_an_exception_out_of_run_beside_leaves_no_cycle() -> None:
    async def work() -> None:
        buffer = bytearray(1 << 20)  # what a connection's frames hold  # noqa: F841
        raise CloseConnection("garbage")

    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            with pytest.raises(CloseConnection):
                await run_beside(work, trio.sleep_forever)
        assert gc.collect() == 0
    finally:
        gc.enable()

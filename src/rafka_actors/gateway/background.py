"""`run_beside`: work in the foreground, helpers in the background, errors unwrapped.

A trio nursery wraps whatever its body raises in an exception group; the connection code
wants its own exceptions (CloseConnection, a broken stream) to come out as themselves, so
that one `except` clause per kind keeps working.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


async def run_beside(
    work: Callable[[], Awaitable[None]], *background: Callable[[], Awaitable[None]]
) -> None:
    """Run `work` while `background` tasks run; cancel them once `work` ends. An exception
    of `work` is re-raised as is; one of a background task comes out of the nursery."""
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        for task in background:
            nursery.start_soon(task)
        try:
            await work()
        except Exception as exc:
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        try:
            raise failure
        finally:
            # This frame would hold the exception whose traceback holds this frame: a cycle
            # (with the connection's frames and buffers in it) left to the cycle collector,
            # which the broker runs rarely. Every closed connection made one.
            failure = None

"""storage/fsync_thread.py: calls run in the one thread, in order, off the event loop; their
value or exception comes back; a cancelled caller still waits for the call it handed over."""

from __future__ import annotations

import threading

import pytest
import trio

from rafka_actors.storage.fsync_thread import FsyncThread


async def test_calls_run_in_one_other_thread_in_order_and_answer() -> None:
    thread = FsyncThread("test fsync")
    thread.start()
    seen: list[tuple[int, str]] = []

    def call(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * 2

    try:
        assert [await thread.run_sync(lambda i=i: call(i)) for i in range(5)] == [0, 2, 4, 6, 8]
    finally:
        thread.stop()
    assert seen == [(i, "test fsync") for i in range(5)]


async def test_a_calls_exception_is_raised_in_the_caller() -> None:
    thread = FsyncThread("test fsync")
    thread.start()

    def fail() -> None:
        raise OSError(5, "EIO")

    try:
        with pytest.raises(OSError, match="EIO"):
            await thread.run_sync(fail)
    finally:
        thread.stop()


async def test_the_loop_serves_while_a_call_runs_and_a_cancelled_caller_waits_for_it() -> None:
    thread = FsyncThread("test fsync")
    thread.start()
    release, finished = threading.Event(), []

    def slow() -> None:
        release.wait(10)
        finished.append(True)

    scope = trio.CancelScope()
    released_while_waiting = []

    async def cancel_then_release() -> None:
        await trio.sleep(0.05)  # the loop runs this while the call blocks its thread
        scope.cancel()
        await trio.sleep(0.05)
        released_while_waiting.append(not finished)  # the caller waits, not abandoned
        release.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_then_release)
            with scope:
                await thread.run_sync(slow)
                assert finished == [True]  # returned only once the call had finished
                await trio.lowlevel.checkpoint()  # where the cancellation is delivered
        assert released_while_waiting == [True]
        assert scope.cancelled_caught
    finally:
        thread.stop()


async def test_a_call_before_start_or_after_stop_is_refused() -> None:
    thread = FsyncThread("test fsync")
    with pytest.raises(RuntimeError):
        await thread.run_sync(lambda: None)
    thread.start()
    thread.stop()
    with pytest.raises(RuntimeError):
        await thread.run_sync(lambda: None)

"""One long-lived thread that runs the coordinator log's fsyncs, off the event loop.

Under ``coordinator.log.fsync=always`` every group-commit batch waits for one fsync, and a slow
disk must never stall the loop (tests/faults/test_slow_fsync.py), so the fsync runs in a
thread. `trio.to_thread.run_sync` costs a scheduler pass for its capacity limiter, a hand-off
to its thread cache and a context copy on every call; this thread is started once with the log
and woken through a `queue.SimpleQueue`, and it hands the result back with
`TrioToken.run_sync_soon(reschedule, ...)`: one wake-up each way, no scheduler pass of its own.

Like `trio.to_thread.run_sync`'s default, a call cannot be abandoned: the waiting task, even if
cancelled, gets its answer only when the fsync has returned (a batch is acknowledged or failed,
never left in between).

Measured side by side in one run, rounds taking turns, against the same tree with
`trio.to_thread.run_sync` (default configuration; a 2-core machine and a disk shared with
other work, an fsync taking 0.1-5 ms, so the ratios vary from run to run): a member's sync
commits, one at a time (``bench/request_cost.py --ops commit --rounds 15 --brokers
'new=rafka-actors,old=rafka-actors@OLD_PYTHON'``): 351 against 314 commits/s (1.12x) and
913 against 1 075 us of broker CPU a commit (-15%); with the data dir on tmpfs, 1 188
against 813 (1.46x), 514 against 655 us. Earlier runs: 1.20x (9 rounds), 1.31x (bench/run.py
(c), 5 runs), 1.28x with 16 committers in 16 groups; one run of 7 rounds gave 0.75x. The
round trip alone (an fsync of a tmpfs file awaited 2 000 times): 217 against 469 us wall,
52 against 99 us of CPU.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TypeVar

import outcome
import trio

T = TypeVar("T")

_Call = tuple[Callable[[], object], trio.lowlevel.TrioToken, trio.lowlevel.Task]


class FsyncThread:
    """`await run_sync(fn)` runs `fn` in the one thread, calls in the order they came.
    `start` before the first call; `stop` lets the thread finish (it is a daemon: a disk that
    never answers does not hold the interpreter's exit)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end once it has run what was handed to it; idempotent."""
        if self._thread is not None:
            self._calls.put(None)
            self._thread = None

    async def run_sync(self, fn: Callable[[], T]) -> T:
        if self._thread is None:
            raise RuntimeError(f"{self._name} is not running")
        await trio.lowlevel.checkpoint_if_cancelled()
        self._calls.put((fn, trio.lowlevel.current_trio_token(), trio.lowlevel.current_task()))
        # FAILED: a cancelled caller still waits for the call it handed over (see above)
        # (the outcome the thread sends back is unwrapped here: fn's value, or its exception)
        return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, token, task = call
            result = outcome.capture(fn)
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)
            except trio.RunFinishedError:  # the loop is gone, and the task with it
                pass

"""Counting the trio tasks a piece of code starts (a trio instrument)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


class TaskCounter(trio.abc.Instrument):
    def __init__(self) -> None:
        self.spawned = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1


@contextmanager
def counting_tasks() -> Iterator[TaskCounter]:
    """Count the tasks spawned inside the block (call from within trio.run)."""
    counter = TaskCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        yield counter
    finally:
        trio.lowlevel.remove_instrument(counter)

"""The users file (sasl.users.file) as the SCRAM admin APIs read and change it while serving.

The file stays the single source of truth: a change re-reads it, applies the request to what it
holds (so an operator's `rafka-actors users` edits since are kept, not overwritten), writes it
back atomically (users.py: temporary file, fsync, rename) and only then becomes what new logins
on a SASL listener are checked against. Changes are made one at a time (a lock), and the file
is read and written in a worker thread, off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import trio

from ..auth.users import UserStore

T = TypeVar("T")


class UsersFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = trio.Lock()

    async def read(self) -> UserStore:
        """The file's users (none if there is no file); UsersFileError if it can't be read."""
        async with self._lock:
            return await trio.to_thread.run_sync(UserStore.load_or_empty, self.path)

    async def change(self, edit: Callable[[UserStore], tuple[UserStore, T]]) -> tuple[UserStore, T]:
        """Apply `edit` to the file's users and store the result; (the users now, its answer).
        Raises UsersFileError if the file can't be read, OSError if it can't be written."""
        async with self._lock:
            before = await trio.to_thread.run_sync(UserStore.load_or_empty, self.path)
            after, answer = edit(before)
            if after != before:
                await trio.to_thread.run_sync(after.save, self.path)
            return after, answer

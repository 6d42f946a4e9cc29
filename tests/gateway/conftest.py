"""Every gateway test holds the API handlers to what they say: a handler not marked
`@file_io` (gateway/context.py) touches no file while it runs.

The API table's handlers are wrapped for each test; a file system call made (on the event
loop's thread) while an unmarked handler runs fails the test with the API's name. Only the
handler's own call is watched, not the `then` of a step it returns.
"""

from __future__ import annotations

import builtins
import dataclasses
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.context import Api

FILE_CALLS = (
    (os, ("open", "read", "pread", "write", "pwrite", "fsync", "ftruncate", "truncate")),
    (os, ("mkdir", "makedirs", "rename", "replace", "unlink", "rmdir", "listdir", "scandir")),
    (builtins, ("open",)),
    (mmap, ("mmap",)),
)


class SansIO(threading.local):
    api: str | None = None  # the unmarked handler running on this thread


def _watched(real: Callable[..., Any], running: SansIO, name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if running.api is not None:
            raise AssertionError(f"{running.api}'s handler called {name}: mark it @file_io")
        return real(*args, **kwargs)

    return call


def _sans_io(api: Api, running: SansIO) -> Api:
    handler = api.handler

    def handle(*args: Any) -> Any:
        running.api = api.name
        try:
            return handler(*args)
        finally:
            running.api = None

    return dataclasses.replace(api, handler=handle)


@pytest.fixture(autouse=True)
def handlers_say_their_file_io(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    running = SansIO()
    for module, names in FILE_CALLS:
        for name in names:
            real = getattr(module, name)
            monkeypatch.setattr(module, name, _watched(real, running, f"{module.__name__}.{name}"))
    for key, api in list(API_TABLE.items()):
        if not api.file_io:
            monkeypatch.setitem(API_TABLE, key, _sans_io(api, running))
    yield

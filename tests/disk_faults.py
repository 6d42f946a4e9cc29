"""Stand-ins for the system calls the durable coordinator log makes, for tests of its failures."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def failing_pwrite(errno: int = 28, *, once: bool = False) -> Callable[..., Any]:
    """A stand-in for ``os.pwrite`` (how the log writes its frames) that fails with `errno`
    (ENOSPC by default) before writing anything: always, or with `once` the first time only,
    then writes as usual."""
    real = os.pwrite
    failed = False

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        nonlocal failed
        if once and failed:
            return real(fd, data, offset)
        failed = True
        raise OSError(errno, os.strerror(errno))

    return pwrite

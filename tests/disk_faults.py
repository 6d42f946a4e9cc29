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


def failing_write(errno: int = 28, *, under: str = "") -> Callable[..., Any]:
    """A stand-in for ``os.write`` (how a partition log appends) that fails with `errno`
    (ENOSPC by default) for files whose path starts with `under` (all files if empty), and
    writes the rest as usual. Its `fail` attribute turns it on and off."""
    real = os.write

    def write(fd: int, data: Any) -> int:
        if write.fail and os.readlink(f"/proc/self/fd/{fd}").startswith(under):  # type: ignore[attr-defined]
            raise OSError(errno, os.strerror(errno))
        return real(fd, data)

    write.fail = True  # type: ignore[attr-defined]
    return write

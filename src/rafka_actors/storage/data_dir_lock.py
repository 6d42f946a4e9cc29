"""One broker per data dir: an exclusive lock on ``<data.dir>/.lock``, held until the broker exits.

Kafka's LogManager locks every log dir before it loads a log (its `FileLock`, Java's
`FileChannel.tryLock`: an fcntl F_SETLK record lock on Linux) and refuses to start if another
process holds it. This is the same lock, taken the same way (`fcntl.lockf`), so the kernel
drops it when the holder's process ends, however it ends (SIGKILL included): no stale lock is
ever left to clean up by hand. Every file the broker writes is under the data dir (the users
file it only reads), so this one lock covers them all.

A second broker is refused naming the dir and, if the kernel says (F_GETLK, on 64-bit Linux),
the holder's PID. POSIX record locks belong to a process, not to a descriptor: a second lock
taken in the same process would be granted, and closing any descriptor of the file drops the
lock. So a table of this process's locks keeps a second broker of the same process out (tests
run several), as the JVM's own lock table does for Kafka, and nothing else opens `.lock`.

The file stays, empty (Kafka's does too); creating it is the one thing a refused start may
write, and only in a data dir no broker has used yet.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import sys
import threading
from pathlib import Path

__all__ = ["LOCK_FILE", "DataDirInUse", "DataDirLock", "lock_data_dir"]

LOCK_FILE = ".lock"

_held: dict[tuple[int, int], Path] = {}  # (device, inode) of each `.lock` this process holds
_held_guard = threading.Lock()
# Descriptors of a `.lock` this process already held, opened by a lost race: closing one would
# drop the holder's lock (see the module docstring), so they stay open.
_never_closed: list[int] = []

# struct flock of 64-bit Linux: l_type, l_whence, (padding), l_start, l_len, l_pid, (padding)
_FLOCK = struct.Struct("hhqqi4x")
_KNOWS_HOLDER = sys.platform == "linux" and struct.calcsize("P") == 8


class DataDirInUse(Exception):
    """Another broker (`pid`, None if unknown) holds the data dir's lock."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        holder = f"PID {pid}" if pid else "another process"
        super().__init__(f"{directory / LOCK_FILE} is locked by {holder}")
        self.directory = directory
        self.pid = pid


class DataDirLock:
    """The held lock; `release` (idempotent) lets another broker have the dir."""

    def __init__(self, directory: Path, fd: int, key: tuple[int, int]) -> None:
        self.directory = directory
        self._fd = fd
        self._key = key

    def release(self) -> None:
        if self._fd < 0:
            return
        with _held_guard:
            _held.pop(self._key, None)
            os.close(self._fd)  # drops the lock
            self._fd = -1


def lock_data_dir(directory: Path) -> DataDirLock:
    """Create the dir if it is missing and lock it; DataDirInUse if another broker holds it,
    OSError if it cannot be created or written."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    with _held_guard:
        _refuse_if_held_here(path, directory)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        stat = os.fstat(fd)
        key = (stat.st_dev, stat.st_ino)
        if key in _held:  # created or renamed here since the check: never close it
            _never_closed.append(fd)
            raise DataDirInUse(directory, os.getpid())
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd) if exc.errno in (errno.EAGAIN, errno.EACCES) else None
            os.close(fd)  # no lock of ours on it to drop
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise DataDirInUse(directory, holder) from None
            raise
        _held[key] = directory
    return DataDirLock(directory, fd, key)


def _refuse_if_held_here(path: Path, directory: Path) -> None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return  # nobody holds a lock on a file that is not there
    if (stat.st_dev, stat.st_ino) in _held:
        raise DataDirInUse(directory, os.getpid())


def _holder(fd: int) -> int | None:
    """The PID of the process holding the lock on `fd`'s file (None: unknown, or gone)."""
    if not _KNOWS_HOLDER:
        return None
    try:
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        l_type, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    return pid if l_type != fcntl.F_UNLCK and pid > 0 else None

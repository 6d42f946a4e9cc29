"""The broker's handle on its fsync worker (storage/fsync_worker.py): one child process that
makes a batch of the coordinator log durable while the event loop goes on serving.

Why a process: under ``coordinator.log.fsync=always`` a batch of several appends used to be
fsynced in a worker thread (`trio.to_thread`), and the thread has to win the GIL back from
the busy event loop before it can report, which on the 2-vCPU VM took longer than the fsync
itself. Same machine, interleaved (docs/performance.md; `rafka-actors bench --workloads c`):
16 committing clients 4,756-5,348 commits/s with the thread, 6,013-6,214 with this worker;
with a 17th client calling committed() meanwhile, 3,863-3,973 against 5,822-5,879.
A lone append is still fsynced on the event loop: the worker's round trip (two wake-ups of
another process) made one committing client 30% slower (1,668-1,706 -> 1,182-1,198/s).

A request is two messages on a socketpair; the worker fsyncs a duplicate of the log's own
descriptor, so it sees the same writeback errors.
"""

from __future__ import annotations

import array
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import trio

from ..storage import fsync_worker

log = logging.getLogger(__name__)

_WORKER = Path(fsync_worker.__file__)


class FsyncProcessGone(Exception):
    """The worker exited or its socket broke: nothing is known of the fsync asked for."""


class FsyncProcess:
    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self._process = process
        self._sock = trio.socket.from_stdlib_socket(sock)  # closed through trio
        self._raw = sock  # non-blocking now; asked through directly (see `_ask`)

    @property
    def pid(self) -> int:
        return self._process.pid

    @classmethod
    def start(cls, command: list[str] | None = None) -> FsyncProcess:
        """Start the worker (``command`` replaces its program, for tests); raises OSError."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            program = command or [sys.executable, "-I", "-S", str(_WORKER)]
            process = subprocess.Popen(
                [*program, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(process, ours)

    async def fsync(self, fd: int) -> OSError | None:
        """fsync ``fd`` in the worker: None once it is durable, or the error fsync gave.

        Raises FsyncProcessGone if the worker cannot answer. Not cancellable, like an fsync
        in a thread: a cancelled wait would leave its reply to be read as the next one's."""
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        with trio.CancelScope(shield=True):
            try:
                reply = await self._ask(rights)
            except OSError as exc:
                raise FsyncProcessGone(f"fsync worker {self.pid}: {exc}") from exc
        if reply == b"k":
            return None
        if reply[:1] == b"e" and reply[1:].isdigit():
            code = int(reply[1:])
            return OSError(code, os.strerror(code))
        returncode = self._process.poll()
        raise FsyncProcessGone(f"fsync worker {self.pid} answered {reply!r} (exit {returncode})")

    async def _ask(self, rights: list[tuple[int, int, array.array[int]]]) -> bytes:
        """Send one request and read its reply on the raw socket. trio's socket methods
        would add two scheduler passes and a failing ``recv`` (the reply comes an fsync
        later) to every batch; a request always fits (one in flight), so `sendmsg` waits
        only in theory."""
        while True:
            try:
                self._raw.sendmsg([b"s"], rights)
                break
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._raw)
        while True:
            await trio.lowlevel.wait_readable(self._raw)
            try:
                return self._raw.recv(64)
            except BlockingIOError:
                continue

    def close(self) -> None:
        """Close our end (the worker then exits) and reap it."""
        self._sock.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("fsync worker %d did not exit; killing it", self.pid)
            self._process.kill()
            self._process.wait()

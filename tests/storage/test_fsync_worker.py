"""storage/fsync_worker.py, the child program: one reply per request, errors as errnos."""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rafka_actors.storage.fsync_worker import serve


@contextmanager
def worker() -> Iterator[socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    thread = threading.Thread(target=serve, args=(theirs,), daemon=True)
    thread.start()
    try:
        yield ours
    finally:
        ours.close()  # the worker ends when the broker's end closes
        thread.join(5)
        theirs.close()
        assert not thread.is_alive()


def ask(sock: socket.socket, fds: list[int]) -> bytes:
    socket.send_fds(sock, [b"s"], fds)
    return sock.recv(64)


def test_a_file_is_synced_and_anything_else_gets_its_errno(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    read_end, write_end = os.pipe()
    try:
        os.write(fd, b"data")
        with worker() as sock:
            assert ask(sock, [fd]) == b"k"
            assert ask(sock, [read_end]) == b"e%d" % errno.EINVAL  # a pipe cannot be synced
            assert ask(sock, []) == b"e%d" % errno.EINVAL  # no descriptor sent
            assert ask(sock, [fd]) == b"k"  # still serving
        os.fstat(fd)  # ours stays open: the worker closed only its duplicates
    finally:
        for each in (fd, read_end, write_end):
            os.close(each)

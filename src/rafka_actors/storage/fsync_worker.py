"""The fsync worker: a child process that fsyncs the files the broker hands it.

The coordinator log (``coordinator.log.fsync=always``) writes a batch to the page cache
itself, then has it made durable here, so that the event loop keeps serving while the disk
flushes, without a worker thread: a thread has to win the GIL back from the busy loop after
each fsync, which on a small VM took longer than the fsync (see actors/fsync_process.py).

Run as ``python -I -S fsync_worker.py FD`` with FD one end of an ``AF_UNIX``
``SOCK_SEQPACKET`` pair. Each request is one message carrying one file descriptor
(``SCM_RIGHTS``): a duplicate of the broker's own, sharing its open file description, so a
writeback error is reported here exactly as to the broker's descriptor. The reply is one
message, ``k`` (synced) or ``e`` and the errno in decimal. The worker ends when the broker
closes its end (or dies), and ignores SIGINT (Ctrl-C stops the broker, which then closes it).

Standard library only, and nothing from this package: the child starts in milliseconds.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys


def serve(sock: socket.socket) -> None:
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(sock, 16, 4)
        except OSError:
            return
        if not message:
            return  # the broker closed its end
        try:
            if len(fds) != 1:
                reply = b"e%d" % errno.EINVAL
            else:
                os.fsync(fds[0])
                reply = b"k"
        except OSError as exc:
            reply = b"e%d" % (exc.errno or errno.EIO)
        finally:
            for fd in fds:
                os.close(fd)
        try:
            sock.send(reply)
        except OSError:
            return


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with socket.socket(fileno=int(argv[1])) as sock:
        serve(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""What a failing disk looks like from above the storage: an answer, one log line, no garbage.

A full disk (ENOSPC, EDQUOT) or a failing one (EIO) fails every append while it lasts: at 800
records a second, a traceback each would be thousands of log lines a minute. Failures are
therefore logged through one `LogBudget` (log_budget.py): the first of each 10 s, then a count.

No reference cycles: an exception kept (in a log's failed state, or in a waiter's answer)
while its traceback holds the frame that keeps it makes a cycle, which holds the request's
buffers (up to a MiB each) until a full collection, and the broker's collector runs those
rarely (gc_policy.py). With the disk full for 30 s under 800 records/s, such cycles grew the
broker's RSS from 49 to 169 MB; `gc.collect()` gave it all back. So what is kept is made
here, without a traceback (`detached`), and exceptions are raised from it, not stored.
"""

from __future__ import annotations

import logging
from typing import Final, TypeVar

from ..log_budget import LogBudget

__all__ = ["STORAGE_LOG", "StorageError", "detached", "reason"]

STORAGE_LOG: Final = LogBudget(
    logging.getLogger("rafka_actors.storage"),
    per_interval=1,
    level=logging.ERROR,
    counted="more storage failures were not logged",
)


class StorageError(Exception):
    """A partition log could not store an append (a full or failing disk); nothing of it was
    acknowledged. Clients get KAFKA_STORAGE_ERROR, which is retriable."""


E = TypeVar("E", bound=BaseException)


def detached(error: E) -> E:
    """`error` without its traceback, cause or context: safe to keep."""
    error.__traceback__ = None
    error.__cause__ = error.__context__ = None
    return error


def reason(exc: BaseException) -> str:
    """An OSError as a log line wants it: its message, without the errno tuple."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror} (errno {exc.errno})"
    return str(exc) or type(exc).__name__

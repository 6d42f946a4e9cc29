"""A ShareFetch in one turn of its group's actor: read, acquire and store together, as Kafka's
SharePartition does on the leader.

`GroupMachine.step` hands a `ShareFetchOp` here. The pure machine steps the session half and
answers where each of the session's partitions is next read (its first Available record);
the actor reads the partition logs from there (`read_for_share`: file I/O, the actor's and
never the machine's), then steps the acquisition of what was read. Both halves' records join
the turn's batch and are stored with its one append before anything is answered: one ask and
one append per ShareFetch whose records are already on disk. Records appended after the read
are the next fetch's. Before, a ShareFetch asked twice (session, then acquire) with the read
between the turns, and could store twice. A read that raises fails that fetch's read alone
(nothing acquired), not the turn: a failed turn would answer every member's op with an error.

Records/s acknowledged (bench/share_groups.py --records 100000 --runs 1, default
configuration; main's build and this change alternating, one process each, five rounds on a
loaded 2-core machine; medians): 1 consumer 53,529 -> 60,571; 4 consumers 53,979 -> 59,389.
Not an optimisation of its own (the shape is the point): it must not, and does not, fall.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from opentelemetry.context import Context

from ..share_group.ops import ShareAcquireOp, ShareFetchOp, ShareFetchOpResp
from ..storage.share_reads import ReadFrom, ShareReads
from .mailbox_actor import Batch

log = logging.getLogger(__name__)

# steps one op through the group's machine (GroupMachine's step, without this module)
Stepper = Callable[[Any, Any, int, int, Batch, Context | None], Any]
# (org id, where to read, max bytes, read_committed) -> what was read
ShareReader = Callable[[int, ReadFrom, int, bool], ShareReads]


def no_reads(_org_id: int, _read_from: ReadFrom, _max_bytes: int, _committed: bool) -> ShareReads:
    """A registry without partition logs (unit tests) reads nothing."""
    return ShareReads()


def share_fetch(
    step: Stepper,
    read: ShareReader,
    org_id: int,
    group: Any,
    op: ShareFetchOp,
    waiter: int,
    now: int,
    batch: Batch,
    cause: Context | None,
) -> Any:
    """Step `op`'s session half, read what it says, step the acquisition: one answer."""
    group = step(group, op, waiter, now, batch, cause)
    opened: ShareFetchOpResp = _taken(batch, waiter)
    if opened.error_code != ErrorCode.none:
        batch.replies.append((waiter, opened))
        return group
    try:
        reads = read(org_id, opened.partitions, op.max_bytes, opened.read_committed)
    except Exception:  # a failed read fails this fetch's read, never the whole turn
        log.exception("share group %s: reading for a ShareFetch failed", op.group_id)
        reads = ShareReads()
    acquire = ShareAcquireOp(op.group_id, op.member_id, reads.reads, op.max_records, reads.aborted)
    group = step(group, acquire, waiter, now, batch, cause)
    acquired = _taken(batch, waiter)
    batch.replies.append(
        (
            waiter,
            ShareFetchOpResp(
                acquired.error_code,
                None,
                opened.partitions,
                opened.ack_errors,
                opened.read_committed,
                reads.records,
                acquired.acquired,
                acquired.lock_duration_ms,
                acquired.next_release_in_ms,
            ),
        )
    )
    return group


def _taken(batch: Batch, waiter: int) -> Any:
    """The answer a step just gave `waiter`, taken back out of the batch."""
    replies = batch.replies
    for at in range(len(replies) - 1, -1, -1):
        if replies[at][0] == waiter:
            return replies.pop(at)[1]
    raise LookupError(f"no answer for waiter {waiter}")

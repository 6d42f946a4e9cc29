"""A consumer's next commit, answered from its last one without decoding it.

A consumer commits the same partitions of the same group, as the same member, again and
again: its OffsetCommit requests differ only in the correlation id and the offsets. When the
reactor (reactor.py) has answered a commit whose every partition was committed, the
connection keeps it as a `RepeatCommit`: the frame, where each partition's offset lies in
it, the request, the op it made and the reply. A later frame equal to the kept one in every
other byte is that request with other offsets, so its op is the kept op with those offsets.
That skips the header's parse, the decode, the handler's own work and the reply's encoding:
with 16 committing clients, a fifth of the broker's CPU per commit (docs/performance-history.md).

Whatever may have changed since is looked at again, by the code that looked the first time:
the connection's rights to the group and its topics and whether the partitions still exist
(apis/offsets.py `committable`), and the group's actor steps the op in full (membership,
generation, heartbeat, log). The kept reply is reused, with the new correlation id, only when
every partition was committed again; any other outcome is answered as the handler would.

An offset's 8 bytes are looked for by value in the kept frame: found exactly once, they can
only be that offset's field. A request whose offsets cannot be told apart so is not kept.
"""

from __future__ import annotations

from typing import Any, Final

from .. import telemetry
from ..group_common.ops import OffsetCommitOp
from ..ids import GroupKey
from ..protocol.codec import encode_response
from ..protocol.headers import parse_request_header
from .apis.offsets import commit_response, committable
from .context import BrokerContext, ConnectionInfo
from .frames import reply_for

_OFFSET_BYTES: Final = 8


class RepeatCommit:
    __slots__ = ("frame", "key", "offsets_at", "op", "partitions", "reply", "request")

    def __init__(
        self,
        key: GroupKey,
        frame: bytes,
        offsets_at: list[int],
        request: Any,
        op: OffsetCommitOp,
        reply: bytes,
    ) -> None:
        self.key = key
        self.frame = frame
        self.offsets_at = offsets_at  # ascending, one per entry of op.offsets
        self.request = request
        self.op = op
        self.reply = reply
        self.partitions = [(topic, partition) for topic, partition, *_ in op.offsets]

    def offsets_in(self, frame: bytes) -> list[int] | None:
        """The offsets `frame` commits, if it equals the kept frame everywhere else (its
        correlation id aside); else None."""
        kept = self.frame
        if len(frame) != len(kept) or frame[:4] != kept[:4]:
            return None
        offsets = []
        start = 8
        for at in self.offsets_at:
            if frame[start:at] != kept[start:at]:
                return None
            start = at + _OFFSET_BYTES
            offsets.append(int.from_bytes(frame[at:start], "big", signed=True))
        if frame[start:] != kept[start:]:
            return None
        return offsets


def keep(frame: bytes, reply: bytes | None, conn: ConnectionInfo) -> RepeatCommit | None:
    """What to answer the connection's next commits from, after the reactor answered
    `frame` with `reply`: the commit the handler left in `conn.last_commit` (every partition
    committed), or None."""
    last, conn.last_commit = conn.last_commit, None
    if last is None or not reply:
        return None
    request, op = last
    # The op has every partition of the request, in the request's order: so in the frame's.
    offsets_at = []
    start = 8
    for _topic, _partition, offset, *_ in op.offsets:
        field = offset.to_bytes(_OFFSET_BYTES, "big", signed=True)
        at = frame.find(field, 8)
        if at < start or frame.find(field, at + 1) >= 0:
            return None  # not only in its field (or not after the one before): not kept
        offsets_at.append(at)
        start = at + _OFFSET_BYTES
    return RepeatCommit(GroupKey(conn.org_id, op.group_id), frame, offsets_at, request, op, reply)


def answer(
    repeat: RepeatCommit, frame: bytes, ctx: BrokerContext, conn: ConnectionInfo, now: float
) -> bytes | None:
    """The reply to `frame` if it is the kept commit with other offsets and the group's actor
    answers it now (GroupActor.answer_inline); else None, and nothing was committed. `now`:
    trio.current_time()."""
    offsets = repeat.offsets_in(frame)
    if offsets is None or telemetry.tracing():
        return None
    op = repeat.op
    if not committable(ctx, conn, op.group_id, repeat.partitions):
        return None
    response = ctx.registry().answer_now(repeat.key, _with_offsets(op, offsets), now)
    if response is None:
        return None
    results = response.results
    if all(error == 0 for _topic, _partition, error in results):
        return reply_for(frame, repeat.reply)
    header, _ = parse_request_header(frame)
    return encode_response(header, commit_response(op.api_version, repeat.request, results))


def _with_offsets(op: OffsetCommitOp, offsets: list[int]) -> OffsetCommitOp:
    # One offset per partition (offsets_in). zip without strict=: mypyc compiles a plain zip
    # into the loop, and zip(strict=True) into a Python call (0.26 us more).
    return OffsetCommitOp(
        op.group_id,
        tuple(
            (topic, partition, offset, epoch, metadata)
            for (topic, partition, _, epoch, metadata), offset in zip(op.offsets, offsets)  # noqa: B905
        ),
        op.member_id,
        op.generation_id,
        op.group_instance_id,
        op.api_version,
    )

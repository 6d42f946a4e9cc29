"""The share-group admin APIs: DescribeShareGroupOffsets (90, v0-1), AlterShareGroupOffsets
(91, v0) and DeleteShareGroupOffsets (92, v0), as Kafka's Admin client sends them.

A share group's "offset" of a partition is its share partition's start offset: every record
below it is acknowledged or archived. Its lag (v1) is what is not yet done with: the records of
the share partition's window still Available or Acquired, plus everything in the log past the
window. The actor answers the window; the log end is read here. Offsets may be altered or
deleted only while the group has no members (NON_EMPTY_GROUP "The group is not empty.", as
Kafka), which the actor decides. Topics are checked here: an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION without asking the actor.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...share_group.ops import (
    AlterShareOffsetsOp,
    AlterShareOffsetsOpResp,
    DeleteShareOffsetsOp,
    DeleteShareOffsetsOpResp,
    DescribeShareOffsetsOp,
    DescribeShareOffsetsOpResp,
)
from ..context import BrokerContext, ConnectionInfo
from ..steps import ask, ask_each
from ._build import NO_THROTTLE, make, schema
from .groups import DENIED, denied
from .offsets import TOPIC_DENIED

DESCRIBE_OFFSETS_KEY = 90
ALTER_OFFSETS_KEY = 91
DELETE_OFFSETS_KEY = 92


# -- DescribeShareGroupOffsets --------------------------------------------------------------
def describe_share_group_offsets(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(DESCRIBE_OFFSETS_KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    wanted = []
    for g in request.groups:
        partitions = None
        if g.topics is not None:
            partitions = tuple((t.topic_name, int(p)) for t in g.topics for p in t.partitions)
        op = (
            None
            if not g.group_id or denied(conn, g.group_id)
            else DescribeShareOffsetsOp(g.group_id, partitions)
        )
        wanted.append((g.group_id, op))

    def described(answers: list[DescribeShareOffsetsOpResp | None]) -> Any:
        groups = []
        for (group_id, _), answer in zip(wanted, answers, strict=True):
            if answer is None:
                code = DENIED if group_id and denied(conn, group_id) else ErrorCode.invalid_group_id
                answer = DescribeShareOffsetsOpResp(code)
            topics: dict[str, list[Any]] = {}
            for topic, index, start, pending, window_end in answer.offsets:
                found = store.by_name(topic)
                code, lag = ErrorCode.none, -1
                if found is None or not 0 <= index < len(found.partitions):
                    code, start = ErrorCode.unknown_topic_or_partition, -1
                elif not conn.may_use_topic(topic):
                    code, start = TOPIC_DENIED, -1
                elif start >= 0:
                    log_end = found.partitions[index].log_end_offset
                    lag = pending + max(0, log_end - window_end)
                topics.setdefault(topic, []).append(
                    make(
                        mod.DescribeShareGroupOffsetsResponsePartition,
                        partition_index=index,
                        start_offset=start,
                        leader_epoch=-1 if start < 0 else 0,
                        lag=lag,
                        error_code=code,
                        error_message=None,
                    )
                )
            groups.append(
                make(
                    mod.DescribeShareGroupOffsetsResponseGroup,
                    group_id=group_id,
                    topics=tuple(
                        make(
                            mod.DescribeShareGroupOffsetsResponseTopic,
                            topic_name=topic,
                            topic_id=_topic_id(store, topic),
                            partitions=tuple(rows),
                        )
                        for topic, rows in topics.items()
                    ),
                    error_code=ErrorCode(answer.error_code),
                    error_message=answer.error_message,
                )
            )
        return make(
            mod.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)
        )

    return ask_each(conn.org_id, wanted, described)


def _topic_id(store: Any, name: str) -> Any:
    topic = store.by_name(name)
    return None if topic is None else topic.topic_id


# -- AlterShareGroupOffsets -----------------------------------------------------------------
def alter_share_group_offsets(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(ALTER_OFFSETS_KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    group_id = request.group_id
    if not group_id or denied(conn, group_id):
        code = DENIED if group_id else ErrorCode.invalid_group_id
        return _altered(mod, store, code, None, {}, [])
    refused: dict[tuple[str, int], ErrorCode] = {}
    asked = []
    for t in request.topics:
        found = store.by_name(t.topic_name)
        for p in t.partitions:
            key = (t.topic_name, p.partition_index)
            if found is None or not 0 <= p.partition_index < len(found.partitions):
                refused[key] = ErrorCode.unknown_topic_or_partition
            elif not conn.may_use_topic(t.topic_name):
                refused[key] = TOPIC_DENIED
            elif p.start_offset < -1:
                refused[key] = ErrorCode.invalid_request
            else:
                asked.append((t.topic_name, p.partition_index, _start(found, p)))
    order = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    op = AlterShareOffsetsOp(group_id, tuple(asked))

    def altered(answer: AlterShareOffsetsOpResp) -> Any:
        return _altered(mod, store, answer.error_code, answer.error_message, refused, order)

    return ask(conn.org_id, group_id, op, altered)


def _start(topic: Any, p: Any) -> int:
    """The start offset asked for, within the log (-1: the log's end, as Kafka's latest)."""
    log = topic.partitions[p.partition_index]
    if p.start_offset == -1:
        return int(log.log_end_offset)
    return min(max(int(p.start_offset), log.log_start_offset), log.log_end_offset)


def _altered(
    mod: Any,
    store: Any,
    code: int,
    message: str | None,
    refused: dict[tuple[str, int], ErrorCode],
    order: list[tuple[str, int]],
) -> Any:
    topics: dict[str, list[Any]] = {}
    for key in order:
        each = refused.get(key, ErrorCode(code))
        topics.setdefault(key[0], []).append(
            make(
                mod.AlterShareGroupOffsetsResponsePartition,
                partition_index=key[1],
                error_code=each,
                error_message=message if each == code and code != ErrorCode.none else None,
            )
        )
    return make(
        mod.AlterShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(code),
        error_message=message,
        responses=tuple(
            make(
                mod.AlterShareGroupOffsetsResponseTopic,
                topic_name=topic,
                topic_id=_topic_id(store, topic),
                partitions=tuple(rows),
            )
            for topic, rows in topics.items()
        ),
    )


# -- DeleteShareGroupOffsets ----------------------------------------------------------------
def delete_share_group_offsets(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(DELETE_OFFSETS_KEY, version)
    store = ctx.data.topics_for(conn.org_id)
    group_id = request.group_id
    names = [t.topic_name for t in request.topics]
    if not group_id or denied(conn, group_id):
        code = DENIED if group_id else ErrorCode.invalid_group_id
        return _deleted(mod, store, code, None, {})
    refused = {
        name: ErrorCode.unknown_topic_or_partition if store.by_name(name) is None else TOPIC_DENIED
        for name in names
        if store.by_name(name) is None or not conn.may_use_topic(name)
    }
    op = DeleteShareOffsetsOp(group_id, tuple(n for n in names if n not in refused))

    def deleted(answer: DeleteShareOffsetsOpResp) -> Any:
        results = {name: ErrorCode(answer.error_code) for name in names}
        results.update({name: ErrorCode(code) for name, code in answer.results})
        results.update(refused)
        return _deleted(mod, store, answer.error_code, answer.error_message, results)

    return ask(conn.org_id, group_id, op, deleted)


def _deleted(
    mod: Any, store: Any, code: int, message: str | None, results: dict[str, ErrorCode]
) -> Any:
    return make(
        mod.DeleteShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(code),
        error_message=message,
        responses=tuple(
            make(
                mod.DeleteShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=_topic_id(store, name),
                error_code=each,
                error_message=None,
            )
            for name, each in results.items()
        ),
    )

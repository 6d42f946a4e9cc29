"""OffsetCommit (8) and OffsetFetch (9): committed offsets live in the group's actor.

OffsetCommit: topic existence is the gateway's business, as in KafkaApis: a partition of an
unknown topic, or beyond the topic's partition count, gets UNKNOWN_TOPIC_OR_PARTITION here and
never reaches the actor. Everything else goes to the actor in ONE OffsetCommitOp (one mailbox
round trip, one batch of records), and the per-partition results are put back in request
order. When nothing is left to commit the actor is not asked at all (Kafka does the same).
An empty group id is accepted (Kafka keeps that for old tools); only a null one is invalid.
`retention_time` (v2-v4) is ignored: offsets here have no per-commit expiry.

OffsetFetch: v1-v7 ask for one group, v8+ for a batch of groups (one actor round trip each).
A null topic list (v2+) means every offset the group has. Unknown topics are not filtered:
like Kafka, the answer for a partition without a committed offset is -1 without an error.
A group-level error goes into the top-level error code (v2-v7), the group's error code (v8+)
or, in v1 which has neither, into every requested partition.
From v9 on each group of the request may name a member id and member epoch: a KIP-848
consumer fetching its group's offsets, which the state machine checks as it checks a commit
(UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; these come back as the group's error code). Admin
clients and classic consumers send a null member id and epoch -1, as do all older versions.

Authorization, as in KafkaApis: a group the user may not use (groups.denied) fails the whole
request without asking the actor: every partition of an OffsetCommit, the group's error of
an OffsetFetch, GROUP_AUTHORIZATION_FAILED. Then topics: a partition of a topic the user may
not use is TOPIC_AUTHORIZATION_FAILED in an OffsetCommit (checked before existence, and the
allowed ones are still committed) and in an OffsetFetch that names it (appended after the
allowed topics, as Kafka does, offset -1); an OffsetFetch of every offset simply leaves such
topics out. The actor never hears of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ...group_common.ops import (
    OffsetCommitOp,
    OffsetCommitOpResp,
    OffsetFetchOp,
    OffsetFetchOpResp,
)
from ...protocol.codec import shared_response
from ..context import BrokerContext, ConnectionInfo
from ..steps import ask, ask_each
from ._build import NO_THROTTLE, error_code, make, schema
from .groups import DENIED, denied

TOPIC_DENIED: Final = ErrorCode.topic_authorization_failed

COMMIT_KEY: Final = 8
FETCH_KEY: Final = 9

FetchRow = tuple[str, int, int, int, str | None, int]  # as in OffsetFetchOpResp.offsets
SHARED_PARTITIONS: Final = 64  # responses of at most this many partitions may be shared


def partition_exists(
    ctx: BrokerContext, conn: ConnectionInfo, topic_name: str, partition: int
) -> bool:
    """Whether the partition exists among the connection's org's topics."""
    topic = ctx.data.topics_for(conn.org_id).by_name(topic_name)
    return topic is not None and 0 <= partition < len(topic.partitions)


# -- OffsetCommit -------------------------------------------------------------------------
def offset_commit(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    group_id = request.group_id
    mod = schema(COMMIT_KEY, version)
    if group_id is None:
        return _commit_response(mod, request, {}, ErrorCode.invalid_group_id, None)
    if denied(conn, group_id):
        return _commit_response(mod, request, {}, DENIED, None)
    offsets = _known_offsets(ctx, conn, version, request)
    results = _denied_partitions(conn, request.topics)

    def committed(response: OffsetCommitOpResp | None) -> Any:
        if response is not None:
            results.update(((t, p), e) for t, p, e in response.results)
        shape = _all_committed(request.topics, results)
        missing = ErrorCode.unknown_topic_or_partition
        return _commit_response(mod, request, results, missing, shape)

    if not offsets:  # nothing left to commit: the actor is not asked (as in Kafka)
        return committed(None)
    op = OffsetCommitOp(
        group_id=group_id,
        offsets=offsets,
        member_id=request.member_id,
        generation_id=request.generation_id_or_member_epoch,
        group_instance_id=request.group_instance_id if version >= 7 else None,
        api_version=version,
    )
    return ask(conn.org_id, group_id, op, committed)


def _committable_partition(
    ctx: BrokerContext, conn: ConnectionInfo, topic: str, partition: int
) -> bool:
    """Whether the user may use the topic and the partition exists (else it never reaches
    the actor: TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION)."""
    return conn.may_use_topic(topic) and partition_exists(ctx, conn, topic, partition)


def _denied_partitions(conn: ConnectionInfo, topics: Any) -> dict[tuple[str, int], int]:
    """TOPIC_AUTHORIZATION_FAILED for each partition of a topic the user may not use."""
    return {
        (t.name, p.partition_index): TOPIC_DENIED
        for t in topics
        if not conn.may_use_topic(t.name)
        for p in t.partitions
    }


def _known_offsets(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> tuple[tuple[str, int, int, int, str | None], ...]:
    """The offsets of partitions that exist, of topics the user may use."""
    return tuple(
        (
            t.name,
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch if version >= 6 else -1,
            p.committed_metadata,
        )
        for t in request.topics
        for p in t.partitions
        if _committable_partition(ctx, conn, t.name, p.partition_index)
    )


def _commit_response(
    mod: Any,
    request: Any,
    results: dict[tuple[str, int], int],
    missing: ErrorCode,
    shape: tuple[Any, ...] | None,
) -> Any:
    """The response; when every requested partition was committed (a consumer's usual
    commit, the same answer every time: `shape`, from `_all_committed`), one shared response
    and encoding per shape."""
    if shape is None:
        return _build_commit_response(mod, request, results, missing)
    return shared_response(
        (COMMIT_KEY, mod, shape), lambda: _build_commit_response(mod, request, results, missing)
    )


def _all_committed(topics: Any, results: dict[tuple[str, int], int]) -> tuple[Any, ...] | None:
    """((topic, (partition, ...)), ...) of the request if every partition was committed and
    there are at most SHARED_PARTITIONS (a consumer's usual commit; sharing bigger ones
    would let varying subsets of many partitions fill the cache with big responses)."""
    shape = []
    count = 0
    for t in topics:
        name = t.name
        indexes = tuple([p.partition_index for p in t.partitions])
        count += len(indexes)
        if count > SHARED_PARTITIONS:
            return None
        for index in indexes:
            if results.get((name, index)) != 0:
                return None
        shape.append((name, indexes))
    return tuple(shape)


def _build_commit_response(
    mod: Any, request: Any, results: dict[tuple[str, int], int], missing: ErrorCode
) -> Any:
    topics = partition_results(
        mod.OffsetCommitResponseTopic,
        mod.OffsetCommitResponsePartition,
        request.topics,
        results,
        missing,
    )
    return make(mod.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def partition_results(
    topic_cls: type,
    partition_cls: type,
    requested: Any,
    results: dict[tuple[str, int], int],
    missing: ErrorCode,
) -> tuple[Any, ...]:
    """(topic name, partition index, error) results for every partition of the request, in
    its order; `missing` for a partition without a result (OffsetCommit, OffsetDelete)."""
    return tuple(
        make(
            topic_cls,
            name=t.name,
            partitions=tuple(
                make(
                    partition_cls,
                    partition_index=p.partition_index,
                    error_code=error_code(results.get((t.name, p.partition_index), missing)),
                )
                for p in t.partitions
            ),
        )
        for t in requested
    )


# -- OffsetFetch --------------------------------------------------------------------------
Shape = tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partition indexes) as requested
# One group's answer: (group id, error, the topics asked for (None: every one), rows)
GroupAnswer = tuple[str | None, ErrorCode, Shape | None, tuple[FetchRow, ...]]
Member = tuple[str | None, int]  # a KIP-848 member's id and epoch (v9+)
NO_MEMBER: Final[Member] = (None, -1)  # a classic consumer's or an admin's fetch


def offset_fetch(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    stable = version >= 7 and request.require_stable
    wanted = (request,) if version < 8 else request.groups  # v1-v7 name one group, v8+ a batch
    mod = schema(FETCH_KEY, version)
    fetches = [_group_fetch(conn, group, _member(version, group), stable) for group in wanted]

    def fetched(responses: list[OffsetFetchOpResp | None]) -> Any:
        answers = tuple(
            answer(response) for (*_, answer), response in zip(fetches, responses, strict=True)
        )
        # (the rows are the response's partitions: every one asked for, or found)
        if sum(len(rows) for *_, rows in answers) > SHARED_PARTITIONS:
            return _build_fetch_response(mod, version, answers)
        # The answer is a pure function of the answers: a client asking again and again for
        # offsets that have not moved (committed(), a lag exporter) gets one shared encoding.
        return shared_response(
            (FETCH_KEY, mod, answers), lambda: _build_fetch_response(mod, version, answers)
        )

    return ask_each(conn.org_id, [(group_id, op) for group_id, op, _ in fetches], fetched)


def _member(version: int, group: Any) -> Member:
    """The KIP-848 member id and epoch a group of the request names (v9+; else none).
    Read by version, not with getattr's default: a missing field raises AttributeError
    inside, which cost a fetch a fifth of its time."""
    return (group.member_id, group.member_epoch) if version >= 9 else NO_MEMBER


def _group_fetch(
    conn: ConnectionInfo, wanted: Any, member: Member, stable: bool
) -> tuple[str, OffsetFetchOp | None, Callable[[OffsetFetchOpResp | None], GroupAnswer]]:
    """For one group of the request (v1-v7: the request itself): its id, the op to ask its
    actor (None: answered without it, a null or denied id), and how its answer becomes the
    group's part of the response."""
    group_id = wanted.group_id
    topics = None
    if wanted.topics is not None:
        allowed = [t for t in wanted.topics if conn.may_use_topic(t.name)]
        refused = [t for t in wanted.topics if not conn.may_use_topic(t.name)]
        topics = allowed
    op = None
    if group_id is None:
        early: OffsetFetchOpResp | None = OffsetFetchOpResp(ErrorCode.invalid_group_id)
    elif denied(conn, group_id):
        early = OffsetFetchOpResp(DENIED)
    else:
        early = None
        partitions = (
            None
            if topics is None
            else tuple((t.name, p) for t in topics for p in t.partition_indexes)
        )
        op = OffsetFetchOp(
            group_id,
            partitions,
            require_stable=stable,
            member_id=member[0],
            member_epoch=member[1],
        )

    def answer(response: OffsetFetchOpResp | None) -> GroupAnswer:
        response = early if response is None else response
        assert response is not None
        code = error_code(response.error_code)
        if topics is None:  # every committed offset, of topics the user may use
            every = () if code != ErrorCode.none else response.offsets
            return group_id, code, None, tuple(r for r in every if conn.may_use_topic(r[0]))
        requested = tuple((t.name, tuple(t.partition_indexes)) for t in allowed + refused)
        if code != ErrorCode.none:  # Kafka appends the refused topics
            # v1 has no group-level error: each requested partition carries it.
            return group_id, code, requested, _rows(requested, int(code))
        rows = (*response.offsets, *_rows(requested[len(allowed) :], TOPIC_DENIED))
        return group_id, code, requested, rows

    return group_id, op, answer


def _build_fetch_response(mod: Any, version: int, answers: tuple[GroupAnswer, ...]) -> Any:
    if version < 8:
        [(_, code, requested, rows)] = answers
        return make(
            mod.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            topics=()
            if code != ErrorCode.none and version >= 2
            else _topics(mod, version, requested, rows),
        )
    groups = tuple(
        make(
            mod.OffsetFetchResponseGroup,
            group_id=group_id or "",  # "": encodable even for a null id
            error_code=code,
            topics=() if code != ErrorCode.none else _topics(mod, version, requested, rows),
        )
        for group_id, code, requested, rows in answers
    )
    return make(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=groups)


def _rows(topics: Shape, error: int) -> tuple[FetchRow, ...]:
    """No offset, and `error`, for each partition of `topics`."""
    return tuple((name, p, -1, -1, "", error) for name, indexes in topics for p in indexes)


def _topics(mod: Any, version: int, requested: Shape | None, rows: Iterable[FetchRow]) -> Any:
    """The response's topics: as requested, or every topic of `rows` (requested is None)."""
    topic_cls, partition_cls = _classes(mod, version)
    if requested is None:
        by_topic: dict[str, list[Any]] = {}
        for row in rows:
            by_topic.setdefault(row[0], []).append(_partition(partition_cls, row))
        return tuple(make(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items())
    found = {(row[0], row[1]): row for row in rows}
    return tuple(
        make(
            topic_cls,
            name=name,
            partitions=tuple(
                _partition(partition_cls, found.get((name, p), (name, p, -1, -1, "", 0)))
                for p in indexes
            ),
        )
        for name, indexes in requested
    )


def _partition(partition_cls: type, row: FetchRow) -> Any:
    _, partition, offset, epoch, metadata, error = row
    return make(
        partition_cls,
        partition_index=partition,
        committed_offset=offset,
        committed_leader_epoch=epoch,
        metadata=metadata,
        error_code=error_code(error),
    )


def _classes(mod: Any, version: int) -> tuple[type, type]:
    """(topic class, partition class): kio's names gained a plural `s` at v8."""
    if version >= 8:
        return mod.OffsetFetchResponseTopics, mod.OffsetFetchResponsePartitions
    return mod.OffsetFetchResponseTopic, mod.OffsetFetchResponsePartition

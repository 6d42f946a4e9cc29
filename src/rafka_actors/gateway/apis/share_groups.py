"""KIP-932 share groups: ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78) and
ShareAcknowledge (79), the versions librdkafka 2.16's ShareConsumer sends (v1 of each).

The gateway holds no share state. A ShareFetch is one ask of the share group's actor
(`ShareFetchOp`), which in one turn (actors/share_fetch.py):

1. checks the share session's epoch, updates its partitions and applies the piggy-backed
   acknowledgements;
2. reads each partition's log from its first Available record, as Fetch does;
3. acquires the Available records of what was read and raises their delivery counts;

then stores all that with one append and answers the batches read and the ranges this member
now holds; the client hands out only the records in them.

When nothing was acquired the request waits for an append to one of the partitions, up to
its max wait (a long poll, as Fetch's), or until the first lock of its partitions expires,
then asks again (a `retry`: steps 2 and 3); a successful acknowledgement of a partition
(another member's ShareFetch or ShareAcknowledge) wakes it too, since a released record, or
room in a full window, may now be acquired. A ShareAcknowledge, and the final ShareFetch of a
session (epoch -1), are step 1 alone (`ShareSessionOp`). The handler itself is sans-IO: the
actor reads. Topics are named by id on the wire and by name in the group's state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ...auth.acl_operations import OMITTED, group_operations
from ...share_group.ops import (
    ShareAck,
    ShareFetchOp,
    ShareFetchOpResp,
    ShareGroupDescribeOp,
    ShareGroupDescribeOpResp,
    ShareGroupHeartbeatOp,
    ShareGroupHeartbeatOpResp,
    SharePartitionId,
    ShareSessionOp,
    ShareSessionOpResp,
)
from ...storage.data_plane import PartitionKey
from ...storage.share_reads import trimmed
from ..context import BrokerContext, ConnectionInfo
from ..identities import WithGroupIdentities
from ..steps import AwaitAppend, Step, ask, ask_each
from ._build import NO_THROTTLE, make, ms, schema, to_ms
from .consumer_groups import described_error, heartbeat_response
from .groups import DENIED, denied
from .offsets import TOPIC_DENIED

HEARTBEAT_KEY = 76
DESCRIBE_KEY = 77
FETCH_KEY = 78
ACKNOWLEDGE_KEY = 79
DEFAULT_MAX_RECORDS = 500  # Kafka's max.poll.records, when a request says 0 or less
LOCK_SLACK_S = 0.005  # a fetch retrying at a lock's expiry comes just after it


# -- ShareGroupHeartbeat -------------------------------------------------------------------
def share_group_heartbeat(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(HEARTBEAT_KEY, version)
    group_id = request.group_id
    if denied(conn, group_id):
        return _heartbeat_response(mod, ShareGroupHeartbeatOpResp(DENIED))
    if not all(map(conn.may_use_topic, request.subscribed_topic_names or ())):
        return _heartbeat_response(mod, ShareGroupHeartbeatOpResp(TOPIC_DENIED))
    if not group_id or not group_id.strip():
        return _heartbeat_response(
            mod, ShareGroupHeartbeatOpResp(ErrorCode.invalid_request, "GroupId can't be empty.")
        )
    names = request.subscribed_topic_names
    op = ShareGroupHeartbeatOp(
        group_id=group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=conn.client_id or "",
        client_host=conn.client_host,
    )
    return ask(conn.org_id, group_id, op, lambda answer: _heartbeat_response(mod, answer))


def _heartbeat_response(mod: Any, answer: ShareGroupHeartbeatOpResp) -> Any:
    return heartbeat_response(mod.ShareGroupHeartbeatResponse, mod, answer)


# -- ShareGroupDescribe --------------------------------------------------------------------
def share_group_describe(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(DESCRIBE_KEY, version)
    wanted = request.include_authorized_operations
    ids = list(request.group_ids)
    asked = [(g, ShareGroupDescribeOp(g) if g and not denied(conn, g) else None) for g in ids]

    def described(answers: list[ShareGroupDescribeOpResp | None]) -> Any:
        groups, cgp_ids = [], {}
        for group_id, answer in zip(ids, answers, strict=True):
            if answer is None:
                code = DENIED if group_id and denied(conn, group_id) else ErrorCode.invalid_group_id
                answer = ShareGroupDescribeOpResp(code)
            elif answer.cgp_id and group_id:
                cgp_ids[group_id] = answer.cgp_id
            operations = group_operations(conn.user, group_id or "") if wanted else OMITTED
            groups.append(_described(ctx, conn.org_id, mod, group_id or "", answer, operations))
        response = make(
            mod.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)
        )
        return WithGroupIdentities(response, conn.org_id, cgp_ids)

    return ask_each(conn.org_id, asked, described)


def _described(
    ctx: BrokerContext,
    org_id: int,
    mod: Any,
    group_id: str,
    answer: ShareGroupDescribeOpResp,
    operations: int,  # the authorized operations, if the group is described
) -> Any:
    if answer.error_code != ErrorCode.none:
        return described_error(mod, group_id, answer.error_code, answer.error_message)
    topics = ctx.data.topics_for(org_id)
    members = []
    for member_id, rack_id, epoch, client_id, client_host, names, assigned in answer.members:
        named = []
        for topic_id, indexes in assigned:
            topic = topics.by_id(topic_id)
            if topic is not None:
                named.append(
                    mod.TopicPartitions(
                        topic_id=topic_id, topic_name=topic.name, partitions=indexes
                    )
                )
        members.append(
            make(
                mod.Member,
                member_id=member_id,
                rack_id=rack_id,
                member_epoch=epoch,
                client_id=client_id,
                client_host=client_host,
                subscribed_topic_names=names,
                assignment=mod.Assignment(topic_partitions=tuple(named)),
            )
        )
    return make(
        mod.DescribedGroup,
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=answer.state,
        group_epoch=answer.group_epoch,
        assignment_epoch=answer.assignment_epoch,
        assignor_name=answer.assignor_name,
        members=tuple(members),
        authorized_operations=operations,
    )


# -- ShareFetch and ShareAcknowledge ----------------------------------------------------------
class _Partitions:
    """The request's partitions by name, with the ones refused before any actor is asked."""

    def __init__(self, ctx: BrokerContext, conn: ConnectionInfo) -> None:
        self.store = ctx.data.topics_for(conn.org_id)
        self.conn = conn
        self.refused: dict[tuple[uuid.UUID, int], ErrorCode] = {}
        self.ids: dict[str, uuid.UUID] = {}

    def name(self, topic_id: uuid.UUID | None, partition: int) -> str | None:
        topic = None if topic_id is None else self.store.by_id(topic_id)
        key = (topic_id or uuid.UUID(int=0), partition)
        if topic is None:
            self.refused[key] = ErrorCode.unknown_topic_id
            return None
        if not self.conn.may_use_topic(topic.name):
            self.refused[key] = TOPIC_DENIED
            return None
        if not 0 <= partition < len(topic.partitions):
            self.refused[key] = ErrorCode.unknown_topic_or_partition
            return None
        self.ids[topic.name] = topic.topic_id
        return topic.name

    def bounds(self, partitions: list[SharePartitionId]) -> Iterator[tuple[str, int, int, int]]:
        for name, index in partitions:
            topic = self.store.by_name(name)
            if topic is not None:
                log = topic.partitions[index]
                yield name, index, log.log_start_offset, log.log_end_offset

    def acks(self, topics: Any) -> tuple[list[SharePartitionId], list[ShareAck]]:
        named: list[SharePartitionId] = []
        acks: list[ShareAck] = []
        for t in topics:
            for p in t.partitions:
                name = self.name(t.topic_id, p.partition_index)
                if name is None:
                    continue
                named.append((name, p.partition_index))
                for b in p.acknowledgement_batches:
                    types = tuple(int(x) for x in b.acknowledge_types)
                    acks.append((name, p.partition_index, b.first_offset, b.last_offset, types))
        return named, acks


@dataclass(frozen=True, slots=True)
class WakeReaders(Step):
    """Wake the ShareFetches (and Fetches) waiting on partitions whose records were just
    acknowledged or released: a fetch that found nothing to acquire may find some now (a
    released record, or room in a full window). `then` gets None."""

    keys: tuple[PartitionKey, ...]
    then: Callable[[None], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        ctx.data.wake_readers(self.keys)
        return self.then(None)


def _woken(
    parts: _Partitions, ack_errors: tuple[tuple[str, int, int], ...], then: Callable[[None], Any]
) -> Any:
    """`then`, after waking the readers of every partition acknowledged without an error."""
    keys = tuple(
        (parts.ids[name], index)
        for name, index, code in ack_errors
        if code == ErrorCode.none and name in parts.ids
    )
    return WakeReaders(keys, then) if keys else then(None)


def share_fetch(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(FETCH_KEY, version)
    group_id = request.group_id
    if denied(conn, group_id):
        return _fetch_error(mod, DENIED)
    if not group_id or not request.member_id:
        return _fetch_error(mod, ErrorCode.invalid_request)
    parts = _Partitions(ctx, conn)
    added, acks = parts.acks(request.topics)
    forgotten = [
        (name, p)
        for t in request.forgotten_topics_data
        for p in t.partitions
        if (name := parts.name(t.topic_id, p)) is not None
    ]
    fetch = _Fetch(ctx, conn, mod, request, parts)
    if request.share_session_epoch == -1:  # the session closes: nothing is read
        op = ShareSessionOp(
            group_id, request.member_id, -1, tuple(added), tuple(forgotten), tuple(acks), False
        )
        return ask(conn.org_id, group_id, op, fetch.closed)
    max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
    fetch_op = ShareFetchOp(
        group_id,
        request.member_id,
        request.share_session_epoch,
        tuple(added),
        tuple(forgotten),
        tuple(acks),
        log_bounds=tuple(parts.bounds(added)),
        max_records=max_records,
        max_bytes=request.max_bytes if request.max_bytes > 0 else 2**31 - 1,
    )
    wait_s = max(0, to_ms(request.max_wait)) / 1000
    return ask(conn.org_id, group_id, fetch_op, lambda answer: fetch.fetched(answer, wait_s))


class _Fetch:
    def __init__(
        self, ctx: BrokerContext, conn: ConnectionInfo, mod: Any, request: Any, parts: _Partitions
    ) -> None:
        self.ctx, self.conn, self.mod, self.request, self.parts = ctx, conn, mod, request, parts
        self.ack_errors: tuple[tuple[str, int, int], ...] = ()  # of the first answer

    def closed(self, session: ShareSessionOpResp) -> Any:
        if session.error_code != ErrorCode.none:
            return _fetch_error(self.mod, ErrorCode(session.error_code), session.error_message)
        self.ack_errors = session.ack_errors
        return _woken(self.parts, session.ack_errors, lambda _: self.response(None))

    def fetched(self, answer: ShareFetchOpResp, wait_s: float) -> Any:
        if answer.error_code != ErrorCode.none:
            return _fetch_error(self.mod, ErrorCode(answer.error_code), answer.error_message)
        self.ack_errors = answer.ack_errors
        return _woken(self.parts, answer.ack_errors, lambda _: self.waited(answer, wait_s))

    def waited(self, answer: ShareFetchOpResp, wait_s: float) -> Any:
        """The response, or a long poll for an append or a lock's expiry, then a retry."""
        keys = [
            (topic.topic_id, index)
            for name, index, _ in answer.records
            if (topic := self.parts.store.by_name(name)) is not None
        ]
        if answer.acquired or wait_s <= 0 or not keys:
            return self.response(answer)
        if 0 <= answer.next_release_in_ms < wait_s * 1000:  # a lock expires first: retry
            left = wait_s - answer.next_release_in_ms / 1000 - LOCK_SLACK_S
            return AwaitAppend(
                keys,
                answer.next_release_in_ms / 1000 + LOCK_SLACK_S,
                lambda unused_s: self.retry(max(0.0, left + unused_s)),
            )
        return AwaitAppend(keys, wait_s, self.retry)

    def retry(self, wait_s: float) -> Any:
        request = self.request
        op = ShareFetchOp(
            request.group_id,
            request.member_id,
            request.share_session_epoch,
            max_records=request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS,
            max_bytes=request.max_bytes if request.max_bytes > 0 else 2**31 - 1,
            retry=True,
        )

        def tried(answer: ShareFetchOpResp) -> Any:
            if answer.error_code != ErrorCode.none:
                return _fetch_error(self.mod, ErrorCode(answer.error_code), answer.error_message)
            return self.waited(answer, wait_s)

        return ask(self.conn.org_id, request.group_id, op, tried)

    def response(self, answer: ShareFetchOpResp | None) -> Any:
        mod = self.mod
        acquired = {} if answer is None else {(t, p): runs for t, p, runs in answer.acquired}
        read = {} if answer is None else {(t, p): data for t, p, data in answer.records}
        ack_errors = {(t, p): code for t, p, code in self.ack_errors}
        rows: dict[uuid.UUID, list[Any]] = {}
        for key in sorted(set(acquired) | set(ack_errors)):
            runs = acquired.get(key, ())
            topic_id = self.parts.ids.get(key[0])
            if topic_id is None:
                topic = self.parts.store.by_name(key[0])
                if topic is None:
                    continue
                topic_id = topic.topic_id
            rows.setdefault(topic_id, []).append(
                _partition(
                    mod,
                    key[1],
                    ErrorCode.none,
                    ack_errors.get(key, 0),
                    trimmed(read.get(key, b""), runs),
                    runs,
                    self.ctx.node_id,
                )
            )
        for (topic_id, index), code in self.parts.refused.items():
            rows.setdefault(topic_id, []).append(_partition(mod, index, code, 0, b"", (), -1))
        return make(
            mod.ShareFetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            acquisition_lock_timeout=ms(answer.lock_duration_ms if answer else 0),
            responses=tuple(
                mod.ShareFetchableTopicResponse(topic_id=topic_id, partitions=tuple(partitions))
                for topic_id, partitions in rows.items()
            ),
            node_endpoints=(),
        )


def _partition(
    mod: Any, index: int, code: ErrorCode, ack_code: int, records: bytes, runs: Any, leader: int
) -> Any:
    return make(
        mod.PartitionData,
        partition_index=index,
        error_code=code,
        error_message=None,
        acknowledge_error_code=ack_code,
        acknowledge_error_message=None,
        current_leader=mod.LeaderIdAndEpoch(
            leader_id=leader, leader_epoch=0 if leader >= 0 else -1
        ),
        records=records,
        acquired_records=tuple(
            mod.AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c)
            for f, la, c in runs
        ),
    )


def _fetch_error(mod: Any, code: ErrorCode, message: str | None = None) -> Any:
    return make(
        mod.ShareFetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=ms(0),
        responses=(),
        node_endpoints=(),
    )


def share_acknowledge(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(ACKNOWLEDGE_KEY, version)
    group_id = request.group_id
    if denied(conn, group_id):
        return _ack_error(mod, DENIED)
    if not group_id or not request.member_id:
        return _ack_error(mod, ErrorCode.invalid_request)
    parts = _Partitions(ctx, conn)
    _, acks = parts.acks(request.topics)
    op = ShareSessionOp(
        group_id,
        request.member_id,
        request.share_session_epoch,
        acks=tuple(acks),
        fetching=False,
    )

    def acknowledged(answer: ShareSessionOpResp) -> Any:
        if answer.error_code != ErrorCode.none:
            return _ack_error(mod, ErrorCode(answer.error_code), answer.error_message)
        return _woken(parts, answer.ack_errors, lambda _: _acknowledged(answer))

    def _acknowledged(answer: ShareSessionOpResp) -> Any:
        rows: dict[uuid.UUID, list[Any]] = {}
        for name, index, code in answer.ack_errors:
            topic_id = parts.ids[name]
            rows.setdefault(topic_id, []).append(
                mod.PartitionData(
                    partition_index=index,
                    error_code=ErrorCode(code),
                    error_message=None,
                    current_leader=mod.LeaderIdAndEpoch(leader_id=ctx.node_id, leader_epoch=0),
                )
            )
        for (topic_id, index), code in parts.refused.items():
            rows.setdefault(topic_id, []).append(
                mod.PartitionData(
                    partition_index=index,
                    error_code=code,
                    error_message=None,
                    current_leader=mod.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                )
            )
        return make(
            mod.ShareAcknowledgeResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            responses=tuple(
                mod.ShareAcknowledgeTopicResponse(topic_id=t, partitions=tuple(ps))
                for t, ps in rows.items()
            ),
            node_endpoints=(),
        )

    return ask(conn.org_id, group_id, op, acknowledged)


def _ack_error(mod: Any, code: ErrorCode, message: str | None = None) -> Any:
    return make(
        mod.ShareAcknowledgeResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        responses=(),
        node_endpoints=(),
    )

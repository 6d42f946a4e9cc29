"""One function per Kafka API the operator's tools use, from kio entities to `model` values.

Versions are fixed, the newest this broker serves: ListGroups v5 (group type and state),
DescribeGroups v5 and ConsumerGroupDescribe v1, OffsetFetch v9 and OffsetCommit v9 as an
admin (no member id, generation / member epoch -1), ListOffsets v8, Metadata v12 (without
auto-creation: a tool must never create a topic by looking at it), DeleteGroups v2.

Describing a group takes up to two requests, because each describe API knows one kind of
group: ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for a classic group (or none), and
DescribeGroups describes a KIP-848 group, or none, as "Dead". So a group is asked for as a
consumer group first and as a classic group second; "Dead" from both means it does not exist.
A classic member's assignment is the consumer protocol's bytes when the group's protocol type
is "consumer" (decoded with `group.consumer_protocol`); other protocol types (Connect, say)
are opaque and shown as unknown.

Listing and describing also ask for each group's `cgp_` id and RRL, with this broker's private
request-header tag (protocol/group_identity.py); a broker that ignores the tag (Kafka) simply
leaves them unknown.

Every error code in an answer becomes a `BrokerError` naming what was asked, except where an
error is an answer (DeleteGroups reports one per group; the caller decides).
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Iterable
from typing import Any

from kio.schema.alter_share_group_offsets.v0 import request as alter_share
from kio.schema.consumer_group_describe.v1 import request as cg_describe
from kio.schema.delete_groups.v2 import request as delete
from kio.schema.describe_groups.v5 import request as describe
from kio.schema.describe_share_group_offsets.v1 import request as share_offsets_v1
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11 import request as fetch_records
from kio.schema.list_groups.v5 import request as list_groups_v5
from kio.schema.list_offsets.v8 import request as list_offsets
from kio.schema.metadata.v12 import request as metadata
from kio.schema.offset_commit.v9 import request as commit
from kio.schema.offset_fetch.v9 import request as fetch
from kio.schema.share_group_describe.v1 import request as share_describe
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ..classic_group.consumer_protocol import decode_assignment
from ..protocol.group_identity import GROUP_IDENTITY_TAG, decode_identities
from ..storage.record_batch import HEADER_SIZE, parse_header
from .client import BrokerError, ConnectionFailed, KafkaClient
from .model import (
    CLASSIC,
    CONSUMER,
    SHARE,
    Assignment,
    GroupDescription,
    GroupListing,
    Member,
    TopicPartition,
)

LATEST, EARLIEST = -1, -2  # ListOffsets timestamps
CONSUMER_GROUP_DESCRIBE = 69
SHARE_GROUP_DESCRIBE = 77
ASK_IDENTITIES = {GROUP_IDENTITY_TAG: b""}
NO_IDENTITY: tuple[str | None, str | None] = (None, None)
# ConsumerGroupDescribe v1's member type: which protocol the member speaks (-1: unknown)
_MEMBER_PROTOCOLS = {0: "classic", 1: "consumer"}


def list_groups(
    client: KafkaClient, states: Iterable[str] = (), types: Iterable[str] = ()
) -> list[GroupListing]:
    """Every group, or those in one of `states` / of one of `types`, sorted by id."""
    request = list_groups_v5.ListGroupsRequest(
        states_filter=tuple(states), types_filter=tuple(types)
    )
    response, tags = client.call_tagged(request, ASK_IDENTITIES)
    if response.error_code != ErrorCode.none:
        raise BrokerError(response.error_code, "listing groups")
    identities = _identities(tags)
    listed = (
        GroupListing(
            g.group_id,
            g.group_type,
            g.group_state,
            g.protocol_type,
            *identities.get(g.group_id, NO_IDENTITY),
        )
        for g in response.groups
    )
    return sorted(listed, key=lambda g: g.group_id)


def _identities(tags: dict[int, bytes]) -> dict[str, tuple[str, str]]:
    """{group id: (cgp_ id, RRL)} from a response header; {} if the broker sent none."""
    raw = tags.get(GROUP_IDENTITY_TAG)
    if raw is None:
        return {}
    try:
        return decode_identities(raw)
    except ValueError as exc:
        raise ConnectionFailed(f"cannot read the group identities in the answer: {exc}") from exc


def describe_group(client: KafkaClient, group_id: str) -> GroupDescription:
    """The group as a KIP-848 consumer group if it is one, else as a classic group."""
    if client.supports(CONSUMER_GROUP_DESCRIBE, 1):
        request = cg_describe.ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group_id),), include_authorized_operations=False
        )
        response, tags = client.call_tagged(request, ASK_IDENTITIES)
        (group,) = response.groups
        if group.error_code == ErrorCode.none:
            return _consumer_group(group, _identities(tags).get(group.group_id, NO_IDENTITY))
        if group.error_code != ErrorCode.group_id_not_found:
            raise BrokerError(group.error_code, f"describing group {group_id!r}")
    if client.supports(SHARE_GROUP_DESCRIBE, 1):
        share_request = share_describe.ShareGroupDescribeRequest(
            group_ids=(GroupId(group_id),), include_authorized_operations=False
        )
        share_response, tags = client.call_tagged(share_request, ASK_IDENTITIES)
        (share,) = share_response.groups
        if share.error_code == ErrorCode.none:
            return _share_group(share, _identities(tags).get(share.group_id, NO_IDENTITY))
        if share.error_code != ErrorCode.group_id_not_found:
            raise BrokerError(share.error_code, f"describing group {group_id!r}")
    classic_request = describe.DescribeGroupsRequest(
        groups=(GroupId(group_id),), include_authorized_operations=False
    )
    response, tags = client.call_tagged(classic_request, ASK_IDENTITIES)
    (classic,) = response.groups
    if classic.error_code != ErrorCode.none:
        raise BrokerError(classic.error_code, f"describing group {group_id!r}")
    return _classic_group(classic, _identities(tags).get(classic.group_id, NO_IDENTITY))


def _consumer_group(group: Any, identity: tuple[str | None, str | None]) -> GroupDescription:
    members = tuple(
        Member(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            host=m.client_host,
            assignment=_named(m.assignment),
            member_epoch=m.member_epoch,
            target_assignment=_named(m.target_assignment),
            subscribed_topics=tuple(m.subscribed_topic_names),
            subscribed_regex=m.subscribed_topic_regex or None,  # Kafka says "" for none
            protocol=_MEMBER_PROTOCOLS.get(m.member_type),
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        group_type=CONSUMER,
        state=group.group_state,
        protocol_type="consumer",
        assignor=group.assignor_name,
        members=members,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        cgp_id=identity[0],
        rrl=identity[1],
    )


def _share_group(group: Any, identity: tuple[str | None, str | None]) -> GroupDescription:
    members = tuple(
        Member(
            member_id=m.member_id,
            instance_id=None,
            client_id=m.client_id,
            host=m.client_host,
            assignment=_named(m.assignment),
            member_epoch=m.member_epoch,
            target_assignment=_named(m.assignment),  # the simple assignor: nothing to reconcile
            subscribed_topics=tuple(m.subscribed_topic_names),
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        group_type=SHARE,
        state=group.group_state,
        protocol_type="share",
        assignor=group.assignor_name,
        members=members,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        cgp_id=identity[0],
        rrl=identity[1],
    )


def share_offsets(client: KafkaClient, group_id: str) -> dict[TopicPartition, tuple[int, int]]:
    """A share group's (start offset, lag) per share partition it has state for."""
    request = share_offsets_v1.DescribeShareGroupOffsetsRequest(
        groups=(
            share_offsets_v1.DescribeShareGroupOffsetsRequestGroup(
                group_id=GroupId(group_id), topics=None
            ),
        )
    )
    (group,) = client.call(request).groups
    what = f"fetching the share offsets of group {group_id!r}"
    if group.error_code != ErrorCode.none:
        raise BrokerError(group.error_code, what)
    offsets = {}
    for topic in group.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise BrokerError(p.error_code, f"{what} ({topic.topic_name}-{p.partition_index})")
            if p.start_offset >= 0:
                offsets[(topic.topic_name, p.partition_index)] = (p.start_offset, p.lag)
    return offsets


def alter_share_offsets(
    client: KafkaClient, group_id: str, offsets: dict[TopicPartition, int]
) -> None:
    """Set a share group's start offsets; the broker refuses while it has members."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            alter_share.AlterShareGroupOffsetsRequestPartition(
                partition_index=i32(partition), start_offset=i64(offset)
            )
        )
    request = alter_share.AlterShareGroupOffsetsRequest(
        group_id=GroupId(group_id),
        topics=tuple(
            alter_share.AlterShareGroupOffsetsRequestTopic(
                topic_name=TopicName(t), partitions=tuple(ps)
            )
            for t, ps in by_topic.items()
        ),
    )
    response = client.call(request)
    what = f"altering the share offsets of group {group_id!r}"
    if response.error_code != ErrorCode.none:
        raise BrokerError(response.error_code, what, response.error_message or "")
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise BrokerError(p.error_code, f"{what} ({topic.topic_name}-{p.partition_index})")


def _named(assignment: Any) -> Assignment:
    return {t.topic_name: tuple(sorted(t.partitions)) for t in assignment.topic_partitions}


def _classic_group(group: Any, identity: tuple[str | None, str | None]) -> GroupDescription:
    consumer = group.protocol_type == "consumer"
    members = tuple(
        Member(
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            client_id=m.client_id,
            host=m.client_host,
            assignment=_decoded(m.member_assignment) if consumer else None,
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        group_type=CLASSIC,
        state=group.group_state,
        protocol_type=group.protocol_type,
        assignor=group.protocol_data,
        members=members,
        cgp_id=identity[0],
        rrl=identity[1],
    )


def _decoded(raw: bytes) -> Assignment | None:
    """A consumer-protocol assignment; empty bytes (not yet synced) assign nothing."""
    if not raw:
        return {}
    try:
        return {t: tuple(sorted(ps)) for t, ps in decode_assignment(raw).items()}
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def committed_offsets(client: KafkaClient, group_id: str) -> dict[TopicPartition, int]:
    """Every offset the group has committed (partitions without one are left out)."""
    request = fetch.OffsetFetchRequest(
        groups=(
            fetch.OffsetFetchRequestGroup(
                group_id=GroupId(group_id), member_id=None, member_epoch=i32(-1), topics=None
            ),
        ),
        require_stable=False,
    )
    (group,) = client.call(request).groups
    what = f"fetching the committed offsets of group {group_id!r}"
    if group.error_code != ErrorCode.none:
        raise BrokerError(group.error_code, what)
    offsets = {}
    for topic in group.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise BrokerError(p.error_code, f"{what} ({topic.name}-{p.partition_index})")
            if p.committed_offset >= 0:
                offsets[(topic.name, p.partition_index)] = p.committed_offset
    return offsets


def pending_transactional(
    client: KafkaClient, group_id: str, partitions: Iterable[TopicPartition]
) -> set[TopicPartition]:
    """Which of `partitions` have a transactional offset pending: those a fetch that requires
    stable offsets answers UNSTABLE_OFFSET_COMMIT for (Kafka's protocol shows that they are
    pending, not what they hold)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return set()
    topics = tuple(
        fetch.OffsetFetchRequestTopics(name=TopicName(t), partition_indexes=tuple(map(i32, ps)))
        for t, ps in sorted(by_topic.items())
    )
    request = fetch.OffsetFetchRequest(
        groups=(
            fetch.OffsetFetchRequestGroup(
                group_id=GroupId(group_id), member_id=None, member_epoch=i32(-1), topics=topics
            ),
        ),
        require_stable=True,
    )
    (group,) = client.call(request).groups
    what = f"fetching the stable offsets of group {group_id!r}"
    if group.error_code != ErrorCode.none:
        raise BrokerError(group.error_code, what)
    pending = set()
    for topic in group.topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.unstable_offset_commit:
                pending.add((topic.name, p.partition_index))
            elif p.error_code != ErrorCode.none:
                raise BrokerError(p.error_code, f"{what} ({topic.name}-{p.partition_index})")
    return pending


def log_offsets(
    client: KafkaClient,
    partitions: Iterable[TopicPartition],
    timestamp: int = LATEST,
    *,
    strict: bool = True,
) -> dict[TopicPartition, int]:
    """Log-end (LATEST) or log-start (EARLIEST) offsets of `partitions`, in one request.

    A partition the broker reports an error for (its topic was deleted, say) is an error when
    `strict`, and otherwise left out, so that a report can still show the others."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return {}
    topics = tuple(
        list_offsets.ListOffsetsTopic(
            name=TopicName(topic),
            partitions=tuple(
                list_offsets.ListOffsetsPartition(partition_index=i32(p), timestamp=i64(timestamp))
                for p in parts
            ),
        )
        for topic, parts in by_topic.items()
    )
    request = list_offsets.ListOffsetsRequest(
        replica_id=BrokerId(-1), isolation_level=i8(0), topics=topics
    )
    found = {}
    for topic in client.call(request).topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.none:
                found[(topic.name, p.partition_index)] = p.offset
            elif strict:
                raise BrokerError(
                    p.error_code, f"listing offsets of {topic.name}-{p.partition_index}"
                )
    return found


def topic_partitions(client: KafkaClient, topics: Iterable[str]) -> dict[str, int]:
    """The partition count of each topic; an unknown topic is an error (never created)."""
    wanted = tuple(dict.fromkeys(topics))
    request = metadata.MetadataRequest(
        topics=tuple(
            metadata.MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in wanted
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    counts = {}
    for topic in client.call(request).topics:
        if topic.error_code != ErrorCode.none:
            raise BrokerError(topic.error_code, f"looking up topic {topic.name!r}")
        counts[topic.name] = len(topic.partitions)
    return counts


def commit_offsets(client: KafkaClient, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit as an admin: generation -1 and no member, which the broker only accepts while
    the group has no members (anything else is UNKNOWN_MEMBER_ID)."""
    by_topic: dict[str, list[commit.OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            commit.OffsetCommitRequestPartition(
                partition_index=i32(partition), committed_offset=i64(offset), committed_metadata=""
            )
        )
    request = commit.OffsetCommitRequest(
        group_id=GroupId(group_id),
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=tuple(
            commit.OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )
    for topic in client.call(request).topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise BrokerError(
                    p.error_code,
                    f"committing offsets of group {group_id!r} ({topic.name}-{p.partition_index})",
                )


def delete_groups(client: KafkaClient, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
    """Each group's result: ErrorCode.none when it was deleted."""
    request = delete.DeleteGroupsRequest(groups_names=tuple(GroupId(g) for g in group_ids))
    return {r.group_id: ErrorCode(r.error_code) for r in client.call(request).results}


def append_times(client: KafkaClient, at: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The append time (max timestamp of the batch, as the broker's lag metric has it) of the
    record at each partition's offset, in one Fetch that does not wait: only the first batch
    header of each partition is read. A partition at its log end (or erroring) is left out.
    """
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(at.items()):
        by_topic.setdefault(topic, []).append((partition, offset))
    if not by_topic:
        return {}
    request = fetch_records.FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=tuple(
            fetch_records.FetchTopic(
                topic=TopicName(topic),
                partitions=tuple(
                    fetch_records.FetchPartition(
                        partition=i32(p),
                        current_leader_epoch=i32(-1),
                        fetch_offset=i64(offset),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(HEADER_SIZE),  # the first batch comes whole
                    )
                    for p, offset in parts
                ),
            )
            for topic, parts in by_topic.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    found: dict[TopicPartition, int] = {}
    for topic in client.call(request).responses:
        for p in topic.partitions:
            records = p.records or b""
            if p.error_code == ErrorCode.none and len(records) >= HEADER_SIZE:
                found[(topic.topic, p.partition_index)] = parse_header(records).max_timestamp
    return found

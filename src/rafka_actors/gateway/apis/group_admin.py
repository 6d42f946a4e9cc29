"""The admin side of groups: DescribeGroups (15), ListGroups (16), DeleteGroups (42) and
OffsetDelete (47).

DescribeGroups and DeleteGroups ask each named group's actor in turn; a group that does not
exist is described as "Dead" without an error (so is a KIP-848 consumer group: DescribeGroups
describes classic groups only, ConsumerGroupDescribe the others), from v6 on (KIP-1043) with
GROUP_ID_NOT_FOUND and Kafka's message, and deleting it answers GROUP_ID_NOT_FOUND (the state
machine decides both). An empty group id is accepted by both,
as Kafka still does for old tools; only a null id is INVALID_GROUP_ID. Member metadata and
assignments are the raw consumer-protocol bytes the members sent and got: confluent's
AdminClient decodes them.

ListGroups visits no actor: the registry keeps a summary (state, protocol type, group type)
per group. The state filter (v4+) is matched case-insensitively and trimmed, the type filter
(v5+) case-insensitively but untrimmed, as Kafka's GroupMetadataManager.listGroups does (it
parses each type with GroupType.parse, so a name it does not know matches no group). v5
reports each group's type: "classic", or "consumer" for a KIP-848 consumer group, whose
protocol type is "consumer" and whose states are Empty, Assigning, Reconciling and Stable.

OffsetDelete checks topics at the gateway as KafkaApis does (unknown topic or partition ->
UNKNOWN_TOPIC_OR_PARTITION, not sent to the actor) and always asks the actor, which validates
the group even when no partition is left. A group-level error replaces the whole answer,
like Kafka's OffsetDeleteResponse.Builder.merge.

Authorization, as in KafkaApis, before any actor is asked (groups.denied): DescribeGroups
answers GROUP_AUTHORIZATION_FAILED in a denied group's entry (Kafka's groupError: empty
state, protocol type and protocol, operations omitted), and puts those entries first, then
the described ones; DeleteGroups gives a denied group that error after the others' results;
OffsetDelete answers it as the top-level error, and TOPIC_AUTHORIZATION_FAILED for the
partitions of a topic the user may not use (checked before existence); ListGroups lists only
the groups the user may use (Kafka lists those the principal may DESCRIBE). A group described
without an error has, when asked (v3+), every group operation as its authorized operations,
since the user may use it (auth/acl_operations.py).

DescribeGroups and ListGroups return the groups' `cgp_` ids beside the response (see
gateway/identities.py), which the connection sends only to a request that asked for them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from ...auth.acl_operations import OMITTED, group_operations
from ...group_common.ops import (
    DeleteGroupOp,
    DeleteGroupOpResp,
    DescribeGroupOp,
    DescribeGroupOpResp,
    OffsetDeleteOp,
    OffsetDeleteOpResp,
)
from ..context import BrokerContext, ConnectionInfo
from ..identities import WithGroupIdentities
from ..steps import ask, ask_each
from ._build import NO_THROTTLE, make, schema
from .groups import DENIED, denied
from .offsets import TOPIC_DENIED, partition_exists, partition_results

DESCRIBE_KEY = 15
LIST_KEY = 16
DELETE_KEY = 42
OFFSET_DELETE_KEY = 47


# -- DescribeGroups -----------------------------------------------------------------------
def describe_groups(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(DESCRIBE_KEY, version)
    wanted = request.include_authorized_operations if version >= 3 else False
    refused = [
        _described(mod, group_id, DescribeGroupOpResp(DENIED, ""), OMITTED)
        for group_id in request.groups
        if denied(conn, group_id)
    ]
    allowed = [group_id for group_id in request.groups if not denied(conn, group_id)]
    asked = [(g, None if g is None else DescribeGroupOp(g)) for g in allowed]

    def described(answers: list[DescribeGroupOpResp | None]) -> Any:
        groups, cgp_ids = [], {}
        for group_id, group in zip(allowed, answers, strict=True):
            if group is None:  # a null id
                group = DescribeGroupOpResp(ErrorCode.invalid_group_id, "")
            elif group.cgp_id and group_id is not None:
                cgp_ids[group_id] = group.cgp_id
            answer, kind = _v6(version, group)
            operations = OMITTED  # as Kafka: only a group described without an error has them
            if wanted and group_id is not None and answer.error_code == ErrorCode.none:
                operations = group_operations(conn.user, group_id)
            groups.append(_described(mod, group_id or "", answer, operations, kind))
        response = make(
            mod.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=(*refused, *groups)
        )
        return WithGroupIdentities(response, conn.org_id, cgp_ids)

    return ask_each(conn.org_id, asked, described)


def _v6(version: int, group: DescribeGroupOpResp) -> tuple[DescribeGroupOpResp, str | None]:
    """The answer for the version, and its message. From v6 on (KIP-1043) a group that is
    not there, or not a classic group, is GROUP_ID_NOT_FOUND, still "Dead" (Kafka's
    GroupMetadataManager.describeGroups); before, both are "Dead" without an error. A group
    of another type is answered GROUP_ID_NOT_FOUND by its machine, one not there "Dead"."""
    if group.state != "Dead" or group.error_code not in (ErrorCode.none, _NOT_FOUND):
        return group, None
    other_type = group.error_code == _NOT_FOUND
    if version < 6:
        return replace(group, error_code=ErrorCode.none), None
    kind = "is not a classic group" if other_type else "not found"
    return replace(group, error_code=_NOT_FOUND), kind


_NOT_FOUND = ErrorCode.group_id_not_found


def _described(
    mod: Any, group_id: str, group: DescribeGroupOpResp, operations: int, kind: str | None = None
) -> Any:
    members = tuple(
        make(
            mod.DescribedGroupMember,
            member_id=member_id,
            group_instance_id=instance_id,  # v4+
            client_id=client_id,
            client_host=client_host,
            member_metadata=metadata,
            member_assignment=assignment,
        )
        for member_id, instance_id, client_id, client_host, metadata, assignment in group.members
    )
    message = None if kind is None else f"Group {group_id} {kind}."
    return make(
        mod.DescribedGroup,
        error_code=ErrorCode(group.error_code),
        error_message=message,  # v6+
        group_id=group_id,
        group_state=group.state,
        protocol_type=group.protocol_type,
        protocol_data=group.protocol_name,
        members=members,
        authorized_operations=operations,
    )


# -- ListGroups ---------------------------------------------------------------------------
def list_groups(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(LIST_KEY, version)
    states = {s.strip().lower() for s in request.states_filter} if version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if version >= 5 else set()
    summaries = [
        s
        for s in ctx.registry().summaries(conn.org_id)
        if (not states or s.state.lower() in states)
        and (not types or s.group_type.lower() in types)
        and conn.may_use_group(s.group_id)
    ]
    listed = tuple(
        make(
            mod.ListedGroup,
            group_id=s.group_id,
            protocol_type=s.protocol_type,
            group_state=s.state,
            group_type=s.group_type,  # v5+
        )
        for s in summaries
    )
    response = make(
        mod.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=listed,
    )
    cgp_ids = {s.group_id: s.cgp_id for s in summaries if s.cgp_id}
    return WithGroupIdentities(response, conn.org_id, cgp_ids)


# -- DeleteGroups -------------------------------------------------------------------------
def delete_groups(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(DELETE_KEY, version)
    refused = [
        make(mod.DeletableGroupResult, group_id=group_id, error_code=DENIED)
        for group_id in request.groups_names
        if denied(conn, group_id)
    ]
    allowed = [group_id for group_id in request.groups_names if not denied(conn, group_id)]
    asked = [(g, None if g is None else DeleteGroupOp(g)) for g in allowed]

    def deleted(answers: list[DeleteGroupOpResp | None]) -> Any:
        results = []
        for group_id, answer in zip(allowed, answers, strict=True):
            code = ErrorCode.invalid_group_id if answer is None else answer.error_code
            results.append(
                make(mod.DeletableGroupResult, group_id=group_id or "", error_code=ErrorCode(code))
            )
        return make(
            mod.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=(*results, *refused)
        )

    return ask_each(conn.org_id, asked, deleted)


# -- OffsetDelete -------------------------------------------------------------------------
def offset_delete(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    group_id = request.group_id
    mod = schema(OFFSET_DELETE_KEY, version)

    def deleted(response: OffsetDeleteOpResp) -> Any:
        code = ErrorCode(response.error_code)
        topics = (
            () if code != ErrorCode.none else _offset_delete_topics(mod, conn, request, response)
        )
        return make(
            mod.OffsetDeleteResponse, error_code=code, throttle_time=NO_THROTTLE, topics=topics
        )

    if denied(conn, group_id):
        return deleted(OffsetDeleteOpResp(DENIED))
    if not group_id:
        return deleted(OffsetDeleteOpResp(ErrorCode.invalid_group_id))
    partitions = tuple(
        (t.name, p.partition_index)
        for t in request.topics
        if conn.may_use_topic(t.name)
        for p in t.partitions
        if partition_exists(ctx, conn, t.name, p.partition_index)
    )
    return ask(conn.org_id, group_id, OffsetDeleteOp(group_id, partitions), deleted)


def _offset_delete_topics(
    mod: Any, conn: ConnectionInfo, request: Any, response: OffsetDeleteOpResp
) -> tuple[Any, ...]:
    results = {(t, p): e for t, p, e in response.results}
    for t in request.topics:
        if not conn.may_use_topic(t.name):
            results.update(((t.name, p.partition_index), TOPIC_DENIED) for p in t.partitions)
    return partition_results(
        mod.OffsetDeleteResponseTopic,
        mod.OffsetDeleteResponsePartition,
        request.topics,
        results,
        ErrorCode.unknown_topic_or_partition,  # the actor did not see it: checked here
    )

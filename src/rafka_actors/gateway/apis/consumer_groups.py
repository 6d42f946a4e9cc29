"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): KIP-848 consumer groups.

The gateway holds no group state here either. ConsumerGroupHeartbeat turns the request into
one `ConsumerGroupHeartbeatOp` and asks the group's actor: the state machine does the checks
of Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` (INVALID_REQUEST, with Kafka's
message) but one, "GroupId can't be empty.", which is answered here without asking an actor,
as the group id is what finds the actor. As in Kafka's `throwIfEmptyString`, an id of blanks
(Java's `trim()`) is empty too, and a missing member id, which Kafka checks first, is the
message then. A null group id cannot come over the wire (the field is not nullable); a
handler called with one answers INVALID_GROUP_ID, as every other group handler does.

What the state machine may not make up itself comes with the op: the client id and host that
ConsumerGroupDescribe reports, and, for a v0 member that joins without a member id (only v0
lets the coordinator choose it), a fresh uuid4 string as its id. The api version goes along
too: from v1 on an empty member id is refused and `subscribed_topic_regex` exists. The
request's partitions are topic ids (a null id, kio's reading of the zero uuid, stays Kafka's
zero uuid), and so are the assignment's: the client resolves them with Metadata.

ConsumerGroupDescribe asks each named group's actor in turn; a group that is not a consumer
group (classic, or none at all) is GROUP_ID_NOT_FOUND from the state machine, and an empty or
null id is INVALID_GROUP_ID in that group's entry, without asking anyone (Kafka's
`isGroupIdNotEmpty`). The state machine knows topic ids only; the response also wants topic
names, looked up in the topic store. A topic id no longer known (the topic was deleted while
a member still has its partitions) is left out of the assignment, as Kafka's
`ConsumerGroupMember.topicPartitionsFromMap` leaves out topics missing from its metadata
image: there is no name to report, and the member loses those partitions at its next
reconciliation anyway. Authorized operations are reported when asked for, and only for groups
described without an error (KafkaApis does the same); an entry with an error carries Kafka's
defaults (empty state and assignor, epochs 0, no members).

Authorization, as in KafkaApis, before any actor is asked (groups.denied): a heartbeat to a
group the user may not use is GROUP_AUTHORIZATION_FAILED; then, as Kafka 4.0 does
(KAFKA-18813), a heartbeat whose `subscribed_topic_names` name a topic the user may not use
is TOPIC_AUTHORIZATION_FAILED as a whole, before the request is validated. A regular
expression is resolved by the state machine against the organisation's topics, and is NOT
narrowed by the user's topic prefixes (Kafka filters the topics a regex resolves to by the
ACLs of the member whose heartbeat refreshed it; that would need the prefixes in the
group's state). ConsumerGroupDescribe answers GROUP_AUTHORIZATION_FAILED in a denied group's
entry, and puts those entries first. Described groups' `cgp_` ids go beside the response
(gateway/identities.py), sent only to a request that asked for them.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from ...auth.acl_operations import OMITTED, group_operations
from ...consumer_group.ops import (
    ConsumerGroupDescribeOp,
    ConsumerGroupDescribeOpResp,
    ConsumerGroupHeartbeatOp,
    ConsumerGroupHeartbeatOpResp,
)
from ...group_common.ops import (
    LEAVE_GROUP_MEMBER_EPOCH,
    TopicPartitions,
)
from ...share_group.ops import ShareGroupHeartbeatOpResp
from ..context import BrokerContext, ConnectionInfo
from ..identities import WithGroupIdentities
from ..steps import ask, ask_each
from ._build import NO_THROTTLE, make, ms, schema, to_ms
from .groups import DENIED, denied
from .offsets import TOPIC_DENIED

HEARTBEAT_KEY = 68
DESCRIBE_KEY = 69

CONSUMER_MEMBER_TYPE = 1  # ConsumerGroupDescribe v1 `member_type`: 0 classic, 1 consumer
CLASSIC_MEMBER_TYPE = 0  # a classic member inside a consumer group (online migration)
ZERO_UUID = uuid.UUID(int=0)
_JAVA_TRIMMED = "".join(map(chr, range(0x21)))


# -- ConsumerGroupHeartbeat ---------------------------------------------------------------
def consumer_group_heartbeat(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    group_id = request.group_id
    mod = schema(HEARTBEAT_KEY, version)
    if group_id is None:
        return _heartbeat_response(mod, ConsumerGroupHeartbeatOpResp(ErrorCode.invalid_group_id))
    if denied(conn, group_id):
        return _heartbeat_response(mod, ConsumerGroupHeartbeatOpResp(DENIED))
    if not all(map(conn.may_use_topic, request.subscribed_topic_names or ())):
        return _heartbeat_response(mod, ConsumerGroupHeartbeatOpResp(TOPIC_DENIED))
    if _blank(group_id):
        message = _empty_id_message(version, request)
        return _heartbeat_response(
            mod, ConsumerGroupHeartbeatOpResp(ErrorCode.invalid_request, message)
        )
    op = _heartbeat_op(conn, version, request)
    return ask(conn.org_id, group_id, op, lambda response: _heartbeat_response(mod, response))


def _blank(value: str) -> bool:
    """Kafka's `throwIfEmptyString`: empty after Java's `trim()` (every char <= U+0020)."""
    return not value.lstrip(_JAVA_TRIMMED)


def _empty_id_message(version: int, request: Any) -> str:
    """Kafka checks the member id (v1+, or a heartbeat or leave) before the group id."""
    epoch = request.member_epoch
    member_id_required = version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH
    if member_id_required and _blank(request.member_id):
        return "MemberId can't be empty."
    return "GroupId can't be empty."


def _heartbeat_op(conn: ConnectionInfo, version: int, request: Any) -> ConsumerGroupHeartbeatOp:
    names = request.subscribed_topic_names
    return ConsumerGroupHeartbeatOp(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=to_ms(request.rebalance_timeout),  # -1: unchanged
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),  # v1+
        server_assignor=request.server_assignor,
        owned=_owned(request.topic_partitions),
        client_id=conn.client_id or "",
        client_host=conn.client_host,
        # the id a v0 member without one gets (the state machine ignores it otherwise)
        new_member_id="" if request.member_id else str(uuid.uuid4()),
        api_version=version,
    )


def _owned(topic_partitions: Any) -> TopicPartitions | None:
    if topic_partitions is None:
        return None
    return tuple(
        (t.topic_id or ZERO_UUID, tuple(int(p) for p in t.partitions)) for t in topic_partitions
    )


def _heartbeat_response(mod: Any, response: ConsumerGroupHeartbeatOpResp) -> Any:
    return heartbeat_response(mod.ConsumerGroupHeartbeatResponse, mod, response)


def heartbeat_response(
    response_type: Any, mod: Any, response: ConsumerGroupHeartbeatOpResp | ShareGroupHeartbeatOpResp
) -> Any:
    """A KIP-848 or a KIP-932 heartbeat's response: the two have the same fields."""
    assignment = None
    if response.assignment is not None:
        assignment = mod.Assignment(
            topic_partitions=tuple(
                mod.TopicPartitions(topic_id=topic_id, partitions=partitions)
                for topic_id, partitions in response.assignment
            )
        )
    return make(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(response.error_code),
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval=ms(response.heartbeat_interval_ms),
        assignment=assignment,
    )


# -- ConsumerGroupDescribe ----------------------------------------------------------------
def consumer_group_describe(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(DESCRIBE_KEY, version)
    wanted = request.include_authorized_operations
    org_id = conn.org_id
    refused = [
        _described(ctx, org_id, mod, group_id, ConsumerGroupDescribeOpResp(DENIED), OMITTED)
        for group_id in request.group_ids
        if denied(conn, group_id)
    ]
    allowed = [group_id for group_id in request.group_ids if not denied(conn, group_id)]
    asked = [(g, ConsumerGroupDescribeOp(g) if g else None) for g in allowed]

    def described(answers: list[ConsumerGroupDescribeOpResp | None]) -> Any:
        groups, cgp_ids = [], {}
        for group_id, group in zip(allowed, answers, strict=True):
            if group is None:  # an empty or null id
                group = ConsumerGroupDescribeOpResp(ErrorCode.invalid_group_id)
            elif group.cgp_id and group_id:
                cgp_ids[group_id] = group.cgp_id
            operations = group_operations(conn.user, group_id or "") if wanted else OMITTED
            groups.append(_described(ctx, org_id, mod, group_id or "", group, operations))
        response = make(
            mod.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=(*refused, *groups)
        )
        return WithGroupIdentities(response, org_id, cgp_ids)

    return ask_each(org_id, asked, described)


def described_error(mod: Any, group_id: str, error_code: int, message: str | None) -> Any:
    """A KIP-848 or KIP-932 group that could not be described: the two look the same."""
    return make(
        mod.DescribedGroup,
        error_code=ErrorCode(error_code),
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=(),
        authorized_operations=OMITTED,
    )


def _described(
    ctx: BrokerContext,
    org_id: int,
    mod: Any,
    group_id: str,
    group: ConsumerGroupDescribeOpResp,
    operations: int,  # the authorized operations, if the group is described
) -> Any:
    if group.error_code != ErrorCode.none:
        return described_error(mod, group_id, group.error_code, group.error_message)
    classic = frozenset(group.classic_members)
    members = tuple(
        make(
            mod.Member,
            member_id=member_id,
            instance_id=instance_id,
            rack_id=rack_id,
            member_epoch=member_epoch,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=topic_names,
            subscribed_topic_regex=topic_regex or "",  # Kafka's member: "" when none
            assignment=_assignment(ctx, org_id, mod, assigned),
            target_assignment=_assignment(ctx, org_id, mod, target),
            member_type=(  # v1+
                CLASSIC_MEMBER_TYPE if member_id in classic else CONSUMER_MEMBER_TYPE
            ),
        )
        for (
            member_id,
            instance_id,
            rack_id,
            member_epoch,
            client_id,
            client_host,
            topic_names,
            topic_regex,
            assigned,
            target,
        ) in group.members
    )
    return make(
        mod.DescribedGroup,
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=members,
        authorized_operations=operations,
    )


def _assignment(ctx: BrokerContext, org_id: int, mod: Any, partitions: TopicPartitions) -> Any:
    """Topic ids with their names (the group's org's topics); ids no longer known are left
    out (see the docstring)."""
    topics = ctx.data.topics_for(org_id)
    named = []
    for topic_id, indexes in partitions:
        topic = topics.by_id(topic_id)
        if topic is not None:
            named.append(
                mod.TopicPartitions(topic_id=topic_id, topic_name=topic.name, partitions=indexes)
            )
    return mod.Assignment(topic_partitions=tuple(named))

"""JoinGroup (11), SyncGroup (14), Heartbeat (12) and LeaveGroup (13): the classic rebalance.

The gateway holds no group state. Each handler checks what Kafka checks before the
coordinator shard (GroupCoordinatorService / KafkaApis: a non-empty group id, SyncGroup v5's
mandatory protocol type and name), turns the request of whatever version into one mailbox Op
to ask the group's actor (steps.py `ask`), and turns the OpResp back into the response of the
client's version. A JoinGroup that parks in a rebalance simply waits for its answer; the
connection waits with it, as Kafka's muted channel does.

The gateway supplies what the pure state machine may not make up itself: the member id a new
member would get (`<instance id or client id>-<uuid>`), the client id and host for
DescribeGroups, and `require_known_member_id` (JoinGroup v4+, where a new dynamic member is
first answered MEMBER_ID_REQUIRED with its id and rejoins with it).

Authorization comes first, as in KafkaApis (after SyncGroup's mandatory-field check, which
Kafka does before it): a user whose group prefixes exclude the group id gets
GROUP_AUTHORIZATION_FAILED, Kafka's answer to a principal without READ on the group, in the
API's error response, and the group's actor is never asked (`denied`, shared by every group
API of the gateway). A null id is left to the INVALID_GROUP_ID check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from ...group_common.ops import (
    HeartbeatOp,
    HeartbeatOpResp,
    JoinGroupOp,
    JoinGroupOpResp,
    LeaveGroupOp,
    LeaveGroupOpResp,
    SyncGroupOp,
    SyncGroupOpResp,
)
from ...ids import new_member_id
from ...protocol.codec import encode_body, shared_response
from ...protocol.response_template import PLACEHOLDER, FieldTemplate
from ..context import BrokerContext, ConnectionInfo
from ..steps import ask
from ._build import NO_THROTTLE, make, schema, to_ms

JOIN_KEY = 11
HEARTBEAT_KEY = 12
LEAVE_KEY = 13
SYNC_KEY = 14


DENIED = ErrorCode.group_authorization_failed


def denied(conn: ConnectionInfo, group_id: str | None) -> bool:
    """The connection's user may not use this group (Kafka: no ACL for it). One prefix check
    per group named; a null id is not checked (it is INVALID_GROUP_ID)."""
    return group_id is not None and not conn.may_use_group(group_id)


# -- JoinGroup ----------------------------------------------------------------------------
def join_group(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    group_id = request.group_id
    mod = schema(JOIN_KEY, version)
    if denied(conn, group_id):
        return _join_response(mod, version, JoinGroupOpResp(DENIED))
    if not group_id:
        invalid = JoinGroupOpResp(ErrorCode.invalid_group_id, member_id=request.member_id)
        return _join_response(mod, version, invalid)
    return ask(
        conn.org_id,
        group_id,
        _join_op(conn, version, request),
        lambda response: _join_response(mod, version, response),
    )


def _join_op(conn: ConnectionInfo, version: int, request: Any) -> JoinGroupOp:
    instance_id = request.group_instance_id if version >= 5 else None
    return JoinGroupOp(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        session_timeout_ms=to_ms(request.session_timeout),
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        # -1: none given (v0); the state machine then uses the session timeout, as Kafka does
        rebalance_timeout_ms=to_ms(request.rebalance_timeout) if version >= 1 else -1,
        group_instance_id=instance_id,
        client_id=conn.client_id or "",
        client_host=conn.client_host,
        require_known_member_id=version >= 4,
        # only a member without an id gets one (membership.join): a rejoin needs no uuid
        new_member_id="" if request.member_id else new_member_id(conn.client_id, instance_id),
        reason=request.reason if version >= 8 else None,
    )


def _join_response(mod: Any, version: int, response: JoinGroupOpResp) -> Any:
    """A follower's from its generation's template (`_templated`), else kio's."""
    follower = not response.members and not response.error_code
    if follower and len(response.member_id) <= _TEMPLATE_MAX_ID:
        generation = (
            response.generation_id,
            response.protocol_type,
            response.protocol_name,
            response.leader_id,
            response.skip_assignment,
        )
        template = _templated(
            (JOIN_KEY, version, generation),
            lambda: _join_response_of(mod, version, replace(response, member_id=PLACEHOLDER)),
        )
        if template is not None:
            return template.with_bytes(response.member_id.encode())
    return _join_response_of(mod, version, response)


def _join_response_of(mod: Any, version: int, response: JoinGroupOpResp) -> Any:
    """The kio JoinGroupResponse of `version` for `response`."""
    members = tuple(
        make(mod.JoinGroupResponseMember, member_id=m, group_instance_id=i, metadata=meta)
        for m, i, meta in response.members
    )
    protocol_name = response.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # nullable only from v7 (Kafka's JoinGroupResponse does the same)
    return make(
        mod.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(response.error_code),
        generation_id=response.generation_id,
        protocol_type=response.protocol_type,
        protocol_name=protocol_name,
        leader=response.leader_id,
        skip_assignment=response.skip_assignment,
        member_id=response.member_id,
        members=members,
    )


# A follower's JoinGroup response is its generation's but for its member id, a member's
# SyncGroup response its group's but for its assignment: each is encoded once a generation
# (protocol/response_template.py). Longer member ids (a client id of thousands of bytes) go
# through kio, whose errors then stay what they are.
_TEMPLATE_MAX_ID = 1024
_TEMPLATES: dict[tuple[Any, ...], FieldTemplate | None] = {}
_TEMPLATES_MAX = 1024


def _templated(
    key: tuple[Any, ...], build: Callable[[], Any], *, bytes_field: bool = False
) -> FieldTemplate | None:
    """The template of the kio response `build()` makes (with PLACEHOLDER in the field), kept
    under `key`, which must say everything else the response holds."""
    try:
        return _TEMPLATES[key]
    except KeyError:
        pass
    template = FieldTemplate.of(build(), encode_body, bytes_field=bytes_field)
    if len(_TEMPLATES) >= _TEMPLATES_MAX:
        _TEMPLATES.clear()
    _TEMPLATES[key] = template
    return template


# -- SyncGroup ----------------------------------------------------------------------------
def sync_group(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    group_id = request.group_id
    mod = schema(SYNC_KEY, version)
    protocol_type = request.protocol_type if version >= 5 else None
    protocol_name = request.protocol_name if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        # KafkaApis: mandatory from v5 on
        return _sync_response(mod, SyncGroupOpResp(ErrorCode.inconsistent_group_protocol))
    if denied(conn, group_id):
        return _sync_response(mod, SyncGroupOpResp(DENIED))
    if not group_id:
        return _sync_response(mod, SyncGroupOpResp(ErrorCode.invalid_group_id))
    op = SyncGroupOp(
        group_id=group_id,
        member_id=request.member_id,
        generation_id=request.generation_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
    )
    return ask(conn.org_id, group_id, op, lambda response: _sync_response(mod, response))


def _sync_response(mod: Any, response: SyncGroupOpResp) -> Any:
    """A member's assignment in its group's template (`_templated`); an error from kio."""
    if not response.error_code:
        template = _templated(
            (SYNC_KEY, mod, response.protocol_type, response.protocol_name),
            lambda: _sync_response_of(mod, replace(response, assignment=PLACEHOLDER.encode())),
            bytes_field=True,
        )
        if template is not None:
            return template.with_bytes(response.assignment)
    return _sync_response_of(mod, response)


def _sync_response_of(mod: Any, response: SyncGroupOpResp) -> Any:
    """The kio SyncGroupResponse of `mod`'s version for `response`."""
    return make(
        mod.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(response.error_code),
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignment=response.assignment,
    )


# -- Heartbeat ----------------------------------------------------------------------------
def heartbeat(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    group_id = request.group_id
    if denied(conn, group_id):
        return heartbeat_response(version, DENIED)
    if not group_id:
        return heartbeat_response(version, ErrorCode.invalid_group_id)
    op = HeartbeatOp(
        group_id=group_id,
        member_id=request.member_id,
        generation_id=request.generation_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
    )

    def answered(response: HeartbeatOpResp) -> Any:
        return heartbeat_response(version, response.error_code)

    return ask(conn.org_id, group_id, op, answered)


def heartbeat_response(version: int, code: int) -> Any:
    """A heartbeat's answer depends on nothing else: one shared and pre-encoded each."""
    return shared_response(
        (HEARTBEAT_KEY, version, code),
        lambda: make(
            schema(HEARTBEAT_KEY, version).HeartbeatResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode(code),
        ),
    )


# -- LeaveGroup ---------------------------------------------------------------------------
def leave_group(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    group_id = request.group_id
    mod = schema(LEAVE_KEY, version)
    if version < 3:  # one member, by id
        members: tuple[tuple[str, str | None, str | None], ...] = ((request.member_id, None, None),)
    else:
        members = tuple(
            (m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
            for m in request.members
        )
    if denied(conn, group_id):
        return _leave_response(mod, version, LeaveGroupOpResp(DENIED))
    if not group_id:
        return _leave_response(mod, version, LeaveGroupOpResp(ErrorCode.invalid_group_id))
    return ask(
        conn.org_id,
        group_id,
        LeaveGroupOp(group_id, members),
        lambda response: _leave_response(mod, version, response),
    )


def _leave_response(mod: Any, version: int, response: LeaveGroupOpResp) -> Any:
    if version < 3:
        # One error for the request: the top-level one, else the first member's (Kafka's
        # LeaveGroupResponse for v0-v2).
        member_errors = (e for _, _, e in response.members if e != ErrorCode.none)
        code = response.error_code or next(member_errors, ErrorCode.none)
        return make(mod.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode(code))
    members = tuple(
        make(
            mod.MemberResponse,
            member_id=m,
            group_instance_id=i,
            error_code=ErrorCode(e),
        )
        for m, i, e in response.members
    )
    return make(
        mod.LeaveGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(response.error_code),
        members=members,
    )

"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as a Kafka broker without an authorizer.

Access here is by organisation and prefixes (docs/tenancy.md), which ACLs can't express (an
ACL names one principal, one operation, allow or deny), so no ACL is stored and none is
described. The three APIs answer exactly as Kafka's AclApis do when no authorizer is configured:
SECURITY_DISABLED, with Kafka's messages. As in Kafka, the cluster permission comes first
(DESCRIBE for DescribeAcls, ALTER for the others): a user who is not an org admin gets
CLUSTER_AUTHORIZATION_FAILED (auth/acl_operations.py).

A filter or binding with an UNKNOWN (0, or an unknown code) resource type, pattern type,
operation or permission type is a request Kafka fails to parse (IllegalArgumentException in
the request's constructor): it closes the connection, and so do we.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...auth.acl_operations import AclOperation
from ..context import BrokerContext, ConnectionInfo
from ..idle import CloseConnection
from ._build import NO_THROTTLE, make, schema

DESCRIBE_KEY, CREATE_KEY, DELETE_KEY = 29, 30, 31
NOT_AUTHORIZED = "Cluster authorization failed."
# Kafka's own words (AclApis): the describe message differs from the other two.
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"

RESOURCE_TYPES = range(1, 8)  # ANY .. USER
PATTERN_TYPES = range(1, 5)  # ANY, MATCH, LITERAL, PREFIXED
OPERATIONS = range(1, 15)  # ANY .. DESCRIBE_TOKENS
PERMISSION_TYPES = range(1, 4)  # ANY, DENY, ALLOW


Codes = tuple[int, int, int, int]  # resource type, pattern type, operation, permission type
_VALID = (RESOURCE_TYPES, PATTERN_TYPES, OPERATIONS, PERMISSION_TYPES)


def _check(what: str, codes: Codes) -> None:
    if any(code not in valid for code, valid in zip(codes, _VALID, strict=True)):
        raise CloseConnection(f"{what} with UNKNOWN elements")


def _filter_codes(f: Any) -> Codes:
    """A DescribeAcls request's or a DeleteAcls filter's codes (the same field names)."""
    return f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type


def _refusal(conn: ConnectionInfo, needed: AclOperation, message: str) -> tuple[ErrorCode, str]:
    if not conn.may_on_cluster(needed):
        return ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED
    return ErrorCode.security_disabled, message


def describe_acls(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(DESCRIBE_KEY, version)
    _check("DescribeAcls", _filter_codes(request))
    code, message = _refusal(conn, AclOperation.DESCRIBE, NO_AUTHORIZER_DESCRIBE)
    return make(
        mod.DescribeAclsResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        resources=(),
    )


def create_acls(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(CREATE_KEY, version)
    for c in request.creations:
        codes = (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
        _check("CreateAcls", codes)
    code, message = _refusal(conn, AclOperation.ALTER, NO_AUTHORIZER)
    result = make(mod.AclCreationResult, error_code=code, error_message=message)
    return make(
        mod.CreateAclsResponse,
        throttle_time=NO_THROTTLE,
        results=(result,) * len(request.creations),
    )


def delete_acls(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(DELETE_KEY, version)
    for f in request.filters:
        _check("DeleteAcls", _filter_codes(f))
    code, message = _refusal(conn, AclOperation.ALTER, NO_AUTHORIZER)
    result = make(
        mod.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=()
    )
    return make(
        mod.DeleteAclsResponse,
        throttle_time=NO_THROTTLE,
        filter_results=(result,) * len(request.filters),
    )

"""DescribeClientQuotas (48): this broker enforces no client quotas, so none is described.

Served because Kafka's `kafka-configs --describe --entity-type users` asks for a user's quotas
beside its SCRAM credentials, and fails on a broker that does not answer. The filter is
checked as Kafka's ClientQuotasImage.describe checks it (INVALID_REQUEST, or
UNSUPPORTED_VERSION for an entity type other than user, client-id and ip); a valid one matches
nothing. AlterClientQuotas is not served: there are no quotas to set.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 48
ENTITY_TYPES = frozenset({"user", "client-id", "ip"})
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


class _Invalid(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def describe_client_quotas(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(KEY, version)
    try:
        _check(request.components)
    except _Invalid as exc:
        return make(
            mod.DescribeClientQuotasResponse,
            throttle_time=NO_THROTTLE,
            error_code=exc.code,
            error_message=str(exc),
            entries=None,
        )
    return make(
        mod.DescribeClientQuotasResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        entries=(),
    )


def _check(components: Any) -> None:
    seen: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise _Invalid(ErrorCode.invalid_request, "Invalid empty entity type.")
        if kind in seen:
            raise _Invalid(
                ErrorCode.invalid_request,
                f"Entity type {kind} cannot appear more than once in the filter.",
            )
        seen.add(kind)
        if kind not in ENTITY_TYPES:
            raise _Invalid(ErrorCode.unsupported_version, f"Unsupported entity type {kind}")
        _check_match(component.match_type, component.match)
    if "ip" in seen and seen & {"user", "client-id"}:
        raise _Invalid(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )


def _check_match(match_type: int, match: str | None) -> None:
    if match_type == EXACT and match is None:
        message = "Request specified MATCH_TYPE_EXACT, but set match string to null."
    elif match_type == DEFAULT and match is not None:
        message = "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
    elif match_type == SPECIFIED and match is not None:
        message = "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
    elif match_type not in (EXACT, DEFAULT, SPECIFIED):
        message = f"Unknown match type {match_type}"
    else:
        return
    raise _Invalid(ErrorCode.invalid_request, message)

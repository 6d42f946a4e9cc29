"""ApiVersions (18): the key/version ranges this broker serves, taken from the api table."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 18


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    answer = ctx.api_versions_answers.get(version)
    if answer is None:
        answer = ctx.api_versions_answers[version] = _answer(ctx, version)
    return answer


def _answer(ctx: BrokerContext, version: int) -> Any:
    mod = schema(KEY, version)
    keys = tuple(
        mod.ApiVersion(api_key=api.key, min_version=api.min_version, max_version=api.max_version)
        for api in sorted(ctx.apis.values(), key=lambda a: a.key)
    )
    return make(
        mod.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
    )

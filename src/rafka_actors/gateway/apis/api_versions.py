"""ApiVersions (18): the key/version ranges this broker serves, taken from the api table, and
(v3+) the features it supports and has finalized (KIP-584).

The one feature served is `transaction.version` (supported 0-2, finalized at the broker's
`transaction.version` setting): a client reads it to choose transactions v2 (KIP-890), as the
Java client does. As Kafka does, v0-v3 answers leave out supported features whose minimum is
0 (older clients cannot read them, KAFKA-17492) and every answer leaves out a feature
finalized at level 0. The finalized features' epoch must grow when they change; Kafka's is an
offset of its metadata log, ours the time the broker started, which grows across restarts
(the only moment the setting can change).
"""

from __future__ import annotations

import time
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 18
FEATURES_VERSION: Final = 3  # the first ApiVersions response with features
TRANSACTION_VERSION: Final = "transaction.version"
SUPPORTED_FEATURES: Final = {TRANSACTION_VERSION: (0, 2)}
_FEATURES_EPOCH: Final = time.time_ns() // 1_000_000


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    answer = ctx.api_versions_answers.get(version)
    if answer is None:
        answer = ctx.api_versions_answers[version] = _answer(ctx, version)
    return answer


def finalized_features(ctx: BrokerContext) -> dict[str, int]:
    """Feature name -> the level finalized on this broker."""
    return {TRANSACTION_VERSION: ctx.config.transaction_version}


def _answer(ctx: BrokerContext, version: int) -> Any:
    mod = schema(KEY, version)
    keys = tuple(
        mod.ApiVersion(api_key=api.key, min_version=api.min_version, max_version=api.max_version)
        for api in sorted(ctx.apis.values(), key=lambda a: a.key)
    )
    if version < FEATURES_VERSION:
        return make(
            mod.ApiVersionsResponse,
            error_code=ErrorCode.none,
            api_keys=keys,
            throttle_time=NO_THROTTLE,
        )
    supported = tuple(
        make(mod.SupportedFeatureKey, name=name, min_version=low, max_version=high)
        for name, (low, high) in SUPPORTED_FEATURES.items()
        if version > FEATURES_VERSION or low > 0
    )
    finalized = tuple(
        make(mod.FinalizedFeatureKey, name=name, min_version_level=level, max_version_level=level)
        for name, level in finalized_features(ctx).items()
        if level > 0
    )
    return make(
        mod.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
        supported_features=supported,
        finalized_features_epoch=_FEATURES_EPOCH,
        finalized_features=finalized,
    )

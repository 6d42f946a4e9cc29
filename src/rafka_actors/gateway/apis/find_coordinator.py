"""FindCoordinator (10): the gateway is the coordinator endpoint, so it answers with itself.

v0-v3 carry one key; v4+ a batch of `coordinator_keys`. No broker round trip (design note 000).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ... import telemetry
from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 10


async def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    with telemetry.span("rafka.gateway.kafka.find-coordinator", version=version):
        mod = schema(KEY, version)
        endpoint = {
            "node_id": ctx.node_id,
            "host": ctx.advertised_host,
            "port": ctx.advertised_port,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        if version < 4:
            return make(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **endpoint)
        coordinators = tuple(
            make(mod.Coordinator, key=key, **endpoint) for key in request.coordinator_keys
        )
        return make(
            mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators
        )

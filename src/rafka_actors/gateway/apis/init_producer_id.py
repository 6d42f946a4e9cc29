"""InitProducerId (22): a fresh producer id for idempotent producers.

kafka-python's producer is idempotent by default and fails without this API. Transactions are
not served: a transactional id gets INVALID_REQUEST, so a transactional producer fails fast
instead of writing batches that read_committed consumers could not interpret.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo
from ._build import NO_THROTTLE, make, schema

KEY = 22


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    if request.transactional_id is not None:
        code, producer_id, epoch = ErrorCode.invalid_request, -1, -1
    else:
        code, producer_id, epoch = ErrorCode.none, ctx.data.producer_ids.allocate(), 0
    return make(
        mod.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )

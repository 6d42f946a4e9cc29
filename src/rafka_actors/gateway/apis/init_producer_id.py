"""InitProducerId (22): a fresh producer id for idempotent producers.

kafka-python's producer is idempotent by default and fails without this API. A request with a
transactional id goes to that id's transaction coordinator (transactions.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo, file_io
from ._build import NO_THROTTLE, make, schema
from .transactions import init_producer_id as transactional_init_producer_id

KEY = 22


@file_io
def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    if request.transactional_id is not None:
        return transactional_init_producer_id(ctx, conn, version, request)
    mod = schema(KEY, version)
    code, producer_id, epoch = ErrorCode.none, ctx.data.producer_ids.allocate(), 0
    return make(
        mod.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )

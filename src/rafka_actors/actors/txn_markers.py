"""Writing a prepared transaction's end markers: to its partitions and to its groups.

The data plane writes one COMMIT or ABORT control batch per partition
(`write_txn_markers`, storage/data_plane.py); each group that took offsets in the transaction
merges or discards them on a `TxnMarkerOp` from its own actor. Both are idempotent, so a
marker written twice (a retry, or a restart in Prepare*) is harmless. A partition whose topic
is gone, or one where a newer producer epoch has moved on, needs no marker (Kafka drops them
too); any other error is retried by the actor.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from ..group_common.ops import TxnMarkerOp
from ..ids import GroupKey
from ..storage.data_plane import DataPlane
from ..transaction.state import Markers

log = logging.getLogger(__name__)

# Answers that mean "no marker is needed here": the partition is gone (its topic deleted), or
# a newer epoch of the producer has moved on there (Kafka's marker handler then stops sending
# too: "this txn can now be ignored").
_NOT_NEEDED = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
        ErrorCode.invalid_producer_epoch,
    }
)


AskGroup = Callable[[GroupKey, Any], Awaitable[Any]]


class MarkerSink(Protocol):
    async def write(self, org_id: int, markers: Markers) -> list[str]:
        """Write every marker; return what failed (empty: all written)."""
        ...


class MarkerWriter:
    """Writes markers through the data plane and the group registry."""

    def __init__(self, data: DataPlane, ask_group: AskGroup) -> None:
        self._data = data
        self._ask_group = ask_group

    async def write(self, org_id: int, markers: Markers) -> list[str]:
        """Write every marker; return what failed (empty: all written)."""
        failed: list[str] = []
        if markers.partitions:
            codes = await self._data.write_txn_markers(
                org_id,
                markers.producer_id,
                markers.producer_epoch,
                markers.committed,
                sorted(markers.partitions),
                transaction_version=markers.transaction_version,
            )
            for (topic, partition), code in sorted(codes.items()):
                if code != ErrorCode.none and code not in _NOT_NEEDED:
                    failed.append(f"{topic}-{partition}: {ErrorCode(code).name.upper()}")
        op = TxnMarkerOp(markers.producer_id, markers.producer_epoch, markers.committed)
        for group_id in sorted(markers.groups):
            answer = await self._ask_group(GroupKey(org_id, group_id), op)
            if answer.error_code != ErrorCode.none and answer.error_code not in _NOT_NEEDED:
                failed.append(f"group {group_id}: {ErrorCode(answer.error_code).name.upper()}")
        return failed

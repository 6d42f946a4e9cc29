"""MarkerWriter alone, with stand-ins for the data plane and the group registry: what counts
as written, what is retried."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from rafka_actors.actors.txn_markers import MarkerWriter
from rafka_actors.group_common.ops import (
    TxnMarkerOp,
    TxnMarkerOpResp,
)
from rafka_actors.ids import GroupKey
from rafka_actors.transaction.state import Markers


class DataPlaneStandIn:
    def __init__(self, codes: dict[tuple[str, int], int]) -> None:
        self.codes = codes
        self.calls: list[tuple[Any, ...]] = []

    async def write_txn_markers(
        self,
        org_id: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        partitions: Iterable[tuple[str, int]],
        coordinator_epoch: int = 0,
        transaction_version: int = 0,
    ) -> dict[tuple[str, int], int]:
        wanted = list(partitions)
        self.calls.append((org_id, producer_id, producer_epoch, committed, wanted))
        return {tp: self.codes.get(tp, ErrorCode.none) for tp in wanted}


async def test_gone_partitions_need_no_marker_and_the_rest_are_retried() -> None:
    data = DataPlaneStandIn(
        {
            ("deleted", 0): ErrorCode.unknown_topic_or_partition,
            ("moved-on", 0): ErrorCode.invalid_producer_epoch,
            ("busy", 1): ErrorCode.not_leader_or_follower,
        }
    )
    asked: list[tuple[GroupKey, Any]] = []

    async def ask(key: GroupKey, op: Any) -> Any:
        asked.append((key, op))
        code = ErrorCode.coordinator_not_available if key.group_id == "loading" else 0
        return TxnMarkerOpResp(code)

    partitions = frozenset({("deleted", 0), ("moved-on", 0), ("busy", 1), ("out", 2)})
    markers = Markers(1000, 4, True, partitions, frozenset({"g", "loading"}))
    failed = await MarkerWriter(data, ask).write(5, markers)

    assert failed == ["busy-1: NOT_LEADER_OR_FOLLOWER", "group loading: COORDINATOR_NOT_AVAILABLE"]
    [(org, pid, epoch, committed, written)] = data.calls
    assert (org, pid, epoch, committed, set(written)) == (5, 1000, 4, True, set(partitions))
    assert asked == [
        (GroupKey(5, "g"), TxnMarkerOp(1000, 4, True)),
        (GroupKey(5, "loading"), TxnMarkerOp(1000, 4, True)),
    ]

"""WriteTxnMarkers (27): COMMIT or ABORT markers written to partitions on request.

Kafka's transaction coordinator sends it to partition leaders; here the coordinator writes
its markers itself (actors/txn_markers.py), so what sends it is an admin: `kafka-transactions
abort` ends a hanging transaction (one its partition holds open while no coordinator knows
of it) with an ABORT marker at the producer's epoch, found with DescribeProducers.

The markers go through the same data-plane write as the coordinator's
(`DataPlane.write_txn_markers`): fsynced before the answer (under the default
`coordinator.log.fsync=always`), idempotent, checked against the partition's producer state
(INVALID_PRODUCER_EPOCH for an older epoch, TRANSACTION_COORDINATOR_FENCED for an older
coordinator epoch; v2's `transaction_version` 2 asks for a bumped epoch, KIP-1228), and
UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist. Like Kafka, which asks for
CLUSTER_ACTION (or ALTER on the cluster), only a user unlimited in topics and transactional
ids may send it (`may_act_on_cluster`); anyone else gets CLUSTER_AUTHORIZATION_FAILED on
every partition. Partitions are the connection's organisation's.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..context import BrokerContext, ConnectionInfo
from ..steps import Awaited
from ._build import make, schema

KEY: Final = 27
TRANSACTION_VERSION_VERSION: Final = 2  # v2+: each marker says its transaction version

# Per producer id (markers of one producer id are answered together, as Kafka's are): each
# (topic, partition)'s error code.
Results = dict[int, dict[tuple[str, int], int]]


def handle(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(KEY, version)
    markers = list(request.markers)
    if not conn.may_act_on_cluster():
        denied: Results = {}
        for m in markers:
            denied.setdefault(m.producer_id, {}).update(
                dict.fromkeys(_partitions(m), ErrorCode.cluster_authorization_failed)
            )
        return _response(mod, denied)

    async def write(ctx: BrokerContext) -> Results:
        results: Results = {}
        for m in markers:
            tv = m.transaction_version if version >= TRANSACTION_VERSION_VERSION else 0
            codes = await ctx.data.write_txn_markers(
                conn.org_id,
                m.producer_id,
                m.producer_epoch,
                m.transaction_result,
                _partitions(m),
                m.coordinator_epoch,
                tv,
            )
            results.setdefault(m.producer_id, {}).update(codes)
        return results

    return Awaited(write, lambda results: _response(mod, results))


def _partitions(marker: Any) -> list[tuple[str, int]]:
    return [(t.name, p) for t in marker.topics for p in t.partition_indexes]


def _response(mod: Any, results: Results) -> Any:
    markers = []
    for producer_id, codes in results.items():
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), code in codes.items():
            by_topic.setdefault(topic, []).append(
                make(
                    mod.WritableTxnMarkerPartitionResult, partition_index=partition, error_code=code
                )
            )
        topics = tuple(
            make(mod.WritableTxnMarkerTopicResult, name=name, partitions=tuple(rows))
            for name, rows in by_topic.items()
        )
        markers.append(make(mod.WritableTxnMarkerResult, producer_id=producer_id, topics=topics))
    return make(mod.WriteTxnMarkersResponse, markers=tuple(markers))

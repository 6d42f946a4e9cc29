"""TxnOffsetCommit (28): a transaction's offsets, sent to the group's coordinator.

The handler only translates: what the gateway decides itself is what KafkaApis decides before
the group coordinator is asked, in its order. A transactional id the user may not use fails
every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka authorizes WRITE on it first,
and takes it as authorizing the producer id too). A null or empty group id is INVALID_GROUP_ID
(Kafka's `isGroupIdNotEmpty`); a group the user may not use fails every partition with
GROUP_AUTHORIZATION_FAILED; a partition of a topic the user may not use is
TOPIC_AUTHORIZATION_FAILED, and one that does not exist UNKNOWN_TOPIC_OR_PARTITION. The rest
goes to the group's actor in one TxnOffsetCommitOp, whose machine checks generation, member
and instance id (KIP-447) and keeps the offsets pending for the producer until the
transaction coordinator's marker (group_common/txn_offsets.py). Versions: v0-v4; librdkafka
and kafka-python send v3, aiokafka v0. v5 is left out: it means the transaction coordinator
adds the group to the transaction implicitly (KIP-890 part 2), which ours does not do.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from ...group_common.ops import (
    TxnOffsetCommitOp,
    TxnOffsetCommitOpResp,
)
from ..context import BrokerContext, ConnectionInfo
from ..steps import ask
from ._build import NO_THROTTLE, make, schema
from .groups import DENIED, denied
from .offsets import TOPIC_DENIED, partition_exists, partition_results

TXN_OFFSET_COMMIT_KEY: Final = 28
MEMBER_FIELDS_VERSION: Final = 3  # v3 adds generation, member id and group instance id
LEADER_EPOCH_VERSION: Final = 2


def txn_offset_commit(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(TXN_OFFSET_COMMIT_KEY, version)
    group_id = request.group_id
    if not conn.may_use_transactional_id(request.transactional_id):
        return _response(mod, request, {}, ErrorCode.transactional_id_authorization_failed)
    if not group_id:
        return _response(mod, request, {}, ErrorCode.invalid_group_id)
    if denied(conn, group_id):
        return _response(mod, request, {}, DENIED)
    results: dict[tuple[str, int], int] = {}
    offsets = []
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if not conn.may_use_topic(t.name):
                results[tp] = TOPIC_DENIED
            elif not partition_exists(ctx, conn, t.name, p.partition_index):
                results[tp] = ErrorCode.unknown_topic_or_partition
            else:
                epoch = p.committed_leader_epoch if version >= LEADER_EPOCH_VERSION else -1
                offsets.append((*tp, p.committed_offset, epoch, p.committed_metadata))
    if not offsets:
        return _response(mod, request, results, ErrorCode.unknown_topic_or_partition)
    members = version >= MEMBER_FIELDS_VERSION
    op = TxnOffsetCommitOp(
        group_id=group_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        offsets=tuple(offsets),
        member_id=request.member_id if members else "",
        generation_id=request.generation_id if members else -1,
        group_instance_id=request.group_instance_id if members else None,
        api_version=version,
        transactional_id=request.transactional_id,
    )

    def committed(response: TxnOffsetCommitOpResp) -> Any:
        results.update(((t, p), e) for t, p, e in response.results)
        return _response(mod, request, results, ErrorCode.unknown_topic_or_partition)

    return ask(conn.org_id, group_id, op, committed)


def _response(
    mod: Any, request: Any, results: dict[tuple[str, int], int], missing: ErrorCode
) -> Any:
    """Every requested partition's error, in request order; `missing` for any without one."""
    topics = partition_results(
        mod.TxnOffsetCommitResponseTopic,
        mod.TxnOffsetCommitResponsePartition,
        request.topics,
        results,
        missing,
    )
    return make(mod.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)

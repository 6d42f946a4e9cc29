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
transaction coordinator's marker (group_common/txn_offsets.py). Versions: v0-v5; librdkafka
and kafka-python send v3, aiokafka v0, the Java client v5 with transactions v2.

Before the group, the transaction coordinator (KIP-890, as Kafka's group coordinator asks it
through its partition writer): v5 is a v2 client's, whose TxnOffsetCommit adds the group to
its transaction (no AddOffsetsToTxn); an older version's group must already be in the
producer's open transaction (`transaction.partition.verification.enable`), read from the
coordinator's published state. (While the client's previous transaction writes its markers,
the add is retried for a moment, as a v2 Produce's is: produce_txn.py.) Their errors are the
whole request's, as Kafka answers them:
PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE (not in the transaction) as
INVALID_TXN_STATE before v4.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from ...group_common.ops import TxnOffsetCommitOp, TxnOffsetCommitOpResp
from ...transaction.ops import AddOffsetsOp
from ...transaction.state import TV_2
from ...transaction.verify import verify_group
from ..context import BrokerContext, ConnectionInfo
from ..steps import ask
from ..txn_steps import add_retry, ask_txn
from ._build import NO_THROTTLE, make, schema
from .groups import DENIED, denied
from .offsets import TOPIC_DENIED, partition_exists, partition_results

TXN_OFFSET_COMMIT_KEY: Final = 28
MEMBER_FIELDS_VERSION: Final = 3  # v3 adds generation, member id and group instance id
LEADER_EPOCH_VERSION: Final = 2
ABORTABLE_VERSION: Final = 4  # v4+ knows TRANSACTION_ABORTABLE
ADD_OFFSETS_VERSION: Final = 5  # v5+: the commit adds the group to the transaction (KIP-890)


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

    def in_transaction(code: int) -> Any:
        if code != ErrorCode.none:
            return _response(mod, request, results, _coordinator_error(code, version))
        return ask(conn.org_id, group_id, op, committed)

    if ctx.transactions is None or request.transactional_id is None:
        return in_transaction(ErrorCode.none)  # nothing to verify with, or nothing to verify
    if not request.transactional_id:
        return in_transaction(ErrorCode.invalid_request)
    producer = (request.producer_id, request.producer_epoch)
    if version >= ADD_OFFSETS_VERSION:
        add = AddOffsetsOp(*producer, group_id, TV_2)
        return ask_txn(
            conn.org_id,
            request.transactional_id,
            add,
            lambda answer: in_transaction(answer.error_code),
            add_retry(ctx),
        )
    if not ctx.config.transaction_partition_verification_enable:
        return in_transaction(ErrorCode.none)
    published = ctx.txn_registry().get_in(conn.org_id, request.transactional_id)
    return in_transaction(verify_group(published, *producer, group_id))


def _coordinator_error(code: int, version: int) -> ErrorCode:
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code == ErrorCode.transaction_abortable and version < ABORTABLE_VERSION:
        return ErrorCode.invalid_txn_state
    return ErrorCode(code)


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

"""AddPartitionsToTxn (24): partitions join a transaction.

Versions 0-3 come from v1 clients: one transaction, its partitions added. Versions 4+ are the
broker's own form (KIP-890: a broker verifies a v1 client's batch, or adds a v2 client's
partition, with it), which Kafka serves to other brokers and to admins (CLUSTER_ACTION): a
batch of transactions, each to add (as a v2 client's Produce would) or only to verify
(`verify_only`, answered from the coordinator's published state, transaction/verify.py).

What KafkaApis decides before the coordinator: the transactional id the user may use
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED, clients' versions), the topics (TOPIC_AUTHORIZATION_
FAILED) and that the partitions exist (UNKNOWN_TOPIC_OR_PARTITION): if any is refused or
unknown, none is added, and the others get OPERATION_NOT_ATTEMPTED. A coordinator error is
every partition's; before v2, PRODUCER_FENCED is INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ...transaction.ops import AddPartitionsOp, TxnResp
from ...transaction.state import TV_2, TV_LEGACY
from ...transaction.verify import verify_partitions
from ..context import BrokerContext, ConnectionInfo
from ..txn_steps import ask_txn
from ._build import NO_THROTTLE, make, schema
from .offsets import partition_exists
from .transactions import fenced_for

KEY: Final = 24
BROKER_VERSION: Final = 4  # v4+: batches of transactions, from brokers (KIP-890)

Codes = dict[tuple[str, int], int]


def add_partitions_to_txn(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(KEY, version)
    if version >= BROKER_VERSION:
        return _batch(ctx, conn, version, request, mod)
    txn_id = request.v3_and_below_transactional_id
    wanted = _wanted(request.v3_and_below_topics)

    def response(codes: Codes) -> Any:
        return make(
            mod.AddPartitionsToTxnResponse,
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=_topic_results(mod, codes),
        )

    if not conn.may_use_transactional_id(txn_id):
        return response(dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed))
    producer = (request.v3_and_below_producer_id, request.v3_and_below_producer_epoch)
    return _one(ctx, conn, version, (txn_id, *producer, False), wanted, response)


def _wanted(topics: Any) -> list[tuple[str, int]]:
    return [(topic.name, partition) for topic in topics for partition in topic.partitions]


def _topic_results(mod: Any, codes: Codes) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(
            make(
                mod.AddPartitionsToTxnPartitionResult,
                partition_index=partition,
                partition_error_code=code,
            )
        )
    return tuple(
        make(mod.AddPartitionsToTxnTopicResult, name=topic, results_by_partition=tuple(rows))
        for topic, rows in by_topic.items()
    )


def _one(
    ctx: BrokerContext,
    conn: ConnectionInfo,
    version: int,
    txn: tuple[str, int, int, bool],  # (transactional id, producer id, epoch, verify only)
    wanted: list[tuple[str, int]],
    then: Callable[[Codes], Any],
) -> Any:
    """One transaction's partitions added (or verified); `then` gets each one's error."""
    txn_id, producer_id, epoch, verify_only = txn
    if not txn_id:
        return then(dict.fromkeys(wanted, ErrorCode.invalid_request))
    refused: Codes = {}
    for topic, partition in wanted:
        if version < BROKER_VERSION and not conn.may_use_topic(topic):
            refused[(topic, partition)] = ErrorCode.topic_authorization_failed
        elif not partition_exists(ctx, conn, topic, partition):
            refused[(topic, partition)] = ErrorCode.unknown_topic_or_partition
    if refused:
        return then({tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in wanted})
    if verify_only:
        published = ctx.txn_registry().get_in(conn.org_id, txn_id)
        return then(verify_partitions(published, producer_id, epoch, wanted))

    def answered(answer: TxnResp) -> Any:
        return then(dict.fromkeys(wanted, fenced_for(version, 1, answer.error_code)))

    client_version = TV_2 if version >= BROKER_VERSION else TV_LEGACY
    op = AddPartitionsOp(producer_id, epoch, frozenset(wanted), client_version)
    return ask_txn(conn.org_id, txn_id, op, answered)


def _batch(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any, mod: Any) -> Any:
    """The broker form: each transaction in turn, one response for all."""

    def response(code: int, results: list[Any]) -> Any:
        return make(
            mod.AddPartitionsToTxnResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            results_by_transaction=tuple(results),
        )

    if not conn.may_act_on_cluster():
        return response(ErrorCode.cluster_authorization_failed, [])
    transactions = list(request.transactions)
    results: list[Any] = []

    def next_one(_: Any = None) -> Any:
        if len(results) == len(transactions):
            return response(ErrorCode.none, results)
        txn = transactions[len(results)]

        def done(codes: Codes) -> Any:
            results.append(
                make(
                    mod.AddPartitionsToTxnResult,
                    transactional_id=txn.transactional_id,
                    topic_results=_topic_results(mod, codes),
                )
            )
            return next_one()

        key = (txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only)
        return _one(ctx, conn, version, key, _wanted(txn.topics), done)

    return next_one()

"""The transaction APIs: InitProducerId with a transactional id (22), AddOffsetsToTxn (25),
EndTxn (26), DescribeTransactions (65) and ListTransactions (66); AddPartitionsToTxn (24) is
in txn_partitions.py.

Each client API is one op in the mailbox of the transactional id's actor
(actors/txn_actor.py), whose machine (transaction/machine.py) decides the error; the gateway
does only what KafkaApis does before the coordinator:

- authorization (tenancy): a transactional id outside the user's `transactional_id_prefixes`
  is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; AddOffsetsToTxn then checks the group
  (GROUP_AUTHORIZATION_FAILED), AddPartitionsToTxn the topics (TOPIC_AUTHORIZATION_FAILED);
- old versions do not know PRODUCER_FENCED (90): InitProducerId before v4, and the others
  before v2, get INVALID_PRODUCER_EPOCH (47) instead, as KafkaApis answers them;
- the version says the client's transaction version (KIP-890): EndTxn v5 is a v2 client's,
  whose epoch the coordinator bumps and names in the answer.

Transactional ids live inside the connection's organisation: the actor's key is
`(org_id, transactional id)`. DescribeTransactions and ListTransactions read the states the
actors last published (after their records were stored) and visit no actor.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from ...transaction.ops import (
    AddOffsetsOp,
    EndTxnOp,
    InitProducerIdOp,
    InitProducerIdResp,
    TxnResp,
)
from ...transaction.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TV_2, TV_LEGACY, TxnState
from ..context import BrokerContext, ConnectionInfo
from ..txn_steps import ask_txn
from ._build import NO_THROTTLE, make, schema, to_ms

INIT_PRODUCER_ID_KEY = 22
ADD_OFFSETS_KEY = 25
END_TXN_KEY = 26
DESCRIBE_KEY = 65
LIST_KEY = 66
END_TXN_V2_VERSION = 5  # EndTxn v5+: a transactions-v2 client (KIP-890 part 2)

_STATE_NAMES = {state.value for state in TxnState}


def fenced_for(version: int, newest_without: int, code: int) -> int:
    """PRODUCER_FENCED as a client of this version understands it."""
    if code == ErrorCode.producer_fenced and version <= newest_without:
        return ErrorCode.invalid_producer_epoch
    return code


# -- InitProducerId ---------------------------------------------------------------------------
def init_producer_id(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    """InitProducerId with a transactional id (init_producer_id.py hands it over)."""
    mod = schema(INIT_PRODUCER_ID_KEY, version)

    def response(answer: InitProducerIdResp) -> Any:
        return make(
            mod.InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=fenced_for(version, 3, answer.error_code),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )

    txn_id = request.transactional_id
    if not conn.may_use_transactional_id(txn_id):
        return response(InitProducerIdResp(ErrorCode.transactional_id_authorization_failed))
    producer_id = request.producer_id if version >= 3 else NO_PRODUCER_ID
    epoch = request.producer_epoch if version >= 3 else NO_PRODUCER_EPOCH
    if not txn_id or (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return response(InitProducerIdResp(ErrorCode.invalid_request))
    op = InitProducerIdOp(to_ms(request.transaction_timeout), producer_id, epoch)
    return ask_txn(conn.org_id, txn_id, op, response)


# -- AddOffsetsToTxn --------------------------------------------------------------------------
def add_offsets_to_txn(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(ADD_OFFSETS_KEY, version)

    def response(code: int) -> Any:
        return make(mod.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=code)

    txn_id = request.transactional_id
    if not conn.may_use_transactional_id(txn_id):
        return response(ErrorCode.transactional_id_authorization_failed)
    if not conn.may_use_group(request.group_id):
        return response(ErrorCode.group_authorization_failed)
    if not txn_id:
        return response(ErrorCode.invalid_request)
    op = AddOffsetsOp(request.producer_id, request.producer_epoch, request.group_id)
    return ask_txn(
        conn.org_id,
        txn_id,
        op,
        lambda answer: response(fenced_for(version, 1, answer.error_code)),
    )


# -- EndTxn -----------------------------------------------------------------------------------
def end_txn(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    mod = schema(END_TXN_KEY, version)

    def response(answer: TxnResp) -> Any:
        return make(
            mod.EndTxnResponse,
            throttle_time=NO_THROTTLE,
            error_code=fenced_for(version, 1, answer.error_code),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )

    txn_id = request.transactional_id
    if not conn.may_use_transactional_id(txn_id):
        return response(TxnResp(ErrorCode.transactional_id_authorization_failed))
    if not txn_id:
        return response(TxnResp(ErrorCode.invalid_request))
    client_version = TV_2 if version >= END_TXN_V2_VERSION else TV_LEGACY
    op = EndTxnOp(request.producer_id, request.producer_epoch, request.committed, client_version)
    return ask_txn(conn.org_id, txn_id, op, response)


# -- DescribeTransactions / ListTransactions ---------------------------------------------------
def _start_time(start_ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(start_ms / 1000, tz=datetime.UTC)


def describe_transactions(
    ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any
) -> Any:
    mod = schema(DESCRIBE_KEY, version)
    registry = ctx.txn_registry()
    states = []
    for txn_id in request.transactional_ids:
        error = ErrorCode.none
        txn = None
        if not conn.may_use_transactional_id(txn_id):
            error = ErrorCode.transactional_id_authorization_failed
        elif not txn_id:
            error = ErrorCode.invalid_request
        else:
            txn = registry.get_in(conn.org_id, txn_id)
            if txn is None:
                error = ErrorCode.transactional_id_not_found
        if txn is None:  # the fields' defaults (0s), as Kafka 4.3.1 leaves them
            states.append(
                make(
                    mod.TransactionState,
                    error_code=error,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=_start_time(0),
                    producer_id=0,
                    producer_epoch=0,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(
            make(
                mod.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=txn_id,
                transaction_state=txn.state.value,
                transaction_timeout=datetime.timedelta(milliseconds=txn.timeout_ms),
                transaction_start_time=_start_time(txn.start_ms),
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=tuple(
                    make(mod.TopicData, topic=topic, partitions=tuple(parts))
                    for topic, parts in by_topic.items()
                ),
            )
        )
    return make(
        mod.DescribeTransactionsResponse,
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(states),
    )


def list_transactions(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
    """Kafka's listTransactionStates: filters by state (unknown names reported back), by
    producer id and (v1+) by duration: started more than that many ms ago."""
    mod = schema(LIST_KEY, version)
    wanted_states = set(request.state_filters)
    unknown = tuple(s for s in request.state_filters if s not in _STATE_NAMES)
    producer_ids = set(request.producer_id_filters)
    min_duration = request.duration_filter if version >= 1 else -1
    now = ctx.txn_registry().now_ms()
    listed = []
    for txn in ctx.txn_registry().transactions(conn.org_id):
        if wanted_states and txn.state.value not in wanted_states:
            continue
        if producer_ids and txn.producer_id not in producer_ids:
            continue
        if min_duration >= 0 and now - txn.start_ms <= min_duration:
            continue
        if not conn.may_use_transactional_id(txn.transactional_id):
            continue
        listed.append(
            make(
                mod.TransactionState,
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                transaction_state=txn.state.value,
            )
        )
    return make(
        mod.ListTransactionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(listed),
    )

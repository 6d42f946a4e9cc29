"""Transactions v2 (KIP-890) and WriteTxnMarkers in the handlers, called as plain functions
over a real data plane, with the transaction coordinator standing in as the state it last
published (the verification reads it) and as the ops a step would ask of its actor (the
step's `then` is called with the actor's answer).

What Kafka's broker decides, as KafkaApis, ReplicaManager and AddPartitionsToTxnManager do:
ApiVersions' features; which version is a v2 client's (EndTxn v5, Produce v12, TxnOffsetCommit
v5); a transactional batch's verification (v1) or add (v2) before it is appended, with the
coordinator's errors turned into the ones each Produce version knows, and the guard that
refuses a batch whose transaction ended while the coordinator was asked; AddPartitionsToTxn's
broker form; and who may send WriteTxnMarkers.
"""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from rafka_actors.auth.users import User
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import Awaited, settle
from rafka_actors.gateway.txn_steps import AskTxn
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.transaction.ops import AddOffsetsOp, AddPartitionsOp, EndTxnOp, TxnResp
from rafka_actors.transaction.state import TV_2, TV_LEGACY, Transaction, TxnState

from ..batch_builder import build_batch

PRODUCE, ADD_PARTITIONS, END_TXN, WRITE_MARKERS, TXN_COMMIT, API_VERSIONS = 0, 24, 26, 27, 28, 18
PID, EPOCH = 1000, 3
NOW = int(time.time() * 1000)


class Published:
    """The transaction registry as the verification sees it: the published states."""

    def __init__(self) -> None:
        self.txns: dict[str, Transaction] = {}

    def get_in(self, org_id: int, transactional_id: str) -> Transaction | None:
        return self.txns.get(transactional_id)


def ongoing(partitions: set[tuple[str, int]], groups: set[str] = frozenset()) -> Transaction:  # type: ignore[assignment]
    return Transaction(
        "tx", PID, EPOCH, -1, 60_000, TxnState.ONGOING, frozenset(partitions),
        frozenset(groups), start_ms=NOW, update_ms=NOW,
    )  # fmt: skip


@pytest.fixture
def published() -> Published:
    return Published()


@pytest.fixture
def ctx(tmp_path: Path, published: Published) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("t", 2)
    context = BrokerContext(BrokerConfig(data_dir=tmp_path), data, "127.0.0.1", 9092, API_TABLE)
    context.transactions = published  # type: ignore[assignment]
    yield context
    data.close()


def conn(user: User | None = None) -> ConnectionInfo:
    return ConnectionInfo("10.0.0.7", 4242, user=user)


def nested(key: int, version: int, cls_name: str, **values: Any) -> Any:
    module = sys.modules[request_class(key, version).__module__]
    return make(getattr(module, cls_name), **values)


def txn_batch(seq: int = 0, epoch: int = EPOCH) -> bytes:
    return build_batch(
        [(None, b"v")], producer_id=PID, producer_epoch=epoch, base_sequence=seq, attributes=0x10
    )


def produce(ctx: BrokerContext, version: int, batch: bytes, txn_id: str | None = "tx") -> Any:
    part = nested(PRODUCE, version, "PartitionProduceData", index=0, records=batch)
    topic = nested(PRODUCE, version, "TopicProduceData", name="t", partition_data=(part,))
    request = make(
        request_class(PRODUCE, version),
        transactional_id=txn_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(topic,),
    )
    return API_TABLE[PRODUCE].handler(ctx, conn(), version, request)


def answer(response: Any) -> tuple[int, str | None]:
    p = response.responses[0].partition_responses[0]
    return int(p.error_code), p.error_message


# -- ApiVersions ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", [2, 3, 4])
def test_api_versions_advertise_the_finalized_transaction_version(
    ctx: BrokerContext, version: int
) -> None:
    request = make(
        request_class(API_VERSIONS, version),
        client_software_name="t",
        client_software_version="1",
    )
    response = API_TABLE[API_VERSIONS].handler(ctx, conn(), version, request)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert (ranges[0], ranges[24], ranges[26], ranges[27], ranges[28]) == (
        (3, 12), (0, 5), (0, 5), (1, 2), (0, 5),
    )  # fmt: skip
    if version < 3:
        return
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features
    }
    assert finalized == {"transaction.version": (2, 2)} and response.finalized_features_epoch > 0
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    # v3 answers leave out supported features whose minimum is 0 (KAFKA-17492), as Kafka's
    assert supported == ({"transaction.version": (0, 2)} if version >= 4 else {})


def test_a_transaction_version_of_zero_is_not_finalized(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path, transaction_version=0)
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    ctx = BrokerContext(config, data, "127.0.0.1", 9092, API_TABLE)
    request = make(
        request_class(API_VERSIONS, 4), client_software_name="t", client_software_version="1"
    )
    assert API_TABLE[API_VERSIONS].handler(ctx, conn(), 4, request).finalized_features == ()
    data.close()


# -- EndTxn ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("version", "client_version"), [(4, TV_LEGACY), (5, TV_2)])
def test_end_txn_v5_is_a_v2_clients_and_names_the_next_epoch(
    ctx: BrokerContext, version: int, client_version: int
) -> None:
    request = make(
        request_class(END_TXN, version),
        transactional_id="tx", producer_id=PID, producer_epoch=EPOCH, committed=True,
    )  # fmt: skip
    step = API_TABLE[END_TXN].handler(ctx, conn(), version, request)
    assert isinstance(step, AskTxn) and step.op == EndTxnOp(PID, EPOCH, True, client_version)
    response = step.then(TxnResp(ErrorCode.none, PID, EPOCH + 1))
    assert response.error_code == ErrorCode.none
    if version >= 5:
        assert (response.producer_id, response.producer_epoch) == (PID, EPOCH + 1)
    else:
        assert not hasattr(response, "producer_epoch")


# -- Produce ------------------------------------------------------------------------------
def test_a_transactional_batch_needs_a_transactional_id_the_user_may_use(
    ctx: BrokerContext,
) -> None:
    denied = ErrorCode.transactional_id_authorization_failed
    assert answer(produce(ctx, 11, txn_batch(), txn_id=None)) == (denied, None)


def test_a_v2_produce_adds_its_partition_then_appends(ctx: BrokerContext) -> None:
    step = produce(ctx, 12, txn_batch())
    assert isinstance(step, AskTxn)
    assert step.op == AddPartitionsOp(PID, EPOCH, frozenset({("t", 0)}), TV_2)
    assert step.retry is not None  # retried while the last transaction's markers are written
    assert answer(step.then(TxnResp(ErrorCode.none))) == (ErrorCode.none, None)
    # its transaction is open in the partition now: the next batch asks nobody
    assert answer(produce(ctx, 12, txn_batch(seq=1))) == (ErrorCode.none, None)


@pytest.mark.parametrize(
    ("coordinator", "version", "expected"),
    [
        (ErrorCode.producer_fenced, 12, ErrorCode.invalid_producer_epoch),
        (ErrorCode.concurrent_transactions, 12, ErrorCode.concurrent_transactions),
        (ErrorCode.coordinator_not_available, 12, ErrorCode.not_enough_replicas),
        (ErrorCode.invalid_producer_id_mapping, 12, ErrorCode.invalid_producer_id_mapping),
    ],
)
def test_a_v2_produce_answers_the_coordinators_refusal_as_produce_does(
    ctx: BrokerContext, coordinator: ErrorCode, version: int, expected: ErrorCode
) -> None:
    step = produce(ctx, version, txn_batch())
    assert answer(step.then(TxnResp(coordinator)))[0] == expected


@pytest.mark.parametrize(
    ("version", "state", "partitions", "expected"),
    [
        (11, TxnState.ONGOING, {("t", 0)}, ErrorCode.none),
        (11, TxnState.ONGOING, {("t", 1)}, ErrorCode.transaction_abortable),
        (10, TxnState.ONGOING, {("t", 1)}, ErrorCode.invalid_txn_state),
        (10, TxnState.PREPARE_COMMIT, {("t", 0)}, ErrorCode.not_enough_replicas),
        (9, TxnState.COMPLETE_COMMIT, set(), ErrorCode.invalid_txn_state),
    ],
)
def test_a_v1_produce_is_verified_against_the_published_transaction(
    ctx: BrokerContext,
    published: Published,
    version: int,
    state: TxnState,
    partitions: set[tuple[str, int]],
    expected: ErrorCode,
) -> None:
    txn = ongoing(partitions)
    published.txns["tx"] = Transaction(**{**_fields(txn), "state": state})
    assert answer(produce(ctx, version, txn_batch()))[0] == expected


def _fields(txn: Transaction) -> dict[str, Any]:
    return {name: getattr(txn, name) for name in txn.__slots__}  # type: ignore[attr-defined]


def test_an_unknown_producer_is_refused_and_verification_can_be_turned_off(
    tmp_path: Path, ctx: BrokerContext
) -> None:
    assert answer(produce(ctx, 9, txn_batch()))[0] == ErrorCode.invalid_producer_id_mapping
    ctx.config = ctx.config.with_values(transaction_partition_verification_enable=False)
    assert answer(produce(ctx, 9, txn_batch())) == (ErrorCode.none, None)  # a hanging one


def test_a_transaction_ended_while_the_coordinator_adds_refuses_the_batch(
    ctx: BrokerContext,
) -> None:
    """(v2 markers bump the epoch, so the epoch refuses it: the guard's own refusal is in
    tests/storage/test_txn_verification.py.)"""
    assert produce(ctx, 12, txn_batch()).then(TxnResp(ErrorCode.none)) is not None
    step = produce(ctx, 12, txn_batch(seq=0, epoch=EPOCH + 1))  # v2: the next transaction
    # ...whose previous transaction's marker (at the bumped epoch) is written meanwhile,
    # and then a timeout's abort marker (bumped again) ends the new one before its batch
    trio.run(ctx.data.write_txn_markers, 0, PID, EPOCH + 1, True, [("t", 0)], 0, 2)
    trio.run(ctx.data.write_txn_markers, 0, PID, EPOCH + 2, False, [("t", 0)], 0, 2)
    code, _ = answer(step.then(TxnResp(ErrorCode.none)))
    assert code == ErrorCode.invalid_producer_epoch  # (older than the abort's epoch)


# -- TxnOffsetCommit ------------------------------------------------------------------------
def txn_commit(ctx: BrokerContext, version: int) -> Any:
    partition = nested(
        TXN_COMMIT, version, "TxnOffsetCommitRequestPartition",
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=None,
    )  # fmt: skip
    topic = nested(
        TXN_COMMIT, version, "TxnOffsetCommitRequestTopic", name="t", partitions=(partition,)
    )
    request = make(
        request_class(TXN_COMMIT, version),
        transactional_id="tx", group_id="g", producer_id=PID, producer_epoch=EPOCH,
        generation_id=-1, member_id="", group_instance_id=None, topics=(topic,),
    )  # fmt: skip
    return API_TABLE[TXN_COMMIT].handler(ctx, conn(), version, request)


def test_txn_offset_commit_v5_adds_its_group_first(ctx: BrokerContext) -> None:
    step = txn_commit(ctx, 5)
    assert isinstance(step, AskTxn) and step.op == AddOffsetsOp(PID, EPOCH, "g", TV_2)
    group_step = step.then(TxnResp(ErrorCode.none))  # then the group's actor is asked
    assert group_step.asks[0][1].producer_epoch == EPOCH
    fenced = step.then(TxnResp(ErrorCode.producer_fenced))
    assert fenced.topics[0].partitions[0].error_code == ErrorCode.invalid_producer_epoch


@pytest.mark.parametrize(
    ("version", "expected"),
    [(3, ErrorCode.invalid_txn_state), (4, ErrorCode.transaction_abortable)],
)
def test_an_older_txn_offset_commit_must_find_its_group_in_the_transaction(
    ctx: BrokerContext, published: Published, version: int, expected: ErrorCode
) -> None:
    published.txns["tx"] = ongoing({("t", 0)})  # no group: AddOffsetsToTxn never came
    response = txn_commit(ctx, version)
    assert response.topics[0].partitions[0].error_code == expected
    published.txns["tx"] = ongoing(set(), {"g"})
    assert txn_commit(ctx, version).asks[0][0].group_id == "g"  # on to the group


# -- AddPartitionsToTxn's broker form -------------------------------------------------------
def add_v5(ctx: BrokerContext, verify_only: bool, user: User | None = None) -> Any:
    topic = nested(ADD_PARTITIONS, 5, "AddPartitionsToTxnTopic", name="t", partitions=(0, 1))
    txn = nested(
        ADD_PARTITIONS, 5, "AddPartitionsToTxnTransaction",
        transactional_id="tx", producer_id=PID, producer_epoch=EPOCH, verify_only=verify_only,
        topics=(topic,),
    )  # fmt: skip
    request = make(request_class(ADD_PARTITIONS, 5), transactions=(txn,))
    return API_TABLE[ADD_PARTITIONS].handler(ctx, conn(user), 5, request)


def v5_codes(response: Any) -> dict[tuple[str, int], int]:
    (txn,) = response.results_by_transaction
    return {
        (t.name, p.partition_index): int(p.partition_error_code)
        for t in txn.topic_results
        for p in t.results_by_partition
    }


def test_add_partitions_v5_adds_or_verifies_and_is_for_the_cluster(
    ctx: BrokerContext, published: Published
) -> None:
    published.txns["tx"] = ongoing({("t", 0)})
    verified = add_v5(ctx, verify_only=True)
    assert v5_codes(verified) == {("t", 0): 0, ("t", 1): ErrorCode.transaction_abortable}
    step = add_v5(ctx, verify_only=False)
    assert step.op == AddPartitionsOp(PID, EPOCH, frozenset({("t", 0), ("t", 1)}), TV_2)
    assert v5_codes(step.then(TxnResp(ErrorCode.none))) == {("t", 0): 0, ("t", 1): 0}
    limited = User("u", 0, topic_prefixes=("t",))
    denied = add_v5(ctx, verify_only=True, user=limited)
    assert (denied.error_code, denied.results_by_transaction) == (
        ErrorCode.cluster_authorization_failed,
        (),
    )


# -- WriteTxnMarkers ------------------------------------------------------------------------
def markers_req(version: int, producer_epoch: int, topic: str = "t") -> Any:
    marker_topic = nested(
        WRITE_MARKERS, version, "WritableTxnMarkerTopic", name=topic, partition_indexes=(0,)
    )
    marker = nested(
        WRITE_MARKERS, version, "WritableTxnMarker",
        producer_id=PID, producer_epoch=producer_epoch, transaction_result=False,
        topics=(marker_topic,), coordinator_epoch=0,
    )  # fmt: skip
    return make(request_class(WRITE_MARKERS, version), markers=(marker,))


def marker_codes(response: Any) -> dict[tuple[int, str, int], int]:
    return {
        (m.producer_id, t.name, p.partition_index): int(p.error_code)
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    }


def test_write_txn_markers_aborts_an_open_transaction(ctx: BrokerContext) -> None:
    ctx.config = ctx.config.with_values(transaction_partition_verification_enable=False)
    assert answer(produce(ctx, 9, txn_batch())) == (ErrorCode.none, None)  # left open
    assert ctx.data.open_transactions(ctx.data.topics.by_name("t"), 0) == {PID: 0}  # type: ignore[arg-type]

    async def write(version: int, epoch: int, topic: str = "t") -> Any:
        step = API_TABLE[WRITE_MARKERS].handler(
            ctx, conn(), version, markers_req(version, epoch, topic)
        )
        assert isinstance(step, Awaited)
        return await settle(step, ctx)

    stale = trio.run(write, 1, EPOCH - 1)
    assert marker_codes(stale) == {(PID, "t", 0): ErrorCode.invalid_producer_epoch}
    done = trio.run(write, 2, EPOCH)
    assert marker_codes(done) == {(PID, "t", 0): ErrorCode.none}
    assert ctx.data.open_transactions(ctx.data.topics.by_name("t"), 0) == {}  # type: ignore[arg-type]
    gone = trio.run(write, 2, EPOCH, "nope")
    assert marker_codes(gone) == {(PID, "nope", 0): ErrorCode.unknown_topic_or_partition}


def test_write_txn_markers_is_for_users_unlimited_in_topics_and_transactional_ids(
    ctx: BrokerContext,
) -> None:
    limited = User("u", 0, transactional_id_prefixes=("mine.",))
    response = API_TABLE[WRITE_MARKERS].handler(ctx, conn(limited), 1, markers_req(1, EPOCH))
    assert marker_codes(response) == {(PID, "t", 0): ErrorCode.cluster_authorization_failed}

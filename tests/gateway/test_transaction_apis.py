"""The transaction APIs' handlers as plain functions (no socket, no registry): what KafkaApis
decides before the coordinator (tenancy, partition existence, the old versions' error code)
and the ops they ask of the transactional id's actor, in the connection's organisation."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.auth.users import User
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.apis._build import make
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.txn_steps import AskTxn
from rafka_actors.ids import TxnKey
from rafka_actors.protocol.messages import request_class
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.transaction.ops import (
    AddPartitionsOp,
    EndTxnOp,
    InitProducerIdOp,
    InitProducerIdResp,
    TxnResp,
)

INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, FIND_COORDINATOR = 22, 24, 25, 26, 10
ORG = 7
RESTRICTED = User("u", ORG, transactional_id_prefixes=("mine.",))


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("out", 2, org_id=ORG)
    yield BrokerContext(BrokerConfig(data_dir=tmp_path), data, "127.0.0.1", 9092, API_TABLE)
    data.close()


def conn(user: User | None = None) -> ConnectionInfo:
    return ConnectionInfo("10.0.0.7", 4242, org_id=ORG, user=user)


def init(txn_id: str | None, version: int = 4, pid: int = -1, epoch: int = -1) -> Any:
    values: dict[str, Any] = {
        "transactional_id": txn_id,
        "transaction_timeout": datetime.timedelta(milliseconds=30_000),
    }
    if version >= 3:
        values |= {"producer_id": pid, "producer_epoch": epoch}
    return make(request_class(INIT, version), **values)


def add_partitions(txn_id: str, partitions: dict[str, list[int]], version: int = 3) -> Any:
    cls = request_class(ADD_PARTITIONS, version)
    topic_cls = sys.modules[cls.__module__].AddPartitionsToTxnTopic
    return make(
        cls,
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=1000,
        v3_and_below_producer_epoch=2,
        v3_and_below_topics=tuple(
            make(topic_cls, name=name, partitions=tuple(parts))
            for name, parts in partitions.items()
        ),
    )


def codes(response: Any) -> dict[tuple[str, int], int]:
    return {
        (topic.name, p.partition_index): p.partition_error_code
        for topic in response.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


def test_init_producer_id_asks_the_actor_of_the_id_in_the_connections_org(
    ctx: BrokerContext,
) -> None:
    step = API_TABLE[INIT].handler(ctx, conn(), 4, init("copier", pid=1000, epoch=3))
    assert isinstance(step, AskTxn)
    assert step.key == TxnKey(ORG, "copier")
    assert step.op == InitProducerIdOp(30_000, 1000, 3)
    response = step.then(InitProducerIdResp(ErrorCode.none, 1000, 4))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (0, 1000, 4)


def test_old_versions_get_invalid_producer_epoch_for_a_fenced_producer(ctx: BrokerContext) -> None:
    fenced = InitProducerIdResp(ErrorCode.producer_fenced)
    for version, expected in (
        (3, ErrorCode.invalid_producer_epoch),
        (4, ErrorCode.producer_fenced),
    ):
        step = API_TABLE[INIT].handler(ctx, conn(), version, init("copier", version))
        assert step.then(fenced).error_code == expected
    for version, expected in (
        (1, ErrorCode.invalid_producer_epoch),
        (2, ErrorCode.producer_fenced),
    ):
        request = make(
            request_class(END_TXN, version),
            transactional_id="copier",
            producer_id=1000,
            producer_epoch=2,
            committed=True,
        )
        step = API_TABLE[END_TXN].handler(ctx, conn(), version, request)
        assert step.op == EndTxnOp(1000, 2, True)
        assert step.then(TxnResp(ErrorCode.producer_fenced)).error_code == expected


def test_an_empty_id_or_half_a_producer_id_is_an_invalid_request(ctx: BrokerContext) -> None:
    for request in (init(""), init("copier", pid=1000, epoch=-1)):
        response = API_TABLE[INIT].handler(ctx, conn(), 4, request)
        assert response.error_code == ErrorCode.invalid_request


def test_ids_beyond_the_users_prefixes_are_refused_everywhere(ctx: BrokerContext) -> None:
    denied = ErrorCode.transactional_id_authorization_failed
    response = API_TABLE[INIT].handler(ctx, conn(RESTRICTED), 4, init("theirs.x"))
    assert response.error_code == denied
    assert isinstance(API_TABLE[INIT].handler(ctx, conn(RESTRICTED), 4, init("mine.x")), AskTxn)
    response = API_TABLE[ADD_PARTITIONS].handler(
        ctx, conn(RESTRICTED), 3, add_partitions("theirs.x", {"out": [0]})
    )
    assert codes(response) == {("out", 0): denied}
    request = make(
        request_class(END_TXN, 3),
        transactional_id="theirs.x",
        producer_id=1,
        producer_epoch=0,
        committed=False,
    )
    assert API_TABLE[END_TXN].handler(ctx, conn(RESTRICTED), 3, request).error_code == denied
    request = make(
        request_class(ADD_OFFSETS, 3),
        transactional_id="theirs.x",
        producer_id=1,
        producer_epoch=0,
        group_id="g",
    )
    assert API_TABLE[ADD_OFFSETS].handler(ctx, conn(RESTRICTED), 3, request).error_code == denied
    find = make(request_class(FIND_COORDINATOR, 4), key_type=1, coordinator_keys=("theirs.x",))
    [coordinator] = API_TABLE[FIND_COORDINATOR].handler(ctx, conn(RESTRICTED), 4, find).coordinators
    assert (coordinator.error_code, coordinator.node_id) == (denied, -1)


def test_unknown_partitions_add_none_and_the_others_are_not_attempted(ctx: BrokerContext) -> None:
    request = add_partitions("copier", {"out": [0, 1, 5], "missing": [0]})
    response = API_TABLE[ADD_PARTITIONS].handler(ctx, conn(), 3, request)
    assert codes(response) == {
        ("out", 0): ErrorCode.operation_not_attempted,
        ("out", 1): ErrorCode.operation_not_attempted,
        ("out", 5): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    step = API_TABLE[ADD_PARTITIONS].handler(
        ctx, conn(), 3, add_partitions("copier", {"out": [0, 1]})
    )
    assert isinstance(step, AskTxn)
    assert step.op == AddPartitionsOp(1000, 2, frozenset({("out", 0), ("out", 1)}))
    assert codes(step.then(TxnResp(ErrorCode.concurrent_transactions))) == {
        ("out", 0): ErrorCode.concurrent_transactions,
        ("out", 1): ErrorCode.concurrent_transactions,
    }

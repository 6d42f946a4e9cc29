"""Transactional offsets in the real broker (issue 43 §2): a TxnOffsetCommit that was answered
is durable across a SIGKILL of the broker: after the restart its offset is still pending (not
committed, UNSTABLE_OFFSET_COMMIT to a fetch that requires stable offsets) and the producer's
epoch still fences an older one."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v3 import request as txn
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32, i64

from rafka_actors.admin import calls
from rafka_actors.admin.client import KafkaClient

from ..broker_process import BrokerProcess
from .clients import Confluent

pytestmark = pytest.mark.e2e

GROUP, TOPIC = "eos", "input"
PARTITIONS = [(TOPIC, 0), (TOPIC, 1)]


def txn_commit(client: KafkaClient, epoch: int, offset: int) -> list[int]:
    """TxnOffsetCommit v3 (librdkafka's and kafka-python's) of partition 0, by no member."""
    partition = txn.TxnOffsetCommitRequestPartition(
        partition_index=i32(0),
        committed_offset=i64(offset),
        committed_leader_epoch=i32(-1),
        committed_metadata=None,
    )
    request = txn.TxnOffsetCommitRequest(
        transactional_id=TransactionalId("tx"),
        group_id=GroupId(GROUP),
        producer_id=ProducerId(77),
        producer_epoch=i16(epoch),
        generation_id=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=(txn.TxnOffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=(partition,)),),
    )
    (topic,) = client.call(request).topics
    return [int(p.error_code) for p in topic.partitions]


def test_a_pending_transactional_offset_survives_a_sigkill(
    broker_factory: type[BrokerProcess],
) -> None:
    broker = broker_factory()
    Confluent(broker.bootstrap).create_topic(TOPIC, 2)
    with KafkaClient(broker.bootstrap) as client:
        assert txn_commit(client, epoch=3, offset=7) == [ErrorCode.none]
        assert calls.pending_transactional(client, GROUP, PARTITIONS) == {(TOPIC, 0)}
        assert calls.committed_offsets(client, GROUP) == {}
    broker.kill()

    restarted = broker_factory()  # the same data directory
    with KafkaClient(restarted.bootstrap) as client:
        assert calls.pending_transactional(client, GROUP, PARTITIONS) == {(TOPIC, 0)}
        assert calls.committed_offsets(client, GROUP) == {}
        assert txn_commit(client, epoch=2, offset=8) == [ErrorCode.invalid_producer_epoch]
        assert txn_commit(client, epoch=3, offset=9) == [ErrorCode.none]

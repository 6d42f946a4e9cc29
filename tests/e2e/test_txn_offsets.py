"""Transactional offsets in the real broker (issue 43 §2).

* A TxnOffsetCommit that was answered is durable across a SIGKILL of the broker: after the
  restart its offset is still pending (not committed, UNSTABLE_OFFSET_COMMIT to a fetch that
  requires stable offsets) and the producer's epoch still fences an older one.
* Groups and transactions together, with confluent-kafka (issue 43's acceptance): a consumer
  group rebalance during a transaction makes the old member's TxnOffsetCommit fail with
  ILLEGAL_GENERATION, an abortable error; after the abort, a transaction that sends the
  current member's offsets commits them with the transaction's marker.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
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
WAIT = 20.0
# The raw TxnOffsetCommits below belong to no transaction the coordinator knows: with Kafka's
# default verification (KIP-890) they would be refused before the group sees them, so the
# broker that tests the group's side of them runs without it, as Kafka would have to.
UNVERIFIED = "transaction.partition.verification.enable=false"


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
    broker = broker_factory(UNVERIFIED)
    Confluent(broker.bootstrap).create_topic(TOPIC, 2)
    with KafkaClient(broker.bootstrap) as client:
        assert txn_commit(client, epoch=3, offset=7) == [ErrorCode.none]
        assert calls.pending_transactional(client, GROUP, PARTITIONS) == {(TOPIC, 0)}
        assert calls.committed_offsets(client, GROUP) == {}
    broker.kill()

    restarted = broker_factory(UNVERIFIED)  # the same data directory
    with KafkaClient(restarted.bootstrap) as client:
        assert calls.pending_transactional(client, GROUP, PARTITIONS) == {(TOPIC, 0)}
        assert calls.committed_offsets(client, GROUP) == {}
        assert txn_commit(client, epoch=2, offset=8) == [ErrorCode.invalid_producer_epoch]
        assert txn_commit(client, epoch=3, offset=9) == [ErrorCode.none]


def _member(broker: BrokerProcess, group: str, topic: str) -> Any:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe([topic])
    return consumer


def _poll_until(consumers: list[Any], done: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not done():
        assert time.monotonic() < deadline, "the group did not settle"
        for consumer in consumers:
            consumer.poll(0.05)


def test_a_rebalance_during_a_transaction_fails_the_old_members_offsets(
    broker_factory: type[BrokerProcess],
) -> None:
    broker = broker_factory(
        "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"
    )
    topic, group = f"in-{uuid.uuid4().hex[:6]}", f"eos-{uuid.uuid4().hex[:6]}"
    Confluent(broker.bootstrap).create_topic(topic, 2)
    first = _member(broker, group, topic)
    _poll_until([first], lambda: len(first.assignment()) == 2)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{group}"}
    )
    producer.init_transactions(WAIT)
    producer.begin_transaction()
    stale = first.consumer_group_metadata()  # generation 1
    second = _member(broker, group, topic)
    _poll_until(
        [first, second], lambda: len(first.assignment()) == 1 and len(second.assignment()) == 1
    )
    with pytest.raises(KafkaException) as failure:
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 3)], stale, WAIT)
    error = failure.value.args[0]
    assert error.code() == KafkaError.ILLEGAL_GENERATION, error
    assert error.txn_requires_abort() and not error.fatal()
    producer.abort_transaction(WAIT)

    (mine,) = first.assignment()
    producer.begin_transaction()
    offsets = [TopicPartition(topic, mine.partition, 5)]
    producer.send_offsets_to_transaction(offsets, first.consumer_group_metadata(), WAIT)
    producer.commit_transaction(WAIT)
    (committed,) = first.committed([TopicPartition(topic, mine.partition)], WAIT)
    assert committed.offset == 5  # merged by the commit marker (require_stable sees it)
    for consumer in (first, second):
        consumer.close()

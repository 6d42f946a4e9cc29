"""A consume-transform-produce application, run as its own process so a test can SIGKILL it:
it copies every record of an input topic to an output topic in transactions, each carrying the
consumed offsets (`send_offsets_to_transaction`), with confluent-kafka, kafka-python or
aiokafka, until the group's committed offsets reach the input's end offsets; then it exits 0.

    python -m tests.e2e.txn_copier CLIENT BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID

The record's value is copied unchanged, so the test can check that every input record is in
the output exactly once. A transaction that fails with an abortable error is aborted and the
consumer rewound to its committed offsets; any other failure ends the process non-zero (the
test restarts it, as a supervisor would).
"""

from __future__ import annotations

import asyncio
import sys
import time

BATCH = 50
POLL_S = 0.5
# Each transactional call gives up after this long; the copier then exits non-zero and the test
# starts it again.
CALL_TIMEOUT_S = 15
# librdkafka 2.16 re-bootstraps (KIP-899) when every broker is down, as the only broker is
# while it restarts; after that its send_offsets_to_transaction was seen waiting forever once
# its AddOffsetsToTxn had succeeded, never sending the TxnOffsetCommit (past its timeout). With
# re-bootstrap off (it re-resolves the bootstrap list only, the same single address here) the
# copier carries on through the restart.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}
# A killed copier's member leaves the group when its session runs out; a short session keeps
# the restarted copier's wait short (the test's broker allows 1 s sessions).
SESSION_MS, HEARTBEAT_MS = 1000, 250


def confluent_copier(bootstrap: str, source: str, sink: str, group: str, txn_id: str) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": SESSION_MS,
            **NO_REBOOTSTRAP,
            "heartbeat.interval.ms": HEARTBEAT_MS,
        }
    )
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
        | NO_REBOOTSTRAP
    )
    producer.init_transactions(CALL_TIMEOUT_S)
    consumer.subscribe([source])
    while True:
        records = [m for m in consumer.consume(BATCH, POLL_S) if not m.error()]
        if not records:
            if _confluent_done(consumer, source):
                return
            continue
        producer.begin_transaction()
        try:
            for m in records:
                producer.produce(sink, m.value(), m.key(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                CALL_TIMEOUT_S,
            )
            producer.commit_transaction(CALL_TIMEOUT_S)
        except confluent_kafka.KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(CALL_TIMEOUT_S)
            for tp in consumer.committed(consumer.assignment(), CALL_TIMEOUT_S):
                consumer.seek(
                    tp
                    if tp.offset >= 0
                    else confluent_kafka.TopicPartition(
                        tp.topic, tp.partition, confluent_kafka.OFFSET_BEGINNING
                    )
                )


def _confluent_done(consumer: object, source: str) -> bool:
    import confluent_kafka

    assignment = consumer.assignment()  # type: ignore[attr-defined]
    if len(assignment) < 3:
        return False
    committed = consumer.committed(assignment, 30)  # type: ignore[attr-defined]
    for tp in committed:
        _, high = consumer.get_watermark_offsets(  # type: ignore[attr-defined]
            confluent_kafka.TopicPartition(source, tp.partition), 30
        )
        if tp.offset != high:
            return False
    return True


def kafka_python_copier(bootstrap: str, source: str, sink: str, group: str, txn_id: str) -> None:
    import kafka
    from kafka.structs import OffsetAndMetadata

    consumer = kafka.KafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    producer.init_transactions()
    while True:
        polled = consumer.poll(timeout_ms=int(POLL_S * 1000), max_records=BATCH)
        if not polled:
            assignment = consumer.assignment()
            if len(assignment) == 3:
                ends = consumer.end_offsets(list(assignment))
                if all(consumer.committed(tp) == ends[tp] for tp in assignment):
                    return
            continue
        producer.begin_transaction()
        for tp, records in polled.items():
            for r in records:
                producer.send(sink, r.value, r.key, partition=tp.partition)
        offsets = {
            tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in consumer.assignment()
        }
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()


def aiokafka_copier(bootstrap: str, source: str, sink: str, group: str, txn_id: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await producer.start()
        await consumer.start()
        try:
            while True:
                polled = await consumer.getmany(timeout_ms=int(POLL_S * 1000), max_records=BATCH)
                if not polled:
                    assignment = consumer.assignment()
                    if len(assignment) == 3:
                        ends = await consumer.end_offsets(list(assignment))
                        committed = [await consumer.committed(tp) for tp in assignment]
                        if committed == [ends[tp] for tp in assignment]:
                            return
                    continue
                async with producer.transaction():
                    for tp, records in polled.items():
                        for r in records:
                            await producer.send(sink, r.value, r.key, partition=tp.partition)
                    offsets = {tp: await consumer.position(tp) for tp in consumer.assignment()}
                    await producer.send_offsets_to_transaction(offsets, group)
        finally:
            await consumer.stop()
            await producer.stop()

    asyncio.run(run())


COPIERS = {
    "confluent": confluent_copier,
    "kafka-python": kafka_python_copier,
    "aiokafka": aiokafka_copier,
}

if __name__ == "__main__":
    client, bootstrap, source, sink, group, txn_id = sys.argv[1:7]
    started = time.monotonic()
    COPIERS[client](bootstrap, source, sink, group, txn_id)
    print(f"copied in {time.monotonic() - started:.1f}s", file=sys.stderr)

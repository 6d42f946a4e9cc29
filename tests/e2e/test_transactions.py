"""The transaction coordinator end to end: the real broker, driven by confluent-kafka,
kafka-python and aiokafka transactional producers, and by `rafka-actors transactions`.

One broker for the module, with `transaction.max.timeout.ms` at 60 s so a producer asking more
is refused. Each test uses its own transactional ids.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator

import confluent_kafka
import kafka
import pytest
from aiokafka import AIOKafkaProducer

from ..broker_process import BrokerProcess

MAX_TIMEOUT_MS = 60_000
WAIT = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("txn") / "data",
        f"transaction.max.timeout.ms={MAX_TIMEOUT_MS}",
        "group.initial.rebalance.delay.ms=0",
    ).start()
    yield process
    if process.alive():
        process.kill()


def confluent_producer(
    broker: BrokerProcess, txn_id: str, **extra: object
) -> confluent_kafka.Producer:
    return confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, **extra}
    )


def cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rafka_actors",
            "transactions",
            *args,
            "--bootstrap",
            broker.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )


def described(broker: BrokerProcess, txn_id: str) -> dict[str, object]:
    done = cli(broker, "describe", txn_id, "--output", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    first = confluent_producer(broker, "fence-me")
    first.init_transactions(WAIT)
    second = confluent_producer(broker, "fence-me")
    second.init_transactions(WAIT)
    assert described(broker, "fence-me")["producer_epoch"] == 1

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    first.begin_transaction()
    with pytest.raises(confluent_kafka.KafkaException) as failure:
        first.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition("in", 0, 1)], consumer.consumer_group_metadata(), WAIT
        )
    error = failure.value.args[0]
    assert error.fatal() and error.code() == confluent_kafka.KafkaError._FENCED
    consumer.close()


def test_a_timeout_beyond_the_brokers_maximum_is_refused(broker: BrokerProcess) -> None:
    producer = confluent_producer(
        broker, "too-long", **{"transaction.timeout.ms": MAX_TIMEOUT_MS + 1}
    )
    with pytest.raises(confluent_kafka.KafkaException) as failure:
        producer.init_transactions(WAIT)
    assert failure.value.args[0].code() == confluent_kafka.KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_every_client_initialises_and_the_cli_lists_them(broker: BrokerProcess) -> None:
    confluent_producer(broker, "list-confluent").init_transactions(WAIT)
    producer = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id="list-kafka-python"
    )
    producer.init_transactions()
    producer.close()

    async def aiokafka_init() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id="list-aiokafka"
        )
        await producer.start()
        await producer.stop()

    asyncio.run(aiokafka_init())

    done = cli(broker, "list", "--output", "json")
    assert done.returncode == 0, done.stderr
    listed = {t["transactional_id"]: t for t in json.loads(done.stdout)}
    for txn_id in ("list-confluent", "list-kafka-python", "list-aiokafka"):
        assert listed[txn_id]["state"] == "Empty"
    ids = {
        listed[t]["producer_id"] for t in ("list-confluent", "list-kafka-python", "list-aiokafka")
    }
    assert len(ids) == 3  # one producer id each
    missing = cli(broker, "describe", "nobody")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    nothing_open = cli(broker, "abort", "list-confluent")
    assert nothing_open.returncode == 1 and "no open transaction" in nothing_open.stderr

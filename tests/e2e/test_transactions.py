"""The transaction coordinator end to end: the real broker, driven by confluent-kafka,
kafka-python and aiokafka transactional producers, and by `rafka-actors transactions`.

One broker for the module, with `transaction.max.timeout.ms` at 60 s so a producer asking more
is refused. Each test uses its own transactional ids.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import time
from collections.abc import Iterator

import confluent_kafka
import confluent_kafka.admin
import kafka
import kafka.errors
import pytest
from aiokafka import AIOKafkaProducer
from kio.schema.errors import ErrorCode

from rafka_actors.admin.client import BrokerError, KafkaClient
from rafka_actors.admin.transactions import describe_transaction, list_transactions

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
    """DescribeTransactions, through the CLI's own call (in this process: no start-up)."""
    with KafkaClient(broker.bootstrap, WAIT) as client:
        return dataclasses.asdict(describe_transaction(client, txn_id))


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


# -- transactions with records: the data plane and the group coordinator take part ----------


def create_topic(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([confluent_kafka.admin.NewTopic(topic, partitions, 1)])
    futures[topic].result(timeout=WAIT)


def read(broker: BrokerProcess, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Everything up to the end of each partition, as a consumer with `isolation` sees it."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + WAIT
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.2):
                if msg.error():
                    if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise AssertionError(msg.error())
                values.append(msg.value())
    finally:
        consumer.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return values


def wait_for_state(broker: BrokerProcess, txn_id: str, state: str) -> dict[str, object]:
    deadline = time.monotonic() + WAIT
    while True:
        description = described(broker, txn_id)
        if description["state"] == state or time.monotonic() > deadline:
            assert description["state"] == state, description
            return description
        time.sleep(0.2)


def test_a_transaction_left_open_past_its_timeout_is_aborted_and_its_producer_fenced(
    broker: BrokerProcess,
) -> None:
    create_topic(broker, "late", 1)
    producer = confluent_producer(broker, "late", **{"transaction.timeout.ms": 1000})
    producer.init_transactions(WAIT)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "late-copier",
            "enable.auto.commit": False,
        }
    )
    producer.begin_transaction()
    producer.produce("late", b"never")
    producer.flush(WAIT)
    offsets = [confluent_kafka.TopicPartition("late", 0, 1)]
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), WAIT)
    assert described(broker, "late")["state"] == "Ongoing"
    aborted = wait_for_state(broker, "late", "CompleteAbort")
    assert aborted["producer_epoch"] == 1  # bumped: the producer is fenced
    with pytest.raises(confluent_kafka.KafkaException) as failure:
        producer.commit_transaction(WAIT)
    assert failure.value.args[0].fatal()
    assert read(broker, "late", 1, "read_committed") == []
    # The abort's marker, at the bumped epoch, discarded the group's pending offset: a fetch
    # with require_stable (librdkafka's) finds none, where a pending one would be unstable.
    [committed] = consumer.committed([confluent_kafka.TopicPartition("late", 0)], WAIT)
    assert committed.offset == confluent_kafka.OFFSET_INVALID
    consumer.close()


def test_offsets_sent_to_a_transaction_are_committed_with_it(broker: BrokerProcess) -> None:
    create_topic(broker, "source", 1)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "copier", "enable.auto.commit": False}
    )
    producer = confluent_producer(broker, "copier-1")
    producer.init_transactions(WAIT)
    metadata = consumer.consumer_group_metadata()
    for end, commit in ((5, True), (9, False)):
        producer.begin_transaction()  # offsets only: the group's marker is the whole transaction
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition("source", 0, end)], metadata, WAIT
        )
        if commit:
            producer.commit_transaction(WAIT)
        else:
            producer.abort_transaction(WAIT)
    [committed] = consumer.committed([confluent_kafka.TopicPartition("source", 0)], WAIT)
    assert committed.offset == 5  # the aborted transaction's offset 9 was discarded
    consumer.close()


def test_the_cli_aborts_an_open_transaction_and_fences_its_producer(broker: BrokerProcess) -> None:
    create_topic(broker, "stuck", 1)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="stuck")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("stuck", b"held").get(timeout=WAIT)
    with KafkaClient(broker.bootstrap, WAIT) as client:
        listed = {t.transactional_id: t.state for t in list_transactions(client, [])}
    assert listed["stuck"] == "Ongoing"
    with KafkaClient(broker.bootstrap, WAIT) as client, pytest.raises(BrokerError) as missing:
        describe_transaction(client, "nobody")
    assert missing.value.code == ErrorCode.transactional_id_not_found
    done = cli(broker, "abort", "stuck")
    assert done.returncode == 0, done.stderr
    after = described(broker, "stuck")
    # fenced, aborted, then initialised again by the CLI's InitProducerId (Kafka's
    # force-terminate): an epoch for the abort, one for the CLI
    assert (after["state"], after["producer_epoch"]) == ("Empty", 2)
    with pytest.raises(kafka.errors.KafkaError):
        producer.commit_transaction()
    producer.close(timeout=1)
    assert read(broker, "stuck", 1, "read_committed") == []


def test_kafka_python_and_aiokafka_commit_and_abort(broker: BrokerProcess) -> None:
    """Visibility: an aborted transaction's records are seen by read_uncommitted only."""
    create_topic(broker, "py-clients", 1)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp")
    producer.init_transactions()
    for value, commit in ((b"kp-kept", True), (b"kp-dropped", False)):
        producer.begin_transaction()
        producer.send("py-clients", value).get(timeout=WAIT)  # sent before the abort
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()

    async def aiokafka_transactions() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="ak")
        await producer.start()
        try:
            for value, commit in ((b"ak-kept", True), (b"ak-dropped", False)):
                await producer.begin_transaction()
                await producer.send_and_wait("py-clients", value)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aiokafka_transactions())
    assert sorted(read(broker, "py-clients", 1, "read_committed")) == [b"ak-kept", b"kp-kept"]
    assert len(read(broker, "py-clients", 1, "read_uncommitted")) == 4


def test_a_rebalance_during_a_transaction_refuses_the_old_members_offsets(
    broker: BrokerProcess,
) -> None:
    create_topic(broker, "rebalanced", 2)

    def member() -> confluent_kafka.Consumer:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "rebalanced",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["rebalanced"])
        return consumer

    def poll_until(consumers: list[confluent_kafka.Consumer], assigned: int) -> None:
        deadline = time.monotonic() + WAIT
        while sum(len(c.assignment()) for c in consumers) != assigned or any(
            not c.assignment() for c in consumers
        ):
            assert time.monotonic() < deadline, "the group did not settle"
            for consumer in consumers:
                consumer.poll(0.1)

    first = member()
    poll_until([first], 2)
    stale = first.consumer_group_metadata()  # generation 1
    second = member()
    poll_until([first, second], 2)  # generation 2: the partitions are split

    producer = confluent_producer(broker, "rebalanced")
    producer.init_transactions(WAIT)
    producer.begin_transaction()
    with pytest.raises(confluent_kafka.KafkaException) as failure:
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition("rebalanced", 0, 1)], stale, WAIT
        )
    assert failure.value.args[0].code() == confluent_kafka.KafkaError.ILLEGAL_GENERATION
    producer.abort_transaction(WAIT)
    # the current generation's metadata is accepted
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [confluent_kafka.TopicPartition("rebalanced", 0, 1)],
        first.consumer_group_metadata(),
        WAIT,
    )
    producer.commit_transaction(WAIT)
    for consumer in (first, second):
        consumer.close()


def test_the_cli_shows_the_coordinator_with_the_other_tools_headers(broker: BrokerProcess) -> None:
    """Issue 51: CamelCase headers, unlike every other tool, and no coordinator column,
    which kafka-transactions.sh prints (first in `describe`, second in `list`)."""
    producer = confluent_producer(broker, "listed")
    producer.init_transactions(WAIT)
    done = cli(broker, "list")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE"]
    (row,) = [r.split() for r in rows if r.split()[0] == "listed"]
    assert (row[1], row[3]) == ("0", "Empty")  # node.id 0 coordinates every id here
    done = cli(broker, "describe", "listed")
    assert done.returncode == 0, done.stderr
    header, row_text = done.stdout.splitlines()
    assert header.split() == [
        "COORDINATOR",
        "TRANSACTIONAL-ID",
        "PRODUCER-ID",
        "PRODUCER-EPOCH",
        "TRANSACTION-STATE",
        "TRANSACTION-TIMEOUT-MS",
        "CURRENT-TRANSACTION-START-TIME-MS",
        "TRANSACTION-DURATION-MS",
        "TOPIC-PARTITIONS",
    ]
    assert row_text.split()[:2] == ["0", "listed"]
    assert described(broker, "listed")["coordinator"] == 0

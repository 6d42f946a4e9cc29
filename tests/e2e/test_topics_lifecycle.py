"""Groups through the cluster's life (issue 45 §2-§5), with confluent-kafka's AdminClient and
real consumers:

* a group config set with incremental_alter_configs reaches the live group at its next
  heartbeat (its heartbeat interval and its session timeout), and describe_configs shows it;
* topic configs are checked as Kafka checks them and shown with their sources;
* create_partitions: a KIP-848 group's members get the new partitions, and so do a classic
  group's after their rejoin;
* a deleted and re-created topic starts with no committed offsets;
* retention deletes old segments; a consumer whose committed offset fell below the log start
  resets and carries on; `groups offsets` counts the lag from the log start;
* delete_records moves the log start, which survives a SIGKILL.

One broker for the module, with short retention checks and short group timers.
"""

from __future__ import annotations

import datetime
import gc
import json
import logging
import signal
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka.admin
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kio.schema.consumer_group_heartbeat.v1.request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse

from rafka_actors.cli import main

from ..broker_process import BrokerProcess
from ..wire import parse_response, request_frame

# one worker under pytest-xdist: the module shares one broker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("topics-lifecycle")]

WAIT = 20.0
SETTINGS = (
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=100",
    "group.consumer.min.session.timeout.ms=1000",
    "group.consumer.assignment.interval.ms=200",
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=1000",
    "log.retention.check.interval.ms=200",
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("topics") / "data", *SETTINGS).start()
    yield process
    if process.alive():
        process.kill()


_ADMINS: dict[str, AdminClient] = {}


def _admin(broker: BrokerProcess) -> AdminClient:
    """One AdminClient per broker address, kept: a client dropped before its futures resolve
    fails them (Broker handle destroyed)."""
    if broker.bootstrap not in _ADMINS:
        _ADMINS[broker.bootstrap] = AdminClient({"bootstrap.servers": broker.bootstrap})
    return _ADMINS[broker.bootstrap]


def _names(tag: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"{tag}-{suffix}", f"group-{tag}-{suffix}"


def _create(broker: BrokerProcess, topic: str, partitions: int, **configs: str) -> None:
    new = NewTopic(
        topic, partitions, 1, config={k.replace("_", "."): v for k, v in configs.items()}
    )
    _admin(broker).create_topics([new])[topic].result(WAIT)


def _produce(broker: BrokerProcess, topic: str, count: int, partition: int = 0) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"record-%d" % i, partition=partition)
        producer.flush(WAIT)  # one batch per record: small segments fill quickly
    assert producer.flush(WAIT) == 0


def _alter(broker: BrokerProcess, kind: ResourceType, name: str, **values: str) -> None:
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in values.items()
    ]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    for future in _admin(broker).incremental_alter_configs([resource]).values():
        future.result(WAIT)


def _described(broker: BrokerProcess, kind: ResourceType, name: str) -> dict[str, Any]:
    (future,) = _admin(broker).describe_configs([ConfigResource(kind, name)]).values()
    return dict(future.result(WAIT))


def _wait_until(predicate: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _watermarks(broker: BrokerProcess, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), WAIT)
        return low, high
    finally:
        consumer.close()


# -- group configs ----------------------------------------------------------------------------
class RawMember:
    """A KIP-848 member speaking ConsumerGroupHeartbeat itself, so the test decides when it
    stops heartbeating (a real consumer would leave the group on close)."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=WAIT)
        self.group, self.topic = group, topic
        self.member_id, self.epoch = str(uuid.uuid4()), 0
        self.owned: tuple[TopicPartitions, ...] = ()
        self.correlation = 0

    def heartbeat(self) -> ConsumerGroupHeartbeatResponse:
        joining = self.epoch == 0
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group,  # type: ignore[arg-type]
            member_id=self.member_id,
            member_epoch=self.epoch,  # type: ignore[arg-type]
            rebalance_timeout=datetime.timedelta(milliseconds=30_000 if joining else -1),  # type: ignore[arg-type]
            subscribed_topic_names=(self.topic,) if joining else None,  # type: ignore[arg-type]
            topic_partitions=self.owned,
        )
        self.correlation += 1
        self.sock.sendall(request_frame(request, self.correlation))
        (size,) = struct.unpack(">i", self._read(4))
        _, response = parse_response(self._read(size), ConsumerGroupHeartbeatResponse, 1)
        assert response.error_code == 0, response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.owned = tuple(
                TopicPartitions(topic_id=t.topic_id, partitions=t.partitions)
                for t in response.assignment.topic_partitions
            )
        return response

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def interval_ms(self) -> int:
        return int(self.heartbeat().heartbeat_interval.total_seconds() * 1000)

    def close(self) -> None:
        self.sock.close()


def _members(broker: BrokerProcess, group: str) -> int:
    (future,) = _admin(broker).describe_consumer_groups([group]).values()
    return len(future.result(WAIT).members)


def test_group_config_reaches_the_live_group_at_its_next_heartbeat(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = _names("gcfg")
    _create(broker, topic, 2)
    member = RawMember(broker, group, topic)
    try:
        # settled: owns its target, joined longer ago than the steady interval
        _wait_until(lambda: member.interval_ms() == 500 and member.owned, "a settled member")
        time.sleep(0.8)
        assert member.interval_ms() == 500
        assert _members(broker, group) == 1

        _alter(
            broker,
            ResourceType.GROUP,
            group,
            consumer_session_timeout_ms="2000",
            consumer_heartbeat_interval_ms="700",
        )
        assert member.interval_ms() == 700  # the very next heartbeat

        configs = _described(broker, ResourceType.GROUP, group)
        session = configs["consumer.session.timeout.ms"]
        assert (session.value, session.source) == ("2000", ConfigSource.GROUP_CONFIG.value)
        assert configs["consumer.heartbeat.interval.ms"].value == "700"
        # The member stops heartbeating: fenced after the group's 2 s session, not the
        # broker's 45 s.
    finally:
        member.close()
    _wait_until(lambda: _members(broker, group) == 0, "the member fenced by its group session")
    described = json.loads(_cli(capsys, broker, "groups", "describe", group, "--output", "json"))
    assert described["dynamic_configs"] == {
        "consumer.heartbeat.interval.ms": "700",
        "consumer.session.timeout.ms": "2000",
    }
    assert "DYNAMIC-CONFIG" in _cli(capsys, broker, "groups", "describe", group)


def test_group_config_refusals_are_kafkas(broker: BrokerProcess) -> None:
    _topic, group = _names("gbad")
    for values, message in (
        ({"consumer_session_timeout_ms": "500"}, "must be greater than or equal to"),
        ({"consumer_heartbeat_interval_ms": "50000"}, "must be less than or equal to"),
        # served since issue 54, with the broker's bounds (group.share.min.*: 15000)
        ({"share_record_lock_duration_ms": "5000"}, "must be greater than or equal to"),
        ({"session_timeout_ms": "5000"}, "Unknown group config name"),
    ):
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            _alter(broker, ResourceType.GROUP, group, **values)
        error = refused.value.args[0]
        assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
        assert message in error.str()
    default = _described(broker, ResourceType.GROUP, group)["consumer.session.timeout.ms"]
    assert (default.value, default.source) == ("45000", ConfigSource.DEFAULT_CONFIG.value)


def test_topic_configs_with_their_sources(broker: BrokerProcess) -> None:
    topic, _group = _names("tcfg")
    _create(broker, topic, 1, segment_bytes="2097152")
    configs = _described(broker, ResourceType.TOPIC, topic)
    assert (configs["segment.bytes"].value, configs["segment.bytes"].source) == (
        "2097152",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    _alter(broker, ResourceType.TOPIC, topic, retention_bytes="100000")
    assert _described(broker, ResourceType.TOPIC, topic)["retention.bytes"].value == "100000"
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        _alter(broker, ResourceType.TOPIC, topic, cleanup_policy="compacted")
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    # kafka-python's admin: AlterConfigs (the legacy API, which replaces the topic's configs)
    legacy = kafka.admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resource = kafka.admin.ConfigResource(
            kafka.admin.ConfigResourceType.TOPIC, topic, configs={"retention.ms": "90000"}
        )
        assert legacy.alter_configs([resource], incremental=False) == {"topic": {topic: "OK"}}
        wanted = kafka.admin.ConfigResource(kafka.admin.ConfigResourceType.TOPIC, topic)
        described = legacy.describe_configs([wanted], config_filter="dynamic")["topic"][topic]
        assert described["retention.ms"]["value"] == "90000"
        assert described["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    finally:
        legacy.close()
    # (kafka-python re-sends the topic's other configs, so that the replacement keeps them)
    assert _described(broker, ResourceType.TOPIC, topic)["segment.bytes"].value == "2097152"
    broker_configs = _described(broker, ResourceType.BROKER, "0")
    retention_check = broker_configs["log.retention.check.interval.ms"]
    assert retention_check.value == "200"
    assert retention_check.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert retention_check.is_read_only


# -- new partitions ---------------------------------------------------------------------------
def _consumer(broker: BrokerProcess, group: str, topic: str, protocol: str) -> Any:
    config: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config |= {
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 500,
        }
    consumer = confluent_kafka.Consumer(config)
    consumer.subscribe([topic])
    return consumer


def _assigned(consumers: list[Any]) -> list[set[int]]:
    for consumer in consumers:
        consumer.poll(0.1)
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def test_create_partitions_reach_consumer_and_classic_groups(broker: BrokerProcess) -> None:
    topic, group = _names("grow")
    _create(broker, topic, 2)
    consumers = [
        _consumer(broker, group + "-848", topic, "consumer"),
        _consumer(broker, group + "-classic", topic, "classic"),
    ]
    try:
        _wait_until(lambda: _assigned(consumers) == [{0, 1}, {0, 1}], "both groups on 2")
        futures = _admin(broker).create_partitions([NewPartitions(topic, 4)])
        futures[topic].result(WAIT)
        _wait_until(
            lambda: _assigned(consumers) == [{0, 1, 2, 3}, {0, 1, 2, 3}], "both groups on 4"
        )
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            _admin(broker).create_partitions([NewPartitions(topic, 3)])[topic].result(WAIT)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    finally:
        for consumer in consumers:
            consumer.close()


# -- topic deletion ---------------------------------------------------------------------------
def _committed(broker: BrokerProcess, group: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], WAIT)
        return int(tp.offset)
    finally:
        consumer.close()


def test_deleted_and_recreated_topic_starts_clean(broker: BrokerProcess) -> None:
    topic, group = _names("recreate")
    _create(broker, topic, 1)
    _produce(broker, topic, 5)
    consumer = _consumer(broker, group, topic, "classic")
    try:
        _wait_until(lambda: _assigned([consumer]) == [{0}], "the partition")
        consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    assert _committed(broker, group, topic) == 4

    _admin(broker).delete_topics([topic])[topic].result(WAIT)
    assert _committed(broker, group, topic) < 0  # tombstoned with the topic
    _create(broker, topic, 1)
    _produce(broker, topic, 2)
    consumer = _consumer(broker, group, topic, "classic")
    try:
        got: list[int] = []

        def read_both() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.offset())
            return len(got) >= 2

        _wait_until(read_both, "the re-created topic read from its start")
        assert got == [0, 1]  # auto.offset.reset=earliest: no stale offset 4
    finally:
        consumer.close()


# -- retention --------------------------------------------------------------------------------
def _cli(capsys: pytest.CaptureFixture[str], broker: BrokerProcess, *argv: str) -> str:
    """Run `rafka-actors ARGV --bootstrap ...` in-process; its stdout (status 0 asserted)."""
    capsys.readouterr()
    code = main([*argv, "--bootstrap", broker.bootstrap])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _groups_offsets(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess, group: str
) -> list[dict[str, Any]]:
    out = _cli(capsys, broker, "groups", "offsets", group, "--output", "json")
    rows: list[dict[str, Any]] = json.loads(out)[0]["partitions"]
    return rows


def test_retention_deletes_segments_and_consumers_reset(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = _names("retain")
    _create(broker, topic, 1, internal_segment_bytes="200")  # (Kafka's, below 1 MiB)
    _produce(broker, topic, 12)
    consumer = _consumer(broker, group, topic, "classic")
    try:
        _wait_until(lambda: _assigned([consumer]) == [{0}], "the partition")
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    assert _watermarks(broker, topic) == (0, 12)

    _alter(broker, ResourceType.TOPIC, topic, retention_ms="300")
    _wait_until(lambda: _watermarks(broker, topic)[0] >= 10, "old segments deleted")
    _alter(broker, ResourceType.TOPIC, topic, retention_ms="-1")  # no further deletions
    low, high = _watermarks(broker, topic)
    segments = sorted(p.name for p in (broker.data_dir / "topics" / topic / "0").glob("*.log"))
    assert int(segments[0].removesuffix(".log")) == low
    (row,) = _groups_offsets(capsys, broker, group)
    assert row["current_offset"] == 2 and row["lag"] == high - low

    _produce(broker, topic, 2)
    consumer = _consumer(broker, group, topic, "classic")
    try:
        got: list[int] = []

        def read_rest() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.offset())
            return bool(got) and got[-1] == high + 1

        _wait_until(read_rest, "the consumer reset to the log start")
        assert got == list(range(low, high + 2))  # reset per auto.offset.reset=earliest
    finally:
        consumer.close()


# -- DeleteRecords ----------------------------------------------------------------------------
def test_delete_records_and_configs_survive_a_sigkill(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic, _group = _names("delrec")
        _create(broker, topic, 1)
        _produce(broker, topic, 10)
        futures = _admin(broker).delete_records([TopicPartition(topic, 0, 7)])
        (deleted,) = futures.values()
        assert deleted.result(WAIT).low_watermark == 7
        assert _watermarks(broker, topic) == (7, 10)
        _alter(broker, ResourceType.TOPIC, topic, retention_ms="86400000")
        _alter(broker, ResourceType.GROUP, "kept", consumer_heartbeat_interval_ms="6000")
        committer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "cut-short"}
        )
        committer.commit(offsets=[TopicPartition(topic, 0, 8)], asynchronous=False)
        committer.close()
        broker.stop(signal.SIGKILL)
        # as if the broker had died in the middle of a DeleteTopics' visit of the groups
        pending = [{"org": 0, "topic": topic, "at_ms": int(time.time() * 1000)}]
        (tmp_path / "data" / "topic-deletions.json").write_text(json.dumps(pending))
        broker.start()
        _wait_until(lambda: _committed(broker, "cut-short", topic) < 0, "the visit finished")
        _wait_until(
            lambda: json.loads((tmp_path / "data" / "topic-deletions.json").read_text()) == [],
            "the pending deletion done",
        )
        assert _watermarks(broker, topic) == (7, 10)
        # configs are durable too
        assert _described(broker, ResourceType.TOPIC, topic)["retention.ms"].value == "86400000"
        configs = _described(broker, ResourceType.GROUP, "kept")
        assert configs["consumer.heartbeat.interval.ms"].value == "6000"
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "d", "auto.offset.reset": "error"}
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 3)])
            message = None
            deadline = time.monotonic() + WAIT
            while message is None or message.error() is None:
                assert time.monotonic() < deadline, "no OFFSET_OUT_OF_RANGE below the log start"
                message = consumer.poll(0.2)
            assert message.error().code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET
        finally:
            consumer.close()
    finally:
        if broker.alive():
            broker.kill()


# -- tenancy ----------------------------------------------------------------------------------
def _users_file(path: Path) -> Path:
    from rafka_actors.auth.scram import MIN_ITERATIONS, Mechanism, derive_credential
    from rafka_actors.auth.users import User, UserStore

    store = UserStore()
    for name, org, prefixes in (("alice", 1, ()), ("bob", 2, ()), ("carol", 1, ("team-a.",))):
        credential = derive_credential(Mechanism.SCRAM_SHA_256, name, iterations=MIN_ITERATIONS)
        credentials = {Mechanism.SCRAM_SHA_256: credential}
        store = store.with_user(User(name, org, prefixes, prefixes, credentials))
    store.save(path)
    return path


def _tenant_admin(broker: BrokerProcess, user: str) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": broker.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": user,
        }
    )


def _error_of(future: Any) -> int:
    try:
        future.result(WAIT)
    except confluent_kafka.KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def test_an_org_sees_and_changes_only_its_own_configs(tmp_path: Path) -> None:
    users = _users_file(tmp_path / "users.json")
    broker = BrokerProcess(
        tmp_path / "data",
        "listener.security.protocol=SASL_PLAINTEXT",
        f"sasl.users.file={users}",
    ).start()
    alice, bob, carol = (_tenant_admin(broker, u) for u in ("alice", "bob", "carol"))
    try:
        alice.create_topics([NewTopic("orders", 1, 1)])["orders"].result(WAIT)
        retention = ConfigEntry(
            "retention.ms", "60000", incremental_operation=AlterConfigOpType.SET
        )
        session = ConfigEntry(
            "consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET
        )
        topic = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[retention])
        group = ConfigResource(ResourceType.GROUP, "payments", incremental_configs=[session])
        for future in alice.incremental_alter_configs([topic, group]).values():
            future.result(WAIT)

        # bob (org 2): org 1's topic does not exist for him, and its group configs are not his
        unknown = confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
        (described,) = bob.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")]).values()
        assert _error_of(described) == unknown
        (altered,) = bob.incremental_alter_configs([topic]).values()
        assert _error_of(altered) == unknown
        (described,) = bob.describe_configs(
            [ConfigResource(ResourceType.GROUP, "payments")]
        ).values()
        assert described.result(WAIT)["consumer.session.timeout.ms"].value == "45000"
        (altered,) = bob.incremental_alter_configs(
            [
                ConfigResource(
                    ResourceType.GROUP,
                    "payments",
                    incremental_configs=[
                        ConfigEntry(
                            "consumer.session.timeout.ms",
                            "55000",
                            incremental_operation=AlterConfigOpType.SET,
                        )
                    ],
                )
            ]
        ).values()
        altered.result(WAIT)
        (described,) = alice.describe_configs(
            [ConfigResource(ResourceType.GROUP, "payments")]
        ).values()
        assert described.result(WAIT)["consumer.session.timeout.ms"].value == "50000"

        # carol (org 1, prefix team-a.): refused outside her prefixes
        futures = carol.describe_configs(
            [
                ConfigResource(ResourceType.TOPIC, "orders"),
                ConfigResource(ResourceType.GROUP, "payments"),
            ]
        )
        codes = sorted(_error_of(f) for f in futures.values())
        assert codes == sorted(
            [
                confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED,
                confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED,
            ]
        )
        (altered,) = carol.incremental_alter_configs([group]).values()
        assert _error_of(altered) == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        broker.kill()


# -- the topics tool --------------------------------------------------------------------------
def test_topics_tool_creates_alters_describes_and_deletes(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, _group = _names("tool")
    _cli(
        capsys,
        broker,
        "topics",
        "create",
        topic,
        "--partitions",
        "2",
        "--config",
        "retention.ms=90000",
    )
    _produce(broker, topic, 3, partition=1)
    _cli(
        capsys,
        broker,
        "topics",
        "alter",
        topic,
        "--partitions",
        "3",
        "--config",
        "retention.bytes=1000000",
        "--delete-config",
        "retention.ms",
    )
    described = json.loads(_cli(capsys, broker, "topics", "describe", topic, "--output", "json"))
    offsets = [
        (p["partition"], p["log_start_offset"], p["log_end_offset"])
        for p in described["partitions"]
    ]
    assert offsets == [(0, 0, 0), (1, 0, 3), (2, 0, 0)]
    assert described["partitions"][1]["size_bytes"] > 0
    configs = {c["name"]: (c["value"], c["source"]) for c in described["configs"]}
    assert configs["retention.bytes"] == ("1000000", "topic")
    assert configs["retention.ms"] == ("604800000", "default")
    assert topic in _cli(capsys, broker, "topics", "list")
    _cli(capsys, broker, "topics", "delete", topic)
    assert topic not in _cli(capsys, broker, "topics", "list")


# -- damaged state files ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["group-configs.json", "broker-configs.json", "topic-deletions.json"]
)
def test_a_damaged_state_file_refuses_to_start_naming_it(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / name).write_text("{not json")
    try:
        status = main(["serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path)])
    finally:
        gc.enable()  # `serve` turns the collector off until it listens (gc_policy.py)
    assert status == 65  # refusals.py: damaged data
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and name in errors[0], errors

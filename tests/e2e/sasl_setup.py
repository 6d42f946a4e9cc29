"""Setup for the SASL / organisation end-to-end tests (test_sasl_tenancy.py).

* `write_users`: the users file, written by the real `rafka-actors users add` command.
* `make_tls`: a throw-away CA and a server certificate for 127.0.0.1 (trustme), as PEM files.
* `Login`: one user's client credentials; `confluent_config` / `kafka_python_config` turn it
  into each library's settings.
* `ConfluentTenant` / `KafkaPythonTenant`: the same small set of operations (create a topic,
  produce to chosen partitions, a group member, list / describe groups, a group's committed
  offsets) through each real client, logged in as one user.
* `RawConnection`: a socket speaking the Kafka wire protocol with the repo's test codec, for
  what the clients can't show (what happens after a failed authentication).

Every client call has a deadline, so a broken broker fails a test instead of hanging it.
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import kafka
import kafka.admin
import trustme
from confluent_kafka import ConsumerGroupTopicPartitions
from kafka.structs import OffsetAndMetadata

from ..wire import parse_response, request_frame

WAIT = 20.0  # the longest a single client call may take
SESSION_MS = 6000
HEARTBEAT_MS = 500
# Short group timers (as test_consumer_groups.py): no initial rebalance delay, short sessions.
GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")

Record = tuple[int, int, bytes]  # partition, offset, value


# -- users, TLS and broker settings -------------------------------------------------------
@dataclass(frozen=True)
class UserSpec:
    name: str
    org: int
    password: str
    group_prefixes: tuple[str, ...] = ()
    topic_prefixes: tuple[str, ...] = ()


def write_users(path: Path, users: Iterable[UserSpec]) -> Path:
    """Write `path` with the real `rafka-actors users add NAME --password P` command."""
    for user in users:
        args = [
            sys.executable,
            "-m",
            "rafka_actors",
            "users",
            "add",
            user.name,
            "--org",
            str(user.org),
            "--password",
            user.password,
            "--file",
            str(path),
        ]
        for prefix in user.group_prefixes:
            args += ["--group-prefix", prefix]
        for prefix in user.topic_prefixes:
            args += ["--topic-prefix", prefix]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"users add {user.name}: {done.stderr}"
        assert f"user {user.name} (org {user.org})" in done.stdout, done.stdout
    return path


@dataclass(frozen=True)
class Tls:
    ca: Path  # the CA certificate clients trust
    cert: Path  # the server's certificate chain
    key: Path  # the server's private key


def make_tls(directory: Path) -> Tls:
    """A fresh CA and a certificate for 127.0.0.1 / localhost (the broker advertises
    127.0.0.1, so the clients' hostname verification passes)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    tls = Tls(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    ca.cert_pem.write_to_path(str(tls.ca))
    tls.cert.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(tls.key))
    return tls


def broker_settings(protocol: str, users_file: Path, tls: Tls | None = None) -> tuple[str, ...]:
    """`-o key=value` items (BrokerProcess adds the `-o`) for a listener of `protocol`."""
    settings = [
        *GROUP_SETTINGS,
        f"listener.security.protocol={protocol}",
        f"sasl.users.file={users_file}",
    ]
    if tls is not None:
        settings += [
            f"ssl.certificate.location={tls.cert}",
            f"ssl.key.location={tls.key}",
        ]
    return tuple(settings)


# -- client settings ----------------------------------------------------------------------
@dataclass(frozen=True)
class Login:
    user: str
    password: str
    mechanism: str = "PLAIN"
    protocol: str = "SASL_PLAINTEXT"  # PLAINTEXT: no SASL settings at all
    ca: Path | None = None  # SASL_SSL: the CA to trust


def confluent_config(bootstrap: str, login: Login, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": login.protocol}
    if login.protocol != "PLAINTEXT":
        config |= {
            "sasl.mechanism": login.mechanism,
            "sasl.username": login.user,
            "sasl.password": login.password,
        }
    if login.ca is not None:
        # hostname verification on (librdkafka's default, said out loud): the certificate
        # names 127.0.0.1, which is what the broker advertises
        config["ssl.ca.location"] = str(login.ca)
        config["ssl.endpoint.identification.algorithm"] = "https"
    return config | extra


def kafka_python_config(bootstrap: str, login: Login, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": login.protocol,
        "request_timeout_ms": int(WAIT * 1000),
    }
    if login.protocol != "PLAINTEXT":
        config |= {
            "sasl_mechanism": login.mechanism,
            "sasl_plain_username": login.user,
            "sasl_plain_password": login.password,
        }
    if login.ca is not None:
        config["ssl_cafile"] = str(login.ca)
        config["ssl_check_hostname"] = True
    return config | extra


# -- what a test reads back ---------------------------------------------------------------
@dataclass(frozen=True)
class GroupView:
    state: str  # upper case: STABLE, EMPTY, ...
    members: tuple[tuple[str, frozenset[int]], ...]  # (client id, assigned partitions)


class Member:
    """One consumer of one group, subscribed to one topic, no auto-commit."""

    topic: str
    poll_timeout = 0.2  # what a test waits per poll() while the member is still joining

    def poll(self, timeout: float) -> list[Record]: ...
    def assignment(self) -> frozenset[int]: ...
    def commit(self, offsets: dict[int, int]) -> None: ...
    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]: ...
    def close(self) -> None: ...


# -- confluent-kafka ----------------------------------------------------------------------
class ConfluentMember(Member):
    def __init__(self, config: dict[str, Any], group: str, topic: str, client_id: str) -> None:
        self.topic = topic
        self.errors: list[confluent_kafka.KafkaError] = []
        self.consumer = confluent_kafka.Consumer(
            config
            | {
                "group.id": group,
                "client.id": client_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "error_cb": self.errors.append,
            }
        )
        self.consumer.subscribe([topic])

    def poll(self, timeout: float) -> list[Record]:
        out = []
        for msg in self.consumer.consume(500, timeout=timeout):
            error = msg.error()
            if error is not None:
                if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                raise confluent_kafka.KafkaException(error)
            out.append((msg.partition(), msg.offset(), msg.value()))
        return out

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self, offsets: dict[int, int]) -> None:
        tps = [confluent_kafka.TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        for tp in self.consumer.commit(offsets=tps, asynchronous=False) or []:
            assert tp.error is None, tp

    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        tps = [confluent_kafka.TopicPartition(self.topic, p) for p in partitions]
        got = self.consumer.committed(tps, timeout=WAIT)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in got}

    def close(self) -> None:
        self.consumer.close()


class ConfluentTenant:
    name = "confluent"

    def __init__(self, bootstrap: str, login: Login) -> None:
        self.bootstrap = bootstrap
        self.login = login
        self.config = confluent_config(bootstrap, login)
        self.admin = confluent_kafka.admin.AdminClient(self.config)

    def create_topic(self, topic: str, partitions: int) -> None:
        futures = self.admin.create_topics(
            [confluent_kafka.admin.NewTopic(topic, partitions, 1)], operation_timeout=10
        )
        futures[topic].result(timeout=WAIT)

    def produce(self, topic: str, records: dict[int, list[bytes]]) -> None:
        producer = confluent_kafka.Producer(self.config | {"acks": "all", "linger.ms": 5})
        errors: list[object] = []

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                errors.append(err)

        for partition, values in records.items():
            for value in values:
                producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
        assert producer.flush(WAIT) == 0, "records left unacknowledged"
        assert not errors, errors[:3]

    def member(self, group: str, topic: str, client_id: str) -> ConfluentMember:
        return ConfluentMember(self.config, group, topic, client_id)

    def groups(self) -> set[str]:
        result = self.admin.list_consumer_groups(request_timeout=10).result(WAIT)
        assert not result.errors, result.errors
        return {g.group_id for g in result.valid}

    def describe(self, group: str) -> GroupView:
        description = self.admin.describe_consumer_groups([group], request_timeout=10)[
            group
        ].result(WAIT)
        return GroupView(
            description.state.name,
            tuple(
                (m.client_id, frozenset(tp.partition for tp in m.assignment.topic_partitions))
                for m in description.members
            ),
        )

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group)]
        result = self.admin.list_consumer_group_offsets(request, request_timeout=10)[group].result(
            WAIT
        )
        assert result.group_id == group
        for tp in result.topic_partitions:
            assert tp.error is None, tp
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}

    def close(self) -> None:
        pass  # the AdminClient has no close; it goes with the object


# -- kafka-python -------------------------------------------------------------------------
class KafkaPythonMember(Member):
    # kafka-python (3.0.12) runs the group join inside poll(); when the poll's deadline falls
    # between its SyncGroup request and the response, the response is dropped: the consumer
    # keeps an empty assignment with heartbeats off until the broker expires it. Long polls
    # (which return as soon as records arrive) keep joins within one poll.
    poll_timeout = 3.0

    def __init__(self, config: dict[str, Any], group: str, topic: str, client_id: str) -> None:
        self.topic = topic
        self.consumer = kafka.KafkaConsumer(
            **config,
            group_id=group,
            client_id=client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=10_000,
        )
        self.consumer.subscribe(topics=[topic])

    def poll(self, timeout: float) -> list[Record]:
        batches = self.consumer.poll(timeout_ms=int(timeout * 1000))
        return [(tp.partition, m.offset, m.value) for tp, msgs in batches.items() for m in msgs]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self, offsets: dict[int, int]) -> None:
        self.consumer.commit(
            {
                kafka.TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                for p, o in offsets.items()
            }
        )

    def committed(self, partitions: Iterable[int]) -> dict[int, int | None]:
        return {
            p: self.consumer.committed(
                kafka.TopicPartition(self.topic, p), timeout_ms=int(WAIT * 1000)
            )
            for p in partitions
        }

    def close(self) -> None:
        self.consumer.close(timeout_ms=int(WAIT * 1000))


class KafkaPythonTenant:
    name = "kafka-python"

    def __init__(self, bootstrap: str, login: Login) -> None:
        self.bootstrap = bootstrap
        self.login = login
        self.config = kafka_python_config(bootstrap, login)
        self.admin = kafka.admin.KafkaAdminClient(**self.config)

    def create_topic(self, topic: str, partitions: int) -> None:
        self.admin.create_topics([kafka.admin.NewTopic(topic, partitions, 1)])

    def produce(self, topic: str, records: dict[int, list[bytes]]) -> None:
        producer = kafka.KafkaProducer(**self.config, acks="all", linger_ms=5)
        try:
            futures = [
                producer.send(topic, value=value, partition=partition)
                for partition, values in records.items()
                for value in values
            ]
            producer.flush(WAIT)
            for future in futures:
                future.get(timeout=WAIT)
        finally:
            producer.close(timeout=WAIT)

    def member(self, group: str, topic: str, client_id: str) -> KafkaPythonMember:
        return KafkaPythonMember(self.config, group, topic, client_id)

    def groups(self) -> set[str]:
        return {g["group_id"] for g in self.admin.list_groups()}

    def describe(self, group: str) -> GroupView:
        description = self.admin.describe_groups([group])[group]
        members = []
        for m in description["members"]:
            assignment = m.get("member_assignment") or {}
            partitions = frozenset(
                p
                for topic in assignment.get("assigned_partitions", ())
                for p in topic["partitions"]
            )
            members.append((m["client_id"], partitions))
        return GroupView(description["group_state"].upper(), tuple(members))

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        offsets = self.admin.list_group_offsets({group: None})[group]
        return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}

    def close(self) -> None:
        self.admin.close()


TENANTS = {"confluent": ConfluentTenant, "kafka-python": KafkaPythonTenant}
Tenant = ConfluentTenant | KafkaPythonTenant


# -- the wire, by hand --------------------------------------------------------------------
class RawConnection:
    """A Kafka connection driven request by request (optionally over TLS)."""

    def __init__(self, host: str, port: int, ca: Path | None = None) -> None:
        sock = socket.create_connection((host, port), timeout=WAIT)
        if ca is not None:
            context = ssl.create_default_context(cafile=str(ca))
            sock = context.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.correlation_id = 0

    def send(self, request: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(request_frame(request, self.correlation_id))
        return self.correlation_id

    def try_send(self, request: Any) -> bool:
        """Send `request` unless the broker already closed the connection (False then)."""
        try:
            self.send(request)
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return False
        return True

    def call(self, request: Any, response_cls: type, header_version: int) -> Any:
        """Send `request` and decode its answer (whose header is v0 or v1, flexible)."""
        sent = self.send(request)
        frame = self._read_frame()
        assert frame is not None, f"the broker closed the connection instead of answering {request}"
        correlation_id, response = parse_response(frame, response_cls, header_version)
        assert correlation_id == sent
        return response

    def closed_unanswered(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection without sending another byte; False if
        anything arrives or the connection is still open after `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(4096) == b""
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    def _read_frame(self) -> bytes | None:
        head = self._read_exactly(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read_exactly(size)

    def _read_exactly(self, size: int) -> bytes | None:
        data = b""
        try:
            while len(data) < size:
                chunk = self.sock.recv(size - len(data))
                if not chunk:
                    return None
                data += chunk
        except (ConnectionResetError, BrokenPipeError):
            return None
        return data

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

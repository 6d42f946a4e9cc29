"""SCRAM credentials and ACLs as an operator sees them through Kafka's own tools (issue 55
§7, §8): `kafka-configs --entity-type users` adds, describes and deletes a user's SCRAM
credential; on a SASL listener an org admin lists its org's users and a user limited by
prefixes is refused; `kafka-acls --list` says no authorizer is configured, as Kafka without
one does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rafka_actors.auth.scram import Mechanism
from rafka_actors.auth.users import UserStore

from ...broker_process import BrokerProcess
from ..sasl_setup import UserSpec, broker_settings, write_users
from .peer import KafkaPeer

# a JVM start takes seconds on a loaded machine: more than the default 120 s a test
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = UserSpec("root", 1, "root-secret")  # no prefixes: org 1's admin
LIMITED = UserSpec("limited", 1, "limited-secret", topic_prefixes=("lim.",))


def test_kafka_configs_adds_describes_and_deletes_a_scram_credential(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    server = ("--bootstrap-server", rafka.bootstrap)
    user = ("--entity-type", "users", "--entity-name", "javauser")
    added = kafka_peer.ok(
        "configs", *server, "--alter", *user,
        "--add-config", "SCRAM-SHA-256=[iterations=8192,password=java-pw]",
    )  # fmt: skip
    assert added.strip() == "Completed updating config for user javauser."
    line = (
        "SCRAM credential configs for user-principal 'javauser' are SCRAM-SHA-256=iterations=8192"
    )
    assert kafka_peer.ok("configs", *server, "--describe", "--entity-type", "users").strip() == line
    assert kafka_peer.ok("configs", *server, "--describe", *user).strip() == line
    # without SASL the caller is org 0's admin: the data dir's users file holds the user
    stored = UserStore.load(rafka.data_dir / "users.json").users["javauser"]
    assert stored.org_id == 0 and list(stored.credentials) == [Mechanism.SCRAM_SHA_256]
    deleted = kafka_peer.ok(
        "configs", *server, "--alter", *user, "--delete-config", "SCRAM-SHA-256"
    )
    assert deleted.strip() == "Completed updating config for user javauser."
    assert kafka_peer.ok("configs", *server, "--describe", *user).strip() == ""


def test_kafka_acls_says_no_authorizer_is_configured(
    kafka_peer: KafkaPeer, rafka: BrokerProcess
) -> None:
    listed = kafka_peer.run("acls", "--bootstrap-server", rafka.bootstrap, "--list")
    assert listed.returncode == 1, listed.explain()
    assert (
        "Error while executing ACL command: org.apache.kafka.common.errors."
        "SecurityDisabledException: No Authorizer is configured on the broker"
    ) in listed.stdout + listed.stderr, listed.explain()


@pytest.fixture
def sasl_broker(kafka_peer: KafkaPeer, tmp_path: Path) -> Iterator[BrokerProcess]:
    del kafka_peer  # no broker for a skip
    users = write_users(tmp_path / "users.json", [ROOT, LIMITED])
    process = BrokerProcess(tmp_path / "data", *broker_settings("SASL_PLAINTEXT", users)).start()
    try:
        yield process
    finally:
        process.stop()


def _login(directory: Path, user: UserSpec) -> str:
    properties = directory / f"{user.name}.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user.name}" password="{user.password}";\n'
    )
    return str(properties)


def test_an_org_admin_lists_its_users_and_a_limited_user_is_refused(
    kafka_peer: KafkaPeer, sasl_broker: BrokerProcess, tmp_path: Path
) -> None:
    server = ("--bootstrap-server", sasl_broker.bootstrap)
    describe = ("--describe", "--entity-type", "users")
    as_root = ("--command-config", _login(tmp_path, ROOT))
    mechanisms = "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=8192"
    assert kafka_peer.ok("configs", *server, *as_root, *describe).splitlines() == [
        f"SCRAM credential configs for user-principal 'limited' are {mechanisms}",
        f"SCRAM credential configs for user-principal 'root' are {mechanisms}",
    ]
    as_limited = ("--command-config", _login(tmp_path, LIMITED))
    refused = kafka_peer.run("configs", *server, *as_limited, *describe)
    assert "ClusterAuthorizationException: Cluster authorization failed." in refused.stdout, (
        refused.explain()
    )
    altered = kafka_peer.run(
        "configs", *server, *as_limited, "--alter", "--entity-type", "users",
        "--entity-name", "intruder", "--add-config", "SCRAM-SHA-256=[password=x]",
    )  # fmt: skip
    assert altered.returncode == 1, altered.explain()
    assert "ClusterAuthorizationException: Cluster authorization failed." in (
        altered.stdout + altered.stderr
    ), altered.explain()

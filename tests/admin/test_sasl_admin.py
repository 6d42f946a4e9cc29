"""`rafka-actors groups --command-config FILE` on a SASL_SSL broker: each user sees its own
organisation's groups only, and a wrong password is a clear error, not a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from ..broker_process import BrokerProcess
from ..e2e.sasl_setup import Tls, UserSpec, broker_settings, make_tls, write_users

pytestmark = pytest.mark.e2e

USERS = {"alice": (1, "alice-pw"), "bob": (2, "bob-pw")}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("sasl-admin")
    users = write_users(
        directory / "users.json",
        [UserSpec(name, org, password) for name, (org, password) in USERS.items()],
    )
    process = BrokerProcess(directory / "data", *broker_settings("SASL_SSL", users, tls)).start()
    yield process
    if process.alive():
        process.kill()


def client_config(broker: BrokerProcess, tls: Tls, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user][1],
        "ssl.ca.location": str(tls.ca),
    }


def command_config(tmp_path: Path, tls: Tls, user: str, password: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={user}\nsasl.password={password}\nssl.ca.location={tls.ca}\n"
    )
    return str(path)


def commit(broker: BrokerProcess, tls: Tls, user: str, offset: int) -> None:
    consumer = confluent_kafka.Consumer(
        {**client_config(broker, tls, user), "group.id": "payments", "enable.auto.commit": False}
    )
    try:
        tp = confluent_kafka.TopicPartition("ledger", 0, offset)
        for done in consumer.commit(offsets=[tp], asynchronous=False) or []:
            assert done.error is None, done
    finally:
        consumer.close()


def test_each_user_lists_only_its_orgs_group_and_offsets(
    broker: BrokerProcess, tls: Tls, tmp_path: Path, cli: Any
) -> None:
    producer = confluent_kafka.Producer(client_config(broker, tls, "alice"))
    for i in range(5):
        producer.produce("ledger", b"%d" % i)
    assert producer.flush(30) == 0
    commit(broker, tls, "alice", 3)

    alice = command_config(tmp_path, tls, "alice", "alice-pw")
    bob = command_config(tmp_path, tls, "bob", "bob-pw")
    listed = cli("list", "--command-config", alice)
    assert listed.code == 0, listed.err
    assert [row["GROUP"] for row in listed.rows()] == ["payments"]
    offsets = cli("offsets", "payments", "--command-config", alice)
    assert offsets.code == 0, offsets.err
    assert [(r["TOPIC"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"]) for r in offsets.rows()] == [
        ("ledger", "3", "5")
    ]

    bobs = cli("list", "--command-config", bob)
    assert bobs.code == 0, bobs.err
    assert "payments" not in bobs.out
    missing = cli("describe", "payments", "--command-config", bob)
    assert missing.code == 1 and "payments" in missing.err


def test_wrong_password_is_a_clear_error(
    broker: BrokerProcess, tls: Tls, tmp_path: Path, cli: Any
) -> None:
    result = cli("list", "--command-config", command_config(tmp_path, tls, "alice", "nope"))
    assert result.code == 1
    assert "SASL_AUTHENTICATION_FAILED" in result.err
    assert "Traceback" not in result.err


def test_plaintext_tools_cannot_reach_a_sasl_ssl_listener(broker: BrokerProcess, cli: Any) -> None:
    result = cli("list")
    assert result.code == 2
    assert result.out == ""

"""`rafka-actors groups --command-config FILE` on a SASL_SSL broker: each user sees its own
organisation's groups only, and a wrong password is a clear error, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
import trustme

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

USERS = {"alice": (1, "alice-pw"), "bob": (2, "bob-pw")}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = {name: str(directory / f"{name}.pem") for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(paths["ca"])
    cert.private_key_pem.write_to_path(paths["key"])
    for i, pem in enumerate(cert.cert_chain_pems):
        pem.write_to_path(paths["cert"], append=i > 0)
    return paths


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, tls: dict[str, str]
) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("sasl-admin")
    users = directory / "users.json"
    for name, (org, password) in USERS.items():
        subprocess.run(
            [sys.executable, "-m", "rafka_actors", "users", "add", name, "--org", str(org),
             "--password", password, "--iterations", "4096", "--file", str(users)],
            check=True,
            capture_output=True,
        )  # fmt: skip
    process = BrokerProcess(
        directory / "data",
        "listener.security.protocol=SASL_SSL",
        f"sasl.users.file={users}",
        f"ssl.certificate.location={tls['cert']}",
        f"ssl.key.location={tls['key']}",
    ).start()
    yield process
    if process.alive():
        process.kill()


def client_config(broker: BrokerProcess, tls: dict[str, str], user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user][1],
        "ssl.ca.location": tls["ca"],
    }


def command_config(tmp_path: Path, tls: dict[str, str], user: str, password: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={user}\nsasl.password={password}\nssl.ca.location={tls['ca']}\n"
    )
    return str(path)


def commit(broker: BrokerProcess, tls: dict[str, str], user: str, offset: int) -> None:
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
    broker: BrokerProcess, tls: dict[str, str], tmp_path: Path, cli: Any
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
    broker: BrokerProcess, tls: dict[str, str], tmp_path: Path, cli: Any
) -> None:
    result = cli("list", "--command-config", command_config(tmp_path, tls, "alice", "nope"))
    assert result.code == 1
    assert "SASL_AUTHENTICATION_FAILED" in result.err
    assert "Traceback" not in result.err


def test_plaintext_tools_cannot_reach_a_sasl_ssl_listener(broker: BrokerProcess, cli: Any) -> None:
    result = cli("list")
    assert result.code == 2
    assert result.out == ""

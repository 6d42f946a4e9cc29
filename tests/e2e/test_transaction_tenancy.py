"""Transactional ids over SASL, end to end: they live inside the user's organisation, and
the users file's `transactional_id_prefixes` limit them, as Kafka's TRANSACTIONAL_ID ACLs.

alice (org 1) may use transactional ids starting `a.`; bob (org 2) any. The same id in both
orgs is two transactional ids: initialising bob's fences nobody of alice's. The users file is
written with the CLI's own store (PBKDF at 4096 iterations, no subprocess per user); the
`users add --transactional-id-prefix` flag itself is covered by tests/auth.
"""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest

from rafka_actors.admin.client import KafkaClient
from rafka_actors.admin.security import ClientSecurity
from rafka_actors.admin.transactions import describe_transaction
from rafka_actors.auth.scram import Mechanism, derive_credential
from rafka_actors.auth.users import User, UserStore

from ..broker_process import BrokerProcess
from .sasl_setup import Login, broker_settings, confluent_config

WAIT = 20.0
ALICE = Login("alice", "alice-secret")
BOB = Login("bob", "bob-secret")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("txn-tenancy")
    store = UserStore()
    for login, org, prefixes in ((ALICE, 1, ("a.",)), (BOB, 2, ())):
        credential = derive_credential(Mechanism.SCRAM_SHA_256, login.password, iterations=4096)
        store = store.with_user(
            User(
                login.user,
                org,
                credentials={Mechanism.SCRAM_SHA_256: credential},
                transactional_id_prefixes=prefixes,
            )
        )
    users = tmp / "users.json"
    store.save(users)
    process = BrokerProcess(tmp / "data", *broker_settings("SASL_PLAINTEXT", users)).start()
    yield process
    if process.alive():
        process.kill()


def producer(broker: BrokerProcess, login: Login, txn_id: str) -> confluent_kafka.Producer:
    return confluent_kafka.Producer(
        confluent_config(broker.bootstrap, login, **{"transactional.id": txn_id})
    )


def describe(broker: BrokerProcess, login: Login, txn_id: str) -> tuple[int, int]:
    security = ClientSecurity("SASL_PLAINTEXT", "PLAIN", login.user, login.password)
    with KafkaClient(broker.bootstrap, WAIT, security) as client:
        described = describe_transaction(client, txn_id)
    return described.producer_id, described.producer_epoch


def test_an_id_beyond_the_users_prefixes_is_refused(broker: BrokerProcess) -> None:
    with pytest.raises(confluent_kafka.KafkaException) as failure:
        producer(broker, ALICE, "b.not-hers").init_transactions(WAIT)
    assert (
        failure.value.args[0].code()
        == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


def test_the_same_id_in_two_organisations_is_two_transactional_ids(broker: BrokerProcess) -> None:
    producer(broker, ALICE, "a.shared").init_transactions(WAIT)
    alice_id, alice_epoch = describe(broker, ALICE, "a.shared")
    producer(broker, BOB, "a.shared").init_transactions(WAIT)
    bob_id, bob_epoch = describe(broker, BOB, "a.shared")
    # had they been one id, bob's InitProducerId would have bumped alice's epoch
    assert describe(broker, ALICE, "a.shared") == (alice_id, alice_epoch) == (alice_id, 0)
    assert bob_epoch == 0 and bob_id != alice_id

"""Authorized operations, SCRAM credential management and the ACL APIs, end to end (issue 55
§6-8): the real broker, confluent-kafka's AdminClient and kafka-python's admin client (Kafka's
own `kafka-configs` and `kafka-acls`: kafka_tools/test_security_tools.py).

* Authorized operations: a topic, the cluster and a group (classic and KIP-848) described with
  `include_authorized_operations` carry every operation Kafka supports on them; a user limited
  by prefixes gets nothing for the cluster (it is no org admin) and everything for its topics.
* SCRAM credentials on a SASL listener: an org admin creates a user, which logs in at once with
  the new password; it rotates a limited user's password (the user keeps its prefixes); deleting
  a user's credential ends its logins. A limited user gets CLUSTER_AUTHORIZATION_FAILED; another
  org's admin sees only its own org and cannot take a name in use. The users file on disk is
  what changed.
* On a listener without SASL, anyone is org 0's admin (as with Kafka without an authorizer):
  the credentials go into the data dir's users file.
* The ACL APIs: SECURITY_DISABLED, with Kafka's messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka.admin
import kafka.errors
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from rafka_actors.auth.scram import Mechanism, derive_credential
from rafka_actors.auth.users import User, UserStore

from ..broker_process import BrokerProcess
from .sasl_setup import (
    GROUP_SETTINGS,
    WAIT,
    Login,
    UserSpec,
    broker_settings,
    confluent_config,
)

pytestmark = pytest.mark.e2e

Op = AclOperation
TOPIC_OPS = {Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE}
TOPIC_OPS |= {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
CLUSTER_OPS = {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
CLUSTER_OPS |= {Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}
GROUP_OPS = {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}

ROOT = UserSpec("root", 1, "root-secret")  # no prefixes: org 1's admin
LIMITED = UserSpec("limited", 1, "limited-secret", topic_prefixes=("lim.",))
OTHER = UserSpec("other", 2, "other-secret")  # org 2's admin


def user(spec: UserSpec) -> User:
    """`spec` as the users file holds it (written here, not by `rafka-actors users add` as
    test_sasl_tenancy.py does: that costs seconds a user)."""
    credentials = {m: derive_credential(m, spec.password, iterations=4096) for m in Mechanism}
    return User(spec.name, spec.org, spec.group_prefixes, spec.topic_prefixes, credentials)


def admin(bootstrap: str, login: Login | None = None) -> AdminClient:
    who = login or Login("", "", protocol="PLAINTEXT")
    return AdminClient(confluent_config(bootstrap, who))


def sasl(user: UserSpec, password: str | None = None, mechanism: str = "SCRAM-SHA-256") -> Login:
    return Login(user.name, user.password if password is None else password, mechanism)


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    """Each future's result, or the KafkaError it failed with."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=WAIT)
        except KafkaException as exc:
            out[key] = exc.args[0]
    return out


def code_of(outcome: Any) -> int:
    return outcome.code() if isinstance(outcome, KafkaError) else KafkaError.NO_ERROR


def upsert(name: str, password: str, mechanism: ScramMechanism, iterations: int = 8192) -> Any:
    return UserScramCredentialUpsertion(
        name, ScramCredentialInfo(mechanism, iterations), password.encode()
    )


def logs_in(bootstrap: str, login: Login) -> bool:
    """Whether a fresh client logs in (and reads the cluster's metadata), or is refused."""
    errors: list[KafkaError] = []
    client = AdminClient(confluent_config(bootstrap, login, error_cb=errors.append))
    deadline = time.monotonic() + WAIT
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, f"neither logged in nor refused: {errors}"
        try:
            client.list_topics(timeout=0.5)
        except KafkaException:
            client.poll(0)  # serves error_cb
            continue
        return True
    return False


def create_topic(client: AdminClient, name: str) -> None:
    client.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=WAIT)


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


# -- authorized operations ------------------------------------------------------------------
def _join(bootstrap: str, group: str, topic: str, protocol: str) -> confluent_kafka.Consumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol}
    if protocol == "classic":
        settings["session.timeout.ms"] = 6000
    consumer = confluent_kafka.Consumer(settings)
    consumer.subscribe([topic])
    eventually(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), "no assignment")
    return consumer


def test_topics_the_cluster_and_groups_carry_their_authorized_operations(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(*GROUP_SETTINGS)
    client = admin(broker.bootstrap)
    create_topic(client, "ops-topic")
    [asked] = client.describe_topics(
        TopicCollection(["ops-topic"]), include_authorized_operations=True
    ).values()
    assert set(asked.result(timeout=WAIT).authorized_operations) == TOPIC_OPS
    [not_asked] = client.describe_topics(TopicCollection(["ops-topic"])).values()
    assert not not_asked.result(timeout=WAIT).authorized_operations
    cluster = client.describe_cluster(include_authorized_operations=True).result(timeout=WAIT)
    assert set(cluster.authorized_operations) == CLUSTER_OPS
    assert not client.describe_cluster().result(timeout=WAIT).authorized_operations

    for protocol in ("classic", "consumer"):  # DescribeGroups, ConsumerGroupDescribe
        group = f"ops-{protocol}"
        consumer = _join(broker.bootstrap, group, "ops-topic", protocol)
        try:
            [described] = client.describe_consumer_groups(
                [group], include_authorized_operations=True
            ).values()
            assert set(described.result(timeout=WAIT).authorized_operations) == GROUP_OPS
        finally:
            consumer.close()


# -- the ACL APIs ---------------------------------------------------------------------------
def test_the_acl_apis_answer_security_disabled(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    client = admin(broker.bootstrap)
    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        Op.READ,
        AclPermissionType.ALLOW,
    )
    matching_all = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, Op.ANY, AclPermissionType.ANY
    )
    for futures in (client.create_acls([binding]), client.delete_acls([matching_all])):
        [outcome] = results(futures).values()
        assert code_of(outcome) == KafkaError.SECURITY_DISABLED
        assert outcome.str() == "No Authorizer is configured."
    python_admin = kafka.admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(kafka.errors.SecurityDisabledError):
            python_admin.describe_acls(
                kafka.admin.ACLFilter(
                    principal=None,
                    host="*",
                    operation=kafka.admin.ACLOperation.ANY,
                    permission_type=kafka.admin.ACLPermissionType.ANY,
                    resource_pattern=kafka.admin.ResourcePatternFilter(
                        kafka.admin.ResourceType.TOPIC, None, kafka.admin.ACLResourcePatternType.ANY
                    ),
                )
            )
    finally:
        python_admin.close()


# -- SCRAM credentials ----------------------------------------------------------------------
def test_an_org_admin_manages_its_org_s_logins(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    users_file = tmp_path / "users.json"
    UserStore({u.name: user(u) for u in (ROOT, LIMITED, OTHER)}).save(users_file)
    broker = broker_factory(*broker_settings("SASL_PLAINTEXT", users_file))
    root = admin(broker.bootstrap, sasl(ROOT))
    create_topic(root, "org1-topic")

    # a new user of org 1, created by its admin, logs in at once with the new password
    [done] = results(
        root.alter_user_scram_credentials(
            [upsert("newbie", "newbie-pw", ScramMechanism.SCRAM_SHA_512)]
        )
    ).values()
    assert done is None
    newbie = Login("newbie", "newbie-pw", "SCRAM-SHA-512")
    assert logs_in(broker.bootstrap, newbie)
    assert "org1-topic" in admin(broker.bootstrap, newbie).list_topics(timeout=WAIT).topics
    assert not logs_in(broker.bootstrap, Login("newbie", "wrong", "SCRAM-SHA-512"))
    described = root.describe_user_scram_credentials(["newbie"])["newbie"].result(timeout=WAIT)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]

    # a limited user's password is rotated; it keeps its prefixes, and is no admin
    results(
        root.alter_user_scram_credentials(
            [upsert("limited", "rotated", ScramMechanism.SCRAM_SHA_256)]
        )
    )
    assert not logs_in(broker.bootstrap, sasl(LIMITED))
    limited = admin(broker.bootstrap, sasl(LIMITED, "rotated"))
    [refused] = results(limited.create_topics([NewTopic("elsewhere", 1, 1)])).values()
    assert code_of(refused) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [refused] = results(limited.describe_user_scram_credentials(["root"])).values()
    assert code_of(refused) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as everyone:
        limited.describe_user_scram_credentials().result(timeout=WAIT)
    assert everyone.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    [refused] = results(
        limited.alter_user_scram_credentials([upsert("limited", "x", ScramMechanism.SCRAM_SHA_256)])
    ).values()
    assert code_of(refused) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    cluster = limited.describe_cluster(include_authorized_operations=True).result(timeout=WAIT)
    assert not cluster.authorized_operations  # Kafka's 0: no DESCRIBE on the cluster
    create_topic(limited, "lim.mine")
    [mine] = limited.describe_topics(
        TopicCollection(["lim.mine"]), include_authorized_operations=True
    ).values()
    assert set(mine.result(timeout=WAIT).authorized_operations) == TOPIC_OPS

    # another org's admin sees its own org only, and can't take a name in use
    other = admin(broker.bootstrap, sasl(OTHER))
    everyone = other.describe_user_scram_credentials().result(timeout=WAIT)
    assert set(everyone) == {"other"}
    [taken] = results(
        other.alter_user_scram_credentials([upsert("newbie", "mine", ScramMechanism.SCRAM_SHA_256)])
    ).values()
    assert code_of(taken) == KafkaError.UNACCEPTABLE_CREDENTIAL
    [unknown] = results(
        other.alter_user_scram_credentials(
            [UserScramCredentialDeletion("root", ScramMechanism.SCRAM_SHA_256)]
        )
    ).values()
    assert code_of(unknown) == KafkaError.RESOURCE_NOT_FOUND
    assert set(root.describe_user_scram_credentials().result(timeout=WAIT)) == {
        "root",
        "limited",
        "newbie",
    }

    # deleting its credential ends the user's logins; the file holds what changed
    results(
        root.alter_user_scram_credentials(
            [UserScramCredentialDeletion("newbie", ScramMechanism.SCRAM_SHA_512)]
        )
    )
    assert not logs_in(broker.bootstrap, newbie)
    on_disk = UserStore.load(users_file)
    assert on_disk.users["newbie"].org_id == 1 and not on_disk.users["newbie"].credentials
    assert on_disk.users["limited"].topic_prefixes == ("lim.",)
    assert on_disk.users["other"].org_id == 2


def test_without_sasl_anyone_manages_org_0_s_users_in_the_data_dir(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = broker_factory(data_dir=tmp_path / "data")
    client = admin(broker.bootstrap)
    [missing] = results(client.describe_user_scram_credentials(["svc"])).values()
    assert code_of(missing) == KafkaError.RESOURCE_NOT_FOUND
    results(
        client.alter_user_scram_credentials(
            [upsert("svc", "pw", ScramMechanism.SCRAM_SHA_256, 4096)]
        )
    )
    svc = UserStore.load(tmp_path / "data" / "users.json").users["svc"]
    assert svc.org_id == 0 and svc.credentials
    described = client.describe_user_scram_credentials(["svc"])["svc"].result(timeout=WAIT)
    assert [c.iterations for c in described.scram_credential_infos] == [4096]

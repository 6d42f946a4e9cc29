"""Authorized operations from the tenancy model, as the bit fields Kafka's clients decode."""

from __future__ import annotations

from rafka_actors.auth.acl_operations import (
    CLUSTER_OPERATIONS,
    GROUP_BITS,
    TOPIC_BITS,
    AclOperation,
    bitfield,
    cluster_authorized_operations,
    cluster_operations,
    group_operations,
    is_org_admin,
    topic_operations,
)
from rafka_actors.auth.users import User

Op = AclOperation


def test_the_fields_are_those_kafka_sends_without_an_authorizer() -> None:
    # The values Kafka 4.3.1 sent for a topic, the cluster and a group to a PLAINTEXT client
    # (Metadata v10, DescribeCluster v1, DescribeGroups v5).
    assert TOPIC_BITS == 3576
    assert bitfield(CLUSTER_OPERATIONS) == 8096
    assert GROUP_BITS == 3400
    assert cluster_authorized_operations(None) == 8096


def test_a_connection_without_a_user_may_do_everything() -> None:
    assert is_org_admin(None)
    assert topic_operations(None, "any") == TOPIC_BITS
    assert group_operations(None, "any") == GROUP_BITS


def test_a_user_without_prefixes_administers_its_org() -> None:
    admin = User("root", 3)
    assert is_org_admin(admin)
    assert cluster_operations(admin) == CLUSTER_OPERATIONS
    assert cluster_authorized_operations(admin) == 8096


def test_prefixes_bound_topics_groups_and_the_cluster() -> None:
    user = User("u", 3, group_prefixes=("g.",), topic_prefixes=("t.",))
    assert not is_org_admin(user)
    assert topic_operations(user, "t.orders") == TOPIC_BITS
    assert topic_operations(user, "orders") == 0
    assert group_operations(user, "g.x") == GROUP_BITS
    assert group_operations(user, "x") == 0
    assert cluster_operations(user) == {Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE}
    # Kafka reports 0 to a principal without DESCRIBE on the cluster.
    assert cluster_authorized_operations(user) == 0


def test_cluster_create_and_cluster_action_follow_the_unlimited_names() -> None:
    groups_only = User("u", 3, group_prefixes=("g.",))
    assert cluster_operations(groups_only) == {
        Op.DESCRIBE_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.CREATE,
        Op.CLUSTER_ACTION,
    }
    txn_limited = User("u", 3, group_prefixes=("g.",), transactional_id_prefixes=("x.",))
    assert Op.CREATE in cluster_operations(txn_limited)
    assert Op.CLUSTER_ACTION not in cluster_operations(txn_limited)
    txn_only = User("u", 3, transactional_id_prefixes=("x.",))
    assert not is_org_admin(txn_only)
    assert Op.ALTER not in cluster_operations(txn_only)

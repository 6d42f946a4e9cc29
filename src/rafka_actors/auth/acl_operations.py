"""What a user may do, as Kafka's ACL operations: the authorized-operations fields.

Metadata, DescribeCluster, DescribeGroups, ConsumerGroupDescribe and ShareGroupDescribe
report, when the client asks, a 32-bit field with bit N set for each `AclOperation` N the
caller may perform on the resource (Kafka's AuthHelper.authorizedOperations). Access here is by
organisation and prefixes (docs/tenancy.md), not ACLs, so the operations follow from the user:

- a topic or group the user may use (its name matches the user's prefixes): every operation
  Kafka supports on it. Its org's topics and groups are the user's to read, write, create,
  delete, alter and configure; one outside the prefixes is refused before it is described.
- the cluster: every operation to an org admin (`is_org_admin`); to other users only what
  they may do (read the broker's configs, write idempotently, create topics when their topic
  names are unlimited, and Kafka's CLUSTER_ACTION when neither topics nor transactional ids
  are limited), which is reported as 0, as Kafka reports it to a principal without DESCRIBE
  on the cluster.

A connection without a user (a listener without SASL) may do everything, as any principal
may with Kafka when no authorizer is configured.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from .users import User


class AclOperation(enum.IntEnum):
    """Kafka's org.apache.kafka.common.acl.AclOperation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


Op = AclOperation
# What Kafka supports per resource type (AclEntry.supportedOperations).
TOPIC_OPERATIONS = frozenset(
    {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER}
    | {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
)
GROUP_OPERATIONS = frozenset(
    {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
)
CLUSTER_OPERATIONS = frozenset(
    {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    | {Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}
)

OMITTED = -(2**31)  # the field's default: the client did not ask


def bitfield(operations: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit N for operation N."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


TOPIC_BITS = bitfield(TOPIC_OPERATIONS)
GROUP_BITS = bitfield(GROUP_OPERATIONS)


def is_org_admin(user: User | None) -> bool:
    """A user whose org is wholly its own: no group, topic or transactional-id prefixes (or
    no user at all, on a listener without SASL). It manages its org's SCRAM credentials."""
    return user is None or not (
        user.group_prefixes or user.topic_prefixes or user.transactional_id_prefixes
    )


def topic_operations(user: User | None, name: str) -> int:
    return TOPIC_BITS if user is None or user.may_use_topic(name) else 0


def group_operations(user: User | None, group_id: str) -> int:
    return GROUP_BITS if user is None or user.may_use_group(group_id) else 0


def cluster_operations(user: User | None) -> frozenset[AclOperation]:
    if is_org_admin(user):
        return CLUSTER_OPERATIONS
    assert user is not None
    allowed = {Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE}
    if not user.topic_prefixes:
        allowed.add(Op.CREATE)
        if not user.transactional_id_prefixes:
            allowed.add(Op.CLUSTER_ACTION)
    return frozenset(allowed)


def cluster_authorized_operations(user: User | None) -> int:
    """The cluster's field, as Kafka fills it: 0 unless the caller may DESCRIBE the cluster."""
    operations = cluster_operations(user)
    return bitfield(operations) if Op.DESCRIBE in operations else 0

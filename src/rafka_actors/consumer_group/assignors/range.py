"""The ``range`` server-side assignor, after Kafka's (KIP-848) ``RangeAssignor``.

Theory of operation
-------------------
Members are put in one order: static members (those with an ``instance_id``) first, by instance
id, then dynamic members, by member id. For each topic, its subscribers in that order split the
partitions into contiguous ranges: with ``n`` partitions over ``m`` subscribers, each gets
``n // m`` and the first ``n % m`` get one more; once the partitions run out, the remaining
subscribers get none of that topic.

Because every topic is split in the same member order, members subscribed to the same topics with
the same partition counts get the *same* partition numbers of each (co-partitioning, for joins):
two members over topics ``T1`` and ``T2`` of three partitions each get ``{T1: 0-1, T2: 0-1}`` and
``{T1: 2, T2: 2}``. With differing subscriptions or partition counts each topic is still split in
ranges, but the numbers no longer line up.

Like Kafka's server-side range assignor this one ignores the ``current`` assignment; its only
stickiness comes from the order: a static member rejoining with a new member id but the same
instance id keeps its place, hence its ranges, as long as the membership, the subscriptions and
the partition counts stay the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from .spec import Assignment, MemberSpec, TopicId

__all__ = ["assign", "member_order"]


def member_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Static members by instance id, then dynamic members by member id."""

    def key(member_id: str) -> tuple[int, str, str]:
        instance_id = members[member_id].instance_id
        if instance_id is None:
            return (1, "", member_id)
        return (0, instance_id, member_id)

    return sorted(members, key=key)


def assign(
    members: Mapping[str, MemberSpec], partitions: Mapping[TopicId, int]
) -> dict[str, Assignment]:
    """Contiguous per-topic ranges, co-partitioned across topics where possible."""
    order = member_order(members)
    result: dict[str, Assignment] = {member_id: {} for member_id in order}
    for topic_id, ranks in _subscribers(members, partitions, order):
        # Members past the partition count get nothing of the topic.
        count = max(partitions[topic_id], 0)
        _split(topic_id, count, len(ranks), [order[r] for r in ranks[:count]], result)
    return result


def _subscribers(
    members: Mapping[str, MemberSpec], partitions: Mapping[TopicId, int], order: list[str]
) -> list[tuple[TopicId, list[int]]]:
    """Every subscribed, existing topic with its subscribers, as ascending ranks in ``order``."""
    # Members sharing a subscription are grouped, so that a homogeneous group of M members over
    # T topics costs O(M + T) here rather than O(M * T). UUID.__hash__ is Python code: set
    # operations (reusing the hashes stored in the frozensets) and ``UUID.int`` keys avoid it.
    groups: dict[frozenset[TopicId], list[int]] = {}
    for rank, member_id in enumerate(order):
        groups.setdefault(members[member_id].subscribed, []).append(rank)
    existing = frozenset(partitions)
    topics: dict[int, tuple[TopicId, list[list[int]]]] = {}
    for subscribed, ranks in groups.items():
        for topic_id in subscribed if subscribed <= existing else subscribed & existing:
            entry = topics.get(topic_id.int)
            if entry is None:
                topics[topic_id.int] = entry = (topic_id, [])
            entry[1].append(ranks)
    return [
        (topic_id, lists[0] if len(lists) == 1 else sorted(r for rs in lists for r in rs))
        for topic_id, lists in topics.values()
    ]


def _split(
    topic_id: TopicId,
    count: int,
    subscriber_count: int,
    subscribers: list[str],
    result: dict[str, Assignment],
) -> None:
    """Give the first ``subscribers`` of the topic's ``subscriber_count``, in order, contiguous
    ranges of its ``count`` partitions."""
    quota, extra = divmod(count, subscriber_count)
    start = 0
    for position, member_id in enumerate(subscribers):
        if start >= count:
            break
        end = start + quota + (1 if position < extra else 0)
        result[member_id][topic_id] = frozenset(range(start, end))
        start = end

"""The ``uniform`` server-side assignor (KIP-848's default), after Kafka's ``UniformAssignor``.

Goals, in priority order: *balance* (partition counts per member as even as the subscriptions
allow), then *stickiness* (a member keeps as much of its ``current`` assignment as balance allows).
Racks are ignored.

Theory of operation
-------------------
Members are numbered in sorted member-id order and topics in sorted topic-id order; every
partition is a slot ``owners[topic][partition]`` holding a member number or ``-1``. Both paths
first *claim* the current assignments: each member, in order, claims the partitions of its
``current`` assignment that still exist, belong to a topic it subscribes to and were not already
claimed by an earlier member. The group then takes one of two paths:

*Homogeneous* (every member has the same subscription): with ``P`` partitions over ``M`` members,
each member's quota is ``P // M``, and ``P % M`` members get one more. The extra slots go to the
members currently holding the most partitions (ties by member id), which maximises what can be
kept. Each member keeps the first ``quota`` partitions of its claim (in topic/partition order) and
releases the rest; the free partitions, in order, then fill the members below quota, in member
order, as contiguous runs. Counts differ by at most one, and the number of partitions that move is
the minimum possible for a balanced result: from a balanced assignment, adding a member only takes
partitions from the others (just its share moves), removing one only gives the survivors more.

*Heterogeneous* (subscriptions differ): claims are kept whole. Topics are ordered by partitions
per subscriber (descending), then subscriber count (ascending), then topic id. For each topic, its
free partitions go one at a time to the subscriber with the fewest partitions overall (ties by the
member's rank at the start of the topic, as Kafka's water-filling does). Then a balancing pass
visits the topics with two or more subscribers in the same order: while the most loaded subscriber
still holding one of the topic's partitions (from before the pass) has at least two more
partitions than the least loaded subscriber, its highest such partition moves. Passes repeat until
a full cycle over the topics moves nothing, or :data:`MAX_BALANCE_ROUNDS` cycles have run. When
done, no partition's owner holds two or more partitions more than some other subscriber of its
topic; as in Kafka, overlapping subscriptions may still leave a group-wide spread above one.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from .spec import Assignment, MemberSpec, TopicId

__all__ = ["MAX_BALANCE_ROUNDS", "assign", "assign_heterogeneous", "assign_homogeneous"]

MAX_BALANCE_ROUNDS = 16
"""Cap on balancing cycles over the topics, as Kafka's ``MAX_ITERATION_COUNT``."""

_UNOWNED = -1


def _topic_key(topic_id: TopicId) -> int:
    return topic_id.int


class _Group:
    """Numbered members and topics, the per-topic subscribers, and the partition owner table."""

    def __init__(self, members: Mapping[str, MemberSpec], partitions: Mapping[TopicId, int]):
        self.member_ids = sorted(members)
        # Members sharing a subscription are grouped, so it is filtered only once per distinct set.
        groups: dict[frozenset[TopicId], list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            groups.setdefault(members[member_id].subscribed, []).append(index)
        # UUID.__hash__ is Python code: set operations (which reuse the hashes stored in the
        # frozensets) and dicts keyed by ``UUID.int`` keep it off the hot paths.
        existing = frozenset(partitions)
        effective = {s: s if s <= existing else s & existing for s in groups}
        self.homogeneous = len(set(effective.values())) == 1
        self.topic_ids = sorted(frozenset().union(*effective.values()), key=_topic_key)
        self.topic_index = {t.int: ti for ti, t in enumerate(self.topic_ids)}
        self.owners = [[_UNOWNED] * max(partitions[t], 0) for t in self.topic_ids]
        self.subscribers: list[list[int]] = [[] for _ in self.topic_ids]
        subscribers, topic_index = self.subscribers, self.topic_index
        for subscribed, indices in groups.items():
            for topic_id in effective[subscribed]:
                subscribers[topic_index[topic_id.int]].extend(indices)
        if len(groups) > 1:
            for topic_subscribers in subscribers:
                topic_subscribers.sort()

    def claim_current(self, members: Mapping[str, MemberSpec]) -> list[list[tuple[int, int]]]:
        """Give each member the valid, not yet claimed partitions of its current assignment.

        Returns the claimed ``(topic index, partition)`` pairs of every member, in order.
        """
        claimed: list[list[tuple[int, int]]] = []
        topic_index = self.topic_index
        for index, member_id in enumerate(self.member_ids):
            spec = members[member_id]
            mine: list[tuple[int, int]] = []
            claimed.append(mine)
            for topic_id in sorted(spec.current, key=_topic_key):
                ti = topic_index.get(topic_id.int)
                if ti is None or topic_id not in spec.subscribed:
                    continue
                owners = self.owners[ti]
                for partition in sorted(spec.current[topic_id]):
                    if 0 <= partition < len(owners) and owners[partition] == _UNOWNED:
                        owners[partition] = index
                        mine.append((ti, partition))
        return claimed

    def result(self) -> dict[str, Assignment]:
        per_member: list[dict[TopicId, list[int]]] = [{} for _ in self.member_ids]
        for topic_id, owners in zip(self.topic_ids, self.owners, strict=True):
            for partition, owner in enumerate(owners):
                if owner != _UNOWNED:
                    per_member[owner].setdefault(topic_id, []).append(partition)
        return {
            member_id: {t: frozenset(ps) for t, ps in assigned.items()}
            for member_id, assigned in zip(self.member_ids, per_member, strict=True)
        }


def assign(
    members: Mapping[str, MemberSpec], partitions: Mapping[TopicId, int]
) -> dict[str, Assignment]:
    """Balanced, sticky assignment of the subscribed partitions over ``members``."""
    if not members:
        return {}
    group = _Group(members, partitions)
    if group.homogeneous:
        _homogeneous(group, members)
    else:
        _heterogeneous(group, members)
    return group.result()


def assign_homogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[TopicId, int]
) -> dict[str, Assignment]:
    """The homogeneous path alone; ``members`` must all have the same subscription."""
    group = _Group(members, partitions)
    if not group.homogeneous:
        raise ValueError("members do not all have the same subscription")
    _homogeneous(group, members)
    return group.result()


def assign_heterogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[TopicId, int]
) -> dict[str, Assignment]:
    """The heterogeneous path alone (valid for any subscriptions, like Kafka's builder)."""
    group = _Group(members, partitions)
    _heterogeneous(group, members)
    return group.result()


def _homogeneous(group: _Group, members: Mapping[str, MemberSpec]) -> None:
    claimed = group.claim_current(members)
    total = sum(len(owners) for owners in group.owners)
    count = len(group.member_ids)
    minimum, extra = divmod(total, count)
    quota = [minimum] * count
    # Extra slots to the members holding most, so that fewest partitions have to move.
    for index in sorted(range(count), key=lambda i: -len(claimed[i]))[:extra]:
        quota[index] += 1
    owners = group.owners
    for index, mine in enumerate(claimed):
        for ti, partition in mine[quota[index] :]:
            owners[ti][partition] = _UNOWNED
        quota[index] -= min(len(mine), quota[index])
    free = [
        (ti, partition)
        for ti, topic_owners in enumerate(owners)
        for partition, owner in enumerate(topic_owners)
        if owner == _UNOWNED
    ]
    position = 0
    for index, remaining in enumerate(quota):
        for ti, partition in free[position : position + remaining]:
            owners[ti][partition] = index
        position += remaining


def _heterogeneous(group: _Group, members: Mapping[str, MemberSpec]) -> None:
    sizes = [len(mine) for mine in group.claim_current(members)]
    order = sorted(
        range(len(group.topic_ids)),
        key=lambda ti: (
            -len(group.owners[ti]) / len(group.subscribers[ti]),
            len(group.subscribers[ti]),
            group.topic_ids[ti].int,
        ),
    )
    for ti in order:
        _fill_topic(group.owners[ti], group.subscribers[ti], sizes)
    _balance(group, [ti for ti in order if len(group.subscribers[ti]) >= 2], sizes)


def _fill_topic(owners: list[int], subscribers: list[int], sizes: list[int]) -> None:
    """Give the topic's free partitions, one by one, to its least loaded subscriber."""
    free = [partition for partition, owner in enumerate(owners) if owner == _UNOWNED]
    if not free:
        return
    # Only the len(free) least loaded subscribers can receive anything; a sorted list is a heap.
    ranked = heapq.nsmallest(len(free), [(sizes[i], i) for i in subscribers])
    heap = [(size, rank, member) for rank, (size, member) in enumerate(ranked)]
    for partition in free:
        size, rank, member = heap[0]
        owners[partition] = member
        sizes[member] = size + 1
        heapq.heapreplace(heap, (size + 1, rank, member))


def _balance(group: _Group, topics: list[int], sizes: list[int]) -> None:
    """Balance topic by topic until a whole cycle over the topics moves nothing."""
    last_moved = -1
    for _ in range(MAX_BALANCE_ROUNDS):
        for position, ti in enumerate(topics):
            if position == last_moved:
                return
            moved = _balance_topic(group.owners[ti], group.subscribers[ti], sizes)
            if moved or last_moved == -1:
                last_moved = position


def _balance_topic(owners: list[int], subscribers: list[int], sizes: list[int]) -> int:
    """Move partitions of one topic from its most to its least loaded subscribers.

    Returns how many partitions moved.
    """
    loads = [sizes[i] for i in subscribers]
    if max(loads) - min(loads) <= 1:
        return 0
    # ``subscribers`` is ascending, and the sort stable: ties stay in member order.
    ranked = sorted(subscribers, key=sizes.__getitem__)
    rank = {member: r for r, member in enumerate(ranked)}
    givable: dict[int, list[int]] = {}
    for partition, owner in enumerate(owners):
        givable.setdefault(owner, []).append(partition)
    # Lazy heaps: an entry whose size no longer matches ``sizes`` is stale and skipped.
    least = [(sizes[m], r, m) for r, m in enumerate(ranked)]
    most = [(-sizes[m], -rank[m], m) for m in reversed(ranked) if m in givable]
    moved = 0
    while most:
        neg_size, neg_rank, giver = most[0]
        if -neg_size != sizes[giver] or not givable[giver]:
            heapq.heappop(most)
            continue
        size, r, taker = least[0]
        if size != sizes[taker]:
            heapq.heappop(least)
            continue
        if sizes[giver] - size <= 1:
            break
        owners[givable[giver].pop()] = taker
        sizes[giver] -= 1
        sizes[taker] += 1
        moved += 1
        heapq.heapreplace(most, (-sizes[giver], neg_rank, giver))
        heapq.heapreplace(least, (sizes[taker], r, taker))
        heapq.heappush(least, (sizes[giver], -neg_rank, giver))
        if taker in givable:
            heapq.heappush(most, (-sizes[taker], -r, taker))
    return moved

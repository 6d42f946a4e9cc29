"""The target assignment: running the server-side assignor when the group epoch has moved.

When the group epoch is ahead of the assignment epoch, the group's assignor (the one most of
its members ask for, else the first of `group.consumer.assignors`) runs over every member and
every subscribed topic. Only the members whose slice changed get a new target record; then the
target-assignment metadata record moves the assignment epoch up to the group epoch.

`group.consumer.assignment.interval.ms` throttles the assignor: within the interval after it
last ran, the group stays Assigning and `assignment_deadline` tells the actor when to run it
(Kafka waits for the next heartbeat; a deadline hands the new target out no later).
"""

from __future__ import annotations

from collections import Counter

from ..group_common.effects import Effects, TargetAssigned
from .assignors import ASSIGNORS, MemberSpec
from .records import ConsumerTargetMemberRecord, ConsumerTargetMetadataRecord, to_rows
from .state import Assignment, ConsumerGroup
from .subscription import topic_names


def maybe_assign(group: ConsumerGroup, fx: Effects) -> None:
    """Compute the target now if it is due and not throttled, else note when it will be."""
    if group.group_epoch <= group.assignment_epoch:
        group.assignment_deadline = None
        return
    due = group.assignment_timestamp_ms + fx.config.consumer_assignment_interval_ms
    if group.assignment_timestamp_ms and fx.now < due:
        group.assignment_deadline = due
        return
    assign(group, fx)


def assign(group: ConsumerGroup, fx: Effects) -> None:
    image = fx.topics
    specs: dict[str, MemberSpec] = {}
    partitions: dict = {}
    resolved: dict[tuple[tuple[str, ...], str | None], frozenset] = {}
    for member_id, member in group.members.items():
        sub = member.subscription
        key = (sub.topic_names, sub.topic_regex)
        topic_ids = resolved.get(key)
        if topic_ids is None:
            infos = [image.by_name[name] for name in topic_names(sub, image)]
            for info in infos:
                partitions[info.topic_id] = info.partitions
            topic_ids = resolved[key] = frozenset(info.topic_id for info in infos)
        specs[member_id] = MemberSpec(
            topic_ids, group.target.get(member_id, {}), sub.instance_id, sub.rack_id
        )
    assignor = preferred_assignor(group, fx)
    result = ASSIGNORS[assignor](specs, partitions)
    for member_id in group.members:
        new: Assignment = {t: p for t, p in result.get(member_id, {}).items() if p}
        if new != group.target.get(member_id):
            fx.write(group, ConsumerTargetMemberRecord(group.group_id, member_id, to_rows(new)))
    fx.write(group, ConsumerTargetMetadataRecord(group.group_id, group.group_epoch, fx.now))
    group.assignment_deadline = None
    fx.events.append(
        TargetAssigned(group.group_id, group.assignment_epoch, assignor, len(group.members))
    )


def preferred_assignor(group: ConsumerGroup, fx: Effects) -> str:
    """The assignor most members name (ties: the configured order), else the default."""
    configured = fx.config.consumer_assignors
    votes = Counter(
        m.subscription.server_assignor
        for m in group.members.values()
        if m.subscription.server_assignor in configured
    )
    if not votes:
        return configured[0]
    return max(configured, key=lambda name: (votes[name], -configured.index(name)))

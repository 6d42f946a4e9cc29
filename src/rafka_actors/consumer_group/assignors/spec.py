"""What a server-side assignor gets and returns (KIP-848's `ConsumerGroupPartitionAssignor`).

An assignor is a pure function `assign(members, partitions) -> {member id: assignment}`:

- ``members``: every member of the group, by member id, with the topic ids it subscribes to
  (only topics that exist), its current *target* assignment (so the assignor can be sticky),
  and its instance and rack ids;
- ``partitions``: the partition count of every subscribed topic, by topic id.

It returns an assignment for every member (an empty one if it gets nothing), where each
partition of a subscribed topic goes to exactly one member subscribed to that topic. It is
deterministic: the same input gives the same output, whatever the order of the mappings.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TopicId = uuid.UUID
Assignment = dict[TopicId, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed: frozenset[TopicId]
    current: Mapping[TopicId, frozenset[int]] = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


Assignor = Callable[[Mapping[str, MemberSpec], Mapping[TopicId, int]], dict[str, Assignment]]

"""A share group's live state: its members, their share sessions, its share partitions.

Kafka's simple assignor (KIP-932's first one) lets every member fetch from every partition of
the topics it subscribes to, so a member's assignment is a function of its subscription and
the topics that exist; the group epoch goes up whenever a member joins, leaves or changes
what it is assigned, and a member's epoch follows the group's on its next heartbeat.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ..group_common.ops import TopicPartitions
from ..group_common.topic_image import TopicImage
from .partition import SharePartition

ASSIGNOR_NAME = "simple"


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


@dataclass(slots=True)
class ShareSession:
    """A member's share-fetch session: the partitions it fetches, and the epoch its next
    request must carry."""

    next_epoch: int = 1
    partitions: set[tuple[str, int]] = field(default_factory=set)


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed: tuple[str, ...] = ()
    assignment: TopicPartitions = ()
    session_deadline: int = 0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    cgp_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    sessions: dict[str, ShareSession] = field(default_factory=dict)  # by member id
    partitions: dict[tuple[str, int], SharePartition] = field(default_factory=dict)
    # what the other group types call offsets: a share group commits none (snapshot.py)
    offsets: dict[Any, Any] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def is_empty(self) -> bool:
        return not self.members


def assignment_of(subscribed: tuple[str, ...], topics: TopicImage) -> TopicPartitions:
    """The simple assignor's answer for one member: every partition of every subscribed
    topic that exists, in a stable order."""
    rows = []
    for name in sorted(set(subscribed)):
        info = topics.by_name.get(name)
        if info is not None and info.partitions > 0:
            rows.append((info.topic_id, tuple(range(info.partitions))))
    return tuple(rows)

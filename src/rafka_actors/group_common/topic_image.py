"""The topics a consumer group's state machine may look at: an immutable, versioned snapshot.

KIP-848 assignments are computed by the coordinator, so the pure state machine needs topic
metadata (Kafka's `MetadataImage`): every topic's id and partition count. The topic store hands
out one `TopicImage` per change (create, delete); `version` grows with each, so a group can
tell in O(1) whether anything it subscribes to may have changed since it last looked.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True)
class TopicImage:
    version: int = 0
    by_name: dict[str, TopicInfo] = field(default_factory=dict)
    by_id: dict[uuid.UUID, TopicInfo] = field(default_factory=dict)

    @classmethod
    def of(cls, version: int, topics: Iterable[TopicInfo]) -> TopicImage:
        listed = list(topics)
        return cls(version, {t.name: t for t in listed}, {t.topic_id: t for t in listed})

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        info = self.by_id.get(topic_id)
        return None if info is None else info.name


EMPTY_IMAGE = TopicImage()

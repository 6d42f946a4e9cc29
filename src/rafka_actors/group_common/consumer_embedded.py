"""The consumer protocol's embedded formats, read and written in full (design note 004).

A classic consumer (protocol type "consumer") puts a ConsumerProtocolSubscription in its
JoinGroup protocols and gets a ConsumerProtocolAssignment back from SyncGroup. The
coordinator reads them when a group changes type (coordinator/migration.py) and when it
serves a classic member inside a consumer group (consumer_group/classic_members.py):

- subscription v0: topics, user data; v1: + owned partitions; v2: + generation; v3: + rack;
- assignment v0-v3: partitions, user data.

A version above the highest known is read as the highest known, as Kafka does (later
versions only add fields at the end). Malformed bytes raise `MalformedEmbedded`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
HIGHEST_VERSION = 3
TopicPartitionList = tuple[tuple[str, tuple[int, ...]], ...]


class MalformedEmbedded(ValueError):
    """Bytes that are not the consumer protocol's embedded format."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitionList = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    partitions: TopicPartitionList
    user_data: bytes | None = None


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: struct.Struct) -> int:
        try:
            (value,) = fmt.unpack_from(self.data, self.pos)
        except struct.error as e:
            raise MalformedEmbedded(f"truncated at byte {self.pos}") from e
        self.pos += fmt.size
        return int(value)

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def string(self, nullable: bool = False) -> str | None:
        length = self.i16()
        if length < 0:
            if nullable:
                return None
            raise MalformedEmbedded("null string")
        end = self.pos + length
        if end > len(self.data):
            raise MalformedEmbedded("string runs past the end")
        try:
            text = self.data[self.pos : end].decode()
        except UnicodeDecodeError as e:
            raise MalformedEmbedded("string is not UTF-8") from e
        self.pos = end
        return text

    def bytes_(self) -> bytes | None:
        length = self.i32()
        if length < 0:
            return None
        end = self.pos + length
        if end > len(self.data):
            raise MalformedEmbedded("bytes run past the end")
        value = self.data[self.pos : end]
        self.pos = end
        return value

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data):
            raise MalformedEmbedded(f"bad array length {n}")
        return n

    def topic_partitions(self) -> TopicPartitionList:
        rows = []
        for _ in range(self.count()):
            topic = self.string()
            assert topic is not None
            rows.append((topic, tuple(self.i32() for _ in range(self.count()))))
        return tuple(rows)


def version_of(data: bytes) -> int:
    """The version an embedded payload was written at (0 if unreadable)."""
    if len(data) < 2:
        return 0
    return max(_I16.unpack_from(data, 0)[0], 0)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise MalformedEmbedded(f"bad version {version}")
    topics = []
    for _ in range(r.count()):
        topic = r.string()
        assert topic is not None
        topics.append(topic)
    user_data = r.bytes_()
    owned: TopicPartitionList = ()
    generation, rack = -1, None
    # Some clients write an older layout under a newer version number: missing trailing
    # fields take their defaults rather than failing the member.
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        generation = r.i32()
    if version >= 3 and not r.at_end():
        rack = r.string(nullable=True)
    return Subscription(version, tuple(topics), user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> Assignment:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise MalformedEmbedded(f"bad version {version}")
    partitions = r.topic_partitions()
    user_data = r.bytes_() if not r.at_end() else None
    return Assignment(version, partitions, user_data)


def encode_assignment(
    partitions: TopicPartitionList, version: int = 0, user_data: bytes | None = None
) -> bytes:
    """A ConsumerProtocolAssignment at `version` (capped at the highest)."""
    out = [_I16.pack(min(max(version, 0), HIGHEST_VERSION)), _I32.pack(len(partitions))]
    for topic, parts in partitions:
        raw = topic.encode()
        out += [_I16.pack(len(raw)), raw, _I32.pack(len(parts))]
        out += [_I32.pack(p) for p in parts]
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(out)


def encode_subscription(subscription: Subscription) -> bytes:
    """A ConsumerProtocolSubscription at its version (capped at the highest)."""
    version = min(max(subscription.version, 0), HIGHEST_VERSION)
    out = [_I16.pack(version), _I32.pack(len(subscription.topics))]
    for topic in subscription.topics:
        raw = topic.encode()
        out += [_I16.pack(len(raw)), raw]
    data = subscription.user_data
    out.append(_I32.pack(-1) if data is None else _I32.pack(len(data)) + data)
    if version >= 1:
        out.append(_I32.pack(len(subscription.owned_partitions)))
        for topic, parts in subscription.owned_partitions:
            raw = topic.encode()
            out += [_I16.pack(len(raw)), raw, _I32.pack(len(parts))]
            out += [_I32.pack(p) for p in parts]
    if version >= 2:
        out.append(_I32.pack(subscription.generation_id))
    if version >= 3:
        rack = subscription.rack_id
        out.append(_I16.pack(-1) if rack is None else _I16.pack(len(rack.encode())) + rack.encode())
    return b"".join(out)

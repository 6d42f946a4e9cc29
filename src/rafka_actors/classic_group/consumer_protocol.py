"""The consumer protocol's embedded formats (design note 004): just enough to read them.

The coordinator treats subscriptions and assignments as opaque bytes, except where Kafka looks
inside: OffsetDelete refuses topics a live consumer group still subscribes to. Decoding is
lenient: bytes that are not a consumer subscription read as "no topics".
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (length,) = _I16.unpack_from(data, pos)
    pos += 2
    if length < 0 or pos + length > len(data):
        raise ValueError("bad string")
    return data[pos : pos + length].decode(), pos + length


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: topics come first)."""
    try:
        pos = 2  # version
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        topics = set()
        for _ in range(max(count, 0)):
            topic, pos = _string(metadata, pos)
            topics.add(topic)
        return topics
    except (struct.error, ValueError, UnicodeDecodeError):
        return set()


def encode_subscription(topics: list[str], user_data: bytes = b"") -> bytes:
    out = [_I16.pack(0), _I32.pack(len(topics))]
    for topic in topics:
        raw = topic.encode()
        out += [_I16.pack(len(raw)), raw]
    out.append(_I32.pack(len(user_data)) + user_data if user_data else _I32.pack(-1))
    return b"".join(out)


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = [_I16.pack(0), _I32.pack(len(partitions))]
    for topic, parts in partitions.items():
        raw = topic.encode()
        out += [_I16.pack(len(raw)), raw, _I32.pack(len(parts))]
        out += [_I32.pack(p) for p in parts]
    out.append(_I32.pack(len(user_data)) + user_data if user_data else _I32.pack(-1))
    return b"".join(out)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    pos = 2
    (count,) = _I32.unpack_from(data, pos)
    pos += 4
    result: dict[str, list[int]] = {}
    for _ in range(count):
        topic, pos = _string(data, pos)
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        result[topic] = list(struct.unpack_from(f">{n}i", data, pos))
        pos += 4 * n
    return result

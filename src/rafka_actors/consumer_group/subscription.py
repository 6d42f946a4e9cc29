"""Which topics a member subscribes to, and the metadata hash that tells when they changed.

A member subscribes by topic names, by one regular expression, or both. A regular expression
has RE2 syntax (Kafka compiles it with RE2/J; we use Google's RE2 through `google-re2`, so the
same patterns are accepted and mean the same) and must match a whole topic name, as Kafka's
`Pattern.matcher(topic).matches()`. What RE2 has not got, and is refused with
INVALID_REGULAR_EXPRESSION: look-around (`(?=`, `(?!`, `(?<=`), back-references (`\\1`),
possessive quantifiers and atomic groups.

The group epoch must move when a topic a member subscribes to is created, deleted or grows.
Kafka keeps a hash of the subscribed topics' metadata and compares it; so do we:
`metadata_hash` over (name, id, partition count) of every subscribed topic that exists. It is
recomputed only when the topic image's version moved or a subscription changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

from ..group_common.topic_image import TopicImage
from .state import ConsumerMember, Subscription

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad pattern is its error, not ours to log


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, _OPTIONS)


def regex_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid RE2 expression, or None if it is."""
    try:
        _compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        return f"SubscribedTopicRegex {pattern!r} is not a valid regular expression: {reason}"
    return None


def matching(pattern: str, image: TopicImage) -> list[str]:
    compiled = _compiled(pattern)
    return [name for name in image.by_name if compiled.fullmatch(name) is not None]


def topic_names(subscription: Subscription, image: TopicImage) -> set[str]:
    """Names of the existing topics the subscription covers."""
    names = {n for n in subscription.topic_names if n in image.by_name}
    if subscription.topic_regex:
        names.update(matching(subscription.topic_regex, image))
    return names


def subscribed_names(members: Iterable[ConsumerMember], image: TopicImage) -> set[str]:
    names: set[str] = set()
    for member in members:
        names |= topic_names(member.subscription, image)
    return names


def metadata_hash(names: Iterable[str], image: TopicImage) -> int:
    """A stable 63-bit hash of the subscribed topics' metadata (persisted: not `hash()`)."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        info = image.by_name.get(name)
        if info is not None:
            digest.update(f"{name}\0{info.topic_id.hex}\0{info.partitions}\n".encode())
    return int.from_bytes(digest.digest(), "big") >> 1

"""One `(topic, partition)` key object for every group that holds an offset of that partition.

A group's committed offsets (committed.py) and the durable log's view of them
(coordinator/latest.py) are dicts keyed by `(topic, partition)`. Made per commit, each key is
a tuple of 56 bytes, and its topic a string decoded from the request (about 60 bytes more),
kept by every group and by the log's view of it: 100 000 groups of one topic held 200 000 of
each. Here each partition's key is made once and shared; keys are immutable values, so
sharing them gives no group a way to change another's.

Measured with the log view's shared empties (coordinator/latest.py), which pay together with
this: 112 B of a resting group's 2 719 B in process (`bench/group_memory.py`), and in the
broker the topic string too; (g)'s RSS after 100 000 groups with all of issue 53's memory work,
169 MiB against 224 MiB (docs/performance.md, "Memory for 100 000 groups").

The table keeps at most `LIMIT` keys and starts afresh when full (commits naming many made-up
topics must not grow it without bound); a key dropped from it stays valid in the dicts that
hold it.
"""

from __future__ import annotations

import sys
from typing import Final

LIMIT: Final = 1 << 16
_KEYS: dict[tuple[str, int], tuple[str, int]] = {}


def partition_key(topic: str, partition: int) -> tuple[str, int]:
    """The shared `(topic, partition)` key."""
    key = (topic, partition)
    shared = _KEYS.get(key)
    if shared is None:
        if len(_KEYS) >= LIMIT:
            _KEYS.clear()
        shared = _KEYS[key] = (sys.intern(topic), partition)
    return shared

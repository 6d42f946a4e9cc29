"""A resting group's compact form: what the registry keeps of a group whose actor stopped.

A group at rest (no member, no deadline: group_actor.py) is held by the registry for
`group.passivation.idle.ms` beside the snapshot its actor published last, and the next request
starts an actor from it. Held as the actor left it, it kept a dict for each of its containers,
nearly all empty (members, static members, pending members...: six for a classic group), and
its committed offsets twice: in its own dict and in the snapshot's copy for readers.

`rest` turns the group, in the turn its actor stops (the actor hands it over and never touches
it again), into its resting form, in place: every empty dict becomes one shared read-only empty
mapping, and its offsets become the published snapshot's read-only offsets when they are the
same (they are: a snapshot is published after every turn that stored a record). `wake` gives
the next actor a live group again: a fresh dict for each read-only mapping, a copy of the
offsets. Nothing else reads a resting group but the registry's summary of it (snapshot.py's
`summary_of`), which only counts and reads fields; a write to a resting group would fail
loudly (a mapping proxy has no `__setitem__`), not change a shared empty.

Measured (`bench/group_memory.py`, tracemalloc): a simple group created by one commit cost
2 719 B at rest on main; this takes 544 B (20%) off it (the six empty dicts, 384 B, and the
second offsets dict, 160 B), and with the shared keys and empties of partition_keys.py,
coordinator/latest.py and txn_offsets.py it costs 1 619 B. (g) side by side with main
(`bench/run.py --workloads g --runs 2`): broker RSS after 100 000 groups 169 MiB against 224
MiB (0.75x), 1 161 B per group against 1 736 B (docs/performance.md, "Memory for 100 000
groups").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ..coordinator.machine import AnyGroup
from .snapshot import GroupSnapshot

_EMPTY: Final[Mapping[Any, Any]] = MappingProxyType({})  # every resting group's empty dicts
_DICTS: dict[type, tuple[str, ...]] = {}  # a group type's fields that hold a dict


def rest(group: AnyGroup, published: GroupSnapshot | None) -> AnyGroup:
    """`group` in its resting form (changed in place; None stays None)."""
    if group is None:
        return None
    for name in _dicts(group):
        if not getattr(group, name):
            setattr(group, name, _EMPTY)
    if published is not None and type(group.offsets) is dict and group.offsets == published.offsets:
        group.offsets = published.offsets  # type: ignore[assignment]  # read-only until `wake`
    return group


def wake(group: AnyGroup) -> AnyGroup:
    """A live group from its resting form (in place): a dict of its own for each mapping."""
    if group is None:
        return None
    for name in _dicts(group):
        value = getattr(group, name)
        if type(value) is MappingProxyType:
            setattr(group, name, {} if value is _EMPTY else dict(value))
    return group


def _dicts(group: Any) -> tuple[str, ...]:
    """The names of the fields of `group`'s type made as dicts (`offsets` among them)."""
    cls = type(group)
    names = _DICTS.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)
        names = _DICTS[cls] = tuple(f.name for f in fields if f.default_factory is dict)
    return names

"""Server-side partition assignors for KIP-848 consumer groups.

Each assignor is a pure function with the :data:`~.spec.Assignor` signature,
``assign(members, partitions) -> {member id: assignment}`` (see :mod:`.spec`): no I/O, no trio,
deterministic whatever the order of the input mappings. They are registered by the names that
clients put in ``ConsumerGroupHeartbeat.ServerAssignor``:

- ``uniform`` (:mod:`.uniform`, the default): as even as the subscriptions allow, then sticky;
- ``range`` (:mod:`.range`): contiguous per-topic ranges, co-partitioned across topics.
"""

from __future__ import annotations

from ...group_common.effects import ASSIGNOR_NAMES
from . import range as _range
from . import uniform as _uniform
from .spec import Assignment, Assignor, MemberSpec, TopicId

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "Assignment", "Assignor", "MemberSpec", "TopicId"]

# One implementation for each name of group_common's table (tests/consumer_group checks both).
ASSIGNORS: dict[str, Assignor] = {
    "uniform": _uniform.assign,
    "range": _range.assign,
}

DEFAULT_ASSIGNOR = ASSIGNOR_NAMES[0]

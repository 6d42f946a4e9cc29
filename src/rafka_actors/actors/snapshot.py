"""What a group's actor publishes for readers: an immutable view of its stored state.

After every batch whose records are stored, the actor publishes a `GroupSnapshot` (through the
registry): the group's summary, which ListGroups reads, and a read-only copy of its committed
offsets, which an OffsetFetch reads without the mailbox. That is how Kafka serves OffsetFetch:
from the last committed snapshot of the coordinator's state (seed 003, "Fetch path"). Nothing
outside the actor ever reads its live group; a snapshot is never changed once published, so a
reader needs no lock and no turn of the actor.

Pending transactional offsets are not committed offsets and are not in the snapshot's
`offsets`; the snapshot keeps only which partitions have one (`unstable`), so that an
OffsetFetch with `require_stable` gets UNSTABLE_OFFSET_COMMIT for them from the snapshot too.

An OffsetFetch that names a KIP-848 member (v9+: member id and epoch) is checked against the
member's epoch, which only the actor knows: it goes through the mailbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..consumer_group.state import ConsumerGroup
from ..coordinator.machine import AnyGroup
from ..group_common.committed import CommittedOffset
from ..group_common.offsets import fetched
from ..group_common.ops import (
    OffsetFetchOp,
    OffsetFetchOpResp,
)
from ..group_common.txn_offsets import pending_partitions
from ..share_group.state import ShareGroup

NO_OFFSETS: Mapping[tuple[str, int], CommittedOffset] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One line of ListGroups."""

    group_id: str
    state: str
    protocol_type: str
    group_type: str  # "classic", "consumer" (KIP-848) or "share" (KIP-932), as ListGroups v5
    cgp_id: str = ""  # the group's stable identity, for our admin tool (not in ListGroups)
    members: int = 0  # for the metrics endpoint (not in ListGroups)
    generation: int = -1  # classic: the generation; consumer and share: the group epoch


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    summary: GroupSummary | None  # None: the group does not exist (never did, or deleted)
    offsets: Mapping[tuple[str, int], CommittedOffset]
    # partitions with a pending transactional offset (not in `offsets` until committed)
    unstable: frozenset[tuple[str, int]] = frozenset()


NO_GROUP = GroupSnapshot(None, NO_OFFSETS)  # what a group with no stored records reads as


def summary_of(group_id: str, group: AnyGroup) -> GroupSummary | None:
    if group is None:
        return None
    if isinstance(group, ConsumerGroup):
        return GroupSummary(
            group_id,
            group.state.value,
            "consumer",
            "consumer",
            group.cgp_id,
            len(group.members),
            group.group_epoch,
        )
    if isinstance(group, ShareGroup):
        return GroupSummary(
            group_id,
            group.state.value,
            "share",
            "share",
            group.cgp_id,
            len(group.members),
            group.group_epoch,
        )
    return GroupSummary(
        group_id,
        group.state.value,
        group.protocol_type or "",
        "classic",
        group.cgp_id,
        len(group.members),
        group.generation,
    )


def snapshot_of(
    group_id: str, group: AnyGroup, *, offsets_from: GroupSnapshot | None = None
) -> GroupSnapshot:
    """The snapshot of `group` as it is now; with `offsets_from`, that snapshot's offsets
    (which the caller knows to be unchanged) instead of a copy of the group's."""
    if offsets_from is not None:
        offsets, unstable = offsets_from.offsets, offsets_from.unstable
    else:
        unstable = pending_partitions(None if isinstance(group, ShareGroup) else group)
        if group is None or not group.offsets:
            offsets = NO_OFFSETS
        else:
            offsets = MappingProxyType(dict(group.offsets))
    return GroupSnapshot(summary_of(group_id, group), offsets, unstable)


def read(snapshot: GroupSnapshot, op: Any) -> OffsetFetchOpResp | None:
    """The answer to `op` from the snapshot, if it is a pure read of it; else None (ask the
    actor)."""
    if type(op) is not OffsetFetchOp or op.member_id is not None or op.member_epoch >= 0:
        return None
    if snapshot.summary is not None and snapshot.summary.group_type == "share":
        return None  # the share group's actor refuses it
    unstable = snapshot.unstable if op.require_stable else frozenset()
    return fetched(snapshot.offsets, op.partitions, unstable)

"""What a group does when its organisation's topics change (Kafka's onTopicsDeleted and
onMetadataUpdate, seed 003): the `TopicsChangedOp` every group's actor is sent.

- A deleted topic's committed offsets are tombstoned, in groups of either type, so that a
  topic re-created under the same name starts with no committed offset. Only offsets
  committed up to the deletion go: a visit that comes late (finished after a restart) leaves
  the offsets of the topic's next incarnation alone. Pending transactional offsets of the
  topic go too (Kafka's offset tombstone removes them).
- A consumer group with members recomputes its subscribed topics' metadata hash against the
  new topic image; if it moved (partitions added, a topic gone), the group epoch is bumped and
  a new target assignment is computed at once, so members get the new partitions (or lose the
  deleted ones) at their next heartbeat without any member having to notice first. Classic
  groups learn of it as Kafka's clients expect: from Metadata, then a rejoin.
"""

from __future__ import annotations

from ..classic_group.state import ClassicGroup
from ..consumer_group.membership import bump_epoch_if_metadata_changed
from ..consumer_group.state import ConsumerGroup
from ..consumer_group.target import maybe_assign
from ..group_common.effects import Effects
from ..group_common.ops import (
    TopicsChangedOp,
    TopicsChangedOpResp,
)
from ..group_common.records import OffsetTombstone
from ..group_common.txn_offsets import drop_pending, pending_partitions


def topics_changed(group: object, op: TopicsChangedOp, waiter: int, fx: Effects) -> None:
    """Step the op on `group` in place (None or a group of another type: nothing to do)."""
    gone: list[tuple[str, int]] = []
    if isinstance(group, ClassicGroup | ConsumerGroup) and op.deleted:
        deleted, until = set(op.deleted), op.deleted_at_ms
        gone = sorted(
            key
            for key, committed in group.offsets.items()
            if key[0] in deleted and (until < 0 or committed.commit_timestamp_ms <= until)
        )
        for topic, partition in gone:
            fx.write(group, OffsetTombstone(group.group_id, topic, partition))
        # as Kafka's tombstones, they take pending offsets too
        for tp in sorted({tp for tp in pending_partitions(group) if tp[0] in deleted}):
            drop_pending(group, tp, fx)
    if isinstance(group, ConsumerGroup) and group.members:
        bump_epoch_if_metadata_changed(group, fx, "subscribed topics' metadata changed")
        if group.group_epoch > group.assignment_epoch:
            maybe_assign(group, fx)
    fx.reply(waiter, TopicsChangedOpResp(0, len(gone)))

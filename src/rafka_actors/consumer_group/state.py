"""A KIP-848 consumer group's state: three epochs, members and who owns which partition.

- The *group epoch* moves whenever the inputs of the assignment change (a member joins,
  leaves or changes its subscription, or a subscribed topic appears, disappears or grows).
- The *assignment epoch* is the group epoch the current target assignment was computed for.
- Each member's *member epoch* says how far it has reconciled towards the target.

The group's state is derived, never stored (Kafka's `ConsumerGroup.maybeUpdateGroupState`):
Empty without members, Assigning while the assignment epoch lags the group epoch, Reconciling
while a member is not yet stable at the assignment epoch, else Stable.

`owners` is Kafka's `currentPartitionEpoch`: every partition a member holds (assigned, or
still pending revocation) mapped to that member. A partition in it is never handed to anyone
else: that is the no-double-ownership guarantee.

Soft state (deadlines, the topic-image version the subscription was last resolved against)
is not persisted; replay sets it afresh, as Kafka's `onLoaded` does.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import TypeVar

from ..group_common.committed import CommittedOffset, TxnOffsets

TopicId = uuid.UUID
# topic id -> partitions; values are frozensets so an Assignment can be shared, not copied
Assignment = dict[TopicId, frozenset[int]]
EMPTY: Assignment = {}
# A group of another type under the same id (a classic group): this package passes it
# through untouched and refuses what needs a consumer group. Changing a group's type is the
# business of the dispatch above both types (coordinator/machine.py).
OtherGroup = TypeVar("OtherGroup")


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """A member's current assignment and how far it got (one CurrentMemberAssignment record)."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member asked for (one MemberMetadata record, with its client's identity)."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None


@dataclass(frozen=True, slots=True)
class ClassicMembership:
    """What a member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer group said in its JoinGroup (Kafka's ClassicMemberMetadata): its session
    timeout, and its protocols (name, embedded subscription), in its order of preference."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol named in its JoinGroup answer: its first (Kafka's choice)."""
        return self.protocols[0][0] if self.protocols else ""


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    subscription: Subscription
    current: Reconciliation = field(default_factory=Reconciliation)
    session_deadline: int | None = None
    rebalance_deadline: int | None = None  # armed while UNREVOKED_PARTITIONS
    rebalance_epoch: int = -1  # the epoch it must move on from before the deadline
    joined_ms: int | None = None  # soft: its last heartbeat with epoch 0 (cadence.py)
    classic: ClassicMembership | None = None  # set for a member using the classic protocol
    # soft, classic members only: the JoinGroup or SyncGroup it owes within its rebalance
    # timeout (Kafka's join and sync timeouts), and what it owes
    classic_deadline: int | None = None
    classic_owes: str = ""

    @property
    def instance_id(self) -> str | None:
        return self.subscription.instance_id

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    cgp_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    metadata_hash: int = 0  # of the subscribed topics' metadata; a change bumps the epoch
    state_timestamp_ms: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target
    owners: dict[tuple[TopicId, int], str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    txn: TxnOffsets | None = None  # transactional offsets, from its first transactional op
    topics_version: int = -1  # soft: the topic image the metadata hash was computed from
    assignment_deadline: int | None = None  # soft: a throttled target assignment is due

    # -- derived state --------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.current.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    # -- membership -----------------------------------------------------------------------
    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def put(self, member: ConsumerMember) -> None:
        """Add or update a member, keeping the static index and the partition owners."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        instance_id = member.instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        self.target.pop(member_id, None)
        return member

    def set_current(self, member: ConsumerMember, current: Reconciliation) -> None:
        self._release(member)
        member.current = current
        self._claim(member)

    def _claim(self, member: ConsumerMember) -> None:
        for assignment in (member.current.assigned, member.current.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.owners[(topic_id, partition)] = member.member_id

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.current.assigned, member.current.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    if self.owners.get((topic_id, partition)) == member.member_id:
                        del self.owners[(topic_id, partition)]

    def owned_by_other(self, member_id: str, topic_id: TopicId, partition: int) -> bool:
        owner = self.owners.get((topic_id, partition))
        return owner is not None and owner != member_id

    def uses_classic_protocol_only(self) -> bool:
        """Every member speaks the classic protocol (a downgrade may then be due)."""
        return all(m.classic is not None for m in self.members.values())

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a partition of its target that it lacks is
        still held by another member."""
        if member.current.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        assigned = member.current.assigned
        for topic_id, partitions in self.target.get(member.member_id, {}).items():
            have = assigned.get(topic_id, frozenset())
            for partition in partitions:
                if partition not in have and (topic_id, partition) in self.owners:
                    return True
        return False

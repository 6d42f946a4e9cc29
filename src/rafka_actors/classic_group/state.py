"""A classic consumer group's state: Kafka's five states, the legal transitions, members.

The transition table is Kafka's `ClassicGroupState` (each state lists the states it may be
entered from); `ClassicGroup.transition_to` refuses anything else, so an illegal move is a bug
that fails loudly instead of a group that silently goes astray.

Pending replies are not futures here: a member parked in JoinGroup or SyncGroup holds the
*waiter token* of its request, and the state machine answers a token when the rebalance gets
there. Deadlines are absolute milliseconds on the caller's clock; the state holds them and the
machine reports the earliest (see machine.next_deadline), so the actor needs no timers of its
own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..group_common.committed import CommittedOffset, TxnOffsets
from ..group_common.ops import Protocols


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


E, P, C, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    E: frozenset({P}),
    P: frozenset({S, C, E}),
    C: frozenset({P}),
    S: frozenset({C}),
    D: frozenset({S, P, C, E, D}),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: int | None = None  # waiter token of a parked JoinGroup
    awaiting_sync: int | None = None  # waiter token of a parked SyncGroup
    is_new: bool = False
    heartbeat_deadline: int | None = None

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka: a new member can expire while parked; others are kept alive by parking."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)

    def metadata(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    cgp_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = 0
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    # Insertion order is join order: the first member is leader, the next one inherits.
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline
    # Members owing a SyncGroup. A dict of str keys, not a set: the cycle collector ignores
    # it (as it does `departed` until someone departs), which for 100 000 groups saves every
    # full collection 200 000 objects to walk, and each group ~270 bytes.
    pending_sync: dict[str, None] = field(default_factory=dict)
    new_member_added: bool = False
    join_deadline: int | None = None
    join_timer_initial: bool = False  # the join deadline is the initial-rebalance delay
    rebalance_reason: str = ""
    initial_delay_ms: int = 0  # the initial-rebalance delay schedule (Kafka's delay/remaining)
    initial_remaining_ms: int = 0
    sync_deadline: int | None = None
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    txn: TxnOffsets | None = None  # transactional offsets, from its first transactional op
    # Kept for the next group record, so the log tells each rebalance's story: when it
    # started, and who went away since the last record, and why.
    rebalance_started_ms: int = -1
    departed: list[tuple[str, str]] | None = None  # (member id, why); see `depart`
    # How many members name each protocol (Kafka's supportedProtocols): the common
    # protocols without a pass over every member on every JoinGroup. Kept by add, remove and
    # set_protocols; derived, so not part of equality.
    protocol_support: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    # How many members have a JoinGroup parked: "has everyone rejoined?" is asked on every
    # JoinGroup of a rebalance. Kept by add, remove and set_awaiting_join.
    parked_joins: int = field(default=0, compare=False, repr=False)

    def depart(self, member_id: str, why: str) -> None:
        """Note for the next group record that the member went away, and why."""
        if self.departed is None:
            self.departed = []
        self.departed.append((member_id, why))

    # -- state ----------------------------------------------------------------------------
    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(f"{self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state, self.state = self.state, target
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- membership -----------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member.protocols, 1)
        self.parked_joins += member.awaiting_join is not None
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member.protocols, -1)
            self.parked_joins -= member.awaiting_join is not None
            if member.instance_id is not None:
                self.static_members.pop(member.instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.pop(member_id, None)
        return member

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def set_awaiting_join(self, member: Member, waiter: int | None) -> None:
        """Park (or, with None, clear) a member's JoinGroup: the only way to, so parked
        joins stay counted."""
        self.parked_joins += (waiter is not None) - (member.awaiting_join is not None)
        member.awaiting_join = waiter

    def awaiting_join_count(self) -> int:
        return self.parked_joins

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    # -- protocols ------------------------------------------------------------------------
    def set_protocols(self, member: Member, protocols: Protocols) -> None:
        """Change a member's protocols (a rejoin): the only way to, so support stays counted."""
        self._count_protocols(member.protocols, -1)
        member.protocols = protocols
        self._count_protocols(protocols, 1)

    def _count_protocols(self, protocols: Protocols, delta: int) -> None:
        support = self.protocol_support
        for name in {name for name, _ in protocols}:
            left = support.get(name, 0) + delta
            if left:
                support[name] = left
            else:
                del support[name]

    def candidate_protocols(self) -> set[str]:
        """The protocols every member names."""
        everyone = len(self.members)
        if not everyone:
            return set()
        return {name for name, count in self.protocol_support.items() if count == everyone}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        # Kafka counts supporters per protocol against the member count: with no members
        # left (a rebalance still waiting out its delay) every protocol qualifies.
        return not self.members or any(n in self.candidate_protocols() for n in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins (ties:
        the first-joined member's vote, so the choice is deterministic)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

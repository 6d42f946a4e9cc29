"""What the operator's tools know about groups, independent of the wire and of the output.

`calls` fills these from Kafka responses, `groups` combines them (offsets with log-end offsets
and owners; reset plans) and `render` prints them as tables or JSON. Classic and KIP-848
consumer groups share one description: the KIP-848 fields (epochs, target assignments,
subscriptions) are None for classic groups, where the protocol name (the assignor the members
agreed on, e.g. "range") fills `assignor`. A share group (KIP-932) is described like a KIP-848
group (its members' target assignment is their assignment); its offsets are its share
partitions' start offsets, and its lag the records not yet acknowledged.

A group that does not exist is described with Kafka's state name for that, "Dead".

`cgp_id` and `rrl` are the group's identity (ids.py), which this broker sends in a private
header tag when asked (protocol/group_identity.py); None from a broker that does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..lag import lag_ms

TopicPartition = tuple[str, int]
Assignment = dict[str, tuple[int, ...]]  # topic -> partitions

CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"
DEAD = "Dead"
INACTIVE_STATES = frozenset({"Empty", DEAD})


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    group_type: str
    state: str
    protocol_type: str
    cgp_id: str | None = None
    rrl: str | None = None


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: Assignment | None  # None: a classic assignment we cannot decode
    member_epoch: int | None = None  # KIP-848 only, as below
    target_assignment: Assignment | None = None
    subscribed_topics: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    # KIP-848 groups: "classic" for a classic member inside it (a migration under way),
    # "consumer" otherwise; None where the broker does not say
    protocol: str | None = None

    def partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, ps in (self.assignment or {}).items() for p in ps)


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    group_type: str
    state: str
    protocol_type: str
    assignor: str
    members: tuple[Member, ...] = ()
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    cgp_id: str | None = None
    rrl: str | None = None

    @property
    def exists(self) -> bool:
        return self.state != DEAD

    def owners(self) -> dict[TopicPartition, Member]:
        """Which member holds each assigned partition."""
        return {tp: m for m in self.members for tp in m.partitions()}


@dataclass(frozen=True)
class OffsetRow:
    """One line of `groups offsets`: Kafka's CURRENT-OFFSET, LOG-END-OFFSET and LAG."""

    group_id: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    owner: Member | None
    log_start_offset: int | None = None  # None: not known
    # `--watch`: the append time of the record at the committed offset (None: caught up)
    append_time_ms: int | None = None
    # a transaction's offset is pending for the partition (not committed until its marker;
    # OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for it)
    pending_transaction: bool = False
    # a share group's lag: its records not yet acknowledged (current_offset is its start)
    share_lag: int | None = None

    @property
    def lag(self) -> int | None:
        """What is left to read: a committed offset below the log start (retention or
        DeleteRecords removed what it points at) counts from the log start, where its
        consumer resumes."""
        if self.share_lag is not None:
            return self.share_lag
        if self.current_offset is None or self.log_end_offset is None:
            return None
        position = max(self.current_offset, self.log_start_offset or 0)
        return max(self.log_end_offset - position, 0)

    def lag_seconds(self, now_ms: int) -> float | None:
        """The broker metric's lag in seconds (lag.py), as of `now_ms`; None for a
        share group (no committed offset)."""
        if self.share_lag is not None or self.current_offset is None:
            return None
        if self.log_end_offset is None:
            return None
        return lag_ms(now_ms, self.log_end_offset, self.current_offset, self.append_time_ms) / 1000


@dataclass(frozen=True)
class GroupOffsets:
    group: GroupDescription
    rows: list[OffsetRow] = field(default_factory=list)


@dataclass(frozen=True)
class ResetRow:
    topic: str
    partition: int
    current_offset: int | None
    new_offset: int


@dataclass(frozen=True)
class ResetPlan:
    group: GroupDescription
    rows: list[ResetRow]
    executed: bool = False
    warnings: list[str] = field(default_factory=list)

    def offsets(self) -> dict[TopicPartition, int]:
        return {(r.topic, r.partition): r.new_offset for r in self.rows}

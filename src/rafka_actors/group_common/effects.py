"""What a handler call produces besides the new state: records, replies and events.

`Effects` is threaded through the handlers of one command. It carries the inputs a pure
handler may not fetch for itself (the time, the configuration, a fresh `cgp_` id in case the
command creates the group) and collects its outputs: records for the coordinator log, replies
keyed by waiter token, and events for telemetry (e.g. a completed rebalance).

A handler changes durable state by writing a record (`write`): the record is stored and
applied to the group through `apply`, the coordinator's one function from a record to the
state it makes (coordinator/apply.py), which start-up folds the stored records through too,
so what a step leaves and what a restart rebuilds cannot drift apart. A record that is a
snapshot of state the handler keeps richer than the record (a classic group's record, a share
partition's) is stored as it is (`write_snapshot`) and applied only at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .records import Record
from .topic_image import EMPTY_IMAGE, TopicImage

# The server assignors of KIP-848 consumer groups, by the names clients send
# (ConsumerGroupHeartbeat.ServerAssignor) and group.consumer.assignors lists: the one table
# the settings are checked against (consumer_group/assignors/ implements each).
ASSIGNOR_NAMES: Final = ("uniform", "range")


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = 300_000  # Kafka's group.classic.new.member.join.timeout
    offset_metadata_max_bytes: int = 4096
    # KIP-848 consumer groups
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_rebalance_heartbeat_interval_ms: int = 250  # consumer_group/cadence.py
    consumer_assignors: tuple[str, ...] = ASSIGNOR_NAMES  # the first is the default
    consumer_assignment_interval_ms: int = 1000
    consumer_max_size: int = 2**31 - 1
    # KIP-932 share groups (share_group/), with Kafka's names and defaults in config.py
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_max_size: int = 200
    share_record_lock_duration_ms: int = 30000
    share_delivery_count_limit: int = 5
    share_partition_max_record_locks: int = 2000
    share_auto_offset_reset: str = "latest"
    share_isolation_level: str = "read_uncommitted"  # a group config only, as in Kafka
    # online migration between the protocols (coordinator/migration.py): Kafka's
    # group.consumer.migration.policy, one of MIGRATION_POLICIES
    consumer_migration_policy: str = "bidirectional"

    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("downgrade", "bidirectional")


MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(frozen=True, slots=True)
class RebalanceCompleted:
    group_id: str
    generation: int
    leader_id: str | None
    members: int


@dataclass(frozen=True, slots=True)
class TargetAssigned:
    """A consumer group's assignor ran: the new target holds for this assignment epoch."""

    group_id: str
    assignment_epoch: int
    assignor: str
    members: int


@dataclass(frozen=True, slots=True)
class MemberFenced:
    """A consumer-group member was removed (left, session or rebalance timeout)."""

    group_id: str
    member_id: str
    reason: str
    group_epoch: int
    # its going left only classic members, and the policy lets the group become a classic
    # group: the coordinator converts it (coordinator/migration.py), so no epoch was bumped
    downgrade: bool = False


@dataclass(frozen=True, slots=True)
class MemberRemoved:
    """A classic group's member was removed: it left, or was dropped (a timeout, an admin)."""

    group_id: str
    member_id: str
    why: str  # "left", "session timeout", ... (as the group's next record has it)


def _no_apply(group: Any, record: Record) -> Any:
    raise TypeError(f"Effects made without an apply cannot write {type(record).__name__}")


@dataclass(slots=True)
class Effects:
    now: int
    config: GroupConfig
    fresh_cgp_id: str = ""
    topics: TopicImage = EMPTY_IMAGE
    # the coordinator's apply (coordinator/apply.py): a record's change to a group
    apply: Callable[[Any, Record], Any] = _no_apply
    records: list[Record] = field(default_factory=list)
    replies: list[tuple[int, Any]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    # The earliest deadline this command set (see `deadline_in`), or None.
    earliest_deadline: int | None = None

    def deadline_in(self, ms: int) -> int:
        """The deadline `ms` from now. Every classic deadline is set through here, so the
        actor learns the earliest one a command set without a pass over the members."""
        at = self.now + ms
        if self.earliest_deadline is None or at < self.earliest_deadline:
            self.earliest_deadline = at
        return at

    def write(self, group: Any, record: Record) -> Any:
        """Store `record` and make its change to `group` through `apply`; the group it
        leaves (None after a group tombstone). A handler changes durable state only so."""
        self.records.append(record)
        return self.apply(group, record)

    def write_snapshot(self, record: Record) -> None:
        """Store a record that describes state the handler keeps (and keeps richer than the
        record): start-up applies it, the live step has made its change already."""
        self.records.append(record)

    def reply(self, waiter: int | None, response: Any) -> None:
        if waiter is not None:
            self.replies.append((waiter, response))

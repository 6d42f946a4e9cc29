"""A test context for the pure KIP-848 consumer-group state machine, after Kafka's
GroupMetadataManagerTestContext.

It holds the group, a fake clock `now` and a topic image the test can change
(`create_topic`, `delete_topic`). `heartbeat(...)` sends one ConsumerGroupHeartbeat through
`machine.handle` and returns its answer; `sleep(ms)` moves the clock forward and fires every
deadline that falls due on the way, in order, as the group actor would. Every record the
machine writes is kept in `records`, so a test can replay them (`replayed()`) and compare.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from rafka_actors.consumer_group.ops import (
    ConsumerGroupHeartbeatOp,
    ConsumerGroupHeartbeatOpResp,
)
from rafka_actors.consumer_group.state import ConsumerGroup, ConsumerMember
from rafka_actors.coordinator import machine
from rafka_actors.coordinator.apply import replay
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    TimerFired,
    TopicPartitions,
)
from rafka_actors.group_common.records import Record
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.group_common.txn_offsets import epochs_of, pending_of

GROUP_ID = "fooup"
CGP_ID = "cgp_test"
REBALANCE_TIMEOUT_MS = 30_000
CONFIG = GroupConfig(
    consumer_session_timeout_ms=45_000,
    consumer_heartbeat_interval_ms=5_000,
    # Kafka's cadence (always the heartbeat interval): the scenarios are Kafka's tests;
    # test_cadence.py covers the shorter one told while a group rebalances
    consumer_rebalance_heartbeat_interval_ms=5_000,
    consumer_assignment_interval_ms=0,  # most scenarios are about reconciliation, not throttling
)

Owned = dict[str, set[int]]  # by topic name, for readable tests


@dataclass
class ConsumerHarness:
    config: GroupConfig = CONFIG
    now: int = 1_000
    group: Any = None
    image: TopicImage = field(default_factory=TopicImage)
    records: list[Record] = field(default_factory=list)
    _tokens: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- topics -----------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int) -> uuid.UUID:
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.{self.image.version}")
        topics = [*self.image.by_name.values(), TopicInfo(name, topic_id, partitions)]
        self.image = TopicImage.of(self.image.version + 1, topics)
        return topic_id

    def delete_topic(self, name: str) -> None:
        topics = [t for t in self.image.by_name.values() if t.name != name]
        self.image = TopicImage.of(self.image.version + 1, topics)

    def tid(self, name: str) -> uuid.UUID:
        return self.image.by_name[name].topic_id

    def tps(self, owned: Owned) -> TopicPartitions:
        return tuple((self.tid(name), tuple(sorted(parts))) for name, parts in owned.items())

    def named(self, assignment: TopicPartitions | None) -> Owned | None:
        if assignment is None:
            return None
        names = {t.topic_id: t.name for t in self.image.by_name.values()}
        return {names.get(tid, str(tid)): set(parts) for tid, parts in assignment if parts}

    # -- requests ---------------------------------------------------------------------------
    def send(self, op: Any) -> Any:
        token = next(self._tokens)
        result = machine.handle(
            self.group,
            op,
            self.now,
            token,
            config=self.config,
            fresh_cgp_id=CGP_ID,
            topics=self.image,
        )
        self.group = result.group
        self.records.extend(result.records)
        replies = dict(result.replies)
        return replies.get(token)

    def heartbeat(
        self,
        member_id: str,
        epoch: int,
        *,
        topics: tuple[str, ...] | None = None,
        regex: str | None = None,
        owned: Owned | None = None,
        instance_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        assignor: str | None = None,
        version: int = 1,
        rack_id: str | None = None,
    ) -> ConsumerGroupHeartbeatOpResp:
        resp: ConsumerGroupHeartbeatOpResp = self.send(
            ConsumerGroupHeartbeatOp(
                group_id=GROUP_ID,
                member_id=member_id,
                member_epoch=epoch,
                instance_id=instance_id,
                rack_id=rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms,
                subscribed_topic_names=topics,
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                owned=None if owned is None else self.tps(owned),
                client_id="client",
                client_host="/127.0.0.1",
                new_member_id=f"generated-{member_id or 'x'}",
                api_version=version,
            )
        )
        return resp

    def join(
        self,
        member_id: str,
        topics: tuple[str, ...] | None = ("foo",),
        **kw: Any,
    ) -> ConsumerGroupHeartbeatOpResp:
        kw.setdefault("rebalance_timeout_ms", REBALANCE_TIMEOUT_MS)
        return self.heartbeat(member_id, 0, topics=topics, owned={}, **kw)

    def sleep(self, ms: int) -> None:
        """Advance the clock, firing each deadline at its own time, as the actor does."""
        until = self.now + ms
        while True:
            due = machine.next_deadline(self.group)
            if due is None or due > until:
                break
            self.now = max(self.now, due)
            self.send(TimerFired())
        self.now = until

    # -- inspection -------------------------------------------------------------------------
    @property
    def consumer(self) -> ConsumerGroup:
        assert isinstance(self.group, ConsumerGroup)
        return self.group

    def member(self, member_id: str) -> ConsumerMember:
        return self.consumer.members[member_id]

    def assigned(self, member_id: str) -> Owned:
        names = {t.topic_id: t.name for t in self.image.by_name.values()}
        return {names[t]: set(p) for t, p in self.member(member_id).current.assigned.items()}

    def replayed(self) -> Any:
        return replay(self.records, self.now, consumer_session_timeout_ms=45_000)


def durable_view(group: ConsumerGroup) -> Any:
    """What of a consumer group must survive a restart (soft state left out)."""
    return (
        group.group_id,
        group.cgp_id,
        group.group_epoch,
        group.assignment_epoch,
        group.metadata_hash,
        {m: (g.subscription, g.current) for m, g in group.members.items()},
        {m: t for m, t in group.target.items() if t},
        dict(group.owners),
        dict(group.offsets),
        dict(group.static_members),
        {pid: (t.producer_epoch, t.offsets) for pid, t in pending_of(group).items()},
        dict(epochs_of(group)),
    )

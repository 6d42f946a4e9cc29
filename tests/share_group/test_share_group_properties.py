"""A hypothesis state machine drives a whole share group through coordinator/machine.py, as its
actor does (members join, heartbeat and leave; share sessions open, fetch, acknowledge and
close; time passes and the timers fire; offsets are altered and deleted), keeping the records
each step returns as the coordinator log's live view would.

Invariants: what is stored always describes the live group (every share partition's latest
record is its current state, the group record its epoch), so a restart at any point finds
exactly what was acknowledged; and a replay of the stored records is that state with every
lock released.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rafka_actors.coordinator import machine
from rafka_actors.coordinator.apply import replay
from rafka_actors.coordinator.latest import GroupRecords
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import TimerFired
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.share_group.ops import (
    AlterShareOffsetsOp,
    DeleteShareOffsetsOp,
    ShareAcquireOp,
    ShareGroupHeartbeatOp,
    ShareSessionOp,
)
from rafka_actors.share_group.partition import ACCEPT, ACQUIRED, GAP, REJECT, RELEASE
from rafka_actors.share_group.records import ShareGroupMetadataRecord, SharePartitionRecord
from rafka_actors.share_group.state import ShareGroup

TOPICS = TopicImage.of(1, [TopicInfo("t", uuid.uuid4(), 2)])
LIMIT = 3
CONFIG = GroupConfig(
    share_session_timeout_ms=3000,
    share_record_lock_duration_ms=400,
    share_delivery_count_limit=LIMIT,
    share_partition_max_record_locks=15,
    share_auto_offset_reset="earliest",
)
MEMBERS = ("a", "b", "c")
PARTITIONS = (("t", 0), ("t", 1))


class ShareGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.group: Any = None
        self.now = 1_000_000
        self.latest: GroupRecords[Any] = GroupRecords()
        self.epochs: dict[str, int] = {}  # what each member last heard
        self.sessions: dict[str, int] = {}  # each member's next session epoch
        self.log_end = {key: 0 for key in PARTITIONS}

    def step(self, op: Any) -> Any:
        result = machine.handle(
            self.group, op, self.now, 1, config=CONFIG, fresh_cgp_id="cgp_p", topics=TOPICS
        )
        self.group = result.group
        self.latest.apply(result.records)
        replies = [r for token, r in result.replies if token == 1]
        return replies[0] if replies else None

    @rule(member=st.sampled_from(MEMBERS))
    def heartbeat(self, member: str) -> None:
        epoch = self.epochs.get(member, 0)
        names = ("t",) if epoch == 0 else None
        answer = self.step(ShareGroupHeartbeatOp("g", member, epoch, subscribed_topic_names=names))
        if answer.error_code == 0:
            self.epochs[member] = answer.member_epoch
        else:
            self.epochs.pop(member, None)

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        if member in self.epochs:
            self.step(ShareGroupHeartbeatOp("g", member, -1))
            del self.epochs[member]

    @rule(n=st.integers(1, 6), index=st.sampled_from((0, 1)))
    def produce(self, n: int, index: int) -> None:
        self.log_end[("t", index)] += n

    @rule(member=st.sampled_from(MEMBERS), new=st.booleans(), span=st.integers(0, 8))
    def fetch(self, member: str, new: bool, span: int) -> None:
        epoch = 0 if new or member not in self.sessions else self.sessions[member]
        bounds = tuple((t, i, 0, self.log_end[(t, i)]) for t, i in PARTITIONS)
        opened = self.step(ShareSessionOp("g", member, epoch, added=PARTITIONS, log_bounds=bounds))
        if opened.error_code != 0:
            self.sessions.pop(member, None)
            return
        self.sessions[member] = epoch + 1
        reads = tuple(
            (t, i, 0, self.log_end[(t, i)], offset, min(offset + span, self.log_end[(t, i)] - 1))
            for t, i, offset in opened.partitions
            if offset >= 0
        )
        acquired = self.step(ShareAcquireOp("g", member, reads, max_records=5))
        event(f"fetch acquired {'something' if acquired.acquired else 'nothing'}")

    @rule(
        member=st.sampled_from(MEMBERS),
        data=st.data(),
        kind=st.sampled_from((ACCEPT, RELEASE, REJECT, GAP)),
        close=st.booleans(),
    )
    def acknowledge(self, member: str, data: st.DataObject, kind: int, close: bool) -> None:
        if member not in self.sessions or not isinstance(self.group, ShareGroup):
            return
        held = [
            (key, offset)
            for key, partition in self.group.partitions.items()
            for offset in partition.acquired_by(member)
        ]
        acks: tuple[Any, ...] = ()
        if held:
            (topic, index), offset = data.draw(st.sampled_from(held))
            acks = ((topic, index, offset, offset + data.draw(st.integers(0, 2)), (kind,)),)
        epoch = -1 if close else self.sessions[member]
        answer = self.step(ShareSessionOp("g", member, epoch, acks=acks, fetching=False))
        event(f"acknowledgement: {answer.ack_errors[0][2] if answer.ack_errors else 'none'}")
        if close or answer.error_code != 0:
            self.sessions.pop(member, None)
        else:
            self.sessions[member] = epoch + 1

    @rule(ms=st.integers(50, 2000))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        due = machine.next_deadline(self.group)
        if due is not None and due <= self.now:
            self.step(TimerFired())
            for member in list(self.epochs):
                if not isinstance(self.group, ShareGroup) or member not in self.group.members:
                    del self.epochs[member]  # evicted

    @rule(start=st.integers(0, 10), delete=st.booleans())
    def administer(self, start: int, delete: bool) -> None:
        if self.group is None:
            return
        if delete:
            self.step(DeleteShareOffsetsOp("g", ("t",)))
        else:
            self.step(AlterShareOffsetsOp("g", (("t", 0, start),)))

    @invariant()
    def what_is_stored_is_the_live_group(self) -> None:
        group = self.group
        if not isinstance(group, ShareGroup):
            return
        head = self.latest.group
        assert isinstance(head, ShareGroupMetadataRecord)
        assert head.group_epoch == group.group_epoch
        stored = {
            (r.topic, r.partition): r
            for r in self.latest.consumer.values()
            if isinstance(r, SharePartitionRecord)
        }
        assert set(stored) == set(group.partitions)
        for key, partition in group.partitions.items():
            record = stored[key]
            assert (record.start_offset, record.batches) == (
                partition.start_offset,
                partition.snapshot(),
            )

    @invariant()
    def a_replay_releases_the_locks_and_keeps_the_rest(self) -> None:
        group = self.group
        if not isinstance(group, ShareGroup):
            return
        again = replay(self.latest.records(), self.now, share_delivery_count_limit=LIMIT)
        assert isinstance(again, ShareGroup) and again.members == {}
        assert again.group_epoch == group.group_epoch
        for key, partition in group.partitions.items():
            restored = again.partitions[key]
            for offset in range(restored.start_offset, restored.end_offset):
                live = partition.records.get(offset)
                assert live is not None
                assert restored.records[offset].delivery_count == live.delivery_count
                assert restored.records[offset].state != ACQUIRED
            assert restored.start_offset >= partition.start_offset


TestShareGroup = ShareGroupMachine.TestCase
TestShareGroup.settings = settings(
    max_examples=int(os.environ.get("RAFKA_PROPERTY_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

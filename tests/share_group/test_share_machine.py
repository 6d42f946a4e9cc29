"""The share-group machine through coordinator/machine.py `handle`, as the actor steps it:
membership by heartbeat with epochs and the simple assignor, session-timeout eviction, share
sessions and their epochs, acquisitions stored before they are answered, one type per group
id, and replay of the stored records (a restart)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from rafka_actors.consumer_group.ops import ConsumerGroupHeartbeatOp
from rafka_actors.coordinator import machine
from rafka_actors.coordinator.apply import replay
from rafka_actors.coordinator.latest import GroupRecords
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    DeleteGroupOp,
    DescribeGroupOp,
    ExpireOffsetsOp,
    ExpireOffsetsOpResp,
    HeartbeatOp,
    JoinGroupOp,
    OffsetCommitOp,
    TimerFired,
)
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.share_group.ops import (
    AlterShareOffsetsOp,
    DescribeShareOffsetsOp,
    ShareAcquireOp,
    ShareGroupHeartbeatOp,
    ShareSessionOp,
)
from rafka_actors.share_group.partition import ACCEPT, RELEASE
from rafka_actors.share_group.records import SharePartitionRecord
from rafka_actors.share_group.state import ShareGroup

TOPIC_ID = uuid.uuid4()
TOPICS = TopicImage.of(1, [TopicInfo("t", TOPIC_ID, 2)])
CONFIG = GroupConfig(
    share_session_timeout_ms=1000,
    share_record_lock_duration_ms=500,
    share_delivery_count_limit=2,
    share_auto_offset_reset="earliest",
)


class Coordinator:
    """One group stepped through the machine, its records kept as the log would."""

    def __init__(self, config: GroupConfig = CONFIG) -> None:
        self.config = config
        self.group: Any = None
        self.now = 1_000_000
        self.stored: list[Any] = []

    def step(self, op: Any) -> Any:
        result = machine.handle(
            self.group, op, self.now, 7, config=self.config, fresh_cgp_id="cgp_x", topics=TOPICS
        )
        self.group = result.group
        self.stored += result.records
        self.last_records = result.records
        replies = [r for token, r in result.replies if token == 7]
        return replies[0] if replies else None

    def join(self, member: str) -> Any:
        return self.step(ShareGroupHeartbeatOp("g", member, 0, subscribed_topic_names=("t",)))

    def restart(self) -> None:
        latest: GroupRecords[Any] = GroupRecords()
        latest.apply(self.stored)
        self.group = replay(latest.records(), self.now, share_delivery_count_limit=2)


def test_members_join_with_every_partition_and_follow_the_group_epoch() -> None:
    c = Coordinator()
    a = c.join("a")
    assert a.error_code == 0 and a.member_epoch == 1
    assert a.assignment == ((TOPIC_ID, (0, 1)),)  # the simple assignor: every partition
    b = c.join("b")
    assert b.member_epoch == 2 and b.assignment == ((TOPIC_ID, (0, 1)),)
    again = c.step(ShareGroupHeartbeatOp("g", "a", 1))
    assert again.member_epoch == 2 and again.assignment is None
    stale = c.step(ShareGroupHeartbeatOp("g", "a", 1))
    assert stale.error_code == ErrorCode.fenced_member_epoch
    unknown = c.step(ShareGroupHeartbeatOp("g", "zz", 2))
    assert unknown.error_code == ErrorCode.unknown_member_id


def test_a_silent_member_is_evicted_and_its_records_released() -> None:
    c = Coordinator()
    c.join("a")
    c.join("b")
    _fetch(c, "a", epoch=0)
    _fetch(c, "a", epoch=1, reads=(("t", 0, 0, 10, 0, 9),))
    assert machine.next_deadline(c.group) == c.now + 500  # the lock expires first
    _fetch(c, "b", epoch=0)
    nothing = c.step(ShareAcquireOp("g", "b", (("t", 0, 0, 10, 10, 9),)))
    assert nothing.acquired == () and nothing.next_release_in_ms == 500  # when to retry
    c.now += 400
    c.step(ShareGroupHeartbeatOp("g", "b", 2))  # b stays alive, a does not
    c.now += 700
    c.step(TimerFired())
    assert set(c.group.members) == {"b"}
    assert c.group.partitions[("t", 0)].fetch_offset() == 0  # a's records are back


def test_an_acquisition_is_stored_before_it_is_answered() -> None:
    c = Coordinator()
    c.join("a")
    _fetch(c, "a", epoch=0)
    c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 10, 0, -1),)))  # initialises at 0
    answer = c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 10, 0, 3),)))
    assert answer.acquired == (("t", 0, ((0, 3, 1),)),)
    (record,) = c.last_records
    assert isinstance(record, SharePartitionRecord)
    assert record.batches == ((0, 3, 1, 1),)  # Acquired, delivered once


def test_share_sessions_check_their_epochs() -> None:
    c = Coordinator()
    c.join("a")
    assert _fetch(c, "a", epoch=1).error_code == ErrorCode.share_session_not_found
    assert _fetch(c, "a", epoch=0).error_code == 0
    assert _fetch(c, "a", epoch=2).error_code == ErrorCode.invalid_share_session_epoch
    assert _fetch(c, "a", epoch=1).error_code == 0
    ack = c.step(ShareSessionOp("g", "a", 0, fetching=False))
    assert ack.error_code == ErrorCode.invalid_share_session_epoch


def test_acknowledgements_release_then_archive_at_the_limit_and_survive_a_restart() -> None:
    c = Coordinator()
    c.join("a")
    _fetch(c, "a", epoch=0)
    c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 10, 0, 9),)))  # initialises
    c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 10, 0, 9),)))
    acks = (("t", 0, 0, 4, (ACCEPT,)), ("t", 0, 5, 5, (RELEASE,)))
    answer = c.step(ShareSessionOp("g", "a", 1, acks=acks))
    assert answer.ack_errors == (("t", 0, 0),)
    assert answer.partitions == (("t", 0, 5),)  # the released record comes first
    bad = c.step(ShareSessionOp("g", "a", 2, acks=(("t", 0, 0, 0, (ACCEPT,)),)))
    assert bad.ack_errors == (("t", 0, ErrorCode.invalid_record_state),)
    again = c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 10, 5, 5),)))
    assert again.acquired == (("t", 0, ((5, 5, 2),)),)
    c.restart()  # 6-9 acquired once and 5 twice: 5 is at the limit of 2
    partition = c.group.partitions[("t", 0)]
    assert partition.start_offset == 6 and partition.fetch_offset() == 6
    assert [partition.records[o].delivery_count for o in range(6, 10)] == [1, 1, 1, 1]
    assert c.group.members == {}  # members join again after a restart


def test_one_group_id_one_type() -> None:
    c = Coordinator()
    c.join("a")
    join = c.step(JoinGroupOp("g", "", "consumer", 10_000, (("range", b""),)))
    assert join.error_code == ErrorCode.inconsistent_group_protocol
    commit = c.step(OffsetCommitOp("g", (("t", 0, 5, -1, None),)))
    assert commit.results == (("t", 0, ErrorCode.group_id_not_found),)
    classic = Coordinator()
    classic.step(OffsetCommitOp("g", (("t", 0, 5, -1, None),)))
    refused = classic.join("a")
    assert refused.error_code == ErrorCode.group_id_not_found
    assert refused.error_message == "Group g is not a share group."
    assert not isinstance(classic.group, ShareGroup)


def test_the_requests_of_other_group_types_are_refused_each_in_its_own_shape() -> None:
    """Each op's own error reply: an ExpireOffsetsOp (the retention sweep, which names no
    group) once raised here, and the sweep's every pass logged a failed actor."""
    c = Coordinator()
    c.join("a")
    assert c.step(ExpireOffsetsOp(60_000)) == ExpireOffsetsOpResp(0, False)
    described = c.step(DescribeGroupOp("g"))
    assert (described.error_code, described.state) == (ErrorCode.group_id_not_found, "Dead")
    heartbeat = c.step(ConsumerGroupHeartbeatOp("g", "m", 0))
    assert heartbeat.error_code == ErrorCode.group_id_not_found
    assert heartbeat.error_message == "Group g is not a consumer group."
    assert c.step(HeartbeatOp("g", "m", 1)).error_code == ErrorCode.group_id_not_found


def test_offsets_are_altered_and_the_group_deleted_only_when_empty() -> None:
    c = Coordinator()
    c.join("a")
    assert c.step(AlterShareOffsetsOp("g", (("t", 0, 3),))).error_code == ErrorCode.non_empty_group
    assert c.step(DeleteGroupOp("g")).error_code == ErrorCode.non_empty_group
    c.step(ShareGroupHeartbeatOp("g", "a", -1))
    assert c.step(AlterShareOffsetsOp("g", (("t", 0, 3),))).error_code == 0
    described = c.step(DescribeShareOffsetsOp("g", None))
    assert described.offsets == (("t", 0, 3, 0, 3),)
    assert c.step(DeleteGroupOp("g")).error_code == 0
    assert c.group is None


def _fetch(c: Coordinator, member: str, epoch: int, reads: tuple[Any, ...] = ()) -> Any:
    answer = c.step(ShareSessionOp("g", member, epoch, added=(("t", 0),)))
    if reads:
        c.step(ShareAcquireOp("g", member, reads))  # initialises the partition
        return c.step(ShareAcquireOp("g", member, reads))
    return answer


def test_an_acknowledgement_outside_the_window_is_refused_at_once() -> None:
    c = Coordinator()
    c.join("a")
    _fetch(c, "a", epoch=0, reads=(("t", 0, 0, 10, 0, 9),))
    huge = c.step(ShareSessionOp("g", "a", 1, acks=(("t", 0, 0, 2**62, (ACCEPT,)),)))
    assert huge.ack_errors == (("t", 0, ErrorCode.invalid_record_state),)
    assert c.group.partitions[("t", 0)].start_offset == 0  # nothing changed


def test_a_leaving_members_last_acknowledgements_still_count() -> None:
    """librdkafka sends the leave heartbeat and the session's closing acknowledgements at
    once: whichever comes first, the acknowledged records are done with and the rest go back."""
    c = Coordinator()
    c.join("a")
    _fetch(c, "a", epoch=0, reads=(("t", 0, 0, 10, 0, 9),))
    c.step(ShareGroupHeartbeatOp("g", "a", -1))  # the leave first
    partition = c.group.partitions[("t", 0)]
    assert partition.fetch_offset() == 10  # still held for the closing acknowledgements
    closing = c.step(
        ShareSessionOp("g", "a", -1, acks=(("t", 0, 0, 5, (ACCEPT,)),), fetching=False)
    )
    assert closing.error_code == 0 and closing.ack_errors == (("t", 0, 0),)
    assert partition.start_offset == 6 and partition.fetch_offset() == 6  # 6-9 released
    assert "a" not in c.group.sessions
    late = c.step(ShareSessionOp("g", "a", -1, fetching=False))
    assert late.error_code == ErrorCode.unknown_member_id


def test_a_new_share_partition_starts_where_share_auto_offset_reset_says() -> None:
    for reset, start in (("latest", 7), ("earliest", 2)):
        config = GroupConfig(share_auto_offset_reset=reset)
        group = machine.handle(
            None,
            ShareGroupHeartbeatOp("g", "a", 0, subscribed_topic_names=("t",)),
            0,
            1,
            config=config,
            fresh_cgp_id="cgp_x",
            topics=TOPICS,
        ).group
        opened = machine.handle(
            group,
            ShareSessionOp("g", "a", 0, added=(("t", 0),), log_bounds=(("t", 0, 2, 7),)),
            0,
            1,
            config=config,
            topics=TOPICS,
        )
        ((_, answer),) = opened.replies
        assert answer.partitions == (("t", 0, start),)
        (record,) = opened.records  # stored before anything is read from it
        assert isinstance(record, SharePartitionRecord) and record.start_offset == start


def test_a_read_committed_group_archives_the_aborted_records_it_is_shown() -> None:
    """share.isolation.level=read_committed (issue 54): the session answer tells the gateway
    to read below the LSO; the records of aborted transactions it read are archived, never
    handed out, and the window moves past them."""
    c = Coordinator(dataclasses.replace(CONFIG, share_isolation_level="read_committed"))
    c.join("a")
    assert _fetch(c, "a", epoch=0).read_committed
    c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 10, 0, -1),)))  # initialises at 0
    # 0-2 an aborted transaction's, 3 its marker, 4-5 plain records
    answer = c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 6, 0, 5),), aborted=(("t", 0, 0, 2),)))
    assert answer.acquired == (("t", 0, ((3, 5, 1),)),)
    partition = c.group.partitions[("t", 0)]
    assert partition.start_offset == 3  # the aborted records are done with
    assert c.last_records[-1].batches == ((3, 5, 1, 1),)
    # only aborted records read: archived and stored, nothing handed out
    c.step(ShareAcquireOp("g", "a", (("t", 0, 0, 9, 6, 8),), aborted=(("t", 0, 6, 8),)))
    assert (partition.start_offset, partition.end_offset) == (3, 9)
    assert c.last_records[-1].batches == ((3, 5, 1, 1), (6, 8, 4, 0))


def test_a_read_uncommitted_group_is_told_so() -> None:
    c = Coordinator()
    c.join("a")
    assert not _fetch(c, "a", epoch=0).read_committed

"""Offsets of consumer groups (fenced by member epoch), describe, delete, expiry, and a group
keeping one type: classic requests to consumer groups and the other way round."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.classic_group.state import ClassicGroup
from rafka_actors.consumer_group.ops import ConsumerGroupDescribeOp
from rafka_actors.consumer_group.state import ConsumerGroup
from rafka_actors.group_common.ops import (
    DeleteGroupOp,
    DescribeGroupOp,
    ExpireOffsetsOp,
    HeartbeatOp,
    JoinGroupOp,
    LeaveGroupOp,
    OffsetCommitOp,
    OffsetDeleteOp,
    OffsetFetchOp,
    SyncGroupOp,
)

from .harness import GROUP_ID, ConsumerHarness, durable_view


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.create_topic("foo", 6)
    return harness


def commit(h: ConsumerHarness, member_id: str, epoch: int, version: int = 9) -> int:
    resp = h.send(
        OffsetCommitOp(GROUP_ID, (("foo", 0, 42, -1, None),), member_id, epoch, api_version=version)
    )
    ((_, _, code),) = resp.results
    return int(code)


def test_offset_commit_fenced_by_member_epoch(h: ConsumerHarness) -> None:
    h.join("m1")
    h.join("m2")
    assert commit(h, "m1", 1) == ErrorCode.none
    assert commit(h, "m2", 1) == ErrorCode.stale_member_epoch
    assert commit(h, "m2", 3) == ErrorCode.stale_member_epoch
    assert commit(h, "m2", 2) == ErrorCode.none
    assert commit(h, "nobody", 2) == ErrorCode.unknown_member_id
    assert commit(h, "m2", 2, version=8) == ErrorCode.unsupported_version
    assert commit(h, "", -1) == ErrorCode.unknown_member_id  # admin: only while empty
    assert h.consumer.offsets[("foo", 0)].offset == 42


def test_admin_commit_to_empty_consumer_group(h: ConsumerHarness) -> None:
    h.join("m1")
    h.heartbeat("m1", -1)
    assert commit(h, "", -1) == ErrorCode.none
    assert durable_view(h.replayed()) == durable_view(h.consumer)


def test_offset_fetch_fenced_by_member_epoch(h: ConsumerHarness) -> None:
    h.join("m1")
    commit(h, "m1", 1)
    ok = h.send(OffsetFetchOp(GROUP_ID, (("foo", 0),), True, "m1", 1))
    assert ok.error_code == ErrorCode.none and ok.offsets[0][2] == 42
    stale = h.send(OffsetFetchOp(GROUP_ID, (("foo", 0),), True, "m1", 5))
    assert stale.error_code == ErrorCode.stale_member_epoch
    unknown = h.send(OffsetFetchOp(GROUP_ID, (("foo", 0),), True, "zz", 1))
    assert unknown.error_code == ErrorCode.unknown_member_id
    admin = h.send(OffsetFetchOp(GROUP_ID, None, False, None, -1))
    assert admin.error_code == ErrorCode.none and admin.offsets[0][2] == 42


def test_consumer_group_describe(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    resp = h.send(ConsumerGroupDescribeOp(GROUP_ID))
    assert (resp.error_code, resp.state, resp.group_epoch, resp.assignment_epoch) == (
        0,
        "Stable",
        1,
        1,
    )
    assert resp.assignor_name == "uniform" and resp.cgp_id == "cgp_test"
    (member,) = resp.members
    assert member[:4] == ("m1", "i1", None, 1)
    assert member[6] == ("foo",)
    assert member[8] == member[9] == ((h.tid("foo"), (0, 1, 2, 3, 4, 5)),)


def test_consumer_group_describe_of_classic_or_unknown_group(h: ConsumerHarness) -> None:
    assert h.send(ConsumerGroupDescribeOp(GROUP_ID)).error_code == ErrorCode.group_id_not_found
    h.send(OffsetCommitOp(GROUP_ID, (("foo", 0, 1, -1, None),)))  # a simple classic group
    assert h.send(ConsumerGroupDescribeOp(GROUP_ID)).error_code == ErrorCode.group_id_not_found


def test_describe_groups_says_dead_for_consumer_group(h: ConsumerHarness) -> None:
    h.join("m1")
    assert h.send(DescribeGroupOp(GROUP_ID)).state == "Dead"


def test_delete_consumer_group(h: ConsumerHarness) -> None:
    h.join("m1")
    commit(h, "m1", 1)
    assert h.send(DeleteGroupOp(GROUP_ID)).error_code == ErrorCode.non_empty_group
    h.heartbeat("m1", -1)
    assert h.send(DeleteGroupOp(GROUP_ID)).error_code == ErrorCode.none
    assert h.group is None and h.replayed() is None


def test_offset_delete_refuses_subscribed_topics(h: ConsumerHarness) -> None:
    h.create_topic("other", 1)
    h.join("m1")
    commit(h, "m1", 1)
    h.send(OffsetCommitOp(GROUP_ID, (("other", 0, 5, -1, None),), "m1", 1))
    resp = h.send(OffsetDeleteOp(GROUP_ID, (("foo", 0), ("other", 0))))
    assert resp.results == (("foo", 0, 86), ("other", 0, 0))
    assert ("other", 0) not in h.consumer.offsets


def test_offsets_of_unsubscribed_topics_expire(h: ConsumerHarness) -> None:
    h.create_topic("other", 1)
    h.join("m1")
    commit(h, "m1", 1)
    h.send(OffsetCommitOp(GROUP_ID, (("other", 0, 5, -1, None),), "m1", 1))
    h.heartbeat("m1", 1)
    h.now += 1000
    resp = h.send(ExpireOffsetsOp(retention_ms=500))
    assert (resp.expired, resp.group_deleted) == (1, False)
    assert list(h.consumer.offsets) == [("foo", 0)]


def test_empty_consumer_group_without_offsets_is_deleted_by_the_sweep(h: ConsumerHarness) -> None:
    h.join("m1")
    h.heartbeat("m1", -1)
    assert h.send(ExpireOffsetsOp(retention_ms=1)).group_deleted
    assert h.group is None and h.replayed() is None


# -- one type per group ----------------------------------------------------------------------
def join_classic(h: ConsumerHarness) -> object:
    """A JoinGroup v4+ first join: answered MEMBER_ID_REQUIRED at once, if it gets that far."""
    return h.send(
        JoinGroupOp(GROUP_ID, "", "consumer", 10_000, (("range", b""),), new_member_id="c-1")
    )


def test_classic_requests_to_non_empty_consumer_group(h: ConsumerHarness) -> None:
    """Kafka 4.x serves classic members in a consumer group (coordinator/migration.py);
    what is refused: another protocol type, and classic requests naming a member that
    speaks the consumer protocol (tests/consumer_group/test_migration.py has the rest)."""
    h.join("m1")
    resp = join_classic(h)
    assert resp.error_code == ErrorCode.member_id_required  # type: ignore[attr-defined]
    other = h.send(JoinGroupOp(GROUP_ID, "", "connect", 10_000, (("v1", b""),), new_member_id="c"))
    assert other.error_code == ErrorCode.inconsistent_group_protocol
    assert h.send(SyncGroupOp(GROUP_ID, "m1", 1)).error_code == ErrorCode.unknown_member_id
    assert h.send(HeartbeatOp(GROUP_ID, "m1", 1)).error_code == ErrorCode.unknown_member_id
    leave = h.send(LeaveGroupOp(GROUP_ID, (("m1", None, None),)))
    assert leave.members == (("m1", None, ErrorCode.unknown_member_id),)
    assert "m1" in h.consumer.members


def test_empty_consumer_group_becomes_classic_on_join(h: ConsumerHarness) -> None:
    h.join("m1")
    commit(h, "m1", 1)
    h.heartbeat("m1", -1)
    resp = join_classic(h)
    assert resp.error_code == ErrorCode.member_id_required  # type: ignore[attr-defined]
    assert isinstance(h.group, ClassicGroup) and h.group.cgp_id == "cgp_test"
    assert h.group.offsets[("foo", 0)].offset == 42
    replayed = h.replayed()
    assert isinstance(replayed, ClassicGroup) and replayed.offsets[("foo", 0)].offset == 42


def test_consumer_heartbeat_to_non_empty_classic_group(h: ConsumerHarness) -> None:
    join_classic(h)
    assert isinstance(h.group, ClassicGroup) and h.group.pending_members
    assert h.join("m1").error_code == ErrorCode.group_id_not_found


def test_empty_classic_group_becomes_consumer_group(h: ConsumerHarness) -> None:
    h.send(OffsetCommitOp(GROUP_ID, (("foo", 0, 7, -1, None),)))  # simple classic group
    assert isinstance(h.group, ClassicGroup)
    resp = h.join("m1")
    assert resp.error_code == ErrorCode.none
    assert isinstance(h.group, ConsumerGroup) and h.group.offsets[("foo", 0)].offset == 7
    assert durable_view(h.replayed()) == durable_view(h.consumer)

"""TopicsChangedOp (issue 45 §3): a consumer group re-targets on new partitions without a
member's heartbeat, and a deleted topic's committed offsets are tombstoned in either type."""

from __future__ import annotations

from rafka_actors.group_common.ops import (
    OffsetCommitOp,
    TopicsChangedOp,
    TopicsChangedOpResp,
)
from rafka_actors.group_common.records import OffsetTombstone
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo

from .harness import GROUP_ID, ConsumerHarness


def _grow(h: ConsumerHarness, name: str, partitions: int) -> None:
    info = h.image.by_name[name]
    others = [t for t in h.image.by_name.values() if t.name != name]
    grown = TopicInfo(name, info.topic_id, partitions)
    h.image = TopicImage.of(h.image.version + 1, [*others, grown])


def test_new_partitions_reach_the_target_without_a_heartbeat() -> None:
    h = ConsumerHarness()
    h.create_topic("foo", 2)
    resp = h.join("m1")
    h.heartbeat("m1", resp.member_epoch, owned=h.named(resp.assignment))
    epoch = h.consumer.group_epoch
    assert h.consumer.target["m1"] == {h.tid("foo"): frozenset({0, 1})}

    _grow(h, "foo", 4)
    answer = h.send(TopicsChangedOp())

    assert answer == TopicsChangedOpResp(0, 0)
    assert h.consumer.group_epoch == epoch + 1
    assert h.consumer.assignment_epoch == epoch + 1
    assert set(h.consumer.target["m1"][h.tid("foo")]) == {0, 1, 2, 3}
    # ... and the member gets them at its next heartbeat
    resp = h.heartbeat("m1", h.member("m1").member_epoch, owned={"foo": {0, 1}})
    assert h.named(resp.assignment) == {"foo": {0, 1, 2, 3}}


def test_an_unchanged_image_changes_nothing() -> None:
    h = ConsumerHarness()
    h.create_topic("foo", 2)
    h.join("m1")
    before = len(h.records)
    assert h.send(TopicsChangedOp()) == TopicsChangedOpResp(0, 0)
    assert len(h.records) == before


def test_a_deleted_topic_s_offsets_are_tombstoned() -> None:
    h = ConsumerHarness()
    h.create_topic("foo", 2)
    h.create_topic("bar", 1)
    commit = OffsetCommitOp(
        GROUP_ID, (("foo", 0, 5, -1, None), ("foo", 1, 7, -1, None), ("bar", 0, 3, -1, None))
    )
    h.send(commit)  # a simple (classic) group, committed by an admin
    h.delete_topic("foo")
    before = len(h.records)

    assert h.send(TopicsChangedOp(("foo",))) == TopicsChangedOpResp(0, 2)

    assert set(h.group.offsets) == {("bar", 0)}
    assert h.records[before:] == [
        OffsetTombstone(GROUP_ID, "foo", 0),
        OffsetTombstone(GROUP_ID, "foo", 1),
    ]
    assert h.send(TopicsChangedOp(("foo",))) == TopicsChangedOpResp(0, 0)  # already gone


def test_a_deleted_topic_leaves_the_target_at_once() -> None:
    h = ConsumerHarness()
    h.create_topic("foo", 2)
    h.create_topic("bar", 2)
    resp = h.join("m1", topics=("foo", "bar"))
    h.heartbeat("m1", resp.member_epoch, owned=h.named(resp.assignment))
    assert len(h.consumer.target["m1"]) == 2
    bar = h.tid("bar")
    h.delete_topic("bar")

    h.send(TopicsChangedOp(("bar",)))

    assert bar not in h.consumer.target["m1"]
    assert set(h.consumer.target["m1"][h.tid("foo")]) == {0, 1}


def test_only_offsets_committed_until_the_deletion_go() -> None:
    h = ConsumerHarness()
    h.create_topic("foo", 2)
    h.send(OffsetCommitOp(GROUP_ID, (("foo", 0, 5, -1, None),)))
    deleted_at = h.now
    h.now += 1000  # the topic is re-created, and committed to again
    h.send(OffsetCommitOp(GROUP_ID, (("foo", 1, 9, -1, None),)))

    assert h.send(TopicsChangedOp(("foo",), deleted_at)) == TopicsChangedOpResp(0, 1)
    assert set(h.group.offsets) == {("foo", 1)}

"""Transactional offsets in the pure machines (issue 43 §2): TxnOffsetCommit's KIP-447 checks
in classic and consumer groups, pending offsets per producer invisible to OffsetFetch,
require_stable, the end marker's merge and discard, retention, and replay of the records."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.actors.snapshot import read, snapshot_of
from rafka_actors.classic_group.state import ClassicGroup, GroupState
from rafka_actors.consumer_group.state import ConsumerGroup
from rafka_actors.coordinator.apply import replay
from rafka_actors.coordinator.latest import GroupRecords
from rafka_actors.group_common.ops import (
    DeleteGroupOp,
    ExpireOffsetsOp,
    JoinGroupOp,
    OffsetDeleteOp,
    OffsetFetchOp,
    TopicsChangedOp,
    TxnMarkerOp,
    TxnOffsetCommitOp,
)
from rafka_actors.group_common.txn_offsets import (
    TxnMarkerRecord,
    TxnOffsetCommitRecord,
    TxnOffsetTombstone,
    TxnProducerEpochRecord,
    epochs_of,
    pending_of,
)
from rafka_actors.ids import GroupKey
from rafka_actors.share_group.ops import ShareGroupHeartbeatOp
from rafka_actors.share_group.state import ShareGroup
from rafka_actors.storage.coordinator_records import (
    compaction_key,
    decode_entry,
    encode_entry,
    entry_compaction_key,
)

from ..consumer_group.harness import GROUP_ID as CONSUMER_GROUP_ID
from ..consumer_group.harness import ConsumerHarness
from ..consumer_group.test_migration import classic_group_of, new_harness
from .harness import GROUP_ID, GroupHarness

PID, OTHER_PID = 1000, 2000
TP = ("topic", 0)
UNSTABLE = ErrorCode.unstable_offset_commit


def txn_op(
    offsets: dict[tuple[str, int], int],
    *,
    group_id: str = GROUP_ID,
    producer_id: int = PID,
    epoch: int = 0,
    member_id: str = "",
    generation: int = -1,
    instance_id: str | None = None,
    version: int = 3,
) -> TxnOffsetCommitOp:
    rows = tuple((t, p, o, -1, "meta") for (t, p), o in offsets.items())
    return TxnOffsetCommitOp(
        group_id, producer_id, epoch, rows, member_id, generation, instance_id, version, "tx"
    )


def errors(response: Any) -> set[int]:
    return {int(e) for _, _, e in response.results}


def fetch_rows(h: Any, *, stable: bool, partitions: Any = (TP,)) -> dict[Any, tuple[int, int]]:
    group_id = GROUP_ID if isinstance(h, GroupHarness) else CONSUMER_GROUP_ID
    op = OffsetFetchOp(group_id, partitions, require_stable=stable)
    resp = h.call(op) if isinstance(h, GroupHarness) else h.send(op)
    return {(t, p): (o, int(e)) for t, p, o, _, _, e in resp.offsets}


@pytest.fixture
def stable() -> tuple[GroupHarness, list[Any]]:
    """A Stable classic group of two members, one of them static (instance "s1")."""
    h = GroupHarness()
    joined = h.join_group_of(2, instance_ids=[None, "s1"])
    leader = joined[0]
    h.sync(leader.member_id, leader.generation, {j.member_id: b"" for j in joined})
    for j in joined[1:]:
        h.sync(j.member_id, j.generation)
    assert h.state is GroupState.STABLE
    return h, joined


# -- KIP-447 checks, classic group ---------------------------------------------------------------


def test_classic_txn_commit_checks_member_generation_and_instance(stable: Any) -> None:
    h, (a, b) = stable
    g = a.generation
    assert errors(h.call(txn_op({TP: 1}, member_id=a.member_id, generation=g - 1))) == {
        ErrorCode.illegal_generation
    }
    assert errors(h.call(txn_op({TP: 1}, member_id="ghost", generation=g))) == {
        ErrorCode.unknown_member_id
    }
    fenced = txn_op({TP: 1}, member_id="someone-else", generation=g, instance_id="s1")
    assert errors(h.call(fenced)) == {ErrorCode.fenced_instance_id}
    ok = txn_op({TP: 1}, member_id=b.member_id, generation=g, instance_id="s1")
    assert errors(h.call(ok)) == {ErrorCode.none}
    assert errors(h.call(txn_op({TP: 2}, member_id=a.member_id, generation=g))) == {0}
    # v0-v2 carry no member: accepted whatever the group's state (Kafka: isTransactional)
    assert errors(h.call(txn_op({TP: 3}, version=0))) == {ErrorCode.none}
    assert not h.g.offsets  # nothing committed yet: all pending


def test_classic_txn_commit_during_rebalance_is_accepted(stable: Any) -> None:
    """A transactional commit is not refused with REBALANCE_IN_PROGRESS (Kafka does not
    enforce the state), but once the rebalance bumps the generation the old one is stale."""
    h, (a, b) = stable
    h.join(a.member_id)  # a rejoins: PreparingRebalance
    assert h.state is GroupState.PREPARING_REBALANCE
    op = txn_op({TP: 5}, member_id=b.member_id, generation=a.generation, instance_id="s1")
    assert errors(h.call(op)) == {ErrorCode.none}
    h.join(b.member_id, instance_id="s1")
    h.sleep(0)
    assert h.generation == a.generation + 1
    assert errors(h.call(op)) == {ErrorCode.illegal_generation}


def test_unknown_group_with_a_generation_is_illegal_generation() -> None:
    h = GroupHarness()
    assert errors(h.call(txn_op({TP: 1}, member_id="m", generation=3))) == {
        ErrorCode.illegal_generation
    }
    assert h.group is None
    assert errors(h.call(txn_op({TP: 1}))) == {ErrorCode.none}  # a simple group is created
    assert isinstance(h.group, ClassicGroup) and pending_of(h.g)[PID].offsets[TP].offset == 1


def test_metadata_too_large_per_partition() -> None:
    h = GroupHarness()
    big = TxnOffsetCommitOp(GROUP_ID, PID, 0, (("t", 0, 1, -1, "x" * 5000), ("t", 1, 1, -1, "")))
    resp = h.call(big)
    assert resp.results == (("t", 0, ErrorCode.offset_metadata_too_large), ("t", 1, 0))


# -- pending, require_stable, markers -------------------------------------------------------------


def test_pending_invisible_until_commit_marker_then_merged() -> None:
    h = GroupHarness()
    h.commit({TP: 10})
    h.call(txn_op({TP: 20, ("topic", 1): 21}))
    assert fetch_rows(h, stable=False) == {TP: (10, 0)}
    assert fetch_rows(h, stable=True, partitions=(TP, ("topic", 1), ("topic", 2))) == {
        TP: (-1, UNSTABLE),
        ("topic", 1): (-1, UNSTABLE),
        ("topic", 2): (-1, 0),
    }
    # every committed offset (null partitions): Kafka lists the committed ones only
    assert fetch_rows(h, stable=True, partitions=None) == {TP: (-1, UNSTABLE)}
    assert h.call(TxnMarkerOp(PID, 0, True)).error_code == ErrorCode.none
    assert fetch_rows(h, stable=True, partitions=(TP, ("topic", 1))) == {
        TP: (20, 0),
        ("topic", 1): (21, 0),
    }
    assert not pending_of(h.g)
    assert type(h.records[-1]) is TxnMarkerRecord
    # the marker again (the coordinator retries after a crash): harmless, writes nothing
    before = len(h.records)
    assert h.call(TxnMarkerOp(PID, 0, True)).error_code == ErrorCode.none
    assert len(h.records) == before


def test_abort_marker_discards() -> None:
    h = GroupHarness()
    h.commit({TP: 10})
    h.call(txn_op({TP: 20}))
    h.call(txn_op({TP: 30}, producer_id=OTHER_PID))
    assert h.call(TxnMarkerOp(PID, 0, False)).error_code == ErrorCode.none
    assert fetch_rows(h, stable=True) == {TP: (-1, UNSTABLE)}  # the other producer's
    h.call(TxnMarkerOp(OTHER_PID, 0, False))
    assert fetch_rows(h, stable=True) == {TP: (10, 0)}


def test_a_later_regular_commit_wins_over_the_pending_one() -> None:
    h = GroupHarness()
    h.call(txn_op({TP: 20, ("topic", 1): 21}))
    h.now += 5
    h.commit({TP: 99})
    replayed = replay(h.records, h.now)
    assert replayed is not None and pending_of(replayed)[PID].superseded == {TP}
    h.call(TxnMarkerOp(PID, 0, True))
    assert h.g.offsets[TP].offset == 99 and h.g.offsets[("topic", 1)].offset == 21
    # a transactional commit after the regular one is the later one again
    h.call(txn_op({TP: 40}))
    h.commit({TP: 41})
    h.call(txn_op({TP: 42}))
    h.call(TxnMarkerOp(PID, 0, True))
    assert h.g.offsets[TP].offset == 42


def test_a_merged_offset_wins_over_an_older_pending_one_of_another_producer() -> None:
    """Kafka keeps, at a commit marker, the most recent of the pending offset and the one in
    place, whether that was committed regularly or merged by another producer's marker."""
    h = GroupHarness()
    h.call(txn_op({TP: 10}))
    h.now += 5
    h.call(txn_op({TP: 20}, producer_id=OTHER_PID))
    h.call(TxnMarkerOp(OTHER_PID, 0, True))
    for group in (h.g, replay(h.records, h.now), rebuilt_from_the_compacted_log(h)):
        assert group is not None and pending_of(group)[PID].superseded == {TP}
    h.call(TxnMarkerOp(PID, 0, True))
    assert h.g.offsets[TP].offset == 20
    # the other way round: the pending offset is the more recent one, and wins
    h.call(txn_op({TP: 30}, producer_id=OTHER_PID))
    h.now += 5
    h.call(txn_op({TP: 40}))
    h.call(TxnMarkerOp(OTHER_PID, 0, True))
    for group in (h.g, replay(h.records, h.now), rebuilt_from_the_compacted_log(h)):
        assert group is not None and pending_of(group)[PID].superseded == set()
    h.call(TxnMarkerOp(PID, 0, True))
    assert h.g.offsets[TP].offset == 40


def rebuilt_from_the_compacted_log(h: GroupHarness) -> Any:
    latest: GroupRecords[Any] = GroupRecords()
    latest.apply(h.records)
    return replay(latest.records(), h.now)


def test_producer_epoch_fencing() -> None:
    h = GroupHarness()
    h.call(txn_op({TP: 1}, epoch=3))
    assert errors(h.call(txn_op({TP: 2}, epoch=2))) == {ErrorCode.invalid_producer_epoch}
    assert h.call(TxnMarkerOp(PID, 2, True)).error_code == ErrorCode.invalid_producer_epoch
    assert pending_of(h.g)[PID].offsets[TP].offset == 1
    # the coordinator aborts a fenced producer's transaction with a bumped epoch
    assert h.call(TxnMarkerOp(PID, 4, False)).error_code == ErrorCode.none
    assert not pending_of(h.g) and not h.g.offsets


def test_a_zombies_commit_after_its_transaction_ended_is_fenced() -> None:
    """The coordinator aborted the fenced producer's transaction (bumped epoch 4) before the
    zombie's TxnOffsetCommit (epoch 3) came: refused, as Kafka's producer state on the
    offsets partition refuses it; else the next commit marker of the producer id would merge
    it. The epoch survives a replay."""
    h = GroupHarness()
    h.commit({TP: 1})
    assert h.call(TxnMarkerOp(PID, 4, False)).error_code == ErrorCode.none  # nothing pending
    assert errors(h.call(txn_op({TP: 99}, epoch=3))) == {ErrorCode.invalid_producer_epoch}
    replayed = replay(h.records, h.now)
    assert replayed is not None and epochs_of(replayed) == {PID: 4}
    assert errors(h.call(txn_op({TP: 5}, epoch=4))) == {ErrorCode.none}  # the new producer
    assert h.call(TxnMarkerOp(PID, 3, True)).error_code == ErrorCode.invalid_producer_epoch
    assert h.call(TxnMarkerOp(PID, 4, True)).error_code == ErrorCode.none
    assert h.g.offsets[TP].offset == 5
    # an old marker sent again when nothing is pending is harmless and changes nothing
    before = len(h.records)
    assert h.call(TxnMarkerOp(PID, 2, True)).error_code == ErrorCode.none
    assert len(h.records) == before and epochs_of(h.g) == {PID: 4}


def test_marker_for_a_group_that_does_not_exist() -> None:
    h = GroupHarness()
    assert h.call(TxnMarkerOp(PID, 0, True)).error_code == ErrorCode.none
    assert h.group is None and not h.records


def test_retention_leaves_pending_offsets_alone() -> None:
    h = GroupHarness()
    h.commit({TP: 10, ("topic", 1): 11})
    h.call(txn_op({TP: 20}))
    h.now += 10_000
    expired = h.call(ExpireOffsetsOp(retention_ms=1_000))
    assert (expired.expired, expired.group_deleted) == (1, False)  # ("topic", 1) only
    assert set(h.g.offsets) == {TP}
    h.call(TxnMarkerOp(PID, 0, False))
    h.now += 10_000
    assert h.call(ExpireOffsetsOp(retention_ms=1_000)).group_deleted


def test_a_group_with_only_pending_offsets_is_not_expired() -> None:
    h = GroupHarness()
    h.call(txn_op({TP: 20}))
    h.now += 10_000
    assert not h.call(ExpireOffsetsOp(retention_ms=1_000)).group_deleted
    assert h.group is not None and pending_of(h.g)


def test_delete_group_drops_pending_offsets_in_the_live_view() -> None:
    h = GroupHarness()
    h.call(txn_op({TP: 20}))
    assert h.call(DeleteGroupOp(GROUP_ID)).error_code == ErrorCode.none
    assert h.group is None and replay(h.records, h.now) is None


def test_offset_delete_removes_the_partitions_pending_offsets_too() -> None:
    """As Kafka's offset tombstone does (OffsetMetadataManager.replay of a null value)."""
    h = GroupHarness()
    h.commit({TP: 10})
    h.call(txn_op({TP: 20, ("topic", 1): 21}))
    h.call(txn_op({TP: 30}, producer_id=OTHER_PID))
    resp = h.call(OffsetDeleteOp(GROUP_ID, (TP,)))
    assert resp.results == (("topic", 0, 0),)
    assert TP not in h.g.offsets and OTHER_PID not in pending_of(h.g)
    assert set(pending_of(h.g)[PID].offsets) == {("topic", 1)}
    assert fetch_rows(h, stable=True, partitions=(TP,)) == {TP: (-1, 0)}
    replayed = replay(h.records, h.now)
    assert replayed is not None and {
        p: set(t.offsets) for p, t in pending_of(replayed).items()
    } == {PID: {("topic", 1)}}
    h.call(TxnMarkerOp(PID, 0, True))
    assert TP not in h.g.offsets and h.g.offsets[("topic", 1)].offset == 21


# -- consumer groups (KIP-848) -------------------------------------------------------------------


@pytest.fixture
def consumers() -> ConsumerHarness:
    h = ConsumerHarness()
    h.create_topic("foo", 3)
    h.join("m1")
    h.join("m2")
    return h


def consumer_txn(h: ConsumerHarness, member: str, epoch: int, version: int = 3) -> set[int]:
    op = txn_op(
        {("foo", 0): 7},
        group_id=CONSUMER_GROUP_ID,
        member_id=member,
        generation=epoch,
        version=version,
    )
    return errors(h.send(op))


def test_consumer_group_txn_commit_fenced_by_member_epoch(consumers: ConsumerHarness) -> None:
    h = consumers
    epoch = h.member("m2").member_epoch
    assert consumer_txn(h, "nobody", epoch) == {ErrorCode.unknown_member_id}
    assert consumer_txn(h, "m2", epoch - 1) == {ErrorCode.illegal_generation}  # v0-v5
    assert consumer_txn(h, "m2", epoch - 1, version=6) == {ErrorCode.stale_member_epoch}
    assert consumer_txn(h, "", -1) == {ErrorCode.unknown_member_id}  # not empty
    assert consumer_txn(h, "m2", epoch) == {ErrorCode.none}
    assert not h.consumer.offsets and pending_of(h.consumer)[PID].offsets[("foo", 0)].offset == 7
    rows = h.send(OffsetFetchOp(CONSUMER_GROUP_ID, (("foo", 0),), require_stable=True)).offsets
    assert rows == (("foo", 0, -1, -1, "", UNSTABLE),)
    replayed = h.replayed()
    assert pending_of(replayed)[PID].offsets == pending_of(h.consumer)[PID].offsets
    h.send(TxnMarkerOp(PID, 0, True))
    assert h.consumer.offsets[("foo", 0)].offset == 7
    assert h.replayed().offsets == h.consumer.offsets and not pending_of(h.replayed())


def test_pending_offsets_survive_a_change_of_group_type() -> None:
    """An empty consumer group that becomes classic (and back) keeps its pending offsets."""
    h = ConsumerHarness()
    h.create_topic("foo", 1)
    h.join("m1")
    h.heartbeat("m1", -1)
    assert isinstance(h.group, ConsumerGroup)
    h.send(txn_op({("foo", 0): 3}, group_id=CONSUMER_GROUP_ID))
    h.send(
        JoinGroupOp(CONSUMER_GROUP_ID, "", "consumer", 10_000, (("range", b""),), new_member_id="x")
    )
    assert isinstance(h.group, ClassicGroup) and PID in pending_of(h.group)
    assert PID in pending_of(h.replayed())


# -- records, compaction, snapshot ---------------------------------------------------------------


def test_records_encode_and_compact_under_the_producer() -> None:
    key = GroupKey(7, GROUP_ID)
    pending = TxnOffsetCommitRecord(GROUP_ID, PID, 2, "t", 1, 5, -1, None, 123)
    marker = TxnMarkerRecord(GROUP_ID, PID, 2, True)
    dropped = TxnOffsetTombstone(GROUP_ID, PID, "t", 1)
    epoch = TxnProducerEpochRecord(GROUP_ID, PID, 2)
    for record in (pending, marker, dropped, epoch):
        payload = encode_entry(key, record)
        assert decode_entry(payload) == (key, record)
        assert entry_compaction_key(payload) == compaction_key(key, record)
    assert compaction_key(key, pending) == ((7, GROUP_ID, 20, PID, "t", 1), False)
    assert compaction_key(key, marker) == ((7, GROUP_ID, 20, PID), True)
    assert compaction_key(key, dropped) == ((7, GROUP_ID, 20, PID, "t", 1), True)
    assert compaction_key(key, epoch) == ((7, GROUP_ID, 23, PID), False)  # not under (20, PID)
    view: GroupRecords[Any] = GroupRecords()
    other = TxnOffsetCommitRecord(GROUP_ID, OTHER_PID, 0, "t", 1, 6, -1, "", 124)
    view.apply([pending, other, epoch, marker])
    assert view.records() == [other, epoch]


def test_snapshot_hides_pending_offsets_but_honours_require_stable() -> None:
    h = GroupHarness()
    h.commit({TP: 10})
    h.call(txn_op({TP: 20}))
    snap = snapshot_of(GROUP_ID, h.group)
    assert dict(snap.offsets) == {TP: h.g.offsets[TP]} and snap.unstable == {TP}
    loose = read(snap, OffsetFetchOp(GROUP_ID, (TP,)))
    strict = read(snap, OffsetFetchOp(GROUP_ID, (TP,), require_stable=True))
    assert loose is not None and loose.offsets[0][2] == 10
    assert strict is not None and strict.offsets[0][2:] == (-1, -1, "", UNSTABLE)
    h.call(TxnMarkerOp(PID, 0, True))
    after = read(snapshot_of(GROUP_ID, h.group), OffsetFetchOp(GROUP_ID, (TP,), True))
    assert after is not None and after.offsets[0][2] == 20 and after.offsets[0][5] == 0


def test_pending_offsets_survive_online_migration_both_ways() -> None:
    """A classic group upgraded to a consumer group by a KIP-848 member, and downgraded when
    it leaves, keeps a transaction's pending offsets (and the producer's epoch) throughout;
    the marker then merges them."""
    h = new_harness()  # (no initial-rebalance delay, topic foo)
    generation = classic_group_of(h, 2)
    op = txn_op({("foo", 1): 7}, group_id=CONSUMER_GROUP_ID, member_id="c0", generation=generation)
    assert errors(h.send(op)) == {ErrorCode.none}
    h.send(TxnMarkerOp(OTHER_PID, 3, False))  # another producer's epoch, nothing pending
    assert h.join("k1").error_code == ErrorCode.none
    assert isinstance(h.group, ConsumerGroup) and PID in pending_of(h.group)
    assert epochs_of(h.group) == {OTHER_PID: 3}
    assert h.heartbeat("k1", -1).error_code == ErrorCode.none
    assert isinstance(h.group, ClassicGroup) and PID in pending_of(h.group)
    assert epochs_of(h.replayed()) == {OTHER_PID: 3} and PID in pending_of(h.replayed())
    assert h.send(TxnMarkerOp(PID, 0, True)).error_code == ErrorCode.none
    assert h.group.offsets[("foo", 1)].offset == 7


def test_a_share_group_takes_no_transactional_offsets() -> None:
    """One group id, one type: a TxnOffsetCommit to a share group is refused as an
    OffsetCommit is (GROUP_ID_NOT_FOUND); its marker has nothing to end."""
    h = ConsumerHarness()
    h.create_topic("foo", 1)
    joined = h.send(ShareGroupHeartbeatOp(CONSUMER_GROUP_ID, "s1", 0, None, ("foo",)))
    assert joined.error_code == ErrorCode.none and isinstance(h.group, ShareGroup)
    refused = h.send(txn_op({("foo", 0): 1}, group_id=CONSUMER_GROUP_ID))
    assert errors(refused) == {ErrorCode.group_id_not_found}
    assert h.send(TxnMarkerOp(PID, 0, True)).error_code == ErrorCode.none


def test_a_deleted_topics_pending_offsets_go_with_its_offsets() -> None:
    h = GroupHarness()
    h.commit({TP: 10})
    h.call(txn_op({TP: 20, ("other", 0): 5}))
    assert h.call(TopicsChangedOp(deleted=("topic",))).offsets_deleted == 1
    assert set(pending_of(h.g)[PID].offsets) == {("other", 0)}
    assert set(pending_of(replay(h.records, h.now))[PID].offsets) == {("other", 0)}
    h.call(TxnMarkerOp(PID, 0, True))
    assert set(h.g.offsets) == {("other", 0)}

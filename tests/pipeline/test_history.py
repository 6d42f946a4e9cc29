"""Rebalance history from the records a real (pure) classic group writes, and from KIP-848
epoch records: generations, start and end, joined, left, evicted, and the cause."""

from __future__ import annotations

from typing import Any

from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.consumer_group.records import ConsumerGroupMetadataRecord
from rafka_actors.group_common.records import GroupTombstone, Record
from rafka_actors.pipeline.history import cause_of, rebalances

from ..classic_group.harness import GroupHarness
from ..consumer_group.test_migration import classic_group_of, new_harness


def row_of(record: Record) -> dict[str, Any] | None:
    """A group-change row as the coordinator-log data source gives it (times in ms)."""
    if isinstance(record, GroupMetadataRecord):
        started = record.rebalance_started_ms
        return {
            "org_id": 0,
            "group_id": record.group_id,
            "group_type": "classic",
            "generation": record.generation,
            "members": [m[0] for m in record.members],
            "reason": record.reason,
            "time": record.state_timestamp_ms,
            "rebalance_started": started if started >= 0 else None,
            "departed": [{"member_id": m, "why": w} for m, w in record.departed],
            "deleted": False,
        }
    if isinstance(record, ConsumerGroupMetadataRecord):
        return {
            "org_id": 0,
            "group_id": record.group_id,
            "group_type": "consumer",
            "generation": record.epoch,
            "members": [],
            "reason": record.reason,
            "time": record.timestamp_ms,
            "rebalance_started": None,
            "departed": [],
            "deleted": False,
        }
    if isinstance(record, GroupTombstone):
        return {"group_id": record.group_id, "group_type": "classic", "deleted": True}
    return None


def rows(records: list[Record]) -> list[dict[str, Any]]:
    return [r for r in map(row_of, records) if r is not None]


def test_classic_rebalances_joined_left_and_evicted() -> None:
    h = GroupHarness()
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    formed_at = h.now
    h.sleep(1000)
    h.leave(b)  # a must rejoin: generation 2 without b
    left_at = h.now
    h.sleep(500)
    token = h.join(a)
    h.wait_for(token)
    assert h.reply(h.sync(a, 2, {a: b"x"})).error_code == 0
    settled_at = h.now
    h.sleep(60_000)  # a stops heartbeating: evicted when its session runs out
    history = rebalances(rows(h.records))
    assert [(r.generation, r.cause) for r in history] == [
        (1, f"member joined ({a})"),
        (2, f"member left ({b})"),
        (3, f"session timeout of {a}"),
    ]
    first, second, third = history
    assert first.joined == tuple(sorted((a, b))) and first.end_ms == formed_at
    assert first.duration_ms == 6000  # the initial delay, extended once by the 2nd member
    assert (second.left, second.evicted, second.joined) == ((b,), (), ())
    assert (second.start_ms, second.end_ms, second.duration_ms) == (left_at, settled_at, 500)
    assert (third.left, third.evicted) == ((), (a,))


def test_consumer_epochs_are_rebalances_without_a_barrier() -> None:
    records: list[Record] = [
        ConsumerGroupMetadataRecord("g", "cgp", 1, 7, "member m1 joined", 1000),
        ConsumerGroupMetadataRecord("g", "cgp", 2, 7, "member m2 joined", 2000),
        ConsumerGroupMetadataRecord("g", "cgp", 3, 7, "member m1 session timeout", 9000),
        ConsumerGroupMetadataRecord("g", "cgp", 4, 9, "subscribed topics changed", 9500),
    ]
    history = rebalances(rows(records))
    assert [(r.generation, r.start_ms, r.joined, r.evicted, r.cause) for r in history] == [
        (1, 1000, ("m1",), (), "member joined (m1)"),
        (2, 2000, ("m2",), (), "member joined (m2)"),
        (3, 9000, (), ("m1",), "session timeout of m1"),
        (4, 9500, (), (), "subscribed topics changed"),
    ]


def test_causes_in_words() -> None:
    assert cause_of("leader rejoined") == "leader rejoin"
    assert cause_of("members left: a, b") == "member left (a, b)"
    assert cause_of("member x rebalance timeout") == "rebalance timeout of x"
    assert cause_of("") == "unknown"


def test_protocol_migrations_are_rebalances_with_their_cause() -> None:
    """An upgrade and a downgrade (coordinator/migration.py) each show up as a rebalance
    whose cause names the conversion and the member that made it."""
    harness = new_harness()
    classic_group_of(harness, 2)
    harness.join("k1")
    harness.sleep(100)
    harness.heartbeat("k1", -1)  # the last consumer-protocol member leaves: downgrade
    generation = harness.group.generation
    for member_id in ("c0", "c1"):  # the classic members rejoin; the rebalance completes
        harness.classic_join(member_id)
    joined = harness.answers[harness.last_token]
    for member_id in ("c0", "c1"):
        harness.classic_sync(member_id, joined.generation_id)
    history = rebalances(rows(harness.records))
    causes = [(r.group_type, r.cause) for r in history]
    assert (
        "consumer",
        "upgrade to a consumer group (k1 joined with the consumer protocol)",
    ) in causes
    downgrade = history[-1]
    assert downgrade.group_type == "classic" and downgrade.generation == generation + 1
    assert (
        downgrade.cause
        == "downgrade to a classic group (the last consumer-protocol member, k1, went)"
    )
    assert downgrade.left == ("k1",)

"""KIP-848 consumer-group scenarios, named after Kafka's GroupMetadataManagerTest.

Each test drives the pure state machine through ConsumerGroupHeartbeats (and the clock) and
checks the answers, epochs, assignments and the group's derived state. `h.replayed()` checks
that what the records say is what the group holds.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.consumer_group.ops import ConsumerGroupDescribeOp
from rafka_actors.consumer_group.state import ConsumerGroupState, MemberState
from rafka_actors.group_common.effects import GroupConfig

from .harness import CONFIG, GROUP_ID, REBALANCE_TIMEOUT_MS, ConsumerHarness, durable_view

SESSION = CONFIG.consumer_session_timeout_ms


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.create_topic("foo", 6)
    harness.create_topic("bar", 3)
    return harness


def settle(h: ConsumerHarness, owned: dict[str, dict[str, set[int]]], rounds: int = 4) -> None:
    """Every member heartbeats with what it owns, taking each answer, until nothing moves."""
    for _ in range(rounds):
        for member_id in list(owned):
            resp = h.heartbeat(member_id, h.member(member_id).member_epoch, owned=owned[member_id])
            assert resp.error_code == ErrorCode.none
            if resp.assignment is not None:
                owned[member_id] = h.named(resp.assignment) or {}


# -- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"member_id": "", "epoch": 0, "topics": ("foo",), "rebalance_timeout_ms": 1}, 42),
        ({"member_id": "m", "epoch": 0, "topics": ("foo",)}, 42),  # no rebalance timeout
        ({"member_id": "m", "epoch": 0, "rebalance_timeout_ms": 1}, 42),  # no subscription
        ({"member_id": "", "epoch": 3}, 42),
        ({"member_id": "m", "epoch": -3}, 42),
        ({"member_id": "m", "epoch": -2}, 42),  # a static leave without an instance id
        (
            {
                "member_id": "m",
                "epoch": 0,
                "topics": ("foo",),
                "rebalance_timeout_ms": 1,
                "assignor": "sticky",
            },
            112,
        ),
        ({"member_id": "m", "epoch": 0, "regex": "foo(?=x)", "rebalance_timeout_ms": 1}, 128),
    ],
)
def test_consumer_heartbeat_request_validation(
    h: ConsumerHarness, kw: dict[str, object], code: int
) -> None:
    member_id = kw.pop("member_id")
    epoch = kw.pop("epoch")
    owned = {} if epoch == 0 else None
    resp = h.heartbeat(member_id, epoch, owned=owned, **kw)  # type: ignore[arg-type]
    assert resp.error_code == code
    assert resp.error_message
    assert h.group is None and h.records == []  # a refusal changes nothing


def test_join_with_owned_partitions_is_invalid(h: ConsumerHarness) -> None:
    resp = h.heartbeat("m", 0, topics=("foo",), owned={"foo": {0}}, rebalance_timeout_ms=1)
    assert resp.error_code == ErrorCode.invalid_request


def test_member_id_generation(h: ConsumerHarness) -> None:
    resp = h.join("", version=0)
    assert resp.error_code == ErrorCode.none
    assert resp.member_id == "generated-x"


def test_unknown_group_id(h: ConsumerHarness) -> None:
    resp = h.heartbeat("m", 1, owned={})
    assert resp.error_code == ErrorCode.group_id_not_found
    assert (resp.member_id, resp.member_epoch) == (None, 0)  # errors carry neither


def test_unknown_member_id_joins_consumer_group(h: ConsumerHarness) -> None:
    h.join("m1")
    resp = h.heartbeat("m2", 1, owned={})
    assert resp.error_code == ErrorCode.unknown_member_id
    assert resp.error_message == "Member m2 is not a member of group fooup."  # Kafka's words


def test_member_joins_empty_consumer_group(h: ConsumerHarness) -> None:
    resp = h.join("m1", ("foo", "bar"))
    assert resp.error_code == ErrorCode.none
    assert (resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms) == ("m1", 1, 5000)
    assert h.named(resp.assignment) == {"foo": set(range(6)), "bar": {0, 1, 2}}
    assert h.consumer.state is ConsumerGroupState.STABLE
    assert (h.consumer.group_epoch, h.consumer.assignment_epoch) == (1, 1)
    assert durable_view(h.replayed()) == durable_view(h.consumer)


def test_the_last_member_leaving_keeps_the_assignment_epoch(h: ConsumerHarness) -> None:
    """As Kafka 4.3.1 describes the empty group (seen by tests/kafka_diff): its epoch is
    bumped, its assignment epoch is the last target's, and a new member is assigned at once."""
    h.join("m1")
    assert h.heartbeat("m1", -1).error_code == ErrorCode.none
    assert h.consumer.state is ConsumerGroupState.EMPTY
    assert (h.consumer.group_epoch, h.consumer.assignment_epoch) == (2, 1)
    assert durable_view(h.replayed()) == durable_view(h.consumer)
    joined = h.join("m2")
    assert (joined.member_epoch, h.named(joined.assignment)) == (3, {"foo": set(range(6))})
    assert (h.consumer.group_epoch, h.consumer.assignment_epoch) == (3, 3)


def test_consumer_group_member_epoch_validation(h: ConsumerHarness) -> None:
    h.join("m1")
    assert h.heartbeat("m1", 2, owned={}).error_code == ErrorCode.fenced_member_epoch
    h.join("m2")  # epoch 2: m1 must give up half
    resp = h.heartbeat("m1", 1, owned={"foo": set(range(6))})
    assert h.member("m1").current.state is MemberState.UNREVOKED_PARTITIONS
    kept = h.named(resp.assignment)
    assert kept is not None
    resp = h.heartbeat("m1", 1, owned=kept)  # revoked: moves to epoch 2
    assert resp.member_epoch == 2
    # A lost epoch-bump response: the member comes back with its previous epoch and what it
    # owns, a subset of its assignment, and is not fenced.
    assert h.heartbeat("m1", 1, owned=kept).error_code == ErrorCode.none
    # ...but not with partitions it does not have, nor without saying what it owns.
    assert h.heartbeat("m1", 1, owned={"foo": set(range(6))}).error_code == 110
    assert h.heartbeat("m1", 1).error_code == 110


def test_updating_subscription_triggers_new_target_assignment(h: ConsumerHarness) -> None:
    h.join("m1", ("foo",))
    resp = h.heartbeat("m1", 1, topics=("foo", "bar"))
    assert resp.member_epoch == 2 and h.consumer.group_epoch == 2
    assert h.named(resp.assignment) == {"foo": set(range(6)), "bar": {0, 1, 2}}


def test_new_joining_member_does_not_get_assigned_partitions_owned_by_others(
    h: ConsumerHarness,
) -> None:
    h.join("m1")
    resp = h.join("m2")
    assert resp.member_epoch == 2 and h.named(resp.assignment) == {}
    assert h.member("m2").current.state is MemberState.UNRELEASED_PARTITIONS
    assert h.consumer.state is ConsumerGroupState.RECONCILING
    owned = {"m1": {"foo": set(range(6))}, "m2": {}}
    settle(h, owned)
    assert owned["m1"]["foo"].isdisjoint(owned["m2"]["foo"])
    assert owned["m1"]["foo"] | owned["m2"]["foo"] == set(range(6))
    assert h.consumer.state is ConsumerGroupState.STABLE
    assert durable_view(h.replayed()) == durable_view(h.consumer)


def test_reconciliation_process(h: ConsumerHarness) -> None:
    owned: dict[str, dict[str, set[int]]] = {}
    for member_id in ("m1", "m2", "m3"):
        owned[member_id] = h.named(h.join(member_id, ("foo", "bar")).assignment) or {}
        settle(h, owned)
    sizes = sorted(sum(len(p) for p in o.values()) for o in owned.values())
    assert sizes == [3, 3, 3]
    assert h.consumer.state is ConsumerGroupState.STABLE
    assert all(m.member_epoch == h.consumer.group_epoch for m in h.consumer.members.values())


def test_leaving_member_bumps_group_epoch(h: ConsumerHarness) -> None:
    h.join("m1")
    h.join("m2")
    resp = h.heartbeat("m2", -1)
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, "m2", -1)
    assert h.consumer.group_epoch == 3 and "m2" not in h.consumer.members
    assert h.consumer.target["m1"] == {h.tid("foo"): frozenset(range(6))}


def test_leave_unknown_member(h: ConsumerHarness) -> None:
    h.join("m1")
    resp = h.heartbeat("m9", -1)
    assert resp.error_code == ErrorCode.unknown_member_id
    assert resp.error_message == "Member m9 is not a member of group fooup."


def test_group_epoch_bump_when_new_static_member_joins(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    h.join("m2", instance_id="i2")
    assert h.consumer.group_epoch == 2 and h.consumer.static_members == {"i1": "m1", "i2": "m2"}


def test_static_member_gets_back_assignment_upon_rejoin(h: ConsumerHarness) -> None:
    owned = {"m1": h.named(h.join("m1", instance_id="i1").assignment) or {}}
    owned["m2"] = h.named(h.join("m2", instance_id="i2").assignment) or {}
    settle(h, owned)
    epoch = h.consumer.group_epoch
    assert h.heartbeat("m2", -2, instance_id="i2").member_epoch == -2
    resp = h.join("m2-again", instance_id="i2")
    assert resp.error_code == ErrorCode.none
    assert h.named(resp.assignment) == owned["m2"]
    assert resp.member_epoch == epoch and h.consumer.group_epoch == epoch
    assert "m2" not in h.consumer.members and h.consumer.static_members["i2"] == "m2-again"
    assert durable_view(h.replayed()) == durable_view(h.consumer)


def test_static_member_rejoin_with_same_instance_id_before_leaving(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    resp = h.join("m1-other", instance_id="i1")
    assert resp.error_code == ErrorCode.unreleased_instance_id


def test_no_group_epoch_bump_when_static_member_temporarily_leaves(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    h.join("m2", instance_id="i2")
    resp = h.heartbeat("m2", -2, instance_id="i2")
    assert (resp.error_code, resp.member_epoch) == (0, -2)
    assert h.consumer.group_epoch == 2 and h.member("m2").member_epoch == -2


def test_leaving_static_member_bumps_group_epoch(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    h.join("m2", instance_id="i2")
    assert h.heartbeat("m2", -1, instance_id="i2").member_epoch == -1
    assert h.consumer.group_epoch == 3 and "i2" not in h.consumer.static_members


def test_static_member_with_different_member_id_leaves_is_fenced(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    resp = h.heartbeat("not-m1", -2, instance_id="i1")
    assert resp.error_code == ErrorCode.fenced_instance_id
    assert h.heartbeat("m1", -2, instance_id="nope").error_code == ErrorCode.unknown_member_id


def test_static_member_heartbeat_with_other_member_id_is_fenced(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    resp = h.heartbeat("m1-other", 1, instance_id="i1", owned={})
    assert resp.error_code == ErrorCode.fenced_instance_id


def test_consumer_group_states(h: ConsumerHarness) -> None:
    h.config = GroupConfig(consumer_assignment_interval_ms=1000)
    h.join("m1")
    assert h.consumer.state is ConsumerGroupState.STABLE
    h.join("m2")  # within the throttle: the target waits
    assert h.consumer.state is ConsumerGroupState.ASSIGNING
    h.sleep(1000)
    assert h.consumer.state is ConsumerGroupState.RECONCILING
    settle(h, {"m1": {"foo": set(range(6))}, "m2": {}})
    assert h.consumer.state is ConsumerGroupState.STABLE
    h.heartbeat("m1", -1)
    h.heartbeat("m2", -1)
    assert h.consumer.state is ConsumerGroupState.EMPTY


def test_assignment_is_throttled_by_the_assignment_interval(h: ConsumerHarness) -> None:
    h.config = GroupConfig(consumer_assignment_interval_ms=1000)
    h.join("m1")
    h.sleep(10)
    resp = h.join("m2")
    assert resp.member_epoch == 1 and h.consumer.assignment_epoch == 1  # the old target
    assert h.consumer.assignment_deadline == 1000 + 1000
    h.sleep(990)  # the deadline runs the assignor; no heartbeat needed
    assert h.consumer.assignment_epoch == 2 and h.consumer.target["m2"]


def test_new_member_is_rejected_when_maximum_members_is_reached(h: ConsumerHarness) -> None:
    h.config = GroupConfig(consumer_max_size=1, consumer_assignment_interval_ms=0)
    h.join("m1")
    assert h.join("m2").error_code == ErrorCode.group_max_size_reached
    assert h.heartbeat("m1", 1).error_code == ErrorCode.none


def test_session_timeout_expiration(h: ConsumerHarness) -> None:
    h.join("m1")
    h.join("m2")
    h.sleep(SESSION - 1)
    assert h.heartbeat("m2", 2).error_code == ErrorCode.none  # m2 keeps its session alive
    h.sleep(1)
    assert "m1" not in h.consumer.members and h.consumer.group_epoch == 3
    assert h.consumer.target["m2"] == {h.tid("foo"): frozenset(range(6))}
    assert h.heartbeat("m1", 1).error_code == ErrorCode.unknown_member_id


def test_session_timeout_of_temporarily_left_static_member(h: ConsumerHarness) -> None:
    h.join("m1", instance_id="i1")
    h.heartbeat("m1", -2, instance_id="i1")
    h.sleep(SESSION)
    assert h.consumer.is_empty() and h.consumer.group_epoch == 2


def test_rebalance_timeout_expiration(h: ConsumerHarness) -> None:
    h.join("m1")
    h.join("m2")
    h.heartbeat("m1", 1, owned={"foo": set(range(6))})  # asked to revoke three
    assert h.member("m1").current.state is MemberState.UNREVOKED_PARTITIONS
    h.sleep(REBALANCE_TIMEOUT_MS - 1)
    assert h.heartbeat("m1", 1).error_code == ErrorCode.none  # still holding on
    h.sleep(1)
    assert "m1" not in h.consumer.members  # fenced: it never let go
    resp = h.heartbeat("m2", 2, owned={})
    assert h.named(resp.assignment) == {"foo": set(range(6))}


def test_rebalance_timeout_disarmed_when_member_revokes(h: ConsumerHarness) -> None:
    h.join("m1")
    h.join("m2")
    kept = h.named(h.heartbeat("m1", 1, owned={"foo": set(range(6))}).assignment)
    h.heartbeat("m1", 1, owned=kept)
    h.sleep(REBALANCE_TIMEOUT_MS + 1)
    assert "m1" in h.consumer.members


def test_fenced_member_rejoins_with_epoch_zero(h: ConsumerHarness) -> None:
    h.join("m1")
    h.join("m2")
    assert h.heartbeat("m1", 7, owned={}).error_code == ErrorCode.fenced_member_epoch
    resp = h.join("m1")  # KAFKA-19233: same member id, epoch 0
    assert resp.error_code == ErrorCode.none and resp.member_epoch >= 1


def test_group_epoch_bump_when_subscribed_topic_is_created(h: ConsumerHarness) -> None:
    h.join("m1", ("foo", "baz"))
    assert h.consumer.group_epoch == 1
    h.create_topic("baz", 2)
    resp = h.heartbeat("m1", 1)
    assert h.consumer.group_epoch == 2 and resp.member_epoch == 2
    assert h.named(resp.assignment) == {"foo": set(range(6)), "baz": {0, 1}}


def test_group_epoch_bump_when_regex_matching_topic_is_created_or_deleted(
    h: ConsumerHarness,
) -> None:
    resp = h.join("m1", None, regex="ba.*")
    assert h.named(resp.assignment) == {"bar": {0, 1, 2}}
    h.create_topic("bazooka", 1)
    h.create_topic("xbar", 1)  # no full match
    resp = h.heartbeat("m1", 1)
    assert h.consumer.group_epoch == 2
    assert h.named(resp.assignment) == {"bar": {0, 1, 2}, "bazooka": {0}}
    h.delete_topic("bar")
    h.heartbeat("m1", 2)
    assert h.consumer.group_epoch == 3 and h.consumer.target["m1"] == {
        h.tid("bazooka"): frozenset({0})
    }


def test_unrelated_topic_change_does_not_bump_epoch(h: ConsumerHarness) -> None:
    h.join("m1", ("foo",))
    h.create_topic("other", 4)
    h.heartbeat("m1", 1)
    assert h.consumer.group_epoch == 1


def test_range_assignor_chosen_by_members(h: ConsumerHarness) -> None:
    h.join("m1", ("foo",), assignor="range")
    h.join("m2", ("foo",), assignor="range")
    assert h.consumer.target["m1"] == {h.tid("foo"): frozenset({0, 1, 2})}
    assert h.consumer.target["m2"] == {h.tid("foo"): frozenset({3, 4, 5})}


# -- a restart: the group rebuilt from its records --------------------------------------------
def test_a_group_rebuilt_from_its_records_gives_each_member_a_fresh_session(
    h: ConsumerHarness,
) -> None:
    """No deadline is stored: a restart starts every member's session afresh (on_loaded),
    so a member that does not come back is still fenced."""
    h.join("m1")
    h.join("m2")
    h.now += 10_000
    h.group = h.replayed()
    assert {m.session_deadline for m in h.consumer.members.values()} == {h.now + SESSION}
    h.sleep(SESSION - 1)
    assert h.heartbeat("m1", h.member("m1").member_epoch).error_code == ErrorCode.none
    h.sleep(1)  # m2 said nothing since the restart
    assert set(h.consumer.members) == {"m1"}


def test_a_rebuilt_member_that_must_revoke_gets_a_fresh_rebalance_deadline(
    h: ConsumerHarness,
) -> None:
    owned = {"m1": h.named(h.join("m1").assignment) or {}}
    h.join("m2")
    h.heartbeat("m1", 1, owned=owned["m1"])  # asked to give up half of foo
    assert h.member("m1").current.state is MemberState.UNREVOKED_PARTITIONS
    h.group = h.replayed()
    assert h.member("m1").rebalance_deadline == h.now + REBALANCE_TIMEOUT_MS
    h.sleep(REBALANCE_TIMEOUT_MS)  # it never lets go: fenced, though its session runs on
    assert "m1" not in h.consumer.members


def test_a_members_rack_is_kept_and_described(h: ConsumerHarness) -> None:
    h.join("m1", rack_id="rack-a")
    h.heartbeat("m1", 1)  # a heartbeat naming no rack keeps it
    for group in (h.group, h.replayed()):
        assert group.members["m1"].subscription.rack_id == "rack-a"
    (described,) = h.send(ConsumerGroupDescribeOp(GROUP_ID)).members
    assert described[2] == "rack-a"

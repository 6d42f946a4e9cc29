"""Online migration between the classic and consumer protocols (coordinator/migration.py)
and classic members inside a consumer group (consumer_group/classic_members.py), stepped
through the pure coordinator as Kafka's GroupMetadataManagerTest does."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from rafka_actors.classic_group.state import ClassicGroup, GroupState
from rafka_actors.consumer_group.state import ConsumerGroup, MemberState
from rafka_actors.coordinator import machine
from rafka_actors.group_common.consumer_embedded import (
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from rafka_actors.group_common.ops import (
    HeartbeatOp,
    JoinGroupOp,
    JoinGroupOpResp,
    LeaveGroupOp,
    OffsetCommitOp,
    SyncGroupOp,
    TimerFired,
)

from .harness import CONFIG, GROUP_ID, ConsumerHarness, durable_view

SESSION_MS = 10_000
REBALANCE_MS = 20_000


@dataclasses.dataclass
class MigrationHarness(ConsumerHarness):
    """Keeps every answer, also those to requests parked in a classic rebalance."""

    answers: dict[int, Any] = dataclasses.field(default_factory=dict)
    last_token: int = 0

    def send(self, op: Any) -> Any:
        token = self.last_token = next(self._tokens)
        result = machine.handle(
            self.group, op, self.now, token, config=self.config, fresh_cgp_id="cgp_test",
            topics=self.image,
        )  # fmt: skip
        self.group = result.group
        self.records.extend(result.records)
        self.answers.update(result.replies)
        return self.answers.get(token)

    def classic_join(
        self, member_id: str, owned: dict[str, list[int]] | None = None, version: int = 1
    ) -> Any:
        owned_rows = tuple((t, tuple(p)) for t, p in (owned or {}).items())
        meta = encode_subscription(Subscription(version, ("foo",), None, owned_rows))
        known = self.group is not None and member_id in self.group.members
        return self.send(
            JoinGroupOp(
                GROUP_ID, member_id if known else "", "consumer", SESSION_MS, (("range", meta),),
                rebalance_timeout_ms=REBALANCE_MS, client_id="classic", client_host="/10.0.0.1",
                require_known_member_id=False, new_member_id=member_id or "new",
            )
        )  # fmt: skip

    def classic_sync(self, member_id: str, generation: int, assignments: Any = ()) -> Any:
        return self.send(
            SyncGroupOp(GROUP_ID, member_id, generation, assignments, None, "consumer", "range")
        )

    def classic_heartbeat(self, member_id: str, generation: int) -> int:
        return int(self.send(HeartbeatOp(GROUP_ID, member_id, generation)).error_code)

    def partitions_of(self, assignment: bytes) -> dict[str, set[int]]:
        return {t: set(p) for t, p in decode_assignment(assignment).partitions}


def new_harness() -> MigrationHarness:
    """No initial-rebalance delay, and topic foo with 6 partitions."""
    harness = MigrationHarness(config=dataclasses.replace(CONFIG, initial_rebalance_delay_ms=0))
    harness.create_topic("foo", 6)
    return harness


@pytest.fixture
def h() -> MigrationHarness:
    return new_harness()


def classic_group_of(h: MigrationHarness, members: int, user_data: bytes | None = None) -> int:
    """A Stable classic group of `members` members c0.. sharing foo's 6 partitions, with a
    committed offset; returns its generation."""
    tokens = []
    for i in range(members):
        h.classic_join(f"c{i}")
        tokens.append(h.last_token)
    h.sleep(0)  # the initial-rebalance delay (0) passes: everyone is answered
    joined = [h.answers[t] for t in tokens]
    generation = joined[0].generation_id
    leader = joined[0].leader_id
    shares: dict[str, list[int]] = {f"c{i}": [] for i in range(members)}
    for p in range(6):
        shares[f"c{p % members}"].append(p)
    plan = tuple(
        (m, encode_assignment((("foo", tuple(ps)),), 1, user_data)) for m, ps in shares.items()
    )
    for i in range(members):
        m = f"c{i}"
        answer = h.classic_sync(m, generation, plan if m == leader else ())
        assert answer is None or answer.error_code == ErrorCode.none
    assert isinstance(h.group, ClassicGroup) and h.group.is_in(GroupState.STABLE)
    h.send(OffsetCommitOp(GROUP_ID, (("foo", 0, 42, -1, None),), "c0", generation))
    return int(generation)


def _rows(assignment: dict) -> tuple:
    return tuple((t, tuple(p)) for t, p in assignment.items())


def owners(group: ConsumerGroup) -> dict[int, str]:
    return {p: m for (_, p), m in group.owners.items()}


# -- upgrade ---------------------------------------------------------------------------------
def test_consumer_member_upgrades_a_classic_group(h: MigrationHarness) -> None:
    generation = classic_group_of(h, 3)
    resp = h.join("k1")
    assert resp.error_code == ErrorCode.none
    group = h.consumer
    assert group.cgp_id == "cgp_test" and group.offsets[("foo", 0)].offset == 42
    assert group.group_epoch == generation + 1 and group.assignment_epoch == generation + 1
    # the classic members came over with their assignment, as classic members
    for i in range(3):
        member = group.members[f"c{i}"]
        assert member.classic is not None and member.classic.session_timeout_ms == SESSION_MS
    assert h.member("c0").current.member_epoch == generation
    # the new member gets nothing until the classic members let go of their partitions
    assert h.assigned("k1") == {}
    assert durable_view(h.replayed()) == durable_view(group)
    assert isinstance(h.replayed().members["c0"].classic, type(group.members["c0"].classic))


def test_classic_members_rejoin_and_hand_over(h: MigrationHarness) -> None:
    generation = classic_group_of(h, 3)
    h.join("k1")
    epoch = h.consumer.group_epoch
    # heartbeat: the group moved on, so the classic member must rejoin
    assert h.classic_heartbeat("c0", generation) == ErrorCode.rebalance_in_progress
    for i in range(3):
        m = f"c{i}"
        assert h.classic_heartbeat(m, generation) == ErrorCode.rebalance_in_progress
        # an eager client gives everything up before it rejoins (owned: none)
        joined = h.classic_join(m)
        assert joined.error_code == ErrorCode.none and joined.leader_id == ""
        assert joined.protocol_name == "range" and joined.protocol_type == "consumer"
        synced = h.classic_sync(m, joined.generation_id)
        assert synced.error_code == ErrorCode.none, m
        assert h.member(m).current.member_epoch == epoch
        assert h.partitions_of(synced.assignment) == h.assigned(m)
    h.heartbeat("k1", h.member("k1").member_epoch)
    # every partition has exactly one owner, and all four members hold some
    taken = owners(h.consumer)
    assert sorted(taken) == list(range(6))
    assert set(taken.values()) == {"c0", "c1", "c2", "k1"}
    assert h.consumer.state.value == "Stable"
    for i in range(3):
        assert h.classic_heartbeat(f"c{i}", epoch) == ErrorCode.none


def test_classic_requests_are_checked_as_kafka_does(h: MigrationHarness) -> None:
    generation = classic_group_of(h, 2)
    h.join("k1")
    assert h.classic_heartbeat("c0", generation + 5) == ErrorCode.illegal_generation
    assert h.classic_heartbeat("nobody", generation) == ErrorCode.unknown_member_id
    # a consumer-protocol member is unknown to the classic requests
    assert h.classic_heartbeat("k1", h.member("k1").member_epoch) == ErrorCode.unknown_member_id
    bad = h.send(
        JoinGroupOp(GROUP_ID, "c0", "consumer", SESSION_MS, (("roundrobin", b""),),
                    rebalance_timeout_ms=REBALANCE_MS, require_known_member_id=False)
    )  # fmt: skip
    assert bad.error_code == ErrorCode.inconsistent_group_protocol
    # before it rejoined, SyncGroup tells it a rebalance is on
    sync = h.classic_sync("c0", generation)
    assert sync.error_code == ErrorCode.rebalance_in_progress


def test_disabled_policy_refuses_the_upgrade(h: MigrationHarness) -> None:
    h.config = dataclasses.replace(h.config, consumer_migration_policy="disabled")
    classic_group_of(h, 2)
    resp = h.join("k1")
    assert resp.error_code == ErrorCode.group_id_not_found
    assert resp.error_message == "Group fooup is not a consumer group."
    assert isinstance(h.group, ClassicGroup) and len(h.group.members) == 2


def test_custom_assignor_user_data_refuses_the_upgrade(h: MigrationHarness) -> None:
    classic_group_of(h, 2, user_data=b"\x01")
    before = len(h.records)
    resp = h.join("k1")
    assert resp.error_code == ErrorCode.group_id_not_found
    assert resp.error_message == (
        "Cannot upgrade classic group fooup to consumer group because an unsupported custom "
        "assignor is in use. Please refer to the documentation or switch to a default assignor "
        "before re-attempting the upgrade."
    )
    assert isinstance(h.group, ClassicGroup) and len(h.records) == before


def test_upgrade_answers_requests_parked_in_a_classic_rebalance(h: MigrationHarness) -> None:
    generation = classic_group_of(h, 2)
    h.classic_join("c0")  # c0 rejoins: the group prepares a rebalance, c0 is parked
    parked = h.last_token
    assert h.answers.get(parked) is None
    h.join("k1")
    assert isinstance(h.group, ConsumerGroup)
    assert h.answers[parked] == JoinGroupOpResp(ErrorCode.rebalance_in_progress, member_id="c0")
    assert h.member("c0").current.member_epoch == generation


# -- downgrade -------------------------------------------------------------------------------
def test_last_consumer_member_leaving_downgrades(h: MigrationHarness) -> None:
    classic_group_of(h, 2)
    h.join("k1")
    epoch_before = h.consumer.group_epoch
    left = h.heartbeat("k1", -1)
    assert left.error_code == ErrorCode.none
    group = h.group
    assert isinstance(group, ClassicGroup)
    assert group.cgp_id == "cgp_test" and group.offsets[("foo", 0)].offset == 42
    assert group.is_in(GroupState.PREPARING_REBALANCE)
    assert group.generation >= epoch_before and set(group.members) == {"c0", "c1"}
    assert group.protocol_type == "consumer" and group.protocol_name == "range"
    # the classic members hear of the rebalance, rejoin, and the group settles classic
    assert h.classic_heartbeat("c0", group.generation) == ErrorCode.rebalance_in_progress
    replayed = h.replayed()
    assert isinstance(replayed, ClassicGroup) and set(replayed.members) == {"c0", "c1"}
    assert replayed.offsets[("foo", 0)].offset == 42
    reasons = [getattr(r, "reason", "") for r in h.records]
    assert "downgraded from a consumer group: the last consumer-protocol member k1 went" in reasons
    assert any(r.startswith("upgraded from a classic group: member k1") for r in reasons)


def test_session_timeout_of_last_consumer_member_downgrades(h: MigrationHarness) -> None:
    classic_group_of(h, 1)
    h.join("k1")
    for _ in range(10):  # the classic member keeps its session; the consumer one goes silent
        h.sleep(5_000)
        joined = h.classic_join("c0")
        h.classic_sync("c0", joined.generation_id)
        if isinstance(h.group, ClassicGroup):
            break
    assert isinstance(h.group, ClassicGroup) and "c0" in h.group.members


def test_upgrade_only_policy_keeps_the_consumer_group(h: MigrationHarness) -> None:
    h.config = dataclasses.replace(h.config, consumer_migration_policy="upgrade")
    classic_group_of(h, 2)
    h.join("k1")
    h.heartbeat("k1", -1)
    assert isinstance(h.group, ConsumerGroup) and set(h.group.members) == {"c0", "c1"}


# -- classic members' timers -----------------------------------------------------------------
def test_classic_member_session_is_its_own(h: MigrationHarness) -> None:
    classic_group_of(h, 1)
    h.config = dataclasses.replace(h.config, consumer_session_timeout_ms=100_000)
    h.join("k1")
    h.sleep(SESSION_MS + 1)  # c0 never heartbeats: fenced after ITS session timeout
    assert "c0" not in h.consumer.members


def test_classic_member_owing_a_join_is_fenced_after_its_rebalance_timeout(
    h: MigrationHarness,
) -> None:
    generation = classic_group_of(h, 1)
    h.join("k1")
    for _ in range(REBALANCE_MS // 5_000):  # heartbeats, but never rejoins
        assert h.classic_heartbeat("c0", generation) == ErrorCode.rebalance_in_progress
        h.heartbeat("k1", h.member("k1").member_epoch)
        h.sleep(5_000)
    assert "c0" not in h.consumer.members
    assert h.classic_heartbeat("c0", generation) == ErrorCode.unknown_member_id


def test_classic_join_into_consumer_group_and_leave(h: MigrationHarness) -> None:
    h.join("k1")
    h.heartbeat("k1", h.member("k1").member_epoch)
    assert h.assigned("k1") == {"foo": set(range(6))}
    needs_id = h.send(
        JoinGroupOp(GROUP_ID, "", "consumer", SESSION_MS,
                    (("range", encode_subscription(Subscription(1, ("foo",)))),),
                    rebalance_timeout_ms=REBALANCE_MS, new_member_id="c9")
    )  # fmt: skip
    assert needs_id.error_code == ErrorCode.member_id_required and needs_id.member_id == "c9"
    joined = h.classic_join("c9")
    assert joined.error_code == ErrorCode.none
    assert h.member("c9").current.state is MemberState.UNRELEASED_PARTITIONS
    # k1 gives up half; then c9's heartbeat says the partitions are free: rejoin
    k1 = h.heartbeat("k1", h.member("k1").member_epoch, owned={"foo": set(range(6))})
    kept = h.named(k1.assignment) or {}
    h.heartbeat("k1", h.member("k1").member_epoch, owned={k: set(v) for k, v in kept.items()})
    assert h.classic_heartbeat("c9", joined.generation_id) == ErrorCode.rebalance_in_progress
    joined = h.classic_join("c9")
    synced = h.classic_sync("c9", joined.generation_id)
    assert len(h.partitions_of(synced.assignment)["foo"]) == 3
    leave = h.send(LeaveGroupOp(GROUP_ID, (("c9", None, None), ("k1", None, None))))
    assert leave.members == (("c9", None, 0), ("k1", None, ErrorCode.unknown_member_id))
    assert set(h.consumer.members) == {"k1"}


# -- properties ------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    members=st.integers(1, 5),
    partitions=st.integers(1, 12),
    commits=st.dictionaries(st.integers(0, 11), st.integers(0, 10**6), max_size=4),
)
def test_round_trip_keeps_assignments_offsets_and_id(
    members: int, partitions: int, commits: dict[int, int]
) -> None:
    """classic -> consumer -> classic: each member keeps its partitions through the upgrade,
    the downgrade hands each member its target, and offsets and the id never change; the
    records replay to the same group each time."""
    h = MigrationHarness(config=dataclasses.replace(CONFIG, initial_rebalance_delay_ms=0))
    h.create_topic("foo", partitions)
    tokens = []
    for i in range(members):
        h.classic_join(f"c{i}")
        tokens.append(h.last_token)
    h.sleep(0)
    generation = h.answers[tokens[0]].generation_id
    leader = h.answers[tokens[0]].leader_id
    shares = {f"c{i}": tuple(range(i, partitions, members)) for i in range(members)}
    plan = tuple((m, encode_assignment((("foo", ps),) if ps else ())) for m, ps in shares.items())
    for m in shares:
        h.classic_sync(m, generation, plan if m == leader else ())
    for p, offset in commits.items():
        if p < partitions:
            h.send(OffsetCommitOp(GROUP_ID, (("foo", p, offset, -1, None),), "c0", generation))
    offsets = dict(h.group.offsets)
    assert h.join("k1").error_code == ErrorCode.none
    group = h.consumer
    for m, ps in shares.items():
        assert h.assigned(m) == ({"foo": set(ps)} if ps else {})
    assert group.offsets == offsets and group.cgp_id == "cgp_test"
    assert durable_view(h.replayed()) == durable_view(group)
    target = {m: h.named(_rows(group.target.get(m, {}))) for m in shares}
    epoch = group.group_epoch
    h.heartbeat("k1", -1)
    classic = h.group
    assert isinstance(classic, ClassicGroup) and classic.offsets == offsets
    # as Kafka's fromConsumerGroup: generation = the group epoch, assignment = the target
    assert classic.generation == epoch
    for m in shares:
        assert h.partitions_of(classic.members[m].assignment) == (target[m] or {})
    for m in shares:
        meta = decode_subscription(classic.members[m].metadata("range"))
        assert meta.topics == ("foo",)
    replayed = h.replayed()
    assert isinstance(replayed, ClassicGroup) and replayed.offsets == offsets
    assert replayed.cgp_id == "cgp_test" and set(replayed.members) == set(shares)
    h.send(TimerFired())


def test_classic_member_commits_with_its_generation_through_any_version(
    h: MigrationHarness,
) -> None:
    generation = classic_group_of(h, 2)
    h.join("k1")
    old_version = OffsetCommitOp(
        GROUP_ID, (("foo", 1, 7, -1, None),), "c0", generation, api_version=2
    )
    assert h.send(old_version).results == (("foo", 1, 0),)
    stale = dataclasses.replace(old_version, generation_id=generation + 1)
    assert h.send(stale).results == (("foo", 1, ErrorCode.illegal_generation),)
    kip848 = dataclasses.replace(old_version, member_id="k1", generation_id=0)
    assert h.send(kip848).results == (("foo", 1, ErrorCode.unsupported_version),)


def test_upgrade_drops_member_ids_not_yet_joined_with(h: MigrationHarness) -> None:
    classic_group_of(h, 2)
    pending = h.send(
        JoinGroupOp(GROUP_ID, "", "consumer", SESSION_MS,
                    (("range", encode_subscription(Subscription(1, ("foo",)))),),
                    rebalance_timeout_ms=REBALANCE_MS, new_member_id="late")
    )  # fmt: skip
    assert pending.error_code == ErrorCode.member_id_required
    assert h.join("k1").error_code == ErrorCode.none
    assert set(h.consumer.members) == {"c0", "c1", "k1"}
    # the late member comes back with its id: it joins the consumer group as a classic member
    back = h.send(
        JoinGroupOp(GROUP_ID, "late", "consumer", SESSION_MS,
                    (("range", encode_subscription(Subscription(1, ("foo",)))),),
                    rebalance_timeout_ms=REBALANCE_MS)
    )  # fmt: skip
    assert back.error_code == ErrorCode.none and back.member_id == "late"
    assert h.member("late").classic is not None


# -- a mixed group under random interleavings ------------------------------------------------
class ClassicClient:
    """A classic consumer (eager or cooperative) as the broker sees it: heartbeats, and on
    REBALANCE_IN_PROGRESS rejoins and syncs; `holds` is what it consumes from."""

    def __init__(self, h: MigrationHarness, member_id: str, generation: int, eager: bool) -> None:
        self.h, self.member_id, self.generation, self.eager = h, member_id, generation, eager
        assignment = h.group.members[member_id].assignment  # of the classic group
        self.holds: set[int] = h.partitions_of(assignment).get("foo", set())

    def step(self) -> None:
        if self.h.classic_heartbeat(self.member_id, self.generation) == ErrorCode.none:
            return
        if self.eager:
            self.holds = set()  # eager: everything is given up before the rejoin
        joined = self.h.classic_join(self.member_id, {"foo": sorted(self.holds)})
        if joined.error_code != ErrorCode.none:
            return
        self.generation = joined.generation_id
        synced = self.h.classic_sync(self.member_id, self.generation)
        if synced.error_code == ErrorCode.none:
            self.holds = self.h.partitions_of(synced.assignment).get("foo", set())


class ConsumerClient:
    def __init__(self, h: MigrationHarness, member_id: str) -> None:
        self.h, self.member_id, self.holds = h, member_id, set()
        self.epoch = -1

    def step(self) -> None:
        if self.epoch < 0:
            resp = self.h.join(self.member_id)
        else:
            resp = self.h.heartbeat(self.member_id, self.epoch, owned={"foo": self.holds})
        if resp.error_code != ErrorCode.none:
            return
        self.epoch = resp.member_epoch
        if resp.assignment is not None:
            self.holds = (self.h.named(resp.assignment) or {}).get("foo", set())


@settings(max_examples=40, deadline=None)
@given(
    eager=st.lists(st.booleans(), min_size=2, max_size=3),
    consumers=st.integers(1, 2),
    steps=st.lists(st.integers(0, 4), min_size=5, max_size=40),
)
def test_no_partition_is_held_twice_in_a_mixed_group(
    eager: list[bool], consumers: int, steps: list[int]
) -> None:
    """Classic members (eager or cooperative) and consumer-protocol members of an upgraded
    group step in any order: no partition is ever consumed by two of them, and once everyone
    has caught up, every partition is consumed by exactly one."""
    h = new_harness()
    generation = classic_group_of(h, len(eager))
    clients: list[Any] = [ClassicClient(h, f"c{i}", generation, e) for i, e in enumerate(eager)] + [
        ConsumerClient(h, f"k{i}") for i in range(consumers)
    ]
    for pick in steps:
        clients[pick % len(clients)].step()
        held = [c.holds for c in clients]
        assert sum(map(len, held)) == len(set().union(*held)), held
    for _ in range(6):  # everyone catches up
        for client in clients:
            client.step()
    held = [c.holds for c in clients]
    assert sorted(set().union(*held)) == list(range(6)) and sum(map(len, held)) == 6, held


def test_classic_member_is_asked_to_rejoin_once_the_target_exists() -> None:
    """With the assignor throttled, the group epoch runs ahead of the target for a while; a
    classic member is told REBALANCE_IN_PROGRESS only once there is a target to move to."""
    h = new_harness()
    h.config = dataclasses.replace(h.config, consumer_assignment_interval_ms=1_000)
    generation = classic_group_of(h, 2)
    h.join("k1")  # upgrades; the target for the new epoch is computed at once
    for m in ("c0", "c1"):
        joined = h.classic_join(m)
        h.classic_sync(m, joined.generation_id)
    epoch = h.member("c0").member_epoch
    assert epoch > generation
    h.sleep(100)
    h.join("k2")  # the epoch moves, the assignor is throttled for 900 ms more
    assert h.consumer.group_epoch > h.consumer.assignment_epoch
    assert h.classic_heartbeat("c0", epoch) == ErrorCode.none
    h.sleep(1_000)  # the throttled target is computed at its deadline
    assert h.consumer.group_epoch == h.consumer.assignment_epoch
    assert h.classic_heartbeat("c0", epoch) == ErrorCode.rebalance_in_progress


def test_classic_static_member_replacing_the_last_consumer_member_downgrades(
    h: MigrationHarness,
) -> None:
    classic_group_of(h, 2)
    h.join("k1", instance_id="i1")
    for m in ("c0", "c1"):
        joined = h.classic_join(m)
        h.classic_sync(m, joined.generation_id)
    epoch = h.member("k1").member_epoch
    h.heartbeat("k1", -2, instance_id="i1")  # a static member steps out, for a restart
    assert isinstance(h.group, ConsumerGroup) and "k1" in h.group.members
    # ...and comes back speaking the classic protocol: the group becomes classic again
    rejoin = JoinGroupOp(
        GROUP_ID, "", "consumer", SESSION_MS,
        (("range", encode_subscription(Subscription(1, ("foo",)))),),
        rebalance_timeout_ms=REBALANCE_MS, group_instance_id="i1", new_member_id="i1-new",
    )  # fmt: skip
    assert h.send(rejoin) is None  # parked in the classic rebalance
    parked = h.last_token
    group = h.group
    assert isinstance(group, ClassicGroup) and group.is_in(GroupState.PREPARING_REBALANCE)
    assert set(group.members) == {"c0", "c1", "i1-new"} and group.generation >= epoch
    assert group.offsets[("foo", 0)].offset == 42
    tokens = [parked]
    for m in ("c0", "c1"):
        assert h.classic_heartbeat(m, group.generation) == ErrorCode.rebalance_in_progress
        h.classic_join(m)
        tokens.append(h.last_token)
    answers = [h.answers[t] for t in tokens]
    assert {a.error_code for a in answers} == {ErrorCode.none}
    assert answers[0].member_id == "i1-new"


def test_consumer_static_member_replaces_a_classic_one_at_once(h: MigrationHarness) -> None:
    """A static classic member does not leave when it restarts; its successor speaking the
    consumer protocol takes its place without waiting out its session (as in Kafka)."""
    classic_group_of(h, 1)
    h.join("k0")
    assert h.consumer.members["c0"].classic is not None
    static = JoinGroupOp(
        GROUP_ID, "", "consumer", SESSION_MS,
        (("range", encode_subscription(Subscription(1, ("foo",)))),),
        rebalance_timeout_ms=REBALANCE_MS, group_instance_id="i0", new_member_id="c-static",
    )  # fmt: skip
    assert h.send(static).error_code == ErrorCode.none
    wrong = dataclasses.replace(static, member_id="someone-else")
    assert h.send(wrong).error_code == ErrorCode.fenced_instance_id
    resp = h.join("k-static", instance_id="i0")
    assert resp.error_code == ErrorCode.none
    assert "c-static" not in h.consumer.members
    assert h.member("k-static").classic is None

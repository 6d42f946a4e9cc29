"""Classic-group scenarios, each mirroring a test of Kafka's GroupMetadataManagerTest (or
OffsetMetadataManagerTest for commits), named after it in snake_case.

The harness fires every deadline at its own instant (Kafka's MockTime jumps first and then
fires what is due at the later time), so a few waits differ by a millisecond or a session from
the Kafka originals; the behaviour asserted is the same.
"""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.errors import ErrorCode

from rafka_actors.classic_group.consumer_protocol import encode_subscription
from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.classic_group.state import GroupState
from rafka_actors.coordinator import machine
from rafka_actors.coordinator.apply import replay
from rafka_actors.group_common.ops import (
    JoinGroupOpResp,
    SyncGroupOpResp,
)
from rafka_actors.group_common.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone

from .harness import (
    CGP_ID,
    DEFAULT_CONFIG,
    DEFAULT_PROTOCOLS,
    GROUP_ID,
    SESSION_TIMEOUT_MS,
    GroupHarness,
    protocols,
)

E = GroupState.EMPTY
P = GroupState.PREPARING_REBALANCE
C = GroupState.COMPLETING_REBALANCE
S = GroupState.STABLE
DELAY = DEFAULT_CONFIG.initial_rebalance_delay_ms


@pytest.fixture
def h() -> GroupHarness:
    return GroupHarness()


def with_config(**changes: int) -> GroupHarness:
    return GroupHarness(config=dataclasses.replace(DEFAULT_CONFIG, **changes))


def setup_group_with_pending_member(h: GroupHarness) -> tuple[str, str, str, dict[str, int]]:
    """Kafka's setupGroupWithPendingMember: a Stable group of two whose members both rejoin
    while a third, pending member (session 5000) has its id but has not joined yet."""
    leader, follower = (j.member_id for j in h.join_and_sync_group_of(2))
    first = h.call(h.join_op(session_timeout_ms=5000))
    assert first.error_code == ErrorCode.member_id_required
    tokens = h.rejoin_all([leader, follower])
    assert h.state is P and not any(h.answered(t) for t in tokens.values())
    return leader, follower, first.member_id, tokens


# -- JoinGroup: validation ---------------------------------------------------------------
def test_join_unknown_member_new_group(h: GroupHarness) -> None:
    response = h.call(h.join_op("member-id"))
    assert response.error_code == ErrorCode.unknown_member_id
    assert response.member_id == "member-id"
    assert response.protocol_type is None
    static = h.call(h.join_op("member-id", instance_id="instance"))
    assert static.error_code == ErrorCode.unknown_member_id
    assert h.group is None and h.records == []


def test_join_group_unknown_member_creates_group_and_requires_member_id(h: GroupHarness) -> None:
    response = h.call(h.join_op(new_member_id="generated"))
    assert response == JoinGroupOpResp(ErrorCode.member_id_required, member_id="generated")
    assert h.state is E and h.g.cgp_id == CGP_ID
    assert h.g.pending_members == {"generated": h.now + 10_000}
    assert h.g.members == {}
    # Kafka commits a new group to the log even when the join itself writes nothing.
    assert h.records == [
        GroupMetadataRecord(GROUP_ID, CGP_ID, None, 0, None, None, 0, (), "group created")
    ]


@pytest.mark.parametrize("session_timeout_ms", [999, 1_800_001])
def test_join_invalid_session_timeout(h: GroupHarness, session_timeout_ms: int) -> None:
    for member_id in ("", "member-id"):
        response = h.call(h.join_op(member_id, session_timeout_ms=session_timeout_ms))
        assert response.error_code == ErrorCode.invalid_session_timeout
        assert response.member_id == member_id
    assert h.group is None and h.records == []


def test_join_inconsistent_protocol_type(h: GroupHarness) -> None:
    h.join_and_complete_join()
    for member_id in ("", h.new_member_id()):
        response = h.call(h.join_op(member_id, protocol_type="connect"))
        assert response.error_code == ErrorCode.inconsistent_group_protocol
    assert len(h.g.members) == 1 and not h.g.pending_members


def test_join_with_empty_protocol_type_or_protocol_list(h: GroupHarness) -> None:
    # Checked before MEMBER_ID_REQUIRED (79): a bad join never gets a member id.
    for op in (
        h.join_op(protocol_type=""),
        h.join_op(protocol_type="", instance_id="instance"),
        h.join_op(protocols=()),
        h.join_op(protocols=(), instance_id="instance"),
    ):
        response = h.call(op)
        assert response.error_code == ErrorCode.inconsistent_group_protocol
        assert response.member_id == ""
    assert h.state is E and not h.g.members and not h.g.pending_members


def test_join_group_second_join_inconsistent_protocol(h: GroupHarness) -> None:
    first = h.call(h.join_op())
    assert first.error_code == ErrorCode.member_id_required
    refused = h.call(h.join_op(first.member_id, protocols=()))
    assert refused.error_code == ErrorCode.inconsistent_group_protocol
    token = h.join(first.member_id)
    assert not h.answered(token)
    h.sleep(DELAY)
    assert h.reply(token).error_code == ErrorCode.none


def test_join_group_inconsistent_group_protocol(h: GroupHarness) -> None:
    first = h.join(require_known_member_id=False, protocols=protocols("range"))
    other = h.join(require_known_member_id=False, protocols=protocols("roundrobin"))
    assert not h.answered(first)
    assert h.reply(other).error_code == ErrorCode.inconsistent_group_protocol
    h.sleep(DELAY)
    assert h.reply(first).error_code == ErrorCode.none
    assert len(h.g.members) == 1


def test_join_group_unknown_consumer_existing_group(h: GroupHarness) -> None:
    h.join_and_complete_join()
    response = h.call(h.join_op("other-member-id"))
    assert response.error_code == ErrorCode.unknown_member_id
    assert response.member_id == "other-member-id"


def test_join_group_existing_member_in_empty_state(h: GroupHarness) -> None:
    (only,) = h.join_and_sync_group_of(1)
    h.leave(only.member_id)
    assert h.state is E
    response = h.call(h.join_op(only.member_id))
    assert response.error_code == ErrorCode.unknown_member_id
    assert response.generation_id == -1


def test_join_group_returns_the_protocol_type(h: GroupHarness) -> None:
    leader = h.join(require_known_member_id=False)
    member = h.join(require_known_member_id=False)
    h.sleep(DELAY)
    h.sleep(DELAY)  # the second member extended the initial delay once
    for token in (leader, member):
        response = h.reply(token)
        assert response.error_code == ErrorCode.none
        assert response.protocol_type == "consumer"
        assert response.protocol_name == "range"


# -- JoinGroup: max group size -----------------------------------------------------------
def test_join_group_max_size_reached() -> None:
    h = with_config(max_size=3)
    tokens = [h.join(require_known_member_id=False) for _ in range(3)]
    assert not any(h.answered(t) for t in tokens)
    rejected = h.call(h.join_op(require_known_member_id=False))
    assert rejected == JoinGroupOpResp(ErrorCode.group_max_size_reached)
    assert len(h.g.members) == 3 and h.records[1:] == []
    h.wait_for(*tokens)
    assert all(h.reply(t).error_code == ErrorCode.none for t in tokens)
    # A full group refuses a new member at once, before handing out a member id.
    assert h.call(h.join_op()).error_code == ErrorCode.group_max_size_reached
    assert not h.g.pending_members


def test_dynamic_members_can_rejoin_group_with_max_size_while_rebalancing() -> None:
    h = with_config(max_size=3)
    ids = [h.call(h.join_op()).member_id for _ in range(4)]
    assert h.state is E and len(h.g.pending_members) == 4
    second = [h.join(m) for m in ids]
    assert h.reply(second[3]).error_code == ErrorCode.group_max_size_reached
    assert h.state is P and h.g.awaiting_join_count() == 3
    # Members already parked may rejoin while rebalancing; the retry supersedes the parked
    # request (Kafka drops it unanswered; the machine answers it REBALANCE_IN_PROGRESS).
    third = [h.join(m) for m in ids]
    for old in second[:3]:
        assert h.reply(old).error_code == ErrorCode.rebalance_in_progress
    assert h.reply(third[3]).error_code == ErrorCode.group_max_size_reached
    h.wait_for(*third[:3])
    assert [h.reply(t).error_code for t in third[:3]] == [ErrorCode.none] * 3
    assert h.state is C and set(h.g.members) == set(ids[:3])


def test_dynamic_members_join_group_with_max_size_and_required_known_member() -> None:
    h = with_config(max_size=2)
    ids = [h.call(h.join_op()).member_id for _ in range(3)]
    tokens = [h.join(m) for m in ids]
    assert h.reply(tokens[2]).error_code == ErrorCode.group_max_size_reached
    h.wait_for(*tokens[:2])
    assert h.state is C and set(h.g.members) == set(ids[:2])
    generation = h.generation
    assert h.reply(h.sync(ids[0], generation)).error_code == ErrorCode.none
    assert h.reply(h.sync(ids[1], generation)).error_code == ErrorCode.none
    # Kafka forgot the refused member: the next rebalance completes as soon as both rejoin
    # (here it waits for the refused member's pending session to run out instead).
    rejoin = h.rejoin_all(ids[:2])
    assert all(h.answered(t) for t in rejoin.values())
    assert all(h.reply(t).generation_id == generation + 1 for t in rejoin.values())
    assert ids[2] not in h.g.pending_members


# -- JoinGroup: the initial rebalance delay -------------------------------------------------
def test_delay_initial_rebalance_on_empty_group(h: GroupHarness) -> None:
    _, token = h.join_new_member()
    assert h.state is P and h.g.previous_state is E
    h.sleep(DELAY // 2)
    assert not h.answered(token)
    h.sleep(DELAY // 2 - 1)
    assert not h.answered(token)
    h.sleep(1)
    response = h.reply(token)
    assert response.error_code == ErrorCode.none and response.generation_id == 1
    assert h.state is C


def test_delay_initial_rebalance_reset_when_new_member_joins(h: GroupHarness) -> None:
    first = h.join(require_known_member_id=False, rebalance_timeout_ms=3 * DELAY)
    h.sleep(DELAY - 1)
    second = h.join(require_known_member_id=False, rebalance_timeout_ms=3 * DELAY)
    h.sleep(1)  # the first delay passes; a member arrived during it: wait another delay
    assert not h.answered(first) and not h.answered(second)
    assert machine.next_deadline(h.group) == 2 * DELAY
    h.sleep(DELAY - 1)
    assert not h.answered(first) and not h.answered(second)
    h.sleep(1)
    assert h.reply(first).error_code == ErrorCode.none
    assert h.reply(second).error_code == ErrorCode.none


def test_delay_initial_rebalance_extended_by_new_member_up_to_rebalance_timeout(
    h: GroupHarness,
) -> None:
    kw = {"require_known_member_id": False, "rebalance_timeout_ms": 2 * DELAY}
    first, second = h.join(**kw), h.join(**kw)
    h.sleep(DELAY + 1)
    third = h.join(**kw)  # would extend again, but the rebalance timeout is used up
    h.sleep(DELAY - 2)
    assert not any(h.answered(t) for t in (first, second, third))
    h.sleep(1)  # 2 * DELAY: the rebalance timeout
    assert [h.reply(t).error_code for t in (first, second, third)] == [ErrorCode.none] * 3
    assert h.generation == 1 and len(h.g.members) == 3


def test_join_group_after_only_member_left_during_initial_rebalance(h: GroupHarness) -> None:
    first, _ = h.join_new_member()
    h.leave(first)  # the initial rebalance keeps waiting out its delay, with no members
    assert h.state is P and h.g.members == {}
    response = h.call(h.join_op())
    assert response.error_code == ErrorCode.member_id_required
    token = h.join(response.member_id)
    h.sleep(DELAY)  # a new member arrived during the delay: Kafka extends it once more
    assert not h.answered(token)
    h.sleep(DELAY)
    assert h.reply(token).error_code == ErrorCode.none
    assert list(h.g.members) == [response.member_id] and h.generation == 1


def test_join_group_replace_static_member(h: GroupHarness) -> None:
    old = h.join(instance_id="instance")
    assert h.g.awaiting_join_count() == 1
    new = h.join(instance_id="instance")
    old_response = h.reply(old)
    assert old_response.error_code == ErrorCode.fenced_instance_id
    assert old_response.generation_id == -1
    assert not h.answered(new)
    assert len(h.g.members) == 1 and h.g.awaiting_join_count() == 1
    h.sleep(DELAY)
    response = h.reply(new)
    assert response.error_code == ErrorCode.none
    assert response.member_id == h.g.static_member_id("instance") == response.leader_id


def test_static_member_join_as_first_member(h: GroupHarness) -> None:
    joined = h.join_and_complete_join(instance_id="instance")
    assert joined.response.leader_id == joined.member_id
    assert joined.response.members == ((joined.member_id, "instance", DEFAULT_PROTOCOLS[0][1]),)


# -- JoinGroup: existing members -------------------------------------------------------------
def test_join_group_existing_member_updated_metadata_triggers_rebalance(h: GroupHarness) -> None:
    joined = h.join_and_complete_join(protocols=protocols("range"))
    assert h.state is C and h.generation == 1
    updated = protocols("range", "roundrobin")
    token = h.join(joined.member_id, protocols=updated)
    response = h.reply(token)
    assert response.error_code == ErrorCode.none and response.generation_id == 2
    assert h.state is C and h.g.members[joined.member_id].protocols == updated


def test_join_group_existing_member_in_completing_rebalance_gets_current_generation(
    h: GroupHarness,
) -> None:
    leader, follower = h.join_group_of(2)
    again = h.reply(h.join(follower.member_id))
    assert again == follower.response  # it missed the answer: the same generation again
    assert again.members == ()
    leader_again = h.reply(h.join(leader.member_id))
    assert leader_again == leader.response and len(leader_again.members) == 2
    assert h.state is C and h.generation == 1


def test_leader_rejoin_stable_triggers_rebalance(h: GroupHarness) -> None:
    leader, follower = (j.member_id for j in h.join_and_sync_group_of(2))
    token = h.join(leader)
    assert not h.answered(token) and h.state is P
    assert h.heartbeat_error(follower, 1) == ErrorCode.rebalance_in_progress
    follower_token = h.join(follower)
    assert h.reply(token).generation_id == 2 == h.reply(follower_token).generation_id
    assert h.reply(token).leader_id == leader and h.state is C


def test_generation_id_increments_on_rebalance(h: GroupHarness) -> None:
    (only,) = h.join_and_sync_group_of(1)
    response = h.reply(h.join(only.member_id))
    assert response.error_code == ErrorCode.none and response.generation_id == 2


def test_follower_rejoin_stable_unchanged_metadata_no_rebalance(h: GroupHarness) -> None:
    leader, follower = (j.member_id for j in h.join_and_sync_group_of(2))
    emitted = len(h.records)
    response = h.reply(h.join(follower))
    assert response == JoinGroupOpResp(
        ErrorCode.none, 1, "consumer", "range", leader, follower, members=()
    )
    assert h.state is S and h.generation == 1 and len(h.records) == emitted


def test_follower_rejoin_stable_with_updated_metadata_triggers_rebalance(h: GroupHarness) -> None:
    leader, follower = (j.member_id for j in h.join_and_sync_group_of(2))
    token = h.join(follower, protocols=protocols("range", "roundrobin"))
    assert not h.answered(token) and h.state is P
    leader_token = h.join(leader)
    assert h.reply(token).generation_id == 2 and h.reply(leader_token).generation_id == 2
    assert h.state is C and len(h.g.members) == 2


def test_complete_join_removes_not_rejoined_dynamic_members(h: GroupHarness) -> None:
    kw = {"session_timeout_ms": 1000, "rebalance_timeout_ms": 1000}
    leader = h.join_and_complete_join(**kw)
    assert h.generation == 1
    newcomer, token = h.join_new_member(**kw)
    assert h.state is P and len(h.g.members) == 2
    h.sleep(1000)  # the leader never rejoins
    response = h.reply(token)
    assert response.error_code == ErrorCode.none and response.generation_id == 2
    assert response.leader_id == newcomer and list(h.g.members) == [newcomer]
    assert leader.member_id not in h.g.members


def test_complete_join_phase_no_members_rejoined_extends_join_phase(h: GroupHarness) -> None:
    kw = {"session_timeout_ms": 30_000, "rebalance_timeout_ms": 10_000}
    a, b, c = (j.member_id for j in h.join_and_sync_group_of(3, instance_ids=["a", "b", "c"], **kw))
    h.leave((c, "c"))  # triggers a rebalance that nobody joins
    assert h.state is P and h.g.join_deadline == h.now + 10_000
    for _ in range(2):
        h.sleep(10_000)
        # nobody rejoined: static members are kept, and the join phase waits once more
        assert h.state is P and h.generation == 1 and set(h.g.members) == {a, b}
        assert h.g.join_deadline == h.now + 10_000
    assert h.heartbeat_error(a, 1) == ErrorCode.rebalance_in_progress
    assert h.heartbeat_error(b, 1) == ErrorCode.rebalance_in_progress
    first = h.join(a, instance_id="a", **kw)
    assert not h.answered(first)
    second = h.join(b, instance_id="b", **kw)
    assert h.reply(first).generation_id == 2 == h.reply(second).generation_id
    assert h.state is C


def test_protocol_chosen_by_vote(h: GroupHarness) -> None:
    prefs = [("range", "roundrobin"), ("roundrobin", "range"), ("roundrobin", "range", "sticky")]
    tokens = [h.join_new_member(protocols=protocols(*p))[1] for p in prefs]
    h.wait_for(*tokens)
    assert h.g.protocol_name == "roundrobin"
    assert {h.reply(t).protocol_name for t in tokens} == {"roundrobin"}
    leader = h.reply(tokens[0])
    assert [meta for _, _, meta in leader.members] == [encode_subscription(["foo"])] * 3
    # A member that only supports one protocol narrows the candidates to it.
    h2 = GroupHarness()
    tokens = [
        h2.join_new_member(protocols=protocols(*p))[1]
        for p in [("roundrobin", "range"), ("roundrobin", "range"), ("range",)]
    ]
    h2.wait_for(*tokens)
    assert h2.g.protocol_name == "range"


def test_rebalance_timeout_is_max_of_members(h: GroupHarness) -> None:
    kw = {"session_timeout_ms": 60_000}
    a, a_token = h.join_new_member(rebalance_timeout_ms=20_000, **kw)
    b, b_token = h.join_new_member(rebalance_timeout_ms=50_000, **kw)
    h.wait_for(a_token, b_token)
    assert h.g.rebalance_timeout_ms() == 50_000
    h.sync(a, 1)
    h.sync(b, 1)
    assert h.state is S
    token = h.join(a, rebalance_timeout_ms=20_000, **kw)
    assert h.g.join_deadline == h.now + 50_000
    h.sleep(49_999)
    assert not h.answered(token)
    h.sleep(1)  # b never rejoined
    assert h.reply(token).generation_id == 2 and list(h.g.members) == [a]
    # The pending-sync deadline of the new generation uses the (new) maximum too.
    assert h.g.sync_deadline == h.now + 20_000


def test_leader_reelected_when_leader_leaves(h: GroupHarness) -> None:
    a, b, c = (j.member_id for j in h.join_and_sync_group_of(3))
    response = h.leave(a)
    assert response.members == ((a, None, ErrorCode.none),)
    assert h.state is P and h.g.leader_id == b
    tokens = h.rejoin_all([c, b])
    for token in tokens.values():
        assert h.reply(token).leader_id == b and h.reply(token).generation_id == 2
    assert len(h.reply(tokens[b]).members) == 2 and h.reply(tokens[c]).members == ()


def test_leader_reelected_when_leader_fails_to_rejoin(h: GroupHarness) -> None:
    kw = {"session_timeout_ms": 30_000, "rebalance_timeout_ms": 20_000}
    a, b = (j.member_id for j in h.join_and_sync_group_of(2, **kw))
    newcomer, token = h.join_new_member(**kw)
    b_token = h.join(b, **kw)
    h.sleep(19_999)
    assert not h.answered(token) and a in h.g.members
    h.sleep(1)
    assert h.reply(b_token).leader_id == b and h.reply(token).leader_id == b
    assert h.reply(b_token).generation_id == 2 and set(h.g.members) == {b, newcomer}
    assert [m for m, _, _ in h.reply(b_token).members] == [b, newcomer]


# -- JoinGroup: timeouts of new and pending members ------------------------------------------
def test_new_member_join_timeout() -> None:
    h = with_config(new_member_join_timeout_ms=30_000)
    first = h.join_and_complete_join(session_timeout_ms=35_000, rebalance_timeout_ms=60_000)
    assert not any(m.is_new for m in h.g.members.values())
    newcomer, token = h.join_new_member(session_timeout_ms=10_000, rebalance_timeout_ms=10_000)
    assert h.g.members[newcomer].is_new and h.state is P
    h.sleep(29_999)
    assert not h.answered(token)
    h.sleep(1)
    assert h.reply(token) == JoinGroupOpResp(ErrorCode.unknown_member_id)
    assert list(h.g.members) == [first.member_id] and h.state is P


def test_new_member_timeout_completion() -> None:
    h = with_config(new_member_join_timeout_ms=30_000)
    joined = h.join_and_complete_join(session_timeout_ms=35_000)
    assert h.reply(h.sync(joined.member_id, 1)).error_code == ErrorCode.none
    h.sleep(30_000)  # the new-member join timeout no longer applies
    assert list(h.g.members) == [joined.member_id]
    emitted = h.sleep(5_000)  # the session timeout does
    assert h.state is E and h.generation == 2
    assert emitted == [
        GroupMetadataRecord(
            GROUP_ID,
            CGP_ID,
            "consumer",
            2,
            None,
            None,
            h.now,
            (),
            f"member {joined.member_id} session timeout",
            rebalance_started_ms=h.now,  # the record tells when, and who went and why
            departed=((joined.member_id, "session timeout"),),
        )
    ]


def test_pending_member_expires_after_session_timeout(h: GroupHarness) -> None:
    pending = h.call(h.join_op(session_timeout_ms=1000)).member_id
    assert list(h.g.pending_members) == [pending]
    h.sleep(999)
    assert list(h.g.pending_members) == [pending]
    h.sleep(1)
    assert h.g.pending_members == {} and h.state is E
    assert h.call(h.join_op(pending)).error_code == ErrorCode.unknown_member_id


def test_join_group_completion_when_pending_member_joins(h: GroupHarness) -> None:
    _leader, _follower, pending, tokens = setup_group_with_pending_member(h)
    token = h.join(pending)
    for t in [token, *tokens.values()]:
        assert h.reply(t).error_code == ErrorCode.none and h.reply(t).generation_id == 2
    assert h.state is C and len(h.g.members) == 3 and not h.g.pending_members


def test_join_group_completion_when_pending_member_times_out(h: GroupHarness) -> None:
    leader, follower, _pending, tokens = setup_group_with_pending_member(h)
    h.sleep(4_999)
    assert not any(h.answered(t) for t in tokens.values())
    h.sleep(1)
    assert all(h.reply(t).generation_id == 2 for t in tokens.values())
    assert h.state is C and set(h.g.members) == {leader, follower} and not h.g.pending_members


def test_second_member_partially_join_and_timeout(h: GroupHarness) -> None:
    (leader,) = h.join_and_sync_group_of(1, instance_ids=["leader"])
    assert h.call(h.join_op(session_timeout_ms=5000)).error_code == ErrorCode.member_id_required
    assert len(h.g.pending_members) == 1 and h.state is S
    for _ in range(2):
        h.sleep(2500)
        assert h.heartbeat_error(leader.member_id, 1, instance_id="leader") == ErrorCode.none
    assert not h.g.pending_members
    assert list(h.g.members) == [leader.member_id] and h.generation == 1 and h.state is S


# -- static members --------------------------------------------------------------------------
def test_replace_static_member_in_stable_state_no_rebalance(h: GroupHarness) -> None:
    leader, follower = h.join_and_sync_group_of(2, instance_ids=["leader", "follower"])
    emitted = len(h.records)
    superset = protocols("range", "roundrobin")
    new_id, token = h.join_new_member(
        instance_id="follower",
        protocols=superset,
        rebalance_timeout_ms=7000,
        session_timeout_ms=4500,
    )
    response = h.reply(token)
    assert response == JoinGroupOpResp(
        ErrorCode.none, 1, "consumer", "range", leader.member_id, new_id, members=()
    )
    assert h.state is S and h.generation == 1
    assert h.g.static_member_id("follower") == new_id
    assert follower.member_id not in h.g.members
    member = h.g.members[new_id]
    assert (member.rebalance_timeout_ms, member.session_timeout_ms) == (7000, 4500)
    assert member.protocols == superset
    # The new id is persisted at once, with the assignment the old one had.
    (record,) = h.records[emitted:]
    assert isinstance(record, GroupMetadataRecord) and record.generation == 1
    assert [row[0] for row in record.members] == [leader.member_id, new_id]
    old_assignment = f"assignment-{follower.member_id}".encode()
    assert record.members[1][7] == old_assignment
    sync = h.reply(h.sync(new_id, 1, instance_id="follower"))
    assert sync == SyncGroupOpResp(ErrorCode.none, old_assignment, "consumer", "range")


def test_replace_static_leader_in_stable_state_names_the_old_leader(h: GroupHarness) -> None:
    (leader,) = h.join_and_sync_group_of(1, instance_ids=["leader"])
    new_id, token = h.join_new_member(instance_id="leader")
    response = h.reply(token)
    # Before JoinGroup v9 (no skip_assignment) Kafka names the leader as it was.
    assert response.leader_id == leader.member_id and response.member_id == new_id
    assert response.members == () and response.skip_assignment is False
    assert h.g.leader_id == new_id and h.state is S


def test_replace_static_member_in_stable_state_with_updated_protocol_triggers_rebalance(
    h: GroupHarness,
) -> None:
    h.join_and_sync_group_of(1, instance_ids=["i"], protocols=protocols("range", "roundrobin"))
    emitted = len(h.records)
    new_id, token = h.join_new_member(instance_id="i", protocols=protocols("roundrobin"))
    response = h.reply(token)
    assert response.error_code == ErrorCode.none and response.generation_id == 2
    assert response.protocol_name == "roundrobin" and response.member_id == new_id
    assert h.state is C and len(h.g.members) == 1 and h.records[emitted:] == []


def test_replace_static_member_in_completing_rebalance_state_triggers_rebalance(
    h: GroupHarness,
) -> None:
    leader, follower = h.join_group_of(2, instance_ids=["leader", "follower"])
    old_sync = h.sync(follower.member_id, 1, instance_id="follower")
    assert not h.answered(old_sync)
    new_id, token = h.join_new_member(instance_id="follower")
    assert h.reply(old_sync) == SyncGroupOpResp(ErrorCode.fenced_instance_id)
    assert not h.answered(token) and h.state is P
    leader_token = h.join(leader.member_id, instance_id="leader")
    assert h.reply(token).generation_id == 2 == h.reply(leader_token).generation_id
    assert set(h.g.members) == {leader.member_id, new_id} and h.state is C


def test_static_member_old_id_fenced(h: GroupHarness) -> None:
    _leader, follower = h.join_and_sync_group_of(2, instance_ids=["leader", "follower"])
    old = follower.member_id
    new_id, _ = h.join_new_member(instance_id="follower")
    fenced = ErrorCode.fenced_instance_id
    join = h.call(h.join_op(old, instance_id="follower"))
    assert join == JoinGroupOpResp(fenced, member_id=old)
    assert h.reply(h.sync(old, 1, instance_id="follower")) == SyncGroupOpResp(fenced)
    assert h.heartbeat_error(old, 1, instance_id="follower") == fenced
    commit = h.commit({("foo", 0): 1}, member_id=old, generation=1, instance_id="follower")
    assert commit.results == (("foo", 0, fenced),)
    assert h.leave((old, "follower")).members == ((old, "follower", fenced),)
    # Without its instance id the old id is simply unknown.
    assert h.heartbeat_error(old, 1) == ErrorCode.unknown_member_id
    assert h.state is S and h.g.static_member_id("follower") == new_id


def test_static_member_rejoin_with_known_member_id(h: GroupHarness) -> None:
    joined = h.join_and_complete_join(instance_id="instance")
    again = h.reply(h.join(joined.member_id, instance_id="instance"))
    assert again.error_code == ErrorCode.none and again.generation_id == 1 and h.state is C
    assert h.reply(h.sync(joined.member_id, 1, instance_id="instance")).error_code == 0
    assert h.state is S


def test_static_member_join_with_unknown_instance_id_and_known_member_id(h: GroupHarness) -> None:
    leader, _ = h.join_and_sync_group_of(2, instance_ids=["leader", "follower"])
    response = h.call(h.join_op(leader.member_id, instance_id="unknown-instance"))
    assert response.error_code == ErrorCode.unknown_member_id


def test_static_member_rejoin_as_follower_with_mismatched_instance_id(h: GroupHarness) -> None:
    leader, follower = h.join_and_sync_group_of(2, instance_ids=["leader", "follower"])
    response = h.call(h.join_op(follower.member_id, instance_id="leader"))
    assert response.error_code == ErrorCode.fenced_instance_id
    response = h.call(h.join_op(leader.member_id, instance_id="follower"))
    assert response.error_code == ErrorCode.fenced_instance_id
    assert h.state is S


def test_static_member_follower_fail_to_rejoin_before_rebalance_timeout(h: GroupHarness) -> None:
    kw = {"session_timeout_ms": 30_000, "rebalance_timeout_ms": 10_000}
    leader, follower = h.join_and_sync_group_of(2, instance_ids=["leader", "follower"], **kw)
    newcomer, token = h.join_new_member(instance_id="newcomer", **kw)
    leader_token = h.join(leader.member_id, instance_id="leader", **kw)
    h.sleep(10_000)
    response = h.reply(leader_token)
    assert response.generation_id == 2 and response.leader_id == leader.member_id
    # The static follower did not rejoin but is kept, and the leader assigns it too.
    assert {m for m, _, _ in response.members} == {leader.member_id, follower.member_id, newcomer}
    assert h.reply(token).members == () and h.state is C
    assert {i for _, i, _ in response.members} == {"leader", "follower", "newcomer"}


def test_static_member_replaced_while_rebalancing_is_not_new(h: GroupHarness) -> None:
    (leader,) = h.join_and_sync_group_of(1, session_timeout_ms=30_000, rebalance_timeout_ms=60_000)
    kw = {"instance_id": "static", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000}
    _, first = h.join_new_member(**kw)  # a new static member: the group rebalances
    assert h.state is P
    new_id, second = h.join_new_member(**kw)  # its process restarts and joins again
    assert h.reply(first).error_code == ErrorCode.fenced_instance_id
    h.sleep(10_000)  # the replacement's session timeout passes while it is parked in join
    assert not h.answered(second)
    assert new_id in h.g.members
    leader_token = h.join(leader.member_id, session_timeout_ms=30_000)
    assert h.reply(second).generation_id == 2 == h.reply(leader_token).generation_id


# -- SyncGroup -------------------------------------------------------------------------------
def test_sync_leader_before_follower(h: GroupHarness) -> None:
    leader, follower = h.join_group_of(2)
    emitted = len(h.records)
    assignments = {leader.member_id: b"\x00", follower.member_id: b"\x01"}
    token = h.sync(leader.member_id, 1, assignments)
    assert h.reply(token) == SyncGroupOpResp(ErrorCode.none, b"\x00", "consumer", "range")
    assert h.state is S
    (record,) = h.records[emitted:]
    assert isinstance(record, GroupMetadataRecord)
    assert (record.generation, record.leader_id, record.protocol_name) == (
        1,
        leader.member_id,
        "range",
    )
    assert [(row[0], row[7]) for row in record.members] == list(assignments.items())


def test_sync_follower_after_leader(h: GroupHarness) -> None:
    leader, follower = h.join_group_of(2)
    h.sync(leader.member_id, 1, {leader.member_id: b"\x00", follower.member_id: b"\x01"})
    emitted = len(h.records)
    response = h.reply(h.sync(follower.member_id, 1))
    assert response == SyncGroupOpResp(ErrorCode.none, b"\x01", "consumer", "range")
    assert h.state is S and len(h.records) == emitted


def test_sync_leader_after_follower(h: GroupHarness) -> None:
    leader, follower = h.join_group_of(2)
    emitted = len(h.records)
    parked = h.sync(follower.member_id, 1)
    assert not h.answered(parked) and len(h.records) == emitted
    h.sync(leader.member_id, 1, {leader.member_id: b"\x00", follower.member_id: b"\x01"})
    assert h.reply(parked) == SyncGroupOpResp(ErrorCode.none, b"\x01", "consumer", "range")
    assert h.state is S


def test_sync_group_empty_assignment(h: GroupHarness) -> None:
    leader, follower = h.join_group_of(2)
    parked = h.sync(follower.member_id, 1)
    h.sync(leader.member_id, 1, {leader.member_id: b"\x00"})  # the follower gets nothing
    assert h.reply(parked) == SyncGroupOpResp(ErrorCode.none, b"", "consumer", "range")


def test_sync_group_from_unknown_group(h: GroupHarness) -> None:
    assert h.reply(h.sync("member-id", 1)) == SyncGroupOpResp(ErrorCode.unknown_member_id)
    assert h.group is None


def test_sync_group_from_unknown_member(h: GroupHarness) -> None:
    (_leader,) = h.join_and_sync_group_of(1)
    response = h.reply(h.sync("unknown-member-id", 1))
    assert response == SyncGroupOpResp(ErrorCode.unknown_member_id)


def test_sync_group_from_illegal_generation(h: GroupHarness) -> None:
    (leader,) = h.join_group_of(1)
    response = h.reply(h.sync(leader.member_id, 2))
    assert response == SyncGroupOpResp(ErrorCode.illegal_generation)
    assert h.state is C


@pytest.mark.parametrize(
    ("protocol_type", "protocol_name", "error"),
    [
        ("protocolType", None, ErrorCode.inconsistent_group_protocol),
        (None, "protocolName", ErrorCode.inconsistent_group_protocol),
        (None, None, ErrorCode.none),
        ("consumer", "range", ErrorCode.none),
    ],
)
def test_sync_group_protocol_type_and_name(
    h: GroupHarness, protocol_type: str | None, protocol_name: str | None, error: int
) -> None:
    (leader,) = h.join_group_of(1)
    token = h.sync(leader.member_id, 1, protocol_type=protocol_type, protocol_name=protocol_name)
    response = h.reply(token)
    assert response.error_code == error
    if error == ErrorCode.none:
        assert (response.protocol_type, response.protocol_name) == ("consumer", "range")
    else:
        assert (response.protocol_type, response.protocol_name) == (None, None)


def test_sync_during_preparing_rebalance(h: GroupHarness) -> None:
    leader, follower = (j.member_id for j in h.join_and_sync_group_of(2))
    h.join(leader)
    assert h.reply(h.sync(follower, 1)) == SyncGroupOpResp(ErrorCode.rebalance_in_progress)


def test_new_rebalance_fails_waiting_syncs_with_27(h: GroupHarness) -> None:
    _leader, follower = h.join_group_of(2)
    parked = h.sync(follower.member_id, 1)
    h.join_new_member()  # a new member: the group goes back to PreparingRebalance
    assert h.reply(parked) == SyncGroupOpResp(ErrorCode.rebalance_in_progress)
    assert h.state is P and h.g.pending_sync == {}


def test_leader_failure_in_sync_group(h: GroupHarness) -> None:
    leader, follower = (j.member_id for j in h.join_and_sync_group_of(2))
    tokens = h.rejoin_all([leader, follower])
    assert h.state is C and h.reply(tokens[follower]).generation_id == 2
    parked = h.sync(follower, 2)
    h.sleep(10_000)  # the leader never syncs, and its session expires
    assert h.reply(parked) == SyncGroupOpResp(ErrorCode.rebalance_in_progress)
    assert list(h.g.members) == [follower] and h.state is P


def test_pending_sync_expiry_removes_members_and_rebalances(h: GroupHarness) -> None:
    """Kafka's testRebalanceTimesOutWhenSyncRequestIsNotReceivedFromFollowers."""
    kw = {"rebalance_timeout_ms": 5000, "session_timeout_ms": 10_000}
    leader, *followers = (j.member_id for j in h.join_group_of(3, **kw))
    start = h.now
    assert h.g.sync_deadline == start + 5000
    h.sleep(2500)
    for m in [leader, *followers]:
        assert h.heartbeat_error(m, 1) == ErrorCode.none
    assert h.reply(h.sync(leader, 1)).error_code == ErrorCode.none and h.state is S
    emitted = h.sleep(2500)
    assert emitted == []
    assert h.heartbeat_error(leader, 1) == ErrorCode.rebalance_in_progress
    for m in followers:
        assert h.heartbeat_error(m, 1) == ErrorCode.unknown_member_id
    assert h.state is P and list(h.g.members) == [leader]


def test_rebalance_times_out_when_sync_request_is_not_received_from_leader(
    h: GroupHarness,
) -> None:
    kw = {"rebalance_timeout_ms": 5000, "session_timeout_ms": 10_000}
    leader, *followers = (j.member_id for j in h.join_group_of(3, **kw))
    parked = [h.sync(m, 1) for m in followers]
    h.sleep(5000)
    for token in parked:
        assert h.reply(token) == SyncGroupOpResp(ErrorCode.rebalance_in_progress)
    assert h.heartbeat_error(leader, 1) == ErrorCode.unknown_member_id
    for m in followers:
        assert h.heartbeat_error(m, 1) == ErrorCode.rebalance_in_progress
    assert h.state is P and h.g.leader_id == followers[0]


def test_rebalance_times_out_when_sync_request_is_not_received(h: GroupHarness) -> None:
    kw = {"rebalance_timeout_ms": 5000, "session_timeout_ms": 10_000}
    members = [j.member_id for j in h.join_group_of(3, **kw)]
    emitted = h.sleep(5000)
    assert h.state is E and h.generation == 2
    assert [(r.generation, r.members, r.leader_id) for r in emitted] == [(2, (), None)]
    for m in members:
        assert h.heartbeat_error(m, 1) == ErrorCode.unknown_member_id


def test_rebalance_does_not_time_out_when_all_syncs_are_received(h: GroupHarness) -> None:
    kw = {"rebalance_timeout_ms": 5000, "session_timeout_ms": 10_000}
    members = [j.member_id for j in h.join_group_of(3, **kw)]
    h.sleep(2500)
    tokens = [h.sync(m, 1) for m in members]
    assert all(h.reply(t).error_code == ErrorCode.none for t in tokens)
    for _ in range(2):
        h.sleep(2500)
        for m in members:
            assert h.heartbeat_error(m, 1) == ErrorCode.none
    assert h.state is S and len(h.g.members) == 3


# -- Heartbeat -------------------------------------------------------------------------------
def test_heartbeat_unknown_group(h: GroupHarness) -> None:
    assert h.heartbeat_error("member-id", -1) == ErrorCode.unknown_member_id


def test_heartbeat_unknown_member(h: GroupHarness) -> None:
    (_leader,) = h.join_and_sync_group_of(1)
    assert h.heartbeat_error("unknown-member-id", 1) == ErrorCode.unknown_member_id
    pending = h.call(h.join_op()).member_id  # a pending member is not a member yet
    assert h.heartbeat_error(pending, 1) == ErrorCode.unknown_member_id


def test_heartbeat_illegal_generation(h: GroupHarness) -> None:
    (leader,) = h.join_and_sync_group_of(1)
    assert h.heartbeat_error(leader.member_id, 2) == ErrorCode.illegal_generation
    assert h.heartbeat_error(leader.member_id, 0) == ErrorCode.illegal_generation
    assert h.heartbeat_error("unknown", 2) == ErrorCode.unknown_member_id  # member first


def test_valid_heartbeat_during_completing_rebalance(h: GroupHarness) -> None:
    (leader,) = h.join_group_of(1)
    assert h.heartbeat_error(leader.member_id, 1) == ErrorCode.none
    assert h.state is C


def test_heartbeat_during_preparing_rebalance(h: GroupHarness) -> None:
    # The initial rebalance: generation 0.
    member, _ = h.join_new_member()
    assert h.heartbeat_error(member, 0) == ErrorCode.rebalance_in_progress
    # A later rebalance: the heartbeat answers REBALANCE_IN_PROGRESS and resets the session.
    h2 = GroupHarness()
    a, b = (j.member_id for j in h2.join_and_sync_group_of(2))
    session_end = h2.g.members[a].heartbeat_deadline
    h2.join(b, protocols=protocols("range", "roundrobin"))
    assert h2.state is P
    h2.sleep(9000)
    assert h2.heartbeat_error(a, 1) == ErrorCode.rebalance_in_progress
    assert h2.g.members[a].heartbeat_deadline == h2.now + 10_000 > session_end
    h2.sleep(9999)  # well past the session a would have had without the heartbeat
    assert a in h2.g.members and h2.state is P
    token = h2.join(a)
    assert h2.reply(token).generation_id == 2


def test_heartbeat_maintains_session(h: GroupHarness) -> None:
    (only,) = h.join_and_sync_group_of(1)
    for _ in range(4):
        h.sleep(5000)
        assert h.heartbeat_error(only.member_id, 1) == ErrorCode.none
    h.sleep(9999)
    assert h.heartbeat_error(only.member_id, 1) == ErrorCode.none


def test_heartbeat_expiry_evicts_and_rebalances(h: GroupHarness) -> None:
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    h.sleep(5000)
    assert h.heartbeat_error(b, 1) == ErrorCode.none
    h.sleep(5000)  # a's session expires
    assert list(h.g.members) == [b] and h.state is P and h.g.leader_id == b
    assert h.heartbeat_error(a, 1) == ErrorCode.unknown_member_id
    assert h.heartbeat_error(b, 1) == ErrorCode.rebalance_in_progress
    response = h.reply(h.join(b))
    assert response.generation_id == 2 and response.leader_id == b


def test_session_timeout_during_rebalance(h: GroupHarness) -> None:
    (first,) = h.join_and_sync_group_of(1)
    newcomer, token = h.join_new_member()
    assert h.state is P
    h.sleep(5000)
    assert h.heartbeat_error(first.member_id, 1) == ErrorCode.rebalance_in_progress
    h.sleep(10_000)  # the first member's session expires: the newcomer is all that is left
    assert h.heartbeat_error(first.member_id, 1) == ErrorCode.unknown_member_id
    response = h.reply(token)
    assert response.error_code == ErrorCode.none and response.generation_id == 2
    assert list(h.g.members) == [newcomer] and h.state is C


def test_static_member_heartbeat_leader_with_invalid_member_id(h: GroupHarness) -> None:
    leader, _ = h.join_and_sync_group_of(2, instance_ids=["leader", "follower"])
    assert h.heartbeat_error(leader.member_id, 1) == ErrorCode.none
    assert h.heartbeat_error("invalid", 1, instance_id="leader") == ErrorCode.fenced_instance_id
    assert h.heartbeat_error("invalid", 1, instance_id="other") == ErrorCode.unknown_member_id


# -- LeaveGroup ------------------------------------------------------------------------------
def test_leave_group_unknown_group(h: GroupHarness) -> None:
    # GroupCoordinatorService.leaveGroup: the group is not found -> each member 25, request 0
    response = h.leave("member-id")
    assert response.error_code == ErrorCode.none
    assert response.members == (("member-id", None, ErrorCode.unknown_member_id),)


def test_leave_group_unknown_member_id_existing_group(h: GroupHarness) -> None:
    h.join_and_complete_join()
    emitted = len(h.records)
    response = h.leave("unknown-member-id")
    assert response.error_code == ErrorCode.none
    assert response.members == (("unknown-member-id", None, ErrorCode.unknown_member_id),)
    assert len(h.records) == emitted and h.state is C


def test_leave_group_batch_per_member_results(h: GroupHarness) -> None:
    leader, follower, pending, tokens = setup_group_with_pending_member(h)
    response = h.leave(leader, follower, pending, "unknown-member-id", ("", "unknown-instance"))
    assert response.error_code == ErrorCode.none
    assert response.members == (
        (leader, None, ErrorCode.none),
        (follower, None, ErrorCode.none),
        (pending, None, ErrorCode.none),
        ("unknown-member-id", None, ErrorCode.unknown_member_id),
        ("", "unknown-instance", ErrorCode.unknown_member_id),
    )
    # The members' parked joins are answered; everyone is gone, so the group is Empty.
    for token in tokens.values():
        assert h.reply(token) == JoinGroupOpResp(ErrorCode.unknown_member_id)
    assert h.state is E and h.generation == 2 and not h.g.pending_members


def test_leave_static_member_by_instance_id_alone(h: GroupHarness) -> None:
    leader, _follower = h.join_and_sync_group_of(2, instance_ids=["leader", "follower"])
    response = h.leave(("", "follower"))
    assert response.members == (("", "follower", ErrorCode.none),)
    assert list(h.g.members) == [leader.member_id] and h.state is P
    assert h.g.static_member_id("follower") is None


def test_static_members_fenced_instance_batch_leave_group(h: GroupHarness) -> None:
    h.join_and_sync_group_of(2, instance_ids=["leader", "follower"])
    response = h.leave(("", "leader"), ("invalid-member-id", "follower"))
    assert response.members == (
        ("", "leader", ErrorCode.none),
        ("invalid-member-id", "follower", ErrorCode.fenced_instance_id),
    )
    assert h.g.static_member_id("follower") is not None and h.state is P


def test_pending_members_leave_group(h: GroupHarness) -> None:
    _leader, _follower, pending, tokens = setup_group_with_pending_member(h)
    emitted = len(h.records)
    response = h.leave(pending)
    assert response.members == ((pending, None, ErrorCode.none),)
    assert len(h.records) == emitted
    # The rebalance was waiting only for the pending member.
    assert all(h.reply(t).generation_id == 2 for t in tokens.values())
    assert h.state is C and len(h.g.members) == 2 and not h.g.pending_members


def test_leave_parked_member_answers_its_join(h: GroupHarness) -> None:
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    parked = h.join(a)
    h.leave(a)
    assert h.reply(parked) == JoinGroupOpResp(ErrorCode.unknown_member_id)
    assert h.state is P and h.g.leader_id == b
    assert h.reply(h.join(b)).generation_id == 2


def test_last_leave_bumps_generation_to_empty(h: GroupHarness) -> None:
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    emitted = len(h.records)
    h.leave(a, b)
    assert h.state is E and h.generation == 2 and h.g.leader_id is None
    (record,) = h.records[emitted:]
    assert record == GroupMetadataRecord(
        GROUP_ID,
        CGP_ID,
        "consumer",
        2,
        None,
        None,
        h.now,
        (),
        f"members left: {a}, {b}",
        rebalance_started_ms=h.now,
        departed=((a, "left"), (b, "left")),
    )
    assert machine.next_deadline(h.group) is None


def test_group_survives_last_member_leaving_with_same_cgp_id_and_offsets(h: GroupHarness) -> None:
    (only,) = h.join_and_sync_group_of(1)
    h.commit({("foo", 0): 42}, member_id=only.member_id, generation=1)
    h.leave(only.member_id)
    assert h.group is not None and h.state is E and h.g.cgp_id == CGP_ID
    h.cgp_id = "cgp_other"  # an id the machine would use only for a new group
    joined = h.join_and_complete_join()
    assert h.g.cgp_id == CGP_ID and joined.generation == 3
    assert h.fetch([("foo", 0)]).offsets == (("foo", 0, 42, -1, "", ErrorCode.none),)
    assert h.describe().cgp_id == CGP_ID


# -- OffsetCommit / OffsetFetch ----------------------------------------------------------------
def test_offset_commit_while_completing_rebalance(h: GroupHarness) -> None:
    (leader,) = h.join_group_of(1)
    emitted = len(h.records)
    response = h.commit({("foo", 0): 1, ("foo", 1): 2}, member_id=leader.member_id, generation=1)
    assert response.results == (
        ("foo", 0, ErrorCode.rebalance_in_progress),
        ("foo", 1, ErrorCode.rebalance_in_progress),
    )
    assert len(h.records) == emitted and h.g.offsets == {}


def test_offset_commit_while_preparing_rebalance_accepted(h: GroupHarness) -> None:
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    h.join(a)  # a parks in JoinGroup; b revokes and commits before rejoining
    assert h.state is P
    response = h.commit({("foo", 0): 10}, member_id=b, generation=1)
    assert response.results == (("foo", 0, ErrorCode.none),)
    assert h.last.records == [OffsetCommitRecord(GROUP_ID, "foo", 0, 10, -1, "", h.now)]
    assert h.commit({("foo", 1): 11}, member_id=a, generation=1).results[0][2] == 0


def test_offset_commit_simple_group_generation_minus_one(h: GroupHarness) -> None:
    h.now = 1234
    response = h.commit([("foo", 0, 100, 7, "meta"), ("bar", 3, 5, -1, "")], instance_id="ignored")
    assert response.results == (("foo", 0, ErrorCode.none), ("bar", 3, ErrorCode.none))
    assert h.state is E and h.g.cgp_id == CGP_ID and h.g.protocol_type is None
    commits = [r for r in h.records if isinstance(r, OffsetCommitRecord)]
    assert commits == [
        OffsetCommitRecord(GROUP_ID, "foo", 0, 100, 7, "meta", 1234),
        OffsetCommitRecord(GROUP_ID, "bar", 3, 5, -1, "", 1234),
    ]
    assert h.fetch([("foo", 0)]).offsets == (("foo", 0, 100, 7, "meta", 0),)


@pytest.mark.parametrize(("api_version", "error"), [(9, 69), (8, 22), (1, 22)])
def test_offset_commit_unknown_group_generation_positive(
    h: GroupHarness, api_version: int, error: int
) -> None:
    response = h.commit(
        {("bar", 0): 100}, member_id="member", generation=10, api_version=api_version
    )
    assert response.results == (("bar", 0, error),)
    assert h.group is None and h.records == []


def test_offset_commit_metadata_too_large(h: GroupHarness) -> None:
    limit = DEFAULT_CONFIG.offset_metadata_max_bytes
    response = h.commit([("foo", 0, 1, -1, "x" * (limit + 1)), ("foo", 1, 2, -1, "x" * limit)])
    assert response.results == (
        ("foo", 0, ErrorCode.offset_metadata_too_large),
        ("foo", 1, ErrorCode.none),
    )
    assert [(r.topic, r.partition) for r in h.records if isinstance(r, OffsetCommitRecord)] == [
        ("foo", 1)
    ]
    assert h.fetch([("foo", 0)]).offsets[0][2] == -1


def test_offset_commit_resets_session_timer(h: GroupHarness) -> None:
    (only,) = h.join_and_sync_group_of(1)
    h.sleep(5000)
    h.commit({("foo", 0): 1}, member_id=only.member_id, generation=1)
    h.sleep(5000)  # the session as of the last heartbeat has passed
    assert list(h.g.members) == [only.member_id]
    h.sleep(5000)  # the session as of the commit has passed too
    assert h.g.members == {} and h.state is E


def test_offset_commit_validation_errors(h: GroupHarness) -> None:
    leader, follower = h.join_and_sync_group_of(2, instance_ids=["leader", None])
    cases = [
        ({"member_id": "unknown", "generation": 1}, ErrorCode.unknown_member_id),
        ({"member_id": leader.member_id, "generation": 10}, ErrorCode.illegal_generation),
        (
            {"member_id": follower.member_id, "generation": 1, "instance_id": "other"},
            ErrorCode.unknown_member_id,
        ),
        (
            {"member_id": "wrong", "generation": 1, "instance_id": "leader"},
            ErrorCode.fenced_instance_id,
        ),
        ({}, ErrorCode.unknown_member_id),  # no member id and generation: group not Empty
        ({"member_id": leader.member_id}, ErrorCode.illegal_generation),
    ]
    for kw, error in cases:
        assert h.commit({("foo", 0): 1}, **kw).results == (("foo", 0, error),), kw
    assert h.g.offsets == {}


def test_offset_commit_with_stale_generation_rejected(h: GroupHarness) -> None:
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    tokens = h.rejoin_all([a, b])
    assert h.reply(tokens[a]).generation_id == 2
    response = h.commit({("foo", 0): 1}, member_id=b, generation=1)
    assert response.results == (("foo", 0, ErrorCode.illegal_generation),)


def test_offset_fetch_unknown_group_returns_minus_one(h: GroupHarness) -> None:
    response = h.fetch([("foo", 0), ("bar", 1)])
    assert response.error_code == ErrorCode.none
    assert response.offsets == (("foo", 0, -1, -1, "", 0), ("bar", 1, -1, -1, "", 0))
    assert h.fetch(None).offsets == ()
    assert h.group is None


def test_offset_fetch_all(h: GroupHarness) -> None:
    h.commit([("foo", 1, 11, 3, "a"), ("bar", 0, 5, -1, "b"), ("foo", 0, 10, 3, "")])
    h.commit([("foo", 1, 12, 4, "c")])
    assert h.fetch().offsets == (
        ("bar", 0, 5, -1, "b", 0),
        ("foo", 0, 10, 3, "", 0),
        ("foo", 1, 12, 4, "c", 0),
    )
    assert h.fetch([("foo", 1), ("foo", 2)]).offsets == (
        ("foo", 1, 12, 4, "c", 0),
        ("foo", 2, -1, -1, "", 0),
    )


def test_offset_commit_null_metadata_fetched_as_empty_string(h: GroupHarness) -> None:
    h.commit([("foo", 0, 10, -1, None)])
    assert h.records[-1] == OffsetCommitRecord(GROUP_ID, "foo", 0, 10, -1, "", 0)
    assert h.fetch([("foo", 0)]).offsets == (("foo", 0, 10, -1, "", 0),)


# -- DeleteGroups / OffsetDelete -----------------------------------------------------------------
def test_delete_non_empty_group(h: GroupHarness) -> None:
    h.join_and_sync_group_of(1)
    emitted = len(h.records)
    assert h.delete().error_code == ErrorCode.non_empty_group
    assert len(h.records) == emitted and h.state is S
    h.join(h.member_ids()[0])
    assert h.delete().error_code == ErrorCode.non_empty_group  # Completing/Preparing too


def test_delete_unknown_group(h: GroupHarness) -> None:
    assert h.delete().error_code == ErrorCode.group_id_not_found
    assert h.records == []


def test_delete_empty_group_writes_tombstones(h: GroupHarness) -> None:
    h.commit({("foo", 1): 1, ("bar", 0): 2, ("foo", 0): 3})
    emitted = len(h.records)
    assert h.delete().error_code == ErrorCode.none
    assert h.group is None
    assert h.records[emitted:] == [
        OffsetTombstone(GROUP_ID, "bar", 0),
        OffsetTombstone(GROUP_ID, "foo", 0),
        OffsetTombstone(GROUP_ID, "foo", 1),
        GroupTombstone(GROUP_ID),
    ]
    assert h.describe().state == "Dead"
    h.cgp_id = "cgp_new"
    h.join_new_member()
    assert h.g.cgp_id == "cgp_new" and h.g.offsets == {}


def test_offset_delete_subscribed_topic(h: GroupHarness) -> None:
    (only,) = h.join_and_sync_group_of(1, protocols=protocols("range", topics=["foo"]))
    h.commit({("foo", 0): 1, ("bar", 0): 2}, member_id=only.member_id, generation=1)
    emitted = len(h.records)
    response = h.delete_offsets([("foo", 0), ("bar", 0), ("bar", 1)])
    assert response.error_code == ErrorCode.none
    assert response.results == (
        ("foo", 0, ErrorCode.group_subscribed_to_topic),
        ("bar", 0, ErrorCode.none),
        ("bar", 1, ErrorCode.none),
    )
    assert h.records[emitted:] == [OffsetTombstone(GROUP_ID, "bar", 0)]
    assert set(h.g.offsets) == {("foo", 0)}


def test_offset_delete_non_empty_non_consumer_group(h: GroupHarness) -> None:
    (_only,) = h.join_and_sync_group_of(1, protocol_type="connect", protocols=(("v1", b"x"),))
    assert h.delete_offsets([("foo", 0)]).error_code == ErrorCode.non_empty_group


def test_offset_delete_unknown_group(h: GroupHarness) -> None:
    response = h.delete_offsets([("foo", 0)])
    assert response.error_code == ErrorCode.group_id_not_found and response.results == ()


def test_offset_delete_empty_group(h: GroupHarness) -> None:
    h.commit({("foo", 0): 1})
    response = h.delete_offsets([("foo", 0)])
    assert response.results == (("foo", 0, ErrorCode.none),)
    assert h.last.records == [OffsetTombstone(GROUP_ID, "foo", 0)]
    assert h.fetch().offsets == ()


# -- DescribeGroups ----------------------------------------------------------------------------
def test_describe_unknown_group_is_dead(h: GroupHarness) -> None:
    response = h.describe()
    assert response.error_code == ErrorCode.none
    assert (response.state, response.protocol_type, response.protocol_name) == ("Dead", "", "")
    assert response.members == () and h.group is None


def test_describe_stable_group_has_metadata_and_assignment(h: GroupHarness) -> None:
    leader, follower = h.join_and_sync_group_of(2, instance_ids=["leader", None])
    response = h.describe()
    metadata = DEFAULT_PROTOCOLS[0][1]
    assert response.state == "Stable" and response.cgp_id == CGP_ID
    assert (response.protocol_type, response.protocol_name) == ("consumer", "range")
    assert response.members == (
        (
            leader.member_id,
            "leader",
            "client",
            "/127.0.0.1",
            metadata,
            f"assignment-{leader.member_id}".encode(),
        ),
        (
            follower.member_id,
            None,
            "client",
            "/127.0.0.1",
            metadata,
            f"assignment-{follower.member_id}".encode(),
        ),
    )


def test_describe_group_rebalancing(h: GroupHarness) -> None:
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    h.join(a)
    response = h.describe()
    assert response.state == "PreparingRebalance" and response.protocol_name == ""
    assert response.protocol_type == "consumer"
    assert [(m[4], m[5]) for m in response.members] == [
        (b"", f"assignment-{a}".encode()),
        (b"", f"assignment-{b}".encode()),
    ]


def test_join_completes_when_a_refused_rejoiner_is_dropped(h: GroupHarness) -> None:
    """The group limit shrank below the group's size: the last rejoiner is refused and
    dropped, and with everyone else already rejoined the join completes on that very event
    (Kafka would wait for the rebalance timeout)."""
    a, b, c = (j.member_id for j in h.join_and_sync_group_of(3))
    h.config = dataclasses.replace(DEFAULT_CONFIG, max_size=2)
    tokens = [h.join(a), h.join(b)]
    assert h.state is P
    assert h.call(h.join_op(c)).error_code == ErrorCode.group_max_size_reached
    assert h.state is C and h.generation == 2
    assert all(h.reply(t).error_code == ErrorCode.none for t in tokens)
    assert sorted(h.g.members) == sorted([a, b])


def test_a_group_rebuilt_from_its_records_gives_each_member_a_fresh_session(
    h: GroupHarness,
) -> None:
    """No deadline is stored: a restart starts every member's session afresh (on_loaded),
    so a member that does not come back is still removed."""
    a, _silent = (j.member_id for j in h.join_and_sync_group_of(2))
    h.now += 7_000
    h.group = replay(h.records, h.now)  # a restart
    assert {m.heartbeat_deadline for m in h.g.members.values()} == {h.now + SESSION_TIMEOUT_MS}
    h.sleep(SESSION_TIMEOUT_MS - 1)
    assert h.heartbeat_error(a, 1) == ErrorCode.none
    h.sleep(1)  # b said nothing since the restart
    assert h.state is P and sorted(h.g.members) == [a]

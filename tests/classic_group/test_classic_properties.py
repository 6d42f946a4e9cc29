"""Stateful property test of the classic-group state machine.

Hypothesis drives a crowd of clients (dynamic members, three static instances, stale ids of
members that were replaced or removed) through JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit and the passing of time, in any order. After every step the actor's duty is
done (timers due now are fired, as the group actor does) and the invariants are checked:

* the generation never goes back;
* the leader, if any, is a member, and a group with members has a leader;
* a member parks a JoinGroup only while PreparingRebalance and a SyncGroup only while
  CompletingRebalance, and never holds a token that was already answered;
* every waiter token ever issued is answered exactly once or still held by exactly one
  parked request of a member: nothing is lost, nothing is answered twice;
* the next deadline is never in the past once due timers have fired;
* the actor's cheap wake-up time (`machine.deadline_after`) is never later than the next
  deadline, so no timer fires late;
* the counted protocol support and parked joins equal a count over the members.

Heartbeats and commits are checked against a small oracle on the spot; in particular a commit
of a known member with a stale generation is always refused with ILLEGAL_GENERATION.

Transactional offsets (issue 43 §2) join in: two producers commit offsets in transactions
(TxnOffsetCommit, with members or without, sometimes as a fenced zombie epoch, also after
the marker that ended its transaction), end them with commit or abort markers, and
OffsetFetch with require_stable reads them. A model of the pending offsets per producer
checks every answer, the merge (a later regular commit wins), and that a replay of the
records rebuilds the pending offsets and the producers' epochs exactly.
"""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from kio.schema.errors import ErrorCode

from rafka_actors.classic_group.state import GroupState
from rafka_actors.coordinator import machine
from rafka_actors.coordinator.apply import replay
from rafka_actors.group_common.ops import (
    OffsetFetchOp,
    TxnMarkerOp,
    TxnOffsetCommitOp,
)
from rafka_actors.group_common.txn_offsets import epochs_of, pending_of

from .harness import DEFAULT_CONFIG, GROUP_ID, GroupHarness, protocols

INSTANCES = ("s1", "s2", "s3")
PROTOCOL_CHOICES = (
    protocols("range"),
    protocols("range", "roundrobin"),
    protocols("roundrobin", "range"),
)
SESSIONS = st.sampled_from((3_000, 6_000))
REBALANCES = st.sampled_from((2_000, 8_000))
PROTOCOLS = st.sampled_from(PROTOCOL_CHOICES)
CONFIG = dataclasses.replace(
    DEFAULT_CONFIG, initial_rebalance_delay_ms=1_000, max_size=4, new_member_join_timeout_ms=9_000
)
SLEEPS = st.sampled_from((1, 500, 1_500, 4_000, 9_000))
PRODUCERS = st.sampled_from((100, 200))
TXN_PARTITIONS = (("topic", 0), ("topic", 1))


class ClassicGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = GroupHarness(config=CONFIG)
        self._records_checked = 0  # records already checked at every crash cut
        self.ids: list[str] = []  # every member id ever handed out (including stale ones)
        self.instance_of: dict[str, str] = {}  # static member id -> its instance id
        self.max_generation = 0
        self.offsets = itertools.count()
        # the model of transactional offsets: per producer its current epoch, and its pending
        # offsets with the epoch they carry, when they were committed, and the partitions a
        # more recent offset won (a later regular commit, or another producer's merged
        # offset committed no earlier: Kafka keeps the most recent at a marker)
        self.epochs = {100: 0, 200: 0}
        self.pending: dict[int, dict[tuple[str, int], int]] = {}
        self.pending_at: dict[int, dict[tuple[str, int], int]] = {}
        self.pending_epoch: dict[int, int] = {}
        self.marker_epoch: dict[int, int] = {}  # the latest epoch of a marker the group got
        self.superseded: dict[int, set[tuple[str, int]]] = {}

    @initialize()
    def start(self) -> None:
        assert self.h.group is None

    # -- helpers -----------------------------------------------------------------------------------
    def settle(self) -> None:
        """The actor fires whatever is due right now before taking its next command."""
        self.h.sleep(0)

    def generation(self) -> int:
        return self.h.group.generation if self.h.group is not None else 0

    def pick(self, data: st.DataObject) -> tuple[str, str | None]:
        """Mostly a current (or pending) member; sometimes any id ever seen (a stale one)."""
        g = self.h.group
        current = [*g.members, *g.pending_members] if g is not None else []
        ids = st.sampled_from(self.ids)
        if current:
            ids = st.one_of(st.sampled_from(current), st.sampled_from(current), ids)
        member_id = data.draw(ids, label="member")
        return member_id, self.instance_of.get(member_id)

    def is_known(self, member_id: str, instance: str | None) -> bool:
        g = self.h.group
        if g is None or member_id not in g.members:
            return False
        return instance is None or g.static_member_id(instance) == member_id

    # -- JoinGroup ---------------------------------------------------------------------------------
    @rule(
        session=SESSIONS,
        rebalance=REBALANCES,
        proto=PROTOCOLS,
        require_known=st.booleans(),
    )
    def join_new_dynamic(
        self, session: int, rebalance: int, proto: tuple, require_known: bool
    ) -> None:
        new_id = self.h.new_member_id()
        token = self.h.join(
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocols=proto,
            require_known_member_id=require_known,
            new_member_id=new_id,
        )
        self.ids.append(new_id)
        if require_known:  # answered at once: a member id to come back with, or a refusal
            assert self.h.reply(token).error_code in (
                ErrorCode.member_id_required,
                ErrorCode.group_max_size_reached,
                ErrorCode.inconsistent_group_protocol,
            )
        self.settle()

    @rule(
        instance=st.sampled_from(INSTANCES), session=SESSIONS, rebalance=REBALANCES, proto=PROTOCOLS
    )
    def join_new_static(self, instance: str, session: int, rebalance: int, proto: tuple) -> None:
        new_id = self.h.new_member_id(instance)
        previous = self.h.group.static_member_id(instance) if self.h.group else None
        previous_tokens = []
        if previous is not None:
            old = self.h.group.members[previous]
            previous_tokens = [t for t in (old.awaiting_join, old.awaiting_sync) if t is not None]
        self.h.join(
            instance_id=instance,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocols=proto,
            new_member_id=new_id,
        )
        self.ids.append(new_id)
        self.instance_of[new_id] = instance
        if previous is not None and self.is_known(new_id, instance):
            # The old incarnation was replaced: whatever it had parked is fenced.
            assert previous not in self.h.g.members
            for t in previous_tokens:
                assert self.h.reply(t).error_code == ErrorCode.fenced_instance_id
        self.settle()

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), session=SESSIONS, rebalance=REBALANCES, proto=PROTOCOLS)
    def join_existing(
        self, data: st.DataObject, session: int, rebalance: int, proto: tuple
    ) -> None:
        member_id, instance = self.pick(data)
        self.h.join(
            member_id,
            instance_id=instance,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocols=proto,
        )
        self.settle()

    # -- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------------
    @precondition(lambda self: self.ids)
    @rule(data=st.data(), stale=st.booleans())
    def sync(self, data: st.DataObject, stale: bool) -> None:
        member_id, instance = self.pick(data)
        g = self.h.group
        assignments = {}
        if g is not None and g.leader_id == member_id:
            assignments = {m: f"for-{m}".encode() for m in g.members}
        generation = self.generation() - int(stale)
        token = self.h.sync(member_id, generation, assignments, instance_id=instance)
        if stale and self.is_known(member_id, instance):
            assert self.h.reply(token).error_code == ErrorCode.illegal_generation
        self.settle()

    @precondition(
        lambda self: (
            self.h.group is not None and self.h.group.state is GroupState.COMPLETING_REBALANCE
        )
    )
    @rule()
    def sync_leader(self) -> None:
        g = self.h.g
        leader, generation = g.leader_id, g.generation
        assert leader is not None
        parked = {m.member_id: m.awaiting_sync for m in g.members.values() if m.awaiting_sync}
        assignments = {m: f"for-{m}".encode() for m in g.members}
        instance = g.members[leader].instance_id
        token = self.h.sync(leader, generation, assignments, instance_id=instance)
        assert self.h.reply(token).assignment == assignments[leader]
        assert self.h.state is GroupState.STABLE
        for member_id, t in parked.items():  # the followers already waiting get theirs
            assert self.h.reply(t).assignment == assignments[member_id]
        self.settle()

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), stale=st.booleans())
    def heartbeat(self, data: st.DataObject, stale: bool) -> None:
        member_id, instance = self.pick(data)
        g = self.h.group
        generation = self.generation() - int(stale)
        if g is None or (instance is not None and g.static_member_id(instance) is None):
            expected = ErrorCode.unknown_member_id
        elif instance is not None and g.static_member_id(instance) != member_id:
            expected = ErrorCode.fenced_instance_id
        elif member_id not in g.members:
            expected = ErrorCode.unknown_member_id
        elif stale:
            expected = ErrorCode.illegal_generation
        elif g.state is GroupState.PREPARING_REBALANCE:
            expected = ErrorCode.rebalance_in_progress
        else:
            expected = ErrorCode.none
        assert self.h.heartbeat_error(member_id, generation, instance_id=instance) == expected
        if expected in (ErrorCode.none, ErrorCode.rebalance_in_progress):
            member = self.h.g.members[member_id]
            assert member.heartbeat_deadline == self.h.now + member.session_timeout_ms
        self.settle()

    @precondition(lambda self: self.h.group is not None and self.h.group.members)
    @rule()
    def keepalive(self) -> None:
        """Every member's background thread heartbeats with the current generation."""
        g = self.h.g
        expected = (
            ErrorCode.rebalance_in_progress
            if g.state is GroupState.PREPARING_REBALANCE
            else ErrorCode.none
        )
        for m in list(g.members.values()):
            error = self.h.heartbeat_error(m.member_id, g.generation, instance_id=m.instance_id)
            assert error == expected
        self.settle()

    @precondition(
        lambda self: (
            self.h.group is not None
            and self.h.group.state is GroupState.PREPARING_REBALANCE
            and self.h.group.members
        )
    )
    @rule()
    def everyone_rejoins(self) -> None:
        """Members not parked yet rejoin with what they had; no protocol changes."""
        g = self.h.g
        fits = len(g.members) <= CONFIG.max_size  # else the last rejoiners are refused
        for m in list(g.members.values()):
            if m.awaiting_join is None and self.h.state is GroupState.PREPARING_REBALANCE:
                self.h.join(
                    m.member_id,
                    instance_id=m.instance_id,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    protocols=m.protocols,
                )
        if fits and not g.pending_members and g.previous_state is not GroupState.EMPTY:
            assert self.h.state is not GroupState.PREPARING_REBALANCE  # the join completed
        self.settle()

    @precondition(
        lambda self: (
            self.h.group is not None and self.h.group.state is GroupState.COMPLETING_REBALANCE
        )
    )
    @rule()
    def followers_sync(self) -> None:
        g = self.h.g
        for m in list(g.members.values()):
            if m.member_id != g.leader_id and m.awaiting_sync is None:
                token = self.h.sync(m.member_id, g.generation, instance_id=m.instance_id)
                assert not self.h.answered(token)
        self.settle()

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), by_instance=st.booleans())
    def leave(self, data: st.DataObject, by_instance: bool) -> None:
        member_id, instance = self.pick(data)
        g = self.h.group
        held = []
        if g is not None and member_id in g.members:
            m = g.members[member_id]
            held = [t for t in (m.awaiting_join, m.awaiting_sync) if t is not None]
        if by_instance and instance is not None:
            response = self.h.leave(("", instance))
        else:
            response = self.h.leave((member_id, instance))
        if response.members and response.members[0][2] == ErrorCode.none:
            assert member_id not in (self.h.g.members if self.h.group else {})
            for t in held:
                assert self.h.reply(t).error_code == ErrorCode.unknown_member_id
        self.settle()

    # -- OffsetCommit ------------------------------------------------------------------------------
    @precondition(lambda self: self.ids)
    @rule(data=st.data(), stale=st.booleans())
    def commit(self, data: st.DataObject, stale: bool) -> None:
        member_id, instance = self.pick(data)
        g = self.h.group
        known = self.is_known(member_id, instance)
        current = self.generation()
        generation = current - int(stale) if g is not None else 1
        state = g.state if g is not None else None
        offset = next(self.offsets)
        committed = (offset, offset % 3 - 1, f"at {offset}")  # offset, leader epoch, metadata
        response = self.h.commit(
            [("topic", 0, *committed)],
            member_id=member_id,
            generation=generation,
            instance_id=instance,
        )
        (result,) = response.results
        if result[2] == ErrorCode.none:
            for pid, offsets in self.pending.items():
                if ("topic", 0) in offsets:
                    self.superseded[pid].add(("topic", 0))
            # what OffsetFetch answers is what the commit's record applied
            ((*_, offset_row, epoch_row, metadata_row, error),) = self.h.fetch(
                [("topic", 0)]
            ).offsets
            assert (offset_row, epoch_row, metadata_row, error) == (*committed, ErrorCode.none)
        if known and generation < current:
            assert result[2] == ErrorCode.illegal_generation, response
        elif known:
            expected = (
                ErrorCode.rebalance_in_progress
                if state is GroupState.COMPLETING_REBALANCE
                else ErrorCode.none
            )
            assert result[2] == expected, response
        elif g is None:
            assert result[2] == ErrorCode.group_id_not_found
        self.settle()

    # -- transactional offsets ---------------------------------------------------------------------
    @rule(
        data=st.data(),
        with_member=st.booleans(),
        stale=st.booleans(),
        producer=PRODUCERS,
        tp=st.sampled_from(TXN_PARTITIONS),
        zombie=st.booleans(),
    )
    def txn_commit(
        self,
        data: st.DataObject,
        with_member: bool,
        stale: bool,
        producer: int,
        tp: tuple[str, int],
        zombie: bool,
    ) -> None:
        g = self.h.group
        current = self.generation()
        if with_member and self.ids:
            member_id, instance = self.pick(data)
            known = self.is_known(member_id, instance)
            generation = current - int(stale) if g is not None else 1
        else:  # v0-v2, or a producer that is no member: no member id, generation -1
            member_id, instance, known, generation = "", None, False, -1
        epoch = self.epochs[producer] - int(zombie and self.epochs[producer] > 0)
        offset = next(self.offsets)
        op = TxnOffsetCommitOp(
            GROUP_ID, producer, epoch, ((*tp, offset, -1, ""),), member_id, generation, instance
        )
        ((_, _, error),) = self.h.call(op).results
        if generation < 0 and (g is None or g.state is GroupState.EMPTY or not member_id):
            valid = True  # a simple commit to an empty group, or one naming no member
        elif known:
            valid = generation == current
            if not valid:
                assert error == ErrorCode.illegal_generation
        else:
            valid = False
            assert error != ErrorCode.none
        known = max(self.pending_epoch.get(producer, -1), self.marker_epoch.get(producer, -1))
        if valid and epoch < known:  # a fenced zombie's, even after its transaction ended
            assert error == ErrorCode.invalid_producer_epoch
        elif valid:
            assert error == ErrorCode.none
            self.pending.setdefault(producer, {})[tp] = offset
            self.pending_at.setdefault(producer, {})[tp] = self.h.now
            self.pending_epoch[producer] = epoch
            self.superseded.setdefault(producer, set()).discard(tp)
        self.settle()

    @rule(producer=PRODUCERS)
    def new_producer_epoch(self, producer: int) -> None:
        self.epochs[producer] += 1

    @rule(producer=PRODUCERS, committed=st.booleans())
    def txn_marker(self, producer: int, committed: bool) -> None:
        before = dict(self.h.group.offsets) if self.h.group is not None else {}
        if self.h.group is not None:  # (a marker to no group leaves nothing behind)
            epoch = max(self.marker_epoch.get(producer, -1), self.epochs[producer])
            self.marker_epoch[producer] = epoch
        response = self.h.call(TxnMarkerOp(producer, self.epochs[producer], committed))
        assert response.error_code == ErrorCode.none
        pending = self.pending.pop(producer, {})
        pending_at = self.pending_at.pop(producer, {})
        superseded = self.superseded.pop(producer, set())
        self.pending_epoch.pop(producer, None)
        after = self.h.group.offsets if self.h.group is not None else {}
        for tp in TXN_PARTITIONS:
            if committed and tp in pending and tp not in superseded:
                assert after[tp].offset == pending[tp]
                for other, at in self.pending_at.items():  # older pending offsets lose to it
                    if tp in at and at[tp] <= pending_at[tp]:
                        self.superseded[other].add(tp)
            else:
                assert after.get(tp) == before.get(tp)
        self.settle()

    @rule()
    def fetch_stable(self) -> None:
        rows = self.h.call(OffsetFetchOp(GROUP_ID, TXN_PARTITIONS, require_stable=True)).offsets
        committed = self.h.group.offsets if self.h.group is not None else {}
        for topic, partition, offset, _, _, error in rows:
            if any((topic, partition) in p for p in self.pending.values()):
                assert (offset, error) == (-1, ErrorCode.unstable_offset_commit)
            else:
                found = committed.get((topic, partition))
                assert (offset, error) == (found.offset if found else -1, ErrorCode.none)

    @invariant()
    def pending_offsets_match_the_model_and_replay(self) -> None:
        live = self.h.group
        held = {} if live is None else pending_of(live)
        assert {pid: {tp: c.offset for tp, c in t.offsets.items()} for pid, t in held.items()} == {
            pid: offsets for pid, offsets in self.pending.items() if offsets
        }
        replayed = replay(self.h.records, self.h.now)
        again = {} if replayed is None else pending_of(replayed)
        assert {pid: (t.producer_epoch, t.offsets) for pid, t in again.items()} == {
            pid: (t.producer_epoch, t.offsets) for pid, t in held.items()
        }
        if live is not None and replayed is not None:
            assert epochs_of(replayed) == epochs_of(live) == self.marker_epoch

    # -- time --------------------------------------------------------------------------------------
    @rule(ms=SLEEPS)
    def sleep(self, ms: int) -> None:
        self.h.sleep(ms)

    @rule(ms=SLEEPS)
    def sleep_more(self, ms: int) -> None:  # time passing is as likely as any request
        self.h.sleep(ms)

    # -- invariants --------------------------------------------------------------------------------
    @invariant()
    def generation_never_decreases(self) -> None:
        generation = self.generation()
        assert generation >= self.max_generation
        self.max_generation = generation

    @invariant()
    def leader_is_a_member(self) -> None:
        g = self.h.group
        if g is None:
            return
        if g.leader_id is not None:
            assert g.leader_id in g.members
        assert (g.leader_id is None) == (not g.members)
        assert not (set(g.pending_members) & set(g.members))
        if g.state is GroupState.EMPTY:
            assert not g.members

    @invariant()
    def parked_requests_fit_the_state(self) -> None:
        g = self.h.group
        if g is None:
            return
        for m in g.members.values():
            if m.awaiting_join is not None:
                assert g.state is GroupState.PREPARING_REBALANCE, (m, g.state)
                assert not self.h.answered(m.awaiting_join)
            if m.awaiting_sync is not None:
                assert g.state is GroupState.COMPLETING_REBALANCE, (m, g.state)
                assert not self.h.answered(m.awaiting_sync)

    @invariant()
    def every_token_answered_once_or_held(self) -> None:
        g = self.h.group
        held: list[int] = []
        if g is not None:
            for m in g.members.values():
                held += [t for t in (m.awaiting_join, m.awaiting_sync) if t is not None]
        assert len(held) == len(set(held)), f"a token is held twice: {held}"
        held_set = set(held)
        assert held_set <= set(self.h.issued)
        for token in self.h.issued:
            answers = len(self.h.replies_for(token))
            if token in held_set:
                assert answers == 0, f"token {token} is held but was answered"
            else:
                assert answers == 1, f"token {token} answered {answers} times"
        assert set(self.h.replies) <= set(self.h.issued)  # no reply to an unknown token

    @invariant()
    def replay_of_the_records_equals_the_settled_state(self) -> None:
        """Issue 4's promise, at every step (every step is a possible crash cut): the records
        rebuild the offsets exactly, and a settled (Stable or Empty) group's generation,
        protocol, leader and members with their assignments."""
        live = self.h.group
        self._check_cuts_inside_the_last_step()
        replayed = replay(self.h.records, self.h.now)
        if live is None:
            assert replayed is None
            return
        assert replayed is not None
        assert replayed.offsets == live.offsets
        assert replayed.cgp_id == live.cgp_id
        if live.state in (GroupState.STABLE, GroupState.EMPTY):
            assert replayed.state is live.state
            assert (replayed.generation, replayed.protocol_name, replayed.leader_id) == (
                live.generation,
                live.protocol_name,
                live.leader_id,
            )
            assert {m: (x.instance_id, x.assignment) for m, x in replayed.members.items()} == {
                m: (x.instance_id, x.assignment) for m, x in live.members.items()
            }

    def _check_cuts_inside_the_last_step(self) -> None:
        """A crash can also cut between the records of one step (one batch): every such cut
        replays without error, to offsets that are each the before- or after-step value."""
        records = self.h.records
        start = self._records_checked
        before = replay(records[:start], self.h.now)
        after = replay(records, self.h.now)
        before_offsets = before.offsets if before is not None else {}
        after_offsets = after.offsets if after is not None else {}
        for cut in range(start + 1, len(records)):
            partial = replay(records[:cut], self.h.now)
            for tp, value in (partial.offsets if partial is not None else {}).items():
                assert value in (before_offsets.get(tp), after_offsets.get(tp))
        self._records_checked = len(records)

    @invariant()
    def next_deadline_not_in_the_past(self) -> None:
        deadline = machine.next_deadline(self.h.group)
        assert deadline is None or deadline > self.h.now

    @invariant()
    def protocol_support_is_counted_right(self) -> None:
        group = self.h.group
        if group is None:
            return
        counted: dict[str, int] = {}
        for member in group.members.values():
            for name in {name for name, _ in member.protocols}:
                counted[name] = counted.get(name, 0) + 1
        assert group.protocol_support == counted

    @invariant()
    def parked_joins_are_counted_right(self) -> None:
        group = self.h.group
        if group is not None:
            parked = sum(m.awaiting_join is not None for m in group.members.values())
            assert group.parked_joins == parked

    @invariant()
    def wake_up_is_never_after_the_next_deadline(self) -> None:
        deadline = machine.next_deadline(self.h.group)
        bound = self.h.wake_bound
        assert deadline is None or (bound is not None and bound <= deadline), (bound, deadline)


ClassicGroupMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestClassicGroupMachine = ClassicGroupMachine.TestCase

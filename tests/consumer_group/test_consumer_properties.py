"""Properties of KIP-848 reconciliation under random joins, heartbeats, lost responses,
leaves, timeouts and topic changes (hypothesis rule-based state machine).

Simulated clients behave as real ones do: each owns exactly what the last answer it got told
it (revoking and adding at once), reports that in every heartbeat, rejoins with epoch 0 after
being fenced, and notices when it has been cut off (a client that heard nothing for its
rebalance timeout, the shorter of its two timeouts here, drops everything, as librdkafka
gives up its partitions when max.poll.interval.ms or the session runs out). Some answers
are lost on the way; a client that lost one sends a full heartbeat next (subscription,
rebalance timeout and owned partitions), as the protocol asks, and so gets its whole
assignment again.

Invariants, after every step:
- no partition is held by two members, by the coordinator's books (assigned or pending
  revocation) nor by what the members' clients believe they own;
- a member's client never owns what the coordinator does not count as its own.
A client fenced without knowing yet (its rebalance timeout ran out on the coordinator before
its acknowledgement arrived) is a zombie until its next heartbeat tells it: it is no member,
and its commits are refused by member epoch; Kafka has the same window.
- the group rebuilt from its records is the group in memory, pending transactional offsets
  included.
Members also commit offsets in transactions (TxnOffsetCommit with their member epoch, as
KIP-447 producers do), which are checked on the spot: accepted from a member at its current
epoch, refused from a zombie or a stale epoch; the transactions end with commit or abort
markers, whose outcome is checked against a model of the pending offsets.
And when every member heartbeats a few times with nothing else happening, the group is
Stable and every partition of every subscribed topic is owned.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rafka_actors.consumer_group.state import ConsumerGroup, ConsumerGroupState
from rafka_actors.consumer_group.subscription import subscribed_names
from rafka_actors.group_common.ops import (
    TxnMarkerOp,
    TxnOffsetCommitOp,
)
from rafka_actors.group_common.txn_offsets import pending_of

from .harness import CONFIG, GROUP_ID, REBALANCE_TIMEOUT_MS, ConsumerHarness, durable_view

MEMBERS = ("m1", "m2", "m3", "m4")
SUBSCRIPTIONS = (("foo",), ("bar",), ("foo", "bar"), ("foo", "bar", "baz"))


@dataclass
class Client:
    epoch: int = 0
    joined: bool = False
    owned: dict[str, set[int]] = field(default_factory=dict)
    last_heard: int = 0
    topics: tuple[str, ...] = ()
    send_full: bool = False


class Reconciliation(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.h = ConsumerHarness()
        self.h.create_topic("foo", 6)
        self.h.create_topic("bar", 4)
        self.clients = {m: Client() for m in MEMBERS}
        # transactional offsets: each member's producer (id = its index), what is pending and
        # when it was committed, and what a more recent offset won (another producer's merged
        # offset committed no earlier: Kafka keeps the most recent at a marker)
        self.pending: dict[int, dict[tuple[str, int], int]] = {}
        self.pending_at: dict[int, dict[tuple[str, int], int]] = {}
        self.superseded: dict[int, set[tuple[str, int]]] = {}
        self.next_offset = 0

    def _take(self, member_id: str, resp: object, lost: bool = False) -> None:
        client = self.clients[member_id]
        code = resp.error_code  # type: ignore[attr-defined]
        if code in (25, 110):  # fenced or forgotten: drop everything, rejoin with epoch 0
            self._reset(client)
            return
        assert code == 0, resp
        if lost:
            client.send_full = True
            return
        client.send_full = False
        client.epoch = resp.member_epoch  # type: ignore[attr-defined]
        client.last_heard = self.h.now
        assignment = resp.assignment  # type: ignore[attr-defined]
        if assignment is not None:
            client.owned = self.h.named(assignment) or {}

    @staticmethod
    def _reset(client: Client) -> None:
        client.epoch, client.owned, client.send_full = 0, {}, False

    @rule(member=st.sampled_from(MEMBERS), topics=st.sampled_from(SUBSCRIPTIONS))
    def join(self, member: str, topics: tuple[str, ...]) -> None:
        client = self.clients[member]
        if client.joined:
            return
        resp = self.h.join(member, topics)
        client.joined, client.topics = True, topics
        self._take(member, resp)

    @rule(member=st.sampled_from(MEMBERS), lost=st.booleans())
    def heartbeat(self, member: str, lost: bool) -> None:
        client = self.clients[member]
        if not client.joined:
            return
        self._take(member, self._heartbeat(member), lost)

    def _heartbeat(self, member: str) -> object:
        client = self.clients[member]
        if client.epoch == 0:
            return self.h.join(member, client.topics)
        if not client.send_full:
            return self.h.heartbeat(member, client.epoch, owned=client.owned)
        return self.h.heartbeat(
            member,
            client.epoch,
            owned=client.owned,
            topics=client.topics,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        )

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        if self.clients[member].joined:
            self.h.heartbeat(member, -1)
            self.clients[member] = Client()

    @rule(ms=st.integers(1_000, 50_000))
    def sleep(self, ms: int) -> None:
        self.h.sleep(ms)
        cut_off = min(CONFIG.consumer_session_timeout_ms, REBALANCE_TIMEOUT_MS)
        for client in self.clients.values():
            if client.joined and self.h.now - client.last_heard >= cut_off:
                self._reset(client)  # its own timer ran out: it gives everything up

    @rule()
    def create_baz(self) -> None:
        if "baz" not in self.h.image.by_name:
            self.h.create_topic("baz", 3)

    @rule()
    def settle(self) -> None:
        for _ in range(4):
            for member, client in self.clients.items():
                if client.joined:
                    self._take(member, self._heartbeat(member))
        group = self.h.group
        if not isinstance(group, ConsumerGroup) or not group.members:
            return
        assert group.state is ConsumerGroupState.STABLE
        owned = {
            (t, p)
            for c in self.clients.values()
            if c.joined
            for t, ps in c.owned.items()
            for p in ps
        }
        wanted = {
            (name, p)
            for name in subscribed_names(group.members.values(), self.h.image)
            for p in range(self.h.image.by_name[name].partitions)
        }
        assert owned == wanted

    # -- transactional offsets ----------------------------------------------------------------
    @rule(member=st.sampled_from(MEMBERS), partition=st.integers(0, 1))
    def txn_commit(self, member: str, partition: int) -> None:
        client = self.clients[member]
        if not client.joined or client.epoch == 0:
            return
        group = self.h.group
        current = group.members.get(member) if isinstance(group, ConsumerGroup) else None
        producer, tp = MEMBERS.index(member), ("foo", partition)
        self.next_offset += 1
        op = TxnOffsetCommitOp(
            GROUP_ID, producer, 0, ((*tp, self.next_offset, -1, None),), member, client.epoch
        )
        ((_, _, error),) = self.h.send(op).results
        if current is None:
            assert error == 25  # UNKNOWN_MEMBER_ID: a zombie that does not know yet
        elif current.member_epoch != client.epoch:
            assert error == 22  # ILLEGAL_GENERATION (STALE_MEMBER_EPOCH only from v6)
        else:
            assert error == 0
            self.pending.setdefault(producer, {})[tp] = self.next_offset
            self.pending_at.setdefault(producer, {})[tp] = self.h.now
            self.superseded.setdefault(producer, set()).discard(tp)

    @rule(member=st.sampled_from(MEMBERS), committed=st.booleans())
    def txn_end(self, member: str, committed: bool) -> None:
        producer = MEMBERS.index(member)
        group = self.h.group
        before = dict(group.offsets) if group is not None else {}
        assert self.h.send(TxnMarkerOp(producer, 0, committed)).error_code == 0
        ended = self.pending.pop(producer, {})
        ended_at = self.pending_at.pop(producer, {})
        superseded = self.superseded.pop(producer, set())
        after = self.h.group.offsets if self.h.group is not None else {}
        for tp in {*before, *after, *ended}:
            if committed and tp in ended and tp not in superseded:
                assert after[tp].offset == ended[tp]
                for other, at in self.pending_at.items():  # older pending offsets lose to it
                    if tp in at and at[tp] <= ended_at[tp]:
                        self.superseded[other].add(tp)
            else:
                assert after.get(tp) == before.get(tp)

    @invariant()
    def pending_offsets_are_the_models(self) -> None:
        group = self.h.group
        held = pending_of(group) if group is not None else {}
        assert {p: {tp: c.offset for tp, c in t.offsets.items()} for p, t in held.items()} == {
            p: offsets for p, offsets in self.pending.items() if offsets
        }

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def no_double_ownership_in_the_books(self) -> None:
        group = self.h.group
        if not isinstance(group, ConsumerGroup):
            return
        seen: set[tuple[object, int]] = set()
        for member in group.members.values():
            for held in (member.current.assigned, member.current.pending_revocation):
                for topic_id, parts in held.items():
                    for p in parts:
                        assert (topic_id, p) not in seen
                        seen.add((topic_id, p))

    @invariant()
    def no_double_ownership_by_clients(self) -> None:
        seen: set[tuple[str, int]] = set()
        group = self.h.group
        for member_id, client in self.clients.items():
            if not isinstance(group, ConsumerGroup) or member_id not in group.members:
                continue  # not a member (never joined, left, or a zombie about to learn it)
            for name, parts in client.owned.items():
                for p in parts:
                    assert (name, p) not in seen, (member_id, name, p)
                    seen.add((name, p))
            if client.owned:
                member = group.members[member_id]
                books = {**member.current.assigned}
                for t, ps in member.current.pending_revocation.items():
                    books[t] = books.get(t, frozenset()) | ps
                for name, parts in client.owned.items():
                    assert parts <= books.get(self.h.tid(name), frozenset())

    @invariant()
    def records_rebuild_the_group(self) -> None:
        if isinstance(self.h.group, ConsumerGroup):
            assert durable_view(self.h.replayed()) == durable_view(self.h.group)


TestReconciliation = Reconciliation.TestCase
TestReconciliation.settings = settings(
    max_examples=int(os.environ.get("RAFKA_PROPERTY_EXAMPLES", "150")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

"""The registry: finds or spawns the actor of a `(org_id, group_id)`, and supervises them all.

Actors run in the registry's nursery. `ask` sends an op with a one-shot reply channel and
waits for the answer. An actor whose group does not exist and which holds nothing stops by
itself (so asking about a thousand unknown groups leaves nothing behind); a request that
races with that stop finds the mailbox closed and is simply sent to a fresh actor.

An actor is spawned dormant (group_actor.py): its task starts with its first envelope or
deadline. `ask_light` answers a dormant actor inline, so a group that only commits and
fetches offsets never has a task; a dormant actor that may stop is simply dropped.

ListGroups reads a live actor's group, and for a group without an actor a one-line summary
(state, protocol type) that the registry keeps once it has read it from the log. Such a group
only changes through an actor, so a kept summary is renewed from the actor's group when the
actor goes (which then is what the log says), and forgotten if the actor died. So a lag
exporter listing 100 000 groups every few seconds does not decode them all each time, nor
after each retention sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import trio

from ..consumer_group.state import ConsumerGroup
from ..coordinator.machine import AnyGroup
from ..group_common.effects import GroupConfig
from ..group_common.ops import ExpireOffsetsOp
from ..group_common.topic_image import EMPTY_IMAGE, TopicImage
from ..ids import GroupKey
from .coordinator_log import CoordinatorLog, now_ms, stored_group, stored_membership
from .group_actor import PASSIVATE, WRITING_OPS, Envelope, GroupActor, InlineOp
from .reply import ReplySlot, ReplyTo

log = logging.getLogger(__name__)

# Actors the passivation sweep looks at between checkpoints. Dropping a dormant actor frees
# its group (a few us each): in one pass, 58 000 of 100 000 took 250 ms, and no request was
# answered meanwhile.
SWEEP_CHUNK = 512


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    group_type: str  # "classic" or "consumer" (KIP-848), as ListGroups v5 reports it
    cgp_id: str = ""  # the group's stable identity, for our admin tool (not in ListGroups)


class GroupRegistry:
    def __init__(
        self,
        nursery: trio.Nursery,
        config: GroupConfig,
        coordinator_log: CoordinatorLog,
        *,
        mailbox_size: int = 1024,
        topics: Callable[[int], TopicImage] = lambda _org: EMPTY_IMAGE,
        passivate_after_s: float = 0.0,
    ) -> None:
        # KIP-848 groups see topics: `topics(org_id)` is the image of that org's topics only.
        self._topics = topics
        self._passivate_after_s = passivate_after_s  # an idle actor stops after this long
        if passivate_after_s > 0:
            nursery.start_soon(self._passivate_idle_forever)
        self._nursery = nursery
        self._config = config
        self._log = coordinator_log
        self._answered_held = False  # see answered_held
        self._mailbox_size = mailbox_size
        self._actors: dict[GroupKey, GroupActor] = {}
        # One bound method for every actor to start itself with, not one per actor (a
        # tracked object the cycle collector walks for each of 100 000 groups).
        self._starter = self._start
        # of groups listed once: read only while the group has no actor (_forget)
        self._summaries: dict[GroupKey, GroupSummary | None] = {}

    async def ask(self, key: GroupKey, op: Any) -> Any:
        reply = ReplySlot()
        envelope = Envelope(op, reply)
        while True:
            actor = self._actors.get(key) or self._spawn(key)
            try:
                # No yield unless the mailbox is full: waiting for the reply is this call's
                # checkpoint, and another would cost every request a pass of the scheduler.
                await actor.post(envelope)
                break
            except trio.BrokenResourceError:  # it stopped just now: spawn a fresh one
                self._stopped(key, actor)
        return await reply.receive()

    def post_now(self, key: GroupKey, op: Any, reply: ReplyTo) -> bool:
        """`ask`'s post without a wait, for a caller that waits on `reply` itself (the
        gateway's reactor, gateway/parked_reply.py); False if the mailbox is full."""
        envelope = Envelope(op, reply)
        while True:
            actor = self._actors.get(key) or self._spawn(key)
            try:
                actor.post_nowait(envelope)
                return True
            except trio.WouldBlock:
                return False
            except trio.BrokenResourceError:
                self._stopped(key, actor)

    def _stopped(self, key: GroupKey, actor: GroupActor) -> None:
        """`actor` stopped just as it was posted to: the next post spawns a fresh one."""
        if self._actors.get(key) is actor:
            self._forget(actor, stored=False)  # its summary is read again

    async def ask_light(self, key: GroupKey, op: InlineOp, *, keep: bool = True) -> Any:
        """`ask` for an op an idle actor may answer inline (InlineOp: a fetch, a Heartbeat, a
        commit, a describe, an expiry): answered inline when the group's actor is parked on
        an empty mailbox or dormant (GroupActor.answer_inline), else through its mailbox.
        Without `keep`, an actor spawned for this op is dropped again if it may be."""
        held = self._actors.get(key)
        actor = held or self._spawn(key)
        response = actor.answer_inline(op)
        if response is None and isinstance(op, WRITING_OPS):
            response = await actor.answer_durably(op)
        if response is None:
            return await self.ask(key, op)
        if not self._passivate_after_s or (held is None and not keep):
            self._drop_if_idle(actor)  # an idle actor stops at once: a dormant one here
        return response

    def hold_writes(self) -> None:
        """Until `release_writes`, the records of inline commits may be kept to be written
        together (CoordinatorLog.hold_appends): the gateway's reactor sends no reply that
        `answered_held` marks before `release_writes` returns True."""
        self._answered_held = False
        self._log.hold_appends()

    def answered_held(self) -> bool:
        """Whether an `answer_now` since the last call was about a group whose records are
        held (a commit answered in the pass, or a fetch of its group after it): its reply
        must wait for `release_writes`."""
        answered, self._answered_held = self._answered_held, False
        return answered

    def release_writes(self) -> bool:
        """Write what was held; False if some of it could not be stored. Then the actors of
        those groups restart from the log, and no reply given since `hold_writes` may go out."""
        unstored = self._log.write_held()
        for key in dict.fromkeys(unstored):
            actor = self._actors.get(key)
            if actor is not None:
                actor.forget_unstored()
            self._summaries.pop(key, None)  # (kept from a dropped actor's unstored group)
        return not unstored

    @property
    def writes_now(self) -> bool:
        """Whether a commit may be answered inline: the log writes without a wait."""
        return self._log.writable_now()

    def answer_now(self, key: GroupKey, op: InlineOp, trio_now: float | None = None) -> Any | None:
        """`ask_light`'s answer if the actor gives it inline (GroupActor.answer_inline), else
        None, and nothing was asked (a dormant actor may have been spawned for it)."""
        actor = self._actors.get(key) or self._spawn(key)
        response = actor.answer_inline(op, trio_now)
        if response is not None:
            if self._log.holds(key):
                self._answered_held = True
            if not self._passivate_after_s:
                self._drop_if_idle(actor)
        return response

    def actor(self, key: GroupKey) -> GroupActor | None:
        """The group's actor, running or dormant, if it has one now."""
        return self._actors.get(key)

    def answers_fetch_again(self, key: GroupKey, group: AnyGroup, trio_now: float) -> bool:
        """Whether a fetch answered inline from `group` may be answered again without a step
        (gateway/fetch_repeat.py, which compares the offsets): the group's actor still holds
        that group object and would answer a fetch inline now (GroupActor.answer_inline)."""
        actor = self._actors.get(key)
        if actor is None or not actor.answers_fetch_again(group, trio_now):
            return False
        if self._log.holds(key):
            self._answered_held = True
        return True

    def _drop_if_idle(self, actor: GroupActor) -> None:
        """Forget a dormant actor that holds nothing (there is no task to stop)."""
        if actor.dormant and actor.idle and self._actors.get(actor.key) is actor:
            self._forget(actor, stored=True)

    def _forget(self, actor: GroupActor, *, stored: bool) -> None:
        """The actor is gone; if its group was listed, renew its summary from the actor's
        group when that is `stored` (what the log says) and still exists, else read it again
        when listed."""
        key = actor.key
        del self._actors[key]
        if key in self._summaries:
            summary = _summary(key, actor.group) if stored else None
            if summary is None:  # died, or the group is gone: nothing kept for a deleted one
                del self._summaries[key]
            else:
                self._summaries[key] = summary

    def _spawn(self, key: GroupKey) -> GroupActor:
        group = stored_group(self._log, key, now_ms(), self._config)
        actor = GroupActor(
            key,
            self._config,
            self._log,
            mailbox_size=self._mailbox_size,
            group=group,
            topics=self._topics,
            passivate_after_s=self._passivate_after_s,
            start=self._starter,
        )
        self._actors[key] = actor
        return actor

    def _start(self, actor: GroupActor) -> None:
        self._nursery.start_soon(self._supervise, actor)

    async def _passivate_idle_forever(self) -> None:
        """Every half delay, ask each actor idle for the whole delay to stop: one sweep over
        the live actors instead of a timer in every actor's wait for requests. Requests are
        answered between chunks of the sweep; each actor is judged when its chunk comes."""
        while True:
            await trio.sleep(self._passivate_after_s / 2)
            await self._sweep(trio.current_time() - self._passivate_after_s)

    async def _sweep(self, cutoff: float) -> None:
        # One pass over a snapshot of the actors, which ends with the pass: kept while the
        # sweeper sleeps, it would keep every actor dropped here alive for another half delay.
        actors = list(self._actors.values())
        for start in range(0, len(actors), SWEEP_CHUNK):
            if start:
                await trio.lowlevel.checkpoint()
            for actor in actors[start : start + SWEEP_CHUNK]:
                self._passivate_if_idle(actor, cutoff)

    def _passivate_if_idle(self, actor: GroupActor, cutoff: float) -> None:
        if actor.last_active <= cutoff and actor.idle:
            if actor.dormant:
                self._drop_if_idle(actor)  # (only if it is still the group's actor)
                return
            try:
                actor.post_nowait(Envelope(PASSIVATE, None))
            except (trio.WouldBlock, trio.BrokenResourceError):
                pass  # busy after all, or already stopping

    async def _supervise(self, actor: GroupActor) -> None:
        # An actor that dies stays dead alone: its siblings (this nursery) never notice,
        # and the next request for its group spawns a fresh one from the log.
        stopped = False
        try:
            await actor.run()
            stopped = True  # idle: its group is what its stored records say
        except Exception:
            log.exception(
                "group %s: actor died; it restarts on the next request", actor.key.group_id
            )
        finally:
            if self._actors.get(actor.key) is actor:
                self._forget(actor, stored=stopped)

    async def expire_offsets_periodically(self, interval_ms: int, retention_ms: int) -> None:
        """Kafka's retention sweep: every interval, each stored group expires what is due
        (the decision is the group's own, in its state machine)."""
        while True:
            await trio.sleep(interval_ms / 1000)
            await self.expire_offsets(retention_ms)

    async def expire_offsets(self, retention_ms: int) -> int:
        """One sweep over every stored group; returns how many groups it deleted."""
        deleted = 0
        stored = self._log.keys()
        for key in stored:
            # A group nobody uses is visited by a dormant actor and left again: the sweep
            # neither starts 100 000 tasks nor keeps what it read in memory.
            answer = await self.ask_light(key, ExpireOffsetsOp(retention_ms), keep=False)
            deleted += answer.group_deleted
            if answer.expired:
                log.info(
                    "group %s: %d offsets expired%s",
                    key.group_id,
                    answer.expired,
                    "; group deleted" if answer.group_deleted else "",
                )
        return deleted

    def resume(self) -> int:
        """After a restart: start the actors of groups that had members, so their members
        carry on (or are evicted when their session runs out) as after a Kafka failover.
        Who the members are needs no offsets: with 100 000 simple groups, decoding and
        replaying their offsets was 40% of start-up."""
        now = now_ms()
        resumed = 0
        stored = self._log.keys()  # a list of group keys, not a dict view
        for key in stored:
            group = stored_membership(self._log, key, now, self._config)
            if group is not None and group.members and key not in self._actors:
                self._spawn(key).wake()  # its members' session timers must run
                resumed += 1
        return resumed

    def summaries(self, org_id: int) -> Iterator[GroupSummary]:
        """Live actors' groups, and the stored ones without an actor (from the summaries kept
        of them, or their records without offsets)."""
        now = now_ms()
        stored = self._log.keys()
        for key in stored:
            if key.org_id != org_id:
                continue
            actor = self._actors.get(key)
            if actor is not None:
                summary = _summary(key, actor.group)
            elif key in self._summaries:
                summary = self._summaries[key]
            else:
                summary = self._summaries[key] = _summary(key, self._stored_membership(key, now))
            if summary is not None:
                yield summary

    def _stored_membership(self, key: GroupKey, now: int) -> AnyGroup:
        """The group without its offsets, which say nothing of its state or type; all of its
        records only for a group stored without a group record (offsets alone)."""
        group = stored_membership(self._log, key, now, self._config)
        return group if group is not None else stored_group(self._log, key, now, self._config)

    def __len__(self) -> int:
        return len(self._actors)


def _summary(key: GroupKey, group: AnyGroup) -> GroupSummary | None:
    if isinstance(group, ConsumerGroup):
        return GroupSummary(key.group_id, group.state.value, "consumer", "consumer", group.cgp_id)
    if group is None:
        return None
    return GroupSummary(
        key.group_id, group.state.value, group.protocol_type or "", "classic", group.cgp_id
    )

"""The registry: finds or starts the actor of a `(org_id, group_id)`, and supervises them all.

`ask(key, op)` is the one way in: it posts the op with a one-shot reply to the group's actor,
starting one in the registry's nursery if none runs, and waits for the answer. A pure read
(an OffsetFetch that names no KIP-848 member) is answered from the snapshot the actor last
published, when there is one (snapshot.py), without the mailbox; and so is a pure read of a
group the log has never stored, while no actor runs for it (a lag exporter's or a new
consumer's committed() before any commit): there is nothing to read, and nobody changing it.

Passivation keeps memory with the groups in use, not every group ever seen. An actor stops as
soon as it is idle (actors/group_actor.py); its group, exactly what its stored records say,
rests here with its snapshot for `group.passivation.idle.ms`, so that its next request starts a
new actor without replaying the log, and a read finds the snapshot. The passivation sweep then
drops it; the next request rebuilds it from the log. With a delay of 0 nothing rests.

Supervision: an actor that dies stays dead alone. Its siblings (this nursery) never notice; it
has answered everything it held (group_actor.py), and the next request for its group starts a
fresh one from the log. A request that races with an actor's stop finds its mailbox closed and
is sent to a fresh one.

ListGroups reads published snapshots, and for a group without one a summary that the registry
keeps once it has read it from the log (a lag exporter listing 100 000 groups every few
seconds must not decode them all each time).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import trio

from .. import telemetry
from ..coordinator.machine import AnyGroup
from ..group_common import group_configs
from ..group_common.effects import GroupConfig
from ..group_common.ops import ExpireOffsetsOp
from ..group_common.topic_image import EMPTY_IMAGE, TopicImage
from ..ids import GroupKey
from ..storage.coordinator_log import CoordinatorLog
from . import snapshot
from .clock import now_ms
from .group_actor import DEFAULT_COMMIT_TIMEOUT_S, Envelope, GroupActor
from .reply import ReplySlot
from .snapshot import GroupSnapshot, GroupSummary, summary_of
from .stored_groups import stored_group, stored_membership

__all__ = ["GroupRegistry", "GroupSummary"]

log = logging.getLogger(__name__)

# Resting groups the passivation sweep looks at between checkpoints, so that requests are
# answered during a sweep over 100 000 groups.
SWEEP_CHUNK: Final = 512


@dataclass(slots=True)
class _Resting:
    group: AnyGroup
    since: float  # trio time it came to rest


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
        commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S,
        group_overrides: Callable[[GroupKey], Iterable[tuple[str, str]]] = lambda _key: (),
    ) -> None:
        self._nursery = nursery
        self._overrides = group_overrides  # a group's dynamic configs (issue 45)
        self._config = config
        self._log = coordinator_log
        self._mailbox_size = mailbox_size
        self._topics = topics  # topics(org_id): the image of that org's topics only
        self._passivate_after_s = passivate_after_s
        self._commit_timeout_s = commit_timeout_s
        # told each batch of records an actor stored (metrics/: rebalances counted)
        self.on_stored: Callable[[GroupKey, list[Any]], None] | None = None
        self._running: dict[GroupKey, GroupActor] = {}
        self._resting: dict[GroupKey, _Resting] = {}
        self._published: dict[GroupKey, GroupSnapshot] = {}  # of running and resting groups
        # ListGroups' lines of groups with neither: read once from the log
        self._summaries: dict[GroupKey, GroupSummary | None] = {}
        # snapshots of groups without a published one, read from the log for the metrics
        self._read_for_metrics: dict[GroupKey, GroupSnapshot] = {}
        if passivate_after_s > 0:
            nursery.start_soon(self._passivate_forever)

    async def ask(self, key: GroupKey, op: Any) -> Any:
        """The answer of the group's actor to `op` (or of its latest snapshot, for a pure
        read). Waits for room in a full mailbox (backpressure)."""
        published = self._published.get(key)
        if published is None and key not in self._running and not self._log.stores(key):
            published = snapshot.NO_GROUP  # nothing stored, nobody changing it: nothing to read
        if published is not None:
            answer = snapshot.read(published, op)
            if answer is not None:
                await trio.lowlevel.checkpoint()
                return answer
        reply = ReplySlot()
        envelope = Envelope(op, reply, telemetry.current_context())
        while True:
            actor = self._running.get(key) or self._start(key)
            try:
                try:
                    actor.mailbox.send_nowait(envelope)  # waiting for the reply is the checkpoint
                except trio.WouldBlock:
                    await actor.mailbox.send(envelope)
                break
            except trio.BrokenResourceError:  # it stopped while we waited for room
                continue
        return await reply.receive()

    def _start(self, key: GroupKey) -> GroupActor:
        config = group_configs.effective(self._config, self._overrides(key))
        resting = self._resting.pop(key, None)
        if resting is not None:
            group, published = resting.group, self._published.get(key)
        else:
            group, published = stored_group(self._log, key, now_ms(), config), None
        actor = GroupActor(
            key,
            config,
            self._log,
            group=group,
            mailbox_size=self._mailbox_size,
            topics=self._topics,
            publish=self._publish,
            commit_timeout_s=self._commit_timeout_s,
            published=published,
            base_config=self._config,
            stored=self.on_stored,
        )
        self._running[key] = actor
        self._nursery.start_soon(self._supervise, actor)
        return actor

    def _publish(self, key: GroupKey, published: GroupSnapshot) -> None:
        self._published[key] = published
        if self._read_for_metrics:
            self._read_for_metrics.pop(key, None)  # older than this, now

    async def _supervise(self, actor: GroupActor) -> None:
        key = actor.key
        try:
            group = await actor.run()
        except Exception:
            log.exception("group %s: actor died; it restarts on the next request", key.group_id)
            # what was said of it may be stale now: read from the log when next asked or listed
            self._published.pop(key, None)
            self._summaries.pop(key, None)
            return
        finally:  # stopped, died or cancelled (the registry shuts down): no longer running
            if self._running.get(key) is actor:
                del self._running[key]
        # No checkpoint since it found its mailbox empty: nobody has posted to it since.
        self._rest(key, group)

    def _rest(self, key: GroupKey, group: AnyGroup) -> None:
        """Keep a stopped actor's group for the passivation delay (not a group that does not
        exist: asking about unknown groups must leave nothing behind)."""
        if group is None or not self._passivate_after_s:
            self._drop(key, group)
        else:
            self._resting[key] = _Resting(group, trio.current_time())

    def _drop(self, key: GroupKey, group: AnyGroup) -> None:
        """Forget a resting group; a listed one keeps its summary (what the log says)."""
        self._resting.pop(key, None)
        self._published.pop(key, None)
        if key in self._summaries:
            summary = summary_of(key.group_id, group)
            if summary is None:  # deleted: nothing kept of it
                del self._summaries[key]
            else:
                self._summaries[key] = summary

    async def _passivate_forever(self) -> None:
        """Every half delay, drop the groups resting for the whole delay: one sweep instead of
        a timer per group."""
        while True:
            await trio.sleep(self._passivate_after_s / 2)
            await self._sweep(trio.current_time() - self._passivate_after_s)

    async def _sweep(self, cutoff: float) -> None:
        # A snapshot of the keys, which ends with the pass (kept while the sweeper sleeps, it
        # would keep every group dropped here alive for another half delay).
        keys = list(self._resting)
        for start in range(0, len(keys), SWEEP_CHUNK):
            if start:
                await trio.lowlevel.checkpoint()
            for key in keys[start : start + SWEEP_CHUNK]:
                resting = self._resting.get(key)
                if resting is not None and resting.since <= cutoff:
                    self._drop(key, resting.group)

    # -- topic changes (issue 45) ---------------------------------------------------------

    def now_ms(self) -> int:
        """The clock the groups' records are stamped with (commit times): a topic deletion
        is timed with it, to tell the offsets committed before it from those after."""
        return now_ms()

    async def ask_groups_of(
        self,
        org_id: int,
        op: Any,
        *,
        stored_too: bool,
        finished: Callable[[], None] | None = None,
    ) -> list[Any]:
        """Ask `op` of every group of the organisation whose actor runs, and if `stored_too`
        of every group the log stores as well (a deleted topic's offsets may be in any).

        The visit is the registry's task, not the caller's: a caller that goes away (a client
        that timed out on a DeleteTopics over many groups) does not leave it half done.
        `finished` is called once every group was asked (not if the registry stops first)."""
        keys = {key for key in self._running if key.org_id == org_id}
        if stored_too:
            stored = self._log.keys()  # a list of group keys, not a dict view
            keys.update(key for key in stored if key.org_id == org_id)
        answers: list[Any] = []
        done = trio.Event()

        async def visit() -> None:
            try:
                for key in sorted(keys, key=lambda k: k.group_id):
                    in_use = key in self._running or key in self._resting
                    try:
                        answers.append(await self.ask(key, op))
                    except Exception:  # one group's fault stays its own
                        log.exception("group %s: %s failed", key.group_id, type(op).__name__)
                    if not in_use and key in self._resting:  # visited only: not kept
                        self._drop(key, self._resting[key].group)
                if finished is not None:
                    try:
                        finished()
                    except Exception:  # e.g. a full disk: the visit is redone at start-up
                        log.exception("after %s of org %d", type(op).__name__, org_id)
            finally:
                done.set()

        self._nursery.start_soon(visit)
        await done.wait()
        return answers

    # -- the retention sweep and start-up -------------------------------------------------

    async def expire_offsets_periodically(self, interval_ms: int, retention_ms: int) -> None:
        """Kafka's retention sweep: every interval, each stored group expires what is due
        (the decision is the group's own, in its state machine)."""
        while True:
            await trio.sleep(interval_ms / 1000)
            await self.expire_offsets(retention_ms)

    async def expire_offsets(self, retention_ms: int) -> int:
        """One sweep over every stored group; returns how many groups it deleted."""
        deleted = 0
        stored = self._log.keys()  # a list of group keys, not a dict view
        for key in stored:
            # A group nobody uses is visited and dropped again: the sweep does not keep what
            # it read in memory.
            in_use = key in self._running or key in self._resting
            answer = await self.ask(key, ExpireOffsetsOp(retention_ms))
            if not in_use and key in self._resting:
                self._drop(key, self._resting[key].group)
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
        stored = self._log.keys()
        for key in stored:
            group = stored_membership(self._log, key, now, self._config)
            if group is not None and group.members and key not in self._running:
                self._start(key)  # its members' session timers must run
                resumed += 1
        return resumed

    # -- reads ----------------------------------------------------------------------------

    def summaries(self, org_id: int) -> Iterator[GroupSummary]:
        """Every stored group of the organisation: from its published snapshot, or else the
        summary kept of it (read from the log once)."""
        now = now_ms()
        stored = self._log.keys()
        for key in stored:
            if key.org_id != org_id:
                continue
            published = self._published.get(key)
            if published is not None:
                summary = published.summary
            elif key in self._summaries:
                summary = self._summaries[key]
            else:
                summary = self._summaries[key] = summary_of(
                    key.group_id, self._stored_membership(key, now)
                )
            if summary is not None:
                yield summary

    def snapshots(
        self, wanted: Callable[[GroupKey], bool] = lambda _key: True
    ) -> Iterator[tuple[GroupKey, GroupSnapshot]]:
        """Every `wanted` stored group's latest snapshot, for the metrics endpoint at scrape
        time: the published one, or one read from the log. A group without an actor changes
        only by starting one, which publishes: what was read stays true until then, and is
        kept for the next scrape (only once metrics are read: the endpoint's memory)."""
        now = now_ms()
        stored = self._log.keys()  # a list of group keys, not a dict view
        for key in stored:
            if not wanted(key):
                continue
            published = self._published.get(key) or self._read_for_metrics.get(key)
            if published is None:
                published = snapshot.snapshot_of(
                    key.group_id, stored_group(self._log, key, now, self._config)
                )
                self._read_for_metrics[key] = published
            yield key, published

    def _stored_membership(self, key: GroupKey, now: int) -> AnyGroup:
        """The group without its offsets, which say nothing of its state or type; all of its
        records only for a group stored without a group record (offsets alone)."""
        group = stored_membership(self._log, key, now, self._config)
        return group if group is not None else stored_group(self._log, key, now, self._config)

    def __len__(self) -> int:
        """How many groups are held in memory: running actors and resting groups."""
        return len(self._running) + len(self._resting)

    def running(self) -> int:
        """How many actors run now."""
        return len(self._running)

    def resting(self) -> int:
        """How many stopped actors' groups are kept for their next request."""
        return len(self._resting)

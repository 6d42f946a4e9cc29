"""The group registry: the registry base (actor_registry.py) for `(org_id, group_id)` keys.

A pure read (an OffsetFetch that names no KIP-848 member) is answered from the snapshot the
group's actor last published (snapshot.py), without the mailbox; and so is a pure read of a
group the log has never stored, while no actor runs for it (a lag exporter's or a new
consumer's committed() before any commit): there is nothing to read, and nobody changing it.

An actor starts from its resting group and snapshot, or from the group as the log has it.
Passivation: an actor stops as soon as its group is idle (group_actor.py); the group, exactly
what its stored records say, rests here with its snapshot for `group.passivation.idle.ms`, so
its next request starts a new actor without replaying the log and a read finds the snapshot.

ListGroups reads published snapshots, and for a group without one a summary that the registry
keeps once it has read it from the log (a lag exporter listing 100 000 groups every few
seconds must not decode them all each time).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import trio

from ..coordinator.machine import AnyGroup
from ..group_common import group_configs
from ..group_common.effects import GroupConfig
from ..group_common.ops import ExpireOffsetsOp
from ..group_common.topic_image import EMPTY_IMAGE, TopicImage
from ..ids import GroupKey
from ..storage.coordinator_log import CoordinatorLog
from . import resting_group, snapshot
from .actor_registry import ActorRegistry, Resting
from .clock import now_ms
from .group_actor import GroupSettings, new_group_actor
from .mailbox_actor import DEFAULT_COMMIT_TIMEOUT_S, MailboxActor
from .share_fetch import ShareReader, no_reads
from .snapshot import GroupSnapshot, GroupSummary, summary_of
from .stored_groups import stored_group, stored_membership

__all__ = ["GroupRegistry", "GroupSummary"]

log = logging.getLogger(__name__)


class GroupRegistry(ActorRegistry[GroupKey, AnyGroup]):
    def __init__(
        self,
        nursery: trio.Nursery,
        config: GroupConfig,
        coordinator_log: CoordinatorLog,
        *,
        mailbox_size: int = 1024,
        topics: Callable[[int], TopicImage] = lambda _org: EMPTY_IMAGE,
        passivate_after_s: float = 0.0,
        idle_grace_s: float = 0.0,
        commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S,
        group_overrides: Callable[[GroupKey], Iterable[tuple[str, str]]] = lambda _key: (),
        read_share: ShareReader = no_reads,  # a ShareFetch's read of the partition logs
    ) -> None:
        super().__init__(nursery, passivate_after_s=passivate_after_s, idle_grace_s=idle_grace_s)
        self._overrides = group_overrides  # a group's dynamic configs (issue 45)
        self._config = config
        self._log = coordinator_log
        self._settings = GroupSettings(
            config,
            coordinator_log,
            topics,  # topics(org_id): the image of that org's topics only
            self._publish,
            None,
            mailbox_size,
            commit_timeout_s,
            read_share,
        )
        self._published: dict[GroupKey, GroupSnapshot] = {}  # of running and resting groups
        # ListGroups' lines of groups with neither: read once from the log
        self._summaries: dict[GroupKey, GroupSummary | None] = {}
        # snapshots of groups without a published one, read from the log for the metrics
        self._read_for_metrics: dict[GroupKey, GroupSnapshot] = {}

    def _read(self, key: GroupKey, op: Any) -> Any:
        published = self._published.get(key)
        if published is None and key not in self._running and not self._log.stores(key):
            published = snapshot.NO_GROUP  # nothing stored, nobody changing it: nothing to read
        return None if published is None else snapshot.read(published, op)

    def _new_actor(
        self, key: GroupKey, resting: Resting[AnyGroup] | None
    ) -> MailboxActor[GroupKey, AnyGroup]:
        config = group_configs.effective(self._config, self._overrides(key))
        if resting is not None:
            group, published = resting_group.wake(resting.state), self._published.get(key)
        else:
            group, published = stored_group(self._log, key, now_ms(), config), None
        return new_group_actor(key, self._settings, group, config=config, published=published)

    def _at_rest(self, key: GroupKey, group: AnyGroup) -> AnyGroup:
        return resting_group.rest(group, self._published.get(key))

    @property
    def on_stored(self) -> Callable[[GroupKey, list[Any]], None] | None:
        """Told each batch of records an actor stored (metrics/: rebalances counted)."""
        return self._settings.stored

    @on_stored.setter
    def on_stored(self, stored: Callable[[GroupKey, list[Any]], None] | None) -> None:
        self._settings = dataclasses.replace(self._settings, stored=stored)  # later actors

    def _publish(self, key: GroupKey, published: GroupSnapshot) -> None:
        self._published[key] = published
        if self._read_for_metrics:
            self._read_for_metrics.pop(key, None)  # older than this, now

    def _died(self, key: GroupKey) -> None:
        # what was said of it may be stale now: read from the log when next asked or listed
        self._published.pop(key, None)
        self._summaries.pop(key, None)

    def _forget(self, key: GroupKey, group: AnyGroup) -> None:
        """A group no longer resting; a listed one keeps its summary (what the log says)."""
        self._published.pop(key, None)
        if key in self._summaries:
            summary = summary_of(key.group_id, group)
            if summary is None:  # deleted: nothing kept of it
                del self._summaries[key]
            else:
                self._summaries[key] = summary

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
                    in_use = self.in_use(key)
                    try:
                        answers.append(await self.ask(key, op))
                    except Exception:  # one group's fault stays its own
                        log.exception("group %s: %s failed", key.group_id, type(op).__name__)
                    self._drop_if_unused(key, in_use)  # visited only: not kept
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
            in_use = self.in_use(key)
            answer = await self.ask(key, ExpireOffsetsOp(retention_ms))
            self._drop_if_unused(key, in_use)
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
        stored = self._log.keys()
        return self._resume(key for key in stored if self._has_members(key, now))

    def _has_members(self, key: GroupKey, now: int) -> bool:
        """Whether the group had members (its session timers must run)."""
        group = stored_membership(self._log, key, now, self._config)
        return group is not None and bool(group.members)

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

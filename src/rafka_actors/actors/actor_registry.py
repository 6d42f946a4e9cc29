"""The registry base: finds or starts the actor of a key, and supervises them all.

`ask(key, op)` is the one way in: it posts the op with a one-shot reply to the key's actor,
starting one in the registry's nursery if none runs, and waits for the answer (a full mailbox
makes it wait for room: backpressure). A kind may answer a pure read without the mailbox
(`_read`: a group's published snapshot).

Start: an actor starts from the state its key rests with, else from what the kind loads
(`_load`: a group read from the log, a transaction kept in memory). Stop: an actor stops idle
by handing its state to `_stopped` in the same turn as it closes its mailbox
(mailbox_actor.py), so nobody can post to it in between; a request that races with the stop
finds the mailbox closed and is sent to a fresh actor.

Passivation keeps memory with the keys in use: a stopped actor's state rests here for
`passivate_after_s`, so that its next request starts a new actor without reading the log;
the passivation sweep then drops it (`_forget` tells the kind). With a delay of 0 nothing
rests.

Supervision: an actor that dies stays dead alone. Its siblings (this nursery) never notice; it
has answered everything it held, nothing of it rests (`_died` tells the kind), and the next
request for its key starts a fresh one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Generic, TypeVar

import trio

from .. import telemetry
from .mailbox_actor import Envelope, MailboxActor
from .reply import ReplySlot

log = logging.getLogger(__name__)

K = TypeVar("K", bound=tuple[int, str])
S = TypeVar("S")

# Resting states the passivation sweep looks at between checkpoints, so that requests are
# answered during a sweep over 100 000 keys.
SWEEP_CHUNK: Final = 512


@dataclass(slots=True)
class Resting(Generic[S]):
    state: S
    since: float  # trio time it came to rest


class ActorRegistry(Generic[K, S]):
    def __init__(
        self, nursery: trio.Nursery, *, passivate_after_s: float = 0.0, idle_grace_s: float = 0.0
    ) -> None:
        self._nursery = nursery
        self._passivate_after_s = passivate_after_s
        self._idle_grace_s = idle_grace_s  # how long an idle actor waits for mail
        self._running: dict[K, MailboxActor[K, S]] = {}
        self._resting: dict[K, Resting[S]] = {}
        self._visited: set[K] = set()  # running for a sweep's visit only: not to rest
        if passivate_after_s > 0:
            nursery.start_soon(self._passivate_forever)

    # -- what a kind provides ---------------------------------------------------------------

    def _new_actor(self, key: K, resting: Resting[S] | None) -> MailboxActor[K, S]:
        """The key's actor, starting from `resting` if given, else from what is stored."""
        raise NotImplementedError

    def _read(self, key: K, op: Any) -> Any:
        """The answer to a pure read without the mailbox, or None: ask the actor."""
        return None

    def _at_rest(self, key: K, state: S) -> S:
        """What of a stopped actor's state rests here (its resting form); `_new_actor` gets
        it back."""
        return state

    def _forget(self, key: K, state: S) -> None:
        """The key's state no longer rests here."""

    def _died(self, key: K) -> None:
        """The key's actor died: what was published of it may be stale."""

    # -- the way in ---------------------------------------------------------------------------

    async def ask(self, key: K, op: Any) -> Any:
        """The answer of the key's actor to `op` (or of its published state, for a pure
        read). Waits for room in a full mailbox (backpressure)."""
        answer = self._read(key, op)
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

    def _start(self, key: K) -> MailboxActor[K, S]:
        resting = self._resting.pop(key, None)
        actor = self._new_actor(key, resting)
        actor.on_stop = partial(self._stopped, actor)
        actor.idle_grace_s = self._grace_for(resting)
        self._running[key] = actor
        self._nursery.start_soon(self._supervise, actor)
        return actor

    def _grace_for(self, resting: Resting[S] | None) -> float:
        """The idle grace of a key asked again within the grace of coming to rest (a burst:
        a consumer's commits); none for a key asked once (100 000 groups created, one commit
        each, would each pay a timer and a wake-up, and hold a task for the grace)."""
        grace = self._idle_grace_s
        if grace and resting is not None and trio.current_time() - resting.since <= grace:
            return grace
        return 0.0

    def _stopped(self, actor: MailboxActor[K, S], state: S) -> None:
        """`actor` stopped idle, in the turn it closed its mailbox: rest its state."""
        key = actor.key
        if self._running.get(key) is actor:
            del self._running[key]
        if self._visited and key in self._visited:
            self._visited.discard(key)
            self._drop(key, state)
            return
        self._rest(key, state)

    async def _supervise(self, actor: MailboxActor[K, S]) -> None:
        key = actor.key
        try:
            await actor.run()
        except Exception:
            log.exception("%s: actor died; it restarts on the next request", actor.describe())
            self._resting.pop(key, None)
            self._died(key)
        finally:  # died or cancelled (the registry shuts down): no longer running
            if self._running.get(key) is actor:
                del self._running[key]
                self._visited.discard(key)

    def _resume(self, keys: Iterable[K]) -> int:
        """Start the actors of `keys` that do not run yet; how many."""
        started = 0
        for key in keys:
            if key not in self._running:
                self._start(key)
                started += 1
        return started

    # -- passivation ----------------------------------------------------------------------------

    def _rest(self, key: K, state: S) -> None:
        """Keep a stopped actor's state for the passivation delay (not a key without one:
        asking about unknown keys must leave nothing behind)."""
        if state is None or not self._passivate_after_s:
            self._drop(key, state)
        else:
            self._resting[key] = Resting(self._at_rest(key, state), trio.current_time())

    def _drop(self, key: K, state: S) -> None:
        self._resting.pop(key, None)
        self._forget(key, state)

    def _drop_if_unused(self, key: K, was_in_use: bool) -> None:
        """Drop what a visit of an unused key (a sweep) left resting: not kept in memory.
        An actor still lingering for more mail stops now and does not rest."""
        if was_in_use:
            return
        actor = self._running.get(key)
        if actor is not None:
            self._visited.add(key)
            actor.stop_lingering()
            return
        resting = self._resting.get(key)
        if resting is not None:
            self._drop(key, resting.state)

    def in_use(self, key: K) -> bool:
        return key in self._running or key in self._resting

    async def _passivate_forever(self) -> None:
        """Every half delay, drop the states resting for the whole delay: one sweep instead
        of a timer per key."""
        while True:
            await trio.sleep(self._passivate_after_s / 2)
            await self._sweep(trio.current_time() - self._passivate_after_s)

    async def _sweep(self, cutoff: float) -> None:
        # A snapshot of the keys, which ends with the pass (kept while the sweeper sleeps, it
        # would keep every state dropped here alive for another half delay).
        keys = list(self._resting)
        for start in range(0, len(keys), SWEEP_CHUNK):
            if start:
                await trio.lowlevel.checkpoint()
            for key in keys[start : start + SWEEP_CHUNK]:
                resting = self._resting.get(key)
                if resting is not None and resting.since <= cutoff:
                    self._drop(key, resting.state)

    # -- counts ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        """How many keys are held in memory: running actors and resting states."""
        return len(self._running) + len(self._resting)

    def running(self) -> int:
        """How many actors run now."""
        return len(self._running)

    def resting(self) -> int:
        """How many stopped actors' states are kept for their next request."""
        return len(self._resting)

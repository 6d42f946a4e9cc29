"""What a handler's answer waits for: the steps the connection takes on a handler's behalf.

API handlers (apis/) are plain functions: a request in, and out either the response or a step
naming what must happen first, with `then`, the plain function that takes the step's outcome
to the response (or to the next step). Only the connection (connection.py) takes steps, with
`settle`; a handler never awaits, so each is testable by calling it and looking at what it
returned, and the group APIs' only way to a group is `Ask`: an op in a group's mailbox
(actors/actor_registry.py), its answer back. A handler is sans-IO unless it says otherwise
(`@file_io`, context.py): Produce appends to a partition log and Fetch reads one on the event
loop, through the data plane, where the page cache makes that quick.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from ..ids import GroupKey

if TYPE_CHECKING:
    from ..storage.data_plane import PartitionKey
    from .context import BrokerContext


class Step:
    """Something a handler's answer waits for; `take` waits, then hands the outcome to the
    step's `then` and returns what that gives (the response, or the next step)."""

    __slots__ = ()

    async def take(self, ctx: BrokerContext) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Ask(Step):
    """Ask each group's actor its op, in order; `then` gets their answers, in that order."""

    asks: tuple[tuple[GroupKey, Any], ...]
    then: Callable[[list[Any]], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        registry = ctx.registry()
        return self.then([await registry.ask(key, op) for key, op in self.asks])


def ask(org_id: int, group_id: str, op: Any, then: Callable[[Any], Any]) -> Ask:
    """Ask one group's actor; `then` gets its answer."""
    return Ask(((GroupKey(org_id, group_id), op),), lambda answers: then(answers[0]))


def ask_each(
    org_id: int, ops: Sequence[tuple[str | None, Any]], then: Callable[[list[Any]], Any]
) -> Ask | Any:
    """Ask each (group id, op) in turn, but for the pairs without an op (a null or refused
    id, answered without an actor); `then` gets one answer per pair, None for those."""
    asked = [
        (GroupKey(org_id, group_id), op)
        for group_id, op in ops
        if group_id is not None and op is not None
    ]
    if not asked:
        return then([None] * len(ops))

    def answered(answers: list[Any]) -> Any:
        each = iter(answers)
        return then(
            [None if group_id is None or op is None else next(each) for group_id, op in ops]
        )

    return Ask(tuple(asked), answered)


@dataclass(frozen=True, slots=True)
class AwaitAppend(Step):
    """A long poll (Fetch): wait up to `wait_s` for an append to one of `keys`; `then` gets
    the seconds left of the wait."""

    keys: Sequence[PartitionKey]
    wait_s: float
    then: Callable[[float], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        deadline = trio.current_time() + self.wait_s
        await ctx.data.wait_for_append(self.keys, deadline)
        return self.then(max(0.0, deadline - trio.current_time()))


@dataclass(frozen=True, slots=True)
class InWorkerThread(Step):
    """Run `work()` in a worker thread under `limiter` (CPU-heavy, e.g. password hashing);
    `then` gets its result (an exception it raises is raised here)."""

    work: Callable[[], Any]
    limiter: trio.CapacityLimiter
    then: Callable[[Any], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        return self.then(await trio.to_thread.run_sync(self.work, limiter=self.limiter))


@dataclass(frozen=True, slots=True)
class Awaited(Step):
    """Await `call(ctx)` (a data-plane write that waits for its fsync); `then` gets what it
    returns."""

    call: Callable[[BrokerContext], Awaitable[Any]]
    then: Callable[[Any], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        return self.then(await self.call(ctx))


@dataclass(frozen=True, slots=True)
class Pause(Step):
    """Answer `seconds` later (a failed login's delay); `then` gets None."""

    seconds: float
    then: Callable[[None], Any]

    async def take(self, ctx: BrokerContext) -> Any:
        await trio.sleep(self.seconds)
        return self.then(None)


async def settle(answer: Any, ctx: BrokerContext) -> Any:
    """Take the steps `answer` names, one after another, until it is a response."""
    while isinstance(answer, Step):
        answer = await answer.take(ctx)  # what it waited for, through its `then`
    return answer

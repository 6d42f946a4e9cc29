"""An idle actor's turn, run on the task that asks (issue 53, lever 1).

When the actor's task waits for mail with nothing queued, nothing due and no turn under way,
the asking task takes the actor's turn token and runs the actor's own `turn` over its
envelope: the same steps, the same append, the same reply slot, and one entry point
(`ActorRegistry.ask`). The actor task stays parked in its mailbox: a request no longer costs
a pass of the scheduler to wake it and one to wake the caller. Otherwise (busy, mail queued,
a timer due) the envelope goes to the mailbox as before: timers and queued work stay with the
actor task, which takes the token back before its own next turn (mailbox_actor.py). A turn
that has started finishes even if the asking task is cancelled: it is shielded, since its
records may be stored and its state must then be the actor's.

The figure (side by side with the build before it, default `coordinator.log.fsync=always`,
`bench/request_cost.py --ops heartbeat --brokers 'new=rafka-actors,main=rafka-actors@<main's
python>'`, 3 runs in both orders): a member's heartbeats cost 0.58-0.82x the broker CPU
(median 153-272 us against 187-399 us) at 1.21-1.91x the rate; 16 heartbeaters in 16 groups
0.95x the CPU at 1.17x the rate. A commit, whose turn waits for its fsync, is within the noise
(docs/performance.md, "Issue 53, lever 1").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from .mailbox_actor import Envelope, MailboxActor


def may_turn_here(actor: MailboxActor[Any, Any]) -> bool:
    """The actor's task waits for mail, with nothing due or under way. (A receiver waits only
    on an empty mailbox, and a sender hands its envelope to it at once: then it no longer
    waits, though it has not run yet.)"""
    return not actor.turning and actor.parked_in_mailbox() and not actor.due()


async def turn_here(actor: MailboxActor[Any, Any], envelope: Envelope) -> None:
    """Run the actor's turn over `envelope` on this task (`may_turn_here` just said so, with
    no checkpoint since)."""
    actor.turning = True
    try:
        with trio.CancelScope(shield=True):
            await actor.turn(False, [envelope])
    finally:
        actor.give_turn_back()

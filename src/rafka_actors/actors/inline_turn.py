"""An idle actor's turn, run on the task that asks (issue 53, lever 1).

When the actor's task waits for mail with nothing queued, nothing due and no turn under way,
the asking task takes the actor's turn token and runs the actor's own `turn` over its
envelope: the same steps, the same append, the same reply slot; the actor task, parked in its
mailbox, is not woken. Otherwise the envelope goes to the mailbox as before. A turn that has
started finishes even if the asking task is cancelled (shielded: its records may be stored).
Timers and queued work stay with the actor task, which takes the token back for its own turns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from .mailbox_actor import Envelope, MailboxActor


def may_turn_here(actor: MailboxActor[Any, Any]) -> bool:
    """The actor's task waits for mail, with nothing queued, due or under way."""
    if actor.turning:
        return False
    stats = actor.inbox_statistics()
    return (
        stats.tasks_waiting_receive == 1 and stats.current_buffer_used == 0 and not actor.due()
    )


async def turn_here(actor: MailboxActor[Any, Any], envelope: Envelope) -> None:
    """Run the actor's turn over `envelope` on this task (`may_turn_here` just said so, with
    no checkpoint since)."""
    actor.take_turn()
    try:
        with trio.CancelScope(shield=True):
            await actor.turn(False, [envelope])
    finally:
        actor.give_turn_back()

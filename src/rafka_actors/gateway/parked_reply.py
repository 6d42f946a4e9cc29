"""A reply from a group's actor, waited for by the reactor in place of a task.

Some requests wait for other members: a JoinGroup until every member has joined, a
follower's SyncGroup for the leader's. So the reactor (reactor.py) cannot answer them on the
spot, and handed to the connection's task each cost the task a wake-up for the reply and
another for the connection's next request, which the task then read for itself. In a
rebalance of 1 000 members the broker was busy for 0.22 s of the 0.26 s from the last
JoinGroup to the last assignment, most of it in the connection tasks' machinery
(docs/performance-history.md). A LeaveGroup and a KIP-848 ConsumerGroupHeartbeat always go through
the actor's mailbox, and so does a Heartbeat the actor cannot answer inline: one read in the
same pass as another member's JoinGroup finds that join in the mailbox, untaken. In one run
of the benchmark's (f) (1 000 and 100 members forming groups and rebalancing) 445
heartbeats came so, and each took its connection into its task for the JoinGroup and
SyncGroup after it too. They all wait here the same way (a Heartbeat in
`ask_group_light`).

Instead the reactor drives the handler's coroutine itself, with the connection's
`ParkedReply` in `conn.parked_reply`: `ask_group` (apis/groups.py) posts the op to the group's
actor with that slot to reply to, and awaits the slot, which suspends the coroutine by
yielding the slot itself to the reactor. The reactor keeps the coroutine and stops reading
the connection (as Kafka mutes a channel until its reply is sent, so replies keep the order
of the requests). The actor answers it as any waiter; filling the slot calls `on_fill`, and
the reactor, woken, sends the coroutine on to its encoded reply, writes it and reads the
connection again. A connection that goes while its request waits forgets the slot: a later
answer goes nowhere, as a task's ReplySlot's does.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any


class ParkedReply:
    __slots__ = ("done", "on_fill", "owner", "value")

    def __init__(self, owner: Any, on_fill: Callable[[ParkedReply], None]) -> None:
        self.owner = owner  # the reactor's record of the connection
        self.on_fill = on_fill
        self.value: Any = None
        self.done = False

    def send_nowait(self, value: Any, /) -> None:
        if not self.done:  # the first answer counts, and none after `forget`
            self.done = True
            self.value = value
            self.on_fill(self)

    def forget(self) -> None:
        """The connection is gone: drop any later answer."""
        self.done = True

    def __await__(self) -> Generator[ParkedReply, None, Any]:
        yield self  # to the reactor, which sends None back once the slot is filled
        return self.value

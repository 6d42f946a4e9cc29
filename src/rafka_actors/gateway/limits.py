"""Connection limits: in total, per client address and per authenticated user.

Pure bookkeeping, no I/O. The server asks `admit(ip)` when it accepts a connection and calls
`release(ip, user)` when the connection ends; SASL asks `bind_user(name)` at authentication.
Kafka refuses a connection over `max.connections.per.ip` by closing it at once; we do the same
for `max.connections` (Kafka makes the acceptor wait instead, which lets a flood hold the
accept queue) and for `max.connections.per.user` (not a Kafka setting; the SASL exchange fails).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import trio


@dataclass(slots=True)
class ConnectionLimits:
    max_total: int
    max_per_ip: int
    max_per_user: int
    total: int = 0
    per_ip: Counter[str] = field(default_factory=Counter)
    per_user: Counter[str] = field(default_factory=Counter)

    def admit(self, ip: str) -> str | None:
        """Count a new connection from `ip`, or say why it is refused (nothing counted)."""
        if self.total >= self.max_total:
            return f"max.connections ({self.max_total}) reached"
        if self.per_ip[ip] >= self.max_per_ip:
            return f"max.connections.per.ip ({self.max_per_ip}) reached for {ip}"
        self.total += 1
        self.per_ip[ip] += 1
        return None

    def bind_user(self, name: str) -> bool:
        if self.per_user[name] >= self.max_per_user:
            return False
        self.per_user[name] += 1
        return True

    def release(self, ip: str, user: str | None) -> None:
        self.total -= 1
        _decrement(self.per_ip, ip)
        if user is not None:
            _decrement(self.per_user, user)


def _decrement(counts: Counter[str], key: str) -> None:
    # drop zero counts so a stream of one-off clients doesn't grow the table forever
    if counts[key] <= 1:
        del counts[key]
    else:
        counts[key] -= 1


class ByteBudget:
    """Kafka's `queued.max.request.bytes`: bytes of big request frames being read or waiting
    for their answer, broker-wide. A connection waits for room before it reads a big frame's
    body (so a flood of maximum-size frames is read a few at a time, not all at once into
    memory); one frame always fits when nothing else is held, however big."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._freed = trio.Event()

    async def acquire(self, size: int) -> None:
        while self.used and self.used + size > self.capacity:
            await self._freed.wait()
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size
        self._freed.set()
        self._freed = trio.Event()

"""Start-up's writes, held until the broker knows it may write.

Opening the logs finds things to write before serving: a torn tail to cut, segments after
damage to delete, the leftovers of an interrupted compaction or topic creation to remove, a
first segment to create, a producer-state snapshot that no longer fits its log to delete, the
active segments to open for appends. A start can still be refused after that: a log opened
later may be damaged. So the opens only read, and hand each write here; the broker applies
them all once every log has checked out, with the data dir locked and the listeners bound
(broker.py), and a refused start leaves the data dir as it found it. A write logs what it
does when it does it, so a refused start never claims a repair it did not make.

Outside the broker (tests, benchmarks, tools), `StartupWrites.now()` writes at once, as the
opens did before; that is what an open given no `writes` uses.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["StartupWrites"]

Write = Callable[[], None]


class StartupWrites:
    def __init__(self, *, hold: bool = True) -> None:
        self._held: list[Write] | None = [] if hold else None

    @classmethod
    def now(cls) -> StartupWrites:
        """Writes made as they are added."""
        return cls(hold=False)

    def add(self, write: Write) -> None:
        if self._held is None:
            write()
        else:
            self._held.append(write)

    def apply(self) -> None:
        """Make the held writes, in the order they were added; later ones are made at once."""
        held, self._held = self._held or [], None
        for write in held:
            write()

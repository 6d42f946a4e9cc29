"""Producer ids for InitProducerId, unique across restarts.

Ids are handed out from blocks, as Kafka's controller does: the file `producer-ids` holds the
first id of the next unclaimed block and is advanced (atomically, fsynced) before any id of a
new block is used, so a crash can skip ids but never hand one out twice.
"""

from __future__ import annotations

import os
from pathlib import Path

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._next = self._read_claimed()
        self._limit = self._next  # nothing of the claimed block is ours yet

    def _read_claimed(self) -> int:
        try:
            return int(self._path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def _claim_block(self) -> None:
        limit = self._next + BLOCK_SIZE
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(limit))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        self._limit = limit

    def allocate(self) -> int:
        if self._next >= self._limit:
            self._claim_block()
        producer_id = self._next
        self._next += 1
        return producer_id

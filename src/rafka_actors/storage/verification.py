"""A producer's batch being verified with the transaction coordinator (KIP-890): Kafka's
VerificationStateEntry and VerificationGuard, as one partition's producer state keeps them
(producer_state.py).

The guard is a number unique in the process that the batch's append must present; a marker
written for the producer meanwhile drops the verification, so the append is refused instead
of opening a transaction after its end. While a batch is verified the lowest sequence seen
must be appended first (a higher one would be out of order once it is), and a
transactions-v2 producer new to the partition starts at sequence 0. Pure, no I/O.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Final

NO_GUARD: Final = 0  # the guard of a batch whose transaction was already open: none needed
_GUARDS = itertools.count(NO_GUARD + 1)


@dataclass(slots=True)
class Verification:
    guard: int
    epoch: int
    lowest_seq: int  # the lowest sequence seen while verifying (at `epoch`)
    epoch_bump: bool  # the producer speaks transactions v2
    started_ms: int

    @classmethod
    def start(cls, epoch: int, sequence: int, epoch_bump: bool, now_ms: int) -> Verification:
        return cls(next(_GUARDS), epoch, sequence, epoch_bump, now_ms)

    def saw(self, epoch: int, sequence: int) -> None:
        """Another batch of the producer is verified: a newer epoch restarts the count."""
        if epoch == self.epoch and sequence < self.lowest_seq:
            self.lowest_seq = sequence
        elif epoch > self.epoch:
            self.epoch, self.lowest_seq = epoch, sequence

    def out_of_order(self, first: int, new_here: bool) -> str | None:
        """Why a batch starting at sequence `first` is out of order now (None if it is not):
        `new_here`, the producer has no batch in the partition."""
        if self.epoch_bump and first != 0 and new_here:
            return f"sequence {first}: a v2 producer new here starts at 0"
        if first > self.lowest_seq:
            return f"sequence {first}, while {self.lowest_seq} is being verified"
        return None

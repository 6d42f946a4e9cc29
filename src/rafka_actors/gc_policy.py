"""Python's cycle collector, set for a broker that holds many long-lived objects.

CPython's defaults (a young collection every 700 allocations, full ones as the heap grows by
a quarter) suit short scripts. A broker keeps every group, member and offset alive for
hours, and each full collection walks all of them: with 45 000 groups held, creating more
ran 35-55% slower than with the settings below. Start-up (the coordinator log's replay)
allocates millions of objects that all stay, so the collector is off until the broker
listens; then what start-up built is frozen out of every later collection, and full
collections run less often. Cyclic garbage is still collected, only in bigger batches.

Young and middle collections stay small, though: how long one takes grows faster than its
size once the objects it walks no longer fit the caches (their referents are spread over the
whole heap). With 100 000 groups, young collections every 50 000 allocations took 34-45 ms
and a middle one 160-240 ms; every 10 000, 6-8 ms and 40-61 ms, groups created as fast, and
full collections as rare as before (`bench/gc_pauses.py`).
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)

# allocations between young collections; young collections per middle one; middle per full
THRESHOLDS = (10_000, 20, 50)


def starting() -> None:
    gc.disable()


def serving() -> None:
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    gc.enable()
    log.info(
        "cycle collector: %d objects from start-up frozen, thresholds %s",
        gc.get_freeze_count(),
        THRESHOLDS,
    )

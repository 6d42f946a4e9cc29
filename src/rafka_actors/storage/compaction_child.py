"""The coordinator log's compaction, in a child process of the broker.

Compaction reads every sealed entry: a 64 MiB segment of 1.2 million commits took 2.9 s.
In a worker thread it would hold the GIL against the event loop for those seconds, which
gets it back only every switch interval (5 ms). Here it runs beside the loop instead
(`CoordinatorSegments.compact_sealed_in_child`), at a lower priority (NICENESS).

The broker writes a JSON request to stdin (the directory, the sealed segments, the settings,
the importable name of the compaction key function); this process rewrites the files as
`CoordinatorSegments.compact_sealed` would and answers on stdout with the compaction's
figures and the sealed segments as they are now. Warnings go to stderr, which the broker
logs. A failure exits non-zero, with the files in a state that replays to the same groups
(module docstring of coordinator_segments, "Compaction").

If the broker dies, this process is killed with it (``PR_SET_PDEATHSIG``), as its thread
would have been: a broker started again must not meet a compaction still changing its
directory. Being killed mid-way is what a crash does to compaction, which it survives.
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from .coordinator_segments import Compaction, segment_from_row, segment_row

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Below the broker and its clients: on a busy machine compaction takes what they leave (as
# Kafka's log cleaner can be throttled), since nothing waits for it.
NICENESS = 10
GONE = 75  # the exit status when the broker was gone before this process could follow it


def die_with(parent: int) -> None:
    """Be killed when `parent` (the thread that started us, which waits for us) dies; exit
    at once if it is gone already."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        sys.exit(GONE)


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    request = json.load(sys.stdin)
    die_with(request["parent"])
    os.nice(NICENESS)
    module, _, name = request["key_of"].partition(":")
    key_of = getattr(importlib.import_module(module), name)
    directory = Path(request["directory"])
    sealed = [segment_from_row(directory, row) for row in request["sealed"]]
    compaction = Compaction(
        directory, sealed, threading.Lock(), request["segment_bytes"], request["skip_corruption"]
    )
    stats = compaction.run(
        key_of,
        now_ms=request["now_ms"],
        tombstone_retention_ms=request["tombstone_retention_ms"],
    )
    answer = {"stats": dataclasses.asdict(stats), "sealed": [segment_row(s) for s in sealed]}
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

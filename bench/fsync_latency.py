"""What one durable append costs the disk: a small write and its flush, four ways.

Under `coordinator.log.fsync=always` a lone committer waits for a write and an fsync of the
coordinator log per commit, so their latency bounds its commits/s. An fsync after a write that
grew the file also has to commit the file's new size (on ext4, through the journal); inside
space already given to the file it flushes only the data. That is why the log preallocates its
active segment (`coordinator.log.preallocate.bytes`, storage/coordinator_segments.py). Each
way writes `--size` bytes at the end of the previous ones and flushes, `--rounds` times, in a
fresh file under `--dir` (default: a temp dir beside the current directory, so on the same
file system as a data dir made there); ways alternate over `--passes`, so a drift of the
machine shows in the spread. Printed: median and p90 latency per way.

    .venv/bin/python bench/fsync_latency.py [--dir D] [--rounds 2000] [--size 120] [--passes 2]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

# (name, grow the file ahead of the writes?, flush)
WAYS: tuple[tuple[str, bool, Callable[[int], None]], ...] = (
    ("append + fsync", False, os.fsync),
    ("append + fdatasync", False, os.fdatasync),
    ("preallocated + fsync", True, os.fsync),
    ("preallocated + fdatasync", True, os.fdatasync),
)


def latencies(
    directory: str, preallocate: bool, flush: Callable[[int], None], rounds: int, size: int
) -> list[float]:
    """Seconds per write + flush of `size` bytes, appended one after another."""
    record = b"x" * size
    fd, path = tempfile.mkstemp(dir=directory)
    try:
        if preallocate:
            os.posix_fallocate(fd, 0, rounds * size)
            os.fsync(fd)
        got = []
        for i in range(rounds):
            started = time.perf_counter()
            os.pwrite(fd, record, i * size)
            flush(fd)
            got.append(time.perf_counter() - started)
        return got
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", help="where to write (default: a temp dir under the cwd)")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--size", type=int, default=120, help="bytes per write")
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/fsync_latency.py', *sys.argv[1:]])}")
    with tempfile.TemporaryDirectory(dir=args.dir or os.getcwd()) as directory:
        runs: dict[str, list[list[float]]] = {name: [] for name, _, _ in WAYS}
        for _ in range(args.passes):
            for name, preallocate, flush in WAYS:
                runs[name].append(latencies(directory, preallocate, flush, args.rounds, args.size))
    for name, passes in runs.items():
        medians = [statistics.median(p) * 1e6 for p in passes]
        p90s = [statistics.quantiles(p, n=10)[-1] * 1e6 for p in passes]
        print(
            f"{name:>25}: median {', '.join(f'{m:.1f}' for m in medians)} us; "
            f"p90 {', '.join(f'{p:.1f}' for p in p90s)} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

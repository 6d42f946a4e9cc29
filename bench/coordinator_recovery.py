"""Recovery time of the coordinator log: write N OffsetCommit records, time the replay.

Writes N commit records (1 000 groups x 100 partitions, cycled, so compaction-worthy but
uncompacted) straight into the segment files, as workload (h) of `bench/run.py` does,
then times `DurableCoordinatorLog.open` alone: (h) times a whole broker start-up.

    .venv/bin/python bench/coordinator_recovery.py [--records 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.scale_workloads import write_commit_log
from rafka_actors.storage.durable_log import DurableCoordinatorLog


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--records", type=int, default=1_000_000)
    args.add_argument("--runs", type=int, default=3)
    opts = args.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        size = write_commit_log(Path(tmp), opts.records)
        times = []
        for _ in range(opts.runs):
            start = time.perf_counter()
            log = DurableCoordinatorLog.open(Path(tmp))
            times.append(time.perf_counter() - start)
            groups = len(log.keys())
            log.close()
    print(f"cores: {os.cpu_count()}  command: {' '.join(sys.argv)}")
    print(f"{opts.records} records, {size / 1e6:.1f} MB, {groups} groups")
    print(
        f"replay s: min {min(times):.2f} median {statistics.median(times):.2f} "
        f"max {max(times):.2f}  -> {opts.records / statistics.median(times):,.0f} records/s"
    )


if __name__ == "__main__":
    main()

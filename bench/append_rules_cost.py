"""CPU cost of DataPlane.append per batch under a topic's configs (storage/append_rules.py).

One 100-record batch (100-byte values) appended back to back to a one-partition topic in a
temp dir, in this process: no sockets, no request decoding. CPU time (process_time), so the
figure holds on a loaded machine better than wall time; compare within one run, and run the
same script with another checkout's Python to compare branches. Each case prints the median
and minimum of --rounds rounds.

    .venv/bin/python bench/append_rules_cost.py [--appends 5000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.batch_builder import build_batch

from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.record_batch import split_batches

# (label, topic configs, the producer's codec: 0 none, 3 lz4)
CASES = [
    ("defaults (CreateTime, producer)", {}, 0),
    ("LogAppendTime", {"message.timestamp.type": "LogAppendTime"}, 0),
    ("compression.type=lz4, producer none", {"compression.type": "lz4"}, 0),
    ("compression.type=lz4, producer lz4 (kept)", {"compression.type": "lz4"}, 3),
    ("compression.type=gzip, producer lz4", {"compression.type": "gzip"}, 3),
]


def _batch(codec: int) -> bytes:
    now = time.time_ns() // 1_000_000
    batch = build_batch([(b"%d" % i, b"x" * 100) for i in range(100)], base_timestamp=now)
    if codec:  # (append_rules' own recompression, only where this branch has it)
        from rafka_actors.storage.batch_records import recompressed

        batch = recompressed(batch, codec, None)
    return batch


def measure(configs: dict[str, str], codec: int, appends: int, rounds: int) -> list[float]:
    views = split_batches(_batch(codec))
    per_append: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        data = DataPlane.open(Path(directory), segment_bytes=1 << 30)
        topic = data.create_topic("t", 1, configs)
        for _ in range(rounds):
            start = time.process_time()
            for _ in range(appends):
                data.append(topic, 0, views)
            per_append.append((time.process_time() - start) / appends * 1e6)
        data.close()
    return per_append


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--appends", type=int, default=5000)
    args.add_argument("--rounds", type=int, default=9)
    args.add_argument("--defaults-only", action="store_true", help="(a branch without the rules)")
    opts = args.parse_args()
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    for label, configs, codec in CASES[:1] if opts.defaults_only else CASES:
        figures = measure(configs, codec, opts.appends, opts.rounds)
        print(
            f"{label:44} median {statistics.median(figures):7.1f} us/append"
            f"  min {min(figures):7.1f}"
        )


if __name__ == "__main__":
    main()

"""How long a coordinator-log segment of non-offset records takes to open, bulk replay on and off.

The bulk walk (storage/coordinator_segments.py `_BulkWalk`) is made for offset commits; a
segment longer than its 4 MB chunk that holds nothing else (a big KIP-848 group's member
records, a busy share group's acquisitions) once cost it a chunk-wide split per frame. This
writes one segment of `--records` KIP-848 member records to a temp dir and opens it both ways.
Session 35, 107 000 records (4.3 MB): 402 s before the fix, 1.8 s after, 1.2 s entry by entry.

    .venv/bin/python bench/replay_other_records.py [--records 107000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rafka_actors.consumer_group.records import ConsumerMemberMetadataRecord
from rafka_actors.coordinator.latest import LatestRecords
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_records import decode_entry, decode_stored, encode_entry
from rafka_actors.storage.coordinator_segments import CoordinatorSegments
from rafka_actors.storage.entry_replay import EntryReplay


def write_segment(directory: Path, records: int) -> int:
    """One segment of `records` member records; returns its size in bytes."""
    segments = CoordinatorSegments.open(directory, decode_entry, lambda _: None)
    key = GroupKey(0, "g")
    for first in range(0, records, 100):
        segments.append(
            [
                encode_entry(
                    key,
                    ConsumerMemberMetadataRecord(
                        "g", f"m{i}", None, None, "c", "/h", ("t",), None, 1000, None
                    ),
                )
                for i in range(first, min(first + 100, records))
            ]
        )
    segments.close()
    return sum(p.stat().st_size for p in directory.iterdir())


def open_seconds(directory: Path, *, bulk: bool) -> float:
    view: LatestRecords[bytes] = LatestRecords()
    replay = EntryReplay(view, bulk=bulk)
    start = time.perf_counter()
    segments = CoordinatorSegments.open(
        directory, decode_stored, replay.apply_entry, bulk=replay.bulk
    )
    segments.close()
    replay.settle()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=107_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        size = write_segment(Path(tmp), args.records)
        print(f"{args.records} member records, {size} bytes")
        for bulk in (True, False):
            print(f"  bulk={bulk}: {open_seconds(Path(tmp), bulk=bulk):.3f} s")


if __name__ == "__main__":
    main()

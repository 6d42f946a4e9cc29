"""What a group's actor spends publishing its snapshot after a turn (actors/snapshot.py).

A classic group with N committed offsets (default 1 000): `snapshot_of` after a turn that
stored a commit (the offsets are copied for readers), and after one that changed no offset
(the last snapshot's are reused), in microseconds per call, best of --repeat timings.

    .venv/bin/python bench/snapshot_cost.py [--offsets 1000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import timeit

from rafka_actors.actors.snapshot import snapshot_of
from rafka_actors.classic_group.state import ClassicGroup
from rafka_actors.group_common.committed import CommittedOffset

CALLS = 2000


def group_with(offsets: int) -> ClassicGroup:
    group = ClassicGroup("g", "cgp_x")
    for partition in range(offsets):
        group.offsets[("t", partition)] = CommittedOffset(partition, -1, "", 0)
    return group


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--offsets", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(" ".join(["# bench/snapshot_cost.py", shlex.join(sys.argv[1:])]).rstrip())
    group = group_with(args.offsets)
    published = snapshot_of("g", group)

    def after_a_commit() -> None:
        group.offsets[("t", 0)] = CommittedOffset(1, -1, "", 0)
        snapshot_of("g", group)

    def after_no_offset_changed() -> None:
        snapshot_of("g", group, offsets_from=published)

    for name, call in (
        ("after a commit", after_a_commit),
        ("no offset changed", after_no_offset_changed),
    ):
        best = min(timeit.repeat(call, number=CALLS, repeat=args.repeat))
        print(f"snapshot_of, {args.offsets} offsets, {name}: {best / CALLS * 1e6:.1f} us")


if __name__ == "__main__":
    main()

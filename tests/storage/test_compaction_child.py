"""Compaction in a child process (storage/compaction_child.py): the same files and segments
as in process, none of its work in the broker's process, and a failed child handled."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey
from rafka_actors.storage import compaction_child, coordinator_segments
from rafka_actors.storage.coordinator_records import encode_entry, entry_compaction_key
from rafka_actors.storage.coordinator_segments import CoordinatorLogError, CoordinatorSegments
from rafka_actors.storage.durable_log import DurableCoordinatorLog

from .test_coordinator_log_compaction import (
    DAY_MS,
    NOW_MS,
    SCENARIO,
    build,
    commit,
    open_view,
    raw_entries,
    state_of,
)


def in_child(log: CoordinatorSegments, command: list[str] | None = None) -> object:
    return log.compact_sealed_in_child(
        entry_compaction_key, now_ms=NOW_MS, tombstone_retention_ms=DAY_MS, command=command
    )


def segments_of(log: CoordinatorSegments) -> tuple[int, int, int, bool]:
    return (
        log.segment_count,
        log.size_bytes,
        log.dirty_bytes,
        log.needs_compaction(NOW_MS, DAY_MS),
    )


def mtimes(directory: Path) -> list[tuple[str, int]]:
    return [(p.name, p.stat().st_mtime_ns) for p in sorted(directory.glob("*.log"))]


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Path, Path]:
    """The compaction tests' scenario, twice."""
    one, two = tmp_path / "one", tmp_path / "two"
    build(one, SCENARIO)
    shutil.copytree(one, two)  # (mtimes too: the age of tombstones)
    assert mtimes(one) == mtimes(two)
    return one, two


def test_a_child_compacts_exactly_as_the_broker_would(twins: tuple[Path, Path]) -> None:
    here, there = twins
    log_here, view = open_view(here, segment_bytes=1)
    log_there, _ = open_view(there, segment_bytes=1)
    before = state_of(view)
    assert in_child(log_there) == log_here.compact_sealed(
        entry_compaction_key, now_ms=NOW_MS, tombstone_retention_ms=DAY_MS
    )
    assert segments_of(log_there) == segments_of(log_here)
    assert segments_of(log_there)[2:] == (0, False)  # all clean, nothing left to do
    log_here.close()
    log_there.close()
    assert raw_entries(there) == raw_entries(here)
    assert mtimes(there) == mtimes(here)
    assert len(raw_entries(there)) < len(SCENARIO)
    _, reopened = open_view(there, segment_bytes=1)
    assert state_of(reopened) == before


def test_none_of_the_work_is_done_in_the_brokers_process(
    scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def here(*_args: object, **_kw: object) -> None:
        raise AssertionError("compacted in the broker's process")

    monkeypatch.setattr(coordinator_segments.Compaction, "run", here)
    log, view = open_view(scenario_dir, segment_bytes=1)
    before = state_of(view)
    stats = in_child(log)
    log.close()
    assert stats.entries_after < stats.entries_before  # type: ignore[attr-defined]
    _, reopened = open_view(scenario_dir, segment_bytes=1)
    assert state_of(reopened) == before


@pytest.mark.parametrize("done_first", [False, True], ids=["died at once", "died after"])
def test_after_a_failed_child_the_segments_are_read_again(
    scenario_dir: Path, done_first: bool
) -> None:
    """A child that fails, before touching anything or after compacting every file: the
    log takes the directory as it is, goes on appending, and compacts again."""
    work = "from rafka_actors.storage import compaction_child as c; c.main()\n"
    dying = [sys.executable, "-c", (work if done_first else "") + "raise SystemExit(3)"]
    log, view = open_view(scenario_dir, segment_bytes=1)
    before = state_of(view)
    with pytest.raises(CoordinatorLogError, match="exited with 3"):
        in_child(log, dying)
    files = sorted(scenario_dir.glob("*.log"))
    assert log.segment_count == len(files)
    assert log.size_bytes == sum(p.stat().st_size for p in files)
    log.append([encode_entry(*commit(GroupKey(1, "late"), "t", 7))])  # rolls a segment
    in_child(log)
    assert log.dirty_bytes == 0
    log.close()
    _, reopened = open_view(scenario_dir, segment_bytes=1)
    after = state_of(reopened)
    assert after.pop(GroupKey(1, "late"))[1][("t", 0)].offset == 7
    assert after == before


async def test_the_durable_log_compacts_in_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def in_process(*_args: object, **_kw: object) -> None:
        raise AssertionError("compacted in a thread of the broker")

    monkeypatch.setattr(CoordinatorSegments, "compact_sealed", in_process)
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="never", segment_bytes=1)
    key = GroupKey(1, "g")
    for offset in range(5):
        await log.append(key, [OffsetCommitRecord("g", "t", 0, offset, -1, None, 0)])
    stats = await log.compact()
    assert (stats.entries_before, stats.entries_after) == (4, 1)
    assert log.stats.compactions == 1
    log.close()
    reopened = DurableCoordinatorLog.open(tmp_path)
    assert reopened.records_of(key) == [OffsetCommitRecord("g", "t", 0, 4, -1, None, 0)]
    reopened.close()


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "scenario"
    build(directory, SCENARIO)
    return directory


FOLLOWER = """
import sys, time
from rafka_actors.storage.compaction_child import die_with
die_with(int(sys.argv[1]))
print("ready", flush=True)
time.sleep(60)
"""

PARENT = """
import subprocess, sys, os
follower = [sys.executable, "-c", sys.argv[1], str(os.getpid())]
child = subprocess.Popen(follower, stdout=subprocess.PIPE)
assert child.stdout.readline() == b"ready\\n"
print(child.pid, flush=True)
child.wait()
"""


def test_the_child_dies_with_the_broker() -> None:
    """A compaction child outliving a SIGKILLed broker would meet the broker started again in
    the same directory."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, FOLLOWER], stdout=subprocess.PIPE, env=_with_package()
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    for _ in range(500):  # the kernel kills it at once; allow a slow machine 5 s
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        if _zombie(child):
            return
        time.sleep(0.01)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the compaction child outlived its broker")


def test_a_child_whose_broker_is_already_gone_exits() -> None:
    gone = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rafka_actors.storage.compaction_child import die_with; die_with(1)",
        ],
        env=_with_package(),
        check=False,
    )
    assert gone.returncode == compaction_child.GONE


def _with_package() -> dict[str, str]:
    root = str(Path(compaction_child.__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True

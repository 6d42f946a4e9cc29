"""Opening the logs only reads; what recovery writes waits for `StartupWrites.apply`
(startup_writes.py), and the files it creates are 0644 (less the umask), never executable.

Each open below is given a held `StartupWrites` over a data dir whose logs need repairs:
nothing on disk changes (not a byte, not a name) until `apply`, and the logs in memory are
already what they will be once repaired; after `apply` they take appends.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.durable_log import DurableCoordinatorLog
from rafka_actors.storage.partition_log import PartitionLog
from rafka_actors.storage.startup_writes import StartupWrites
from tests.batch_builder import build_batch


def files_of(root: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(root)): (
            -1 if p.is_dir() else p.stat().st_size,
            "" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in sorted(root.rglob("*"))
    }


def batch(n: int) -> bytes:
    return build_batch([(None, b"v%d" % i) for i in range(n)], base_timestamp=1000)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_partition_log_is_repaired_only_when_the_writes_are_made(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    log = PartitionLog.open(directory, segment_bytes=200)
    for _ in range(3):
        log.append([batch(3)])
    log.close()
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 2
    with open(segments[-1], "ab") as f:
        f.write(b"\x00" * 8 + b"torn")  # a torn tail
    before = files_of(tmp_path)

    writes = StartupWrites()
    held = PartitionLog.open(directory, segment_bytes=200, writes=writes)
    assert held.log_end_offset == 9 and held.read(0, 10_000)  # read as it will be once cut
    assert files_of(tmp_path) == before
    with pytest.raises(OSError):
        held.append([batch(1)])  # not open for appends yet
    writes.apply()
    assert segments[-1].stat().st_size == before[f"p/{segments[-1].name}"][0] - 12
    assert held.append([batch(1)]) == 9
    held.close()


def test_a_new_partition_log_is_created_only_when_the_writes_are_made(tmp_path: Path) -> None:
    writes = StartupWrites()
    log = PartitionLog.open(tmp_path / "a" / "0", writes=writes)
    assert not (tmp_path / "a").exists()
    assert log.log_end_offset == 0 and log.read(0, 100) == b""
    log.flush()  # nothing to flush yet, and no failure
    writes.apply()
    assert log.append([batch(2)]) == 0
    log.close()


def test_the_data_plane_defers_its_repairs(tmp_path: Path) -> None:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    topic = data.create_topic("t", 2)
    data.append(topic, 0, [memoryview(batch(2))])
    data.close()
    (tmp_path / "topics" / "t" / "1" / "producer-state.snapshot").write_bytes(b"damaged")
    (tmp_path / "topics" / "half" / "0").mkdir(parents=True)  # a create cut short
    before = files_of(tmp_path)

    writes = StartupWrites()
    held = DataPlane.open(tmp_path, segment_bytes=1 << 20, writes=writes)
    assert held.topics.by_name("t") is not None and held.topics.by_name("half") is None
    held.close(snapshots=False)
    assert files_of(tmp_path) == before  # closing before the writes writes nothing either

    writes = StartupWrites()
    held = DataPlane.open(tmp_path, segment_bytes=1 << 20, writes=writes)
    writes.apply()
    after = files_of(tmp_path)
    assert "topics/half" not in after and "topics/t/1/producer-state.snapshot" not in after
    held.close()


def test_the_coordinator_log_defers_its_repairs(tmp_path: Path) -> None:
    key = GroupKey(0, "g")
    log = DurableCoordinatorLog.open(tmp_path, fsync_policy="never")

    async def commit() -> None:
        await log.append(key, [OffsetCommitRecord("g", "t", 0, 7, -1, None, 1)])

    trio.run(commit)
    active = tmp_path / "coordinator" / f"{0:020d}.log"
    killed = active.read_bytes()  # as a kill leaves it: grown ahead, preallocated zeros
    log.close()
    active.write_bytes(killed)
    grown = len(killed)
    assert grown >= 1 << 20
    (tmp_path / "coordinator" / f"{0:020d}.log.compacting").write_bytes(b"leftover")
    before = files_of(tmp_path)

    writes = StartupWrites()
    held = DurableCoordinatorLog.open(tmp_path, fsync_policy="never", writes=writes)
    assert held.keys() == [key]
    assert files_of(tmp_path) == before
    writes.apply()
    assert active.stat().st_size < grown
    assert not (tmp_path / "coordinator" / f"{0:020d}.log.compacting").exists()
    trio.run(held.append, key, [OffsetCommitRecord("g", "t", 0, 8, -1, None, 2)])
    held.close()

    writes = StartupWrites()
    DurableCoordinatorLog.open(tmp_path / "fresh", writes=writes).close()
    assert not (tmp_path / "fresh").exists()  # a log never started writes nothing


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")}


def test_files_are_created_0644_never_executable(tmp_path: Path, umask_022: None) -> None:
    """Segments used to be created by os.open without a mode: 0777 less the umask, 0755."""
    data = DataPlane.open(tmp_path, segment_bytes=300)
    topic = data.create_topic("t", 1)
    for _ in range(4):  # rolls: new segments
        data.append(topic, 0, [memoryview(batch(3))])
    data.topics.by_name("t").partitions[0].advance_log_start(2)  # type: ignore[union-attr]
    log = DurableCoordinatorLog.open(tmp_path)
    log.close()
    data.close()
    files = {name: mode for name, mode in _modes(tmp_path).items() if (tmp_path / name).is_file()}
    assert len([n for n in files if n.endswith(".log")]) >= 3
    assert files and all(mode == 0o644 for mode in files.values()), files


@pytest.mark.parametrize("step", ["written", "committed", "half-finished"])
def test_a_swap_a_crash_interrupted_is_read_as_finished_and_finished_by_the_writes(
    tmp_path: Path, step: str
) -> None:
    """The log cleaner's swap (segment_swap.py) is finished at open: the open reads the
    segments as the swap will leave them, and only the writes finish it."""
    from tests.storage.test_log_cleaner import _cleaned_but_not_swapped, everything

    _, (first, last), _ = _cleaned_but_not_swapped(tmp_path)
    directory = tmp_path / "p"
    cleaned = directory / f"{first:020d}.log.cleaned"
    swap = directory / f"{first:020d}-{last:020d}.swap"
    if step != "written":
        cleaned.rename(swap)
    if step == "half-finished":
        min(p for p in directory.glob("*.log") if first < int(p.stem) <= last).unlink()
    before = files_of(tmp_path)

    writes = StartupWrites()
    held = PartitionLog.open(directory, segment_bytes=200, writes=writes)
    seen = everything(held)
    assert files_of(tmp_path) == before
    writes.apply()
    assert not list(directory.glob("*.cleaned")) + list(directory.glob("*.swap"))
    assert everything(held) == seen
    held.close()
    again = PartitionLog.open(directory, segment_bytes=200)
    assert everything(again) == seen
    again.close()

"""The data dir's lock (storage/data_dir_lock.py): exclusive across processes and within one,
named by the holder's PID, and freed when the holder dies, even by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rafka_actors.storage.data_dir_lock import DataDirInUse, lock_data_dir

HOLDER = """
import sys, time
from pathlib import Path
from rafka_actors.storage.data_dir_lock import lock_data_dir
lock_data_dir(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(60)
"""


def hold_in_child(directory: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_another_process_holds_it_until_it_is_killed(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    child = hold_in_child(directory)
    try:
        with pytest.raises(DataDirInUse) as refused:
            lock_data_dir(directory)
        assert refused.value.pid == child.pid
        assert str(directory / ".lock") in str(refused.value)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    lock = lock_data_dir(directory)  # the kernel dropped the dead holder's lock
    lock.release()


def test_one_process_holds_it_once(tmp_path: Path) -> None:
    """A second broker of the same process is refused too (POSIX locks would grant it), and
    trying does not drop the first one's lock (closing any descriptor of the file would)."""
    first = lock_data_dir(tmp_path)
    with pytest.raises(DataDirInUse) as refused:
        lock_data_dir(tmp_path)
    assert refused.value.pid == os.getpid()
    done = subprocess.run(
        [sys.executable, "-c", HOLDER, str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode != 0 and "DataDirInUse" in done.stderr  # still ours
    first.release()
    first.release()  # idempotent
    lock_data_dir(tmp_path).release()


def test_the_lock_file_is_empty_and_not_executable(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        lock = lock_data_dir(tmp_path / "new" / "dir")
    finally:
        os.umask(old)
    path = tmp_path / "new" / "dir" / ".lock"
    assert path.stat().st_size == 0 and path.stat().st_mode & 0o777 == 0o644  # (not opened:
    # closing a descriptor of it would drop this process's lock)
    lock.release()


def test_a_data_dir_that_cannot_be_made(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(OSError):
        lock_data_dir(a_file)

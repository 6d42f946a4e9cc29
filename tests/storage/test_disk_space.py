"""The free-space watch: one warning when the data dir's free space falls below
log.dir.free.space.warning.bytes, one line when it is back, and the reading kept."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from rafka_actors.storage import disk_space
from rafka_actors.storage.disk_space import DiskSpace


def test_warns_once_below_the_threshold_and_says_when_space_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    free_blocks = [1000]
    monkeypatch.setattr(
        disk_space.os,
        "statvfs",
        lambda _path: SimpleNamespace(f_bavail=free_blocks[0], f_frsize=4096),
    )
    caplog.set_level(logging.INFO, logger=disk_space.__name__)
    space = DiskSpace(tmp_path, warn_below_bytes=500 * 4096)
    assert space.free_bytes is None
    for blocks in (1000, 400, 300, 200, 600, 700):
        free_blocks[0] = blocks
        assert space.check() == blocks * 4096
    assert space.free_bytes == 700 * 4096
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(lines) == 2
    assert lines[0][0] == "WARNING" and "1.6 MiB free, below log.dir.free.space" in lines[0][1]
    assert lines[1] == ("INFO", f"{tmp_path} has 2.3 MiB free again")


def test_a_threshold_of_zero_never_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    space = DiskSpace(tmp_path, warn_below_bytes=0)
    free = space.check()
    assert free is not None and free == space.free_bytes
    assert free > 0
    assert not caplog.records

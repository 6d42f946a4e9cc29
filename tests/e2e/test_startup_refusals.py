"""`rafka-actors serve` refuses a user's mistake in one line, with the mistake's own exit status
and no traceback unless --debug (refusals.py): a taken port, an unusable data dir, a bad
setting's key or value, a missing TLS file, a damaged coordinator log. With
coordinator.log.skip.corruption the damaged bytes are skipped, and the warning names the groups
and offsets they held.

The command runs in this process (`cli.main`), as the console script would, but for one run
as a child process that checks what the operator really sees on stderr.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rafka_actors.cli import main
from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey
from rafka_actors.storage.durable_log import DurableCoordinatorLog

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _collector_back() -> Iterator[None]:
    """`serve` turns the cycle collector off until it listens (gc_policy.py); a refused start
    never gets there."""
    yield
    gc.enable()


def serve(data_dir: Path, *args: str) -> int:
    return main(["serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), *args])


def refusal(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    """The one error line of the refusal."""
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert errors[0].getMessage().startswith("cannot start: ")
    return errors[0]


def test_a_taken_port(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status = main(["serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path)])
    assert status == 69
    line = refusal(caplog)
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line.getMessage()
    assert "--listen HOST:PORT" in line.getMessage()
    assert line.exc_info is None


def test_an_unusable_data_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a directory")
    assert serve(a_file) == 73
    message = refusal(caplog).getMessage()
    assert f"cannot use the data dir {a_file}: it is not a directory" in message
    assert "--data-dir DIR" in message


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("group.min.sesion.timeout.ms=6000", "did you mean group.min.session.timeout.ms?"),
        ("group.min.session.timeout.ms=six", "group.min.session.timeout.ms: can't use 'six'"),
    ],
    ids=["key", "value"],
)
def test_a_bad_setting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, setting: str, named: str
) -> None:
    assert serve(tmp_path, "-o", setting) == 78
    message = refusal(caplog).getMessage()
    assert named in message and "--help-config" in message


def test_a_missing_tls_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    key = tmp_path / "key.pem"
    key.write_text("")
    cert = tmp_path / "missing.pem"
    settings = [
        "listener.security.protocol=SASL_SSL",
        f"ssl.certificate.location={cert}",
        f"ssl.key.location={key}",
    ]
    assert serve(tmp_path / "data", *(a for s in settings for a in ("-o", s))) == 66
    message = refusal(caplog).getMessage()
    assert f"cannot read {cert} (ssl.certificate.location): No such file" in message


# -- a damaged coordinator log ----------------------------------------------------------------
def damaged_log(data_dir: Path) -> Path:
    """A coordinator log with commits of g1, g2 and g3, in that order, and one byte of g2's
    entry flipped: damage in the middle of a segment, not a torn tail."""
    log = DurableCoordinatorLog.open(data_dir, fsync_policy="never")

    async def commit() -> None:
        for group, offset in (("g1", 5), ("g2", 7), ("g3", 9)):
            record = OffsetCommitRecord(group, "t", 0, offset, -1, None, 1_700_000_000_000)
            await log.append(GroupKey(0, group), [record])

    trio.run(commit)
    log.close()
    (segment,) = (data_dir / "coordinator").glob("*.log")
    data = bytearray(segment.read_bytes())
    pos = 0
    while b"g2" not in data[pos + 8 : pos + 8 + int.from_bytes(data[pos : pos + 4], "big")]:
        pos += 8 + int.from_bytes(data[pos : pos + 4], "big")
    end = pos + 8 + int.from_bytes(data[pos : pos + 4], "big")
    data[end - 1] ^= 0x01  # the commit timestamp's last byte: the entry still decodes
    segment.write_bytes(bytes(data))
    return segment


def test_a_damaged_coordinator_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    segment = damaged_log(tmp_path)
    assert serve(tmp_path) == 65
    line = refusal(caplog)
    message = line.getMessage()
    assert f"the coordinator log is damaged: {segment}: damaged frame at byte" in message
    assert "CRC mismatch" in message
    assert "-o coordinator.log.skip.corruption=true" in message
    assert "loses the group records and committed offsets stored in them" in message
    assert line.exc_info is None

    caplog.clear()
    assert serve(tmp_path, "--debug") == 65
    assert refusal(caplog).exc_info is not None  # the traceback, when asked for

    caplog.clear()
    caplog.set_level(logging.WARNING)
    skipped = DurableCoordinatorLog.open(tmp_path, skip_corruption=True)
    try:
        stored = skipped.keys()
        assert {key.group_id for key in stored} == {"g1", "g3"}
    finally:
        skipped.close()
    (warning,) = [r.getMessage() for r in caplog.records if "skipping damaged bytes" in r.msg]
    assert "lost: group 'g2' offset t-0=7" in warning


def test_the_operator_sees_one_line_and_no_traceback(tmp_path: Path) -> None:
    damaged_log(tmp_path)
    command = [sys.executable, "-m", "rafka_actors", "serve", "--listen", "127.0.0.1:0"]
    done = subprocess.run(
        [*command, "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 65, done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "coordinator.log.skip.corruption" in errors[0]
    assert done.stderr.splitlines()[0] == errors[0]  # the first line printed (issue 51)
    assert "Traceback" not in done.stderr

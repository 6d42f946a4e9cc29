"""bench/poll_echo.py: each mode's echo server answers, and the figures are printed (no
timing asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_every_mode_echoes_and_prints_its_round_trips() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "poll_echo.py"), "--rounds", "1", "--seconds", "0.05"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("# bench/poll_echo.py --rounds 1 --seconds 0.05")
    found = {
        m.group(1): float(m.group(2).replace(",", ""))
        for m in re.finditer(r"^\s*(\w+): best ([\d,]+) round trips/s", done.stdout, re.MULTILINE)
    }
    assert set(found) == {"task", "self", "none", "reactor"}
    assert all(rate > 0 for rate in found.values())


def test_several_clients_echo_at_once_in_every_mode() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "poll_echo.py"),
            *("--rounds", "1", "--seconds", "0.1", "--clients", "3"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = re.findall(r"^\s*(\w+): best ([\d,]+) round trips/s", done.stdout, re.MULTILINE)
    assert {mode for mode, _ in found} == {"task", "self", "none", "reactor"}
    assert all(float(rate.replace(",", "")) > 0 for _, rate in found)

"""bench/poll_echo.py: each mode's echo server answers, and the figures are printed (no
timing asserted)."""

from __future__ import annotations

import re

from . import run_bench_script


def _best_rates(*args: str) -> tuple[str, dict[str, float]]:
    """poll_echo.py's stdout and each mode's best round trips/s."""
    out = run_bench_script("poll_echo.py", *args, timeout=60)
    found = {
        m.group(1): float(m.group(2).replace(",", ""))
        for m in re.finditer(r"^\s*(\w+): best ([\d,]+) round trips/s", out, re.MULTILINE)
    }
    return out, found


def test_every_mode_echoes_and_prints_its_round_trips() -> None:
    out, found = _best_rates("--rounds", "1", "--seconds", "0.05")
    assert out.splitlines()[0].startswith("# bench/poll_echo.py --rounds 1 --seconds 0.05")
    assert set(found) == {"task", "self", "none", "reactor"}
    assert all(rate > 0 for rate in found.values())


def test_several_clients_echo_at_once_in_every_mode() -> None:
    _, found = _best_rates("--rounds", "1", "--seconds", "0.1", "--clients", "3")
    assert set(found) == {"task", "self", "none", "reactor"}
    assert all(rate > 0 for rate in found.values())

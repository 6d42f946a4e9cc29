"""Tests of the benchmark tools; `run_bench_script` runs one of bench/ as a user would.

Every module here is marked `bench`, which `addopts` deselects: `just test-bench` (or
`pytest -m bench`) runs them, `just test` and CI do not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run_bench_script(script: str, *args: str, timeout: float) -> str:
    """The stdout of `python bench/<script> ARGS`, which must exit 0."""
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return done.stdout

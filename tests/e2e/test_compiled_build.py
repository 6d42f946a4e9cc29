"""The compiled build (setup.py, rafka_actors/compiled.py): mypyc compiles every hot module,
the broker says which build it runs, and every end-to-end test passes against a broker that
runs the compiled modules.

The rest of the suite runs the editable install's pure Python (some unit tests patch module
functions, which compiled callers no longer look up); this is where the compiled build, what
`pip install .` gives the users, is held to the same real-client tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rafka_actors.compiled import HOT_MODULES

from ..broker_process import BrokerProcess

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of src/ with the hot modules compiled in place, as a wheel build would."""
    root = tmp_path_factory.mktemp("compiled")
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root)
    shutil.copytree(
        REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    built = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert built.returncode == 0, built.stderr[-5000:]
    assert "not compiled" not in built.stderr, built.stderr[-5000:]
    return root / "src"


def _env(compiled_src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(compiled_src)}


def _python(
    compiled_src: Path, *args: str, timeout: float, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the repository, with the compiled copy first on the path."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=_env(compiled_src),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


@pytest.mark.timeout(1200)
def test_every_hot_module_is_compiled(compiled_src: Path) -> None:
    probe = "import json, rafka_actors.compiled as c; print(json.dumps(c.compiled_modules()))"
    done = _python(compiled_src, "-c", probe, timeout=60, check=True)
    assert json.loads(done.stdout) == list(HOT_MODULES)


@pytest.mark.timeout(1200)
def test_the_broker_logs_which_build_it_runs(compiled_src: Path, tmp_path: Path) -> None:
    for env, expected in (
        (_env(compiled_src), f"hot path: compiled by mypyc: {len(HOT_MODULES)} of "),
        ({}, "hot path: pure Python"),  # this suite's editable install
    ):
        broker = BrokerProcess(tmp_path / expected[:14].replace(" ", "_"), env=env).start()
        try:
            assert _logged(broker, expected), broker.log_text()
        finally:
            broker.stop()


def _logged(broker: BrokerProcess, text: str, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in broker.lines):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(1800)
def test_the_end_to_end_tests_pass_against_the_compiled_broker(compiled_src: Path) -> None:
    done = _python(
        compiled_src,
        *("-m", "pytest", "-q", "-p", "no:cacheprovider"),
        *(str(REPO / "tests" / "e2e"), "--ignore", __file__),
        timeout=1700,
    )
    assert done.returncode == 0, done.stdout[-8000:]
    assert " passed" in done.stdout.splitlines()[-1]


@pytest.mark.timeout(600)
def test_the_compiled_entry_cbor_writes_the_bytes_cbor2_writes(compiled_src: Path) -> None:
    # storage/entry_cbor.py hand-writes the CBOR of the coordinator log's entries: its unit
    # tests, which compare it with cbor2 byte for byte, run here against the compiled module
    test = REPO / "tests" / "storage" / "test_entry_cbor.py"
    probe = "import rafka_actors.storage.entry_cbor as m; print(m.__file__)"
    where = _python(compiled_src, "-c", probe, timeout=60, check=True)
    assert where.stdout.strip().endswith(".so"), where.stdout
    done = _python(
        compiled_src, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test), timeout=500
    )
    assert done.returncode == 0, done.stdout[-8000:]
    assert " passed" in done.stdout.splitlines()[-1]

"""A new user's first hour: the README's quick-start command, then the demo.

`test_readme_then_demo_in_a_fresh_venv` does it literally (a copy of the repository, a new
venv, the README's install command, `examples/demo.sh`): about 25 s with pip's cache warm, as
CI's is after its own install. `test_the_quick_start_installs_what_the_examples_import` checks
what it depends on without installing: that command installs every package the examples
import.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def quick_start_command() -> str:
    """The README's command that installs and runs the broker (the first `sh` block)."""
    section = README.read_text().split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    command = block.group(1).strip()
    assert "rafka-actors serve" in command
    return command


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_quick_start_installs_what_the_examples_import() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = re.search(r"\.\[([\w,-]+)\]", quick_start_command())
    installed = {_requirement_name(r) for r in project["dependencies"]}
    for extra in extras.group(1).split(",") if extras else ():
        installed |= {_requirement_name(r) for r in project["optional-dependencies"][extra]}
    distributions = metadata.packages_distributions()
    for example in (ROOT / "examples").glob("*.py"):
        for node in ast.walk(ast.parse(example.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "rafka_actors":
                    continue
                dists = {d.lower() for d in distributions.get(top, [top])}
                assert dists & installed, f"{example.name} imports {top}, not installed by {extras}"


@pytest.mark.e2e
def test_readme_then_demo_in_a_fresh_venv(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(
        ROOT,
        clone,
        ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "rafka-data"),
    )
    install = quick_start_command().split("&& .venv/bin/rafka-actors serve")[0]
    done = subprocess.run(
        ["bash", "-c", install], cwd=clone, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    demo = subprocess.run(
        ["bash", "examples/demo.sh"], cwd=clone, capture_output=True, text=True, timeout=120
    )
    assert demo.returncode == 0, demo.stderr
    counts = [int(n) for n in re.findall(r"member [ab]: (\d+) records", demo.stdout)]
    assert len(counts) == 2 and sum(counts) == 1000, demo.stdout + demo.stderr

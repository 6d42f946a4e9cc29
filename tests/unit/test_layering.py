"""The pure layers stay pure: group/ and protocol/ never import trio (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "rafka_actors"


@pytest.mark.parametrize("package", ["group", "protocol"])
def test_pure_packages_do_not_import_trio(package: str) -> None:
    offenders = []
    for path in sorted((SRC / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {n}" for n in names if n.split(".")[0] in ("trio", "tricycle")
            ]
    assert offenders == []

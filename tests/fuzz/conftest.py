from __future__ import annotations

from typing import Any

from .budget import COUNTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if COUNTS:
        terminalreporter.write_sep("-", "fuzz inputs executed")
        for name, count in sorted(COUNTS.items()):
            terminalreporter.write_line(f"{name:>40}: {count}")

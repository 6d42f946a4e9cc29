from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .broker_process import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[type[BrokerProcess]]:
    started: list[BrokerProcess] = []

    def factory(*overrides: str, data_dir: Path | None = None, **kw: object) -> BrokerProcess:
        process = BrokerProcess(data_dir or tmp_path / "data", *overrides, **kw)  # type: ignore[arg-type]
        started.append(process)
        return process.start()

    yield factory  # type: ignore[misc]
    for process in started:
        if process.alive():
            process.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return broker_factory()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for name in ("broker",):
            process = item.funcargs.get(name)
            if isinstance(process, BrokerProcess):
                report.sections.append(("broker log", process.log_text()))

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from .broker_process import BrokerProcess

# No per-example deadline, and no too-slow health check: Hypothesis would otherwise fail a
# property that holds whenever the machine is busy (CI shares two cores with four workers).
# Speed is measured in bench/, never asserted by a test.
settings.register_profile("rafka", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rafka")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Schedule by file (`--dist loadgroup`), but every test that uses Spark on one worker.

    Each xdist worker that meets a Spark test starts its own JVM; four of them on two cores made
    one Spark job take over 120 s. One JVM for all of them keeps each job near its 8 s. Runs
    before xdist's own hook, which reads the group marks.
    """
    for item in items:
        uses_spark = "spark" in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.xdist_group("spark" if uses_spark else str(item.path)))


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

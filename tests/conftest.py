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


def pytest_itemcollected(item: pytest.Item) -> None:
    """A Spark test gets 300 s, not the suite's 120.

    Each xdist worker that meets one starts its own JVM, and on two cores shared by four workers
    one job of 8 s took over 120 s in CI. Speed is measured in bench/, never asserted by a test.
    """
    if "spark" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.timeout(300))


LONG_POLES = ("pipeline", "kafka_tools")  # Spark's and Java's modules: the longest files
SPARK_TESTS = "tests/pipeline/"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile`, except that every pipeline module goes to one worker.

    A worker that meets a Spark test starts a JVM of its own (80-100 s on two cores shared by
    four workers), and file by file the pipeline modules reached every worker: four JVMs for
    one suite. The xdist_group mark would say this, but `--dist loadgroup` spread even a static
    group over the workers here (xdist 3.8, pytest 9.2).
    """
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SparkOnOneWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SPARK_TESTS if nodeid.startswith(SPARK_TESTS) else super()._split_scope(nodeid)

    return SparkOnOneWorker(config, log)  # type: ignore[arg-type]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first, each kept whole and in order (a stable sort by directory).

    xdist hands out files in collection order; started last, the Spark modules were the run's
    tail while the other workers sat idle. Started first, the short files fill in around them.
    """
    items.sort(key=lambda item: not any(part in LONG_POLES for part in item.path.parts))


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

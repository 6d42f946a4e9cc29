"""One SparkSession for the whole test session (starting a JVM costs seconds).

``local[2]`` on 127.0.0.1 with this interpreter as the workers' Python (build_session does both
for a local master), two shuffle partitions and no UI: the data is tiny, and the suite has to
stay quick. Tests that don't need Spark don't ask for the fixture and never start it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from rafka_actors.pipeline.session import build_session

    session = build_session(
        "local[2]",
        app_name="rafka-actors tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
        },
    )
    yield session
    session.stop()

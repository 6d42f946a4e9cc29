"""The SparkSession the pipeline runs in: ``local[*]`` on a laptop, any master on a cluster.

Local mode binds the driver to 127.0.0.1 (no network needed, nothing exposed) and runs the
Python workers with this very interpreter (``PYSPARK_PYTHON=sys.executable``), so they import
the same ``rafka_actors``, pandas and pyarrow as the driver. With another master the workers'
Python is the cluster's business: ``PYSPARK_PYTHON`` is left as the environment sets it (and
defaults to this interpreter's path, right when the workers share the driver's image); see
docs/pipeline.md for shipping the package to executors.

Local mode also shuffles into two partitions per core instead of Spark's 200: the rows are
small (a commit or a batch header each), and every partition costs a task.

Under ``spark-submit`` (with this package's ``pipeline/__main__.py`` as the application) and no
``--master`` given to the job, the master, settings and environment are spark-submit's.

Timestamps are shown and computed in UTC (``spark.sql.session.timeZone``), whatever the
machine's zone. Both data sources are registered on the session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "build_session", "is_local"]

DEFAULT_MASTER = "local[*]"
SUBMITTED = "PYSPARK_GATEWAY_PORT"  # set when spark-submit launched this Python driver


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def build_session(
    master: str | None = None,
    *,
    app_name: str = "rafka-actors pipeline",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session on ``master`` (default ``local[*]``) with the data sources registered."""
    from pyspark.sql import SparkSession

    from .sources import register

    submitted = SUBMITTED in os.environ and master is None  # spark-submit chose the master
    master = master or DEFAULT_MASTER
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.log.level": "ERROR",
        "spark.ui.showConsoleProgress": "false",
    }
    if is_local(master) and not submitted:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        # Spark's 200 shuffle partitions cost more in task start-ups than a laptop gains
        settings["spark.sql.shuffle.partitions"] = str(2 * (os.cpu_count() or 1))
    elif not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark

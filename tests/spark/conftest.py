"""The Spark suite's one shared session (local[*], quiet, UTC) and its guards.

pyspark, pyarrow and Java are part of the test install (the ``test`` extra); when one is
missing the suite is skipped with the reason, unless ``PLOG_REQUIRE_SPARK=1`` or
``PLOG_REQUIRE_KAFKA=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import pytest

from spark_env import require_spark

TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    # C1 JIT and the serial GC start faster: the suite's JVM lives for a minute.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole suite (plog's data source registered)."""
    require_spark()
    from plog.spark_tasks import session

    handle = session.start("local[*]", TEST_CONF, app_name="plog-tests")
    assert handle.owned
    try:
        yield handle.spark
    finally:
        handle.stop()

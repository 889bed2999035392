"""The Spark suite's one shared session (local[*], quiet, UTC) and its guards.

pyspark, pyarrow and Java are part of the test install (the ``test`` extra); when one is
missing the suite is skipped with the reason, unless ``PLOG_REQUIRE_SPARK=1`` or
``PLOG_REQUIRE_KAFKA=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    # C1 JIT and the serial GC start faster: the suite's JVM lives for a minute.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def spark_missing() -> str | None:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'plog[spark]')"
    if importlib.util.find_spec("pyarrow") is None:
        return "pyarrow is not installed (pip install 'plog[spark]')"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "no Java (Spark needs Java 17+)"
    return None


def require_spark() -> None:
    reason = spark_missing()
    if reason is None:
        return
    if os.environ.get("PLOG_REQUIRE_SPARK") == "1" or os.environ.get("PLOG_REQUIRE_KAFKA") == "1":
        pytest.fail(f"the Spark suite is required here but {reason}")
    pytest.skip(reason)


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

"""Whether the Spark suite can run here (pyspark, pyarrow, Java), and what to do if not."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


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

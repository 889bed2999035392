"""Errors of the Spark layer. Importing this module never imports pyspark."""

from __future__ import annotations


class SparkSetupError(Exception):
    """Spark cannot run here: pyspark, pyarrow or Java is missing, the executors' Python
    differs from the driver's, or the session failed to start. The message says what to do."""

    exit_code = 1

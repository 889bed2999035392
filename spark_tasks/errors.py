"""Errors of the Spark layer. Importing this module never imports pyspark."""

from __future__ import annotations

from plog.formats.errors import PlogError


class SparkError(PlogError):
    """Base class: a one-line message, without the JVM's stack trace; ``kind`` says how the
    CLI exits (``cli/exit_codes.KIND_EXIT_CODES``)."""


class SparkSetupError(SparkError):
    """Spark cannot run here: pyspark, pyarrow or Java is missing, the executors' Python
    differs from the driver's, or the session failed to start. The message says what to do."""


class SparkJobError(SparkError):
    """A Spark job failed (a py4j/pyspark exception): its first line, and where Spark's own
    log is."""


class SparkQueryError(SparkError):
    """A SQL query Spark cannot parse or analyse: the user's query, so a usage error."""

    kind = "usage"

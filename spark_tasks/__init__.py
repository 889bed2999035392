"""plog.spark_tasks: PySpark jobs and the ``plog`` Spark data source.

This is the only place pyspark is imported, and only inside functions: importing this
package costs nothing. A plain PySpark program uses it as::

    from pyspark.sql import SparkSession
    import plog.spark_tasks

    spark = SparkSession.builder.getOrCreate()
    plog.spark_tasks.register(spark)
    df = spark.read.format("plog").load("/data/kafka-logs")

Executors must be able to import plog (installed there, or shipped with
``spark.sparkContext.addPyFile(plog.spark_tasks.package_zip())``) and pyarrow.
"""

from __future__ import annotations

from .errors import SparkSetupError


def register(spark) -> None:
    """Register the ``plog`` data source on ``spark`` (once per session is enough)."""
    from .datasource import PlogDataSource

    spark.dataSource.register(PlogDataSource)


def package_zip(directory: str | None = None) -> str:
    """A zip of plog's modules to ship to executors with ``addPyFile``."""
    from .session import package_zip as build

    return build(directory)


__all__ = ["SparkSetupError", "package_zip", "register"]

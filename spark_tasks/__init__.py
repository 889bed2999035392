"""plog.spark_tasks: PySpark jobs and the ``plog`` Spark data source.

This is the only place pyspark is imported, and only inside functions: importing this
package costs nothing. A plain PySpark program uses it as::

    from pyspark.sql import SparkSession
    import plog.spark_tasks

    spark = SparkSession.builder.getOrCreate()
    plog.spark_tasks.register(spark)
    df = spark.read.format("plog").load("/data/kafka-logs")

``register`` makes plog importable where the data source runs: on a local master its Python
workers run this interpreter (unless ``PYSPARK_PYTHON`` or ``spark.pyspark.python`` chose
one); on a cluster plog's modules are shipped with ``addPyFile``, and the workers need
pyarrow and a Python of the driver's minor version.
"""

from __future__ import annotations

from .errors import SparkError, SparkJobError, SparkQueryError, SparkSetupError


def register(spark) -> None:
    """Register the ``plog`` data source on ``spark`` (once per session is enough), with
    plog importable by the Python workers that plan and read it (see the module docstring)."""
    from .datasource import PlogDataSource
    from .session import driver_python_for_workers, is_local, ship_package

    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext here; the server's workers are its business
        sc = None
    if sc is None:
        spark.dataSource.register(PlogDataSource)
    elif is_local(sc.master):
        with driver_python_for_workers(sc):
            spark.dataSource.register(PlogDataSource)
    else:
        ship_package(sc)
        spark.dataSource.register(PlogDataSource)


def package_zip(directory: str | None = None) -> str:
    """A zip of plog's modules to ship to executors with ``addPyFile``."""
    from .session import package_zip as build

    return build(directory)


__all__ = ["SparkError", "SparkJobError", "SparkQueryError", "SparkSetupError", "package_zip", "register"]

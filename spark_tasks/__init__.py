"""plog.spark_tasks: PySpark jobs and the plog Spark data source. The only place pyspark is imported."""

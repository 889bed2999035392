"""plog: an embedded Kafka-compatible log engine and an offline toolkit for Kafka log directories.

The distribution maps four top-level folders to subpackages (see pyproject.toml):
``formats/`` -> ``plog.formats``, ``engine/`` -> ``plog.engine``, ``cli/`` -> ``plog.cli``,
``spark_tasks/`` -> ``plog.spark_tasks``. This file is ``plog/__init__.py``.
"""

__version__ = "0.1.0"

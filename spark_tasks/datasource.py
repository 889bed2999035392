"""The ``plog`` Spark data source (PySpark's Python Data Source API, Spark >= 4.0).

    import plog.spark_tasks
    plog.spark_tasks.register(spark)
    df = spark.read.format("plog").option("topics", "orders").load("/data/kafka-logs")

``partitions()`` runs on the driver side: it plans the scan with
:func:`plog.engine.inspect.scan.plan_scan` (segments as byte ranges, large ones split at checked
index entries, small ones bin-packed, offset/time filters pushed down to segment and
position selection). ``read()`` runs on executors: it streams its unit's slices in bounded
chunks and yields Arrow record batches (:mod:`plog.spark_tasks.arrow_batches`: at most
8192 rows / 8 MiB of payload on the reference path, 64 Ki records / 8 MiB of records
regions on the native one), so an executor's memory does not grow with the segment size.

Options (all optional): ``topics`` (comma-separated), ``level`` (``record``|``batch``),
``offset_lo``/``offset_hi`` (offsets, ``[lo, hi)``), ``time_lo``/``time_hi`` (epoch ms,
``[lo, hi)``), ``key``, ``value_contains`` (text, or binary-safe JSON as plog writes it),
``headers`` (JSON ``[[key, value], ...]``), ``unit_bytes`` (work unit size), ``parallelism``
(units to aim for per core count; default the driver's core count), ``paths`` (a JSON list
of paths, instead of ``load(path)``). Paths must be local paths visible at the same place on
the driver and every executor (a shared filesystem on a cluster).
"""

from __future__ import annotations

import json
import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition


def _paths(options) -> list[str]:
    from plog.engine.errors import ScanError

    raw = options.get("paths")
    if raw:
        try:
            paths = json.loads(raw)
        except ValueError:
            paths = [p for p in raw.split(",") if p]
        if isinstance(paths, str):
            paths = [paths]
    else:
        path = options.get("path")
        paths = [path] if path else []
    if not paths:
        raise ScanError("no path: use spark.read.format('plog').load('/path/to/kafka-logs')")
    out = []
    for p in paths:
        p = str(p)
        if p.startswith("file:"):
            p = p[5:]
            while p.startswith("//"):
                p = p[1:]
        elif "://" in p:
            raise ScanError(f"{p}: only local paths are supported (on a cluster, a shared filesystem mounted at "
                            f"the same path on every executor)")
        out.append(os.path.abspath(p))
    return out


class UnitPartition(InputPartition):
    """One :class:`plog.engine.inspect.scan.ScanUnit` (pickled to the executor that reads it)."""

    def __init__(self, unit):
        super().__init__(unit.index)
        self.unit = unit


class PlogDataSource(DataSource):
    """Kafka log directories as a table: one row per record (or per batch)."""

    @classmethod
    def name(cls) -> str:
        return "plog"

    def schema(self):
        from .schema import spark_schema

        return spark_schema(self.options.get("level", "record") or "record")

    def reader(self, schema):
        return PlogReader(dict(self.options))


class PlogReader(DataSourceReader):
    def __init__(self, options: dict):
        from plog.engine.inspect.scan import ScanFilter

        from .schema import fields_for

        self.options = {str(k).lower(): v for k, v in options.items()}
        self.level = self.options.get("level") or "record"
        fields_for(self.level)  # validates the level
        self.filter = ScanFilter.from_options(self.options)
        self.paths = _paths(self.options)
        unit_bytes = self.options.get("unit_bytes")
        self.unit_bytes = int(unit_bytes) if unit_bytes else None
        parallelism = self.options.get("parallelism")
        self.parallelism = int(parallelism) if parallelism else (os.cpu_count() or 2)

    def partitions(self):
        from plog.engine.inspect.scan import plan_scan

        plan = plan_scan(self.paths, self.filter, unit_bytes=self.unit_bytes, parallelism=self.parallelism)
        if not plan.units:
            from plog.engine.inspect.scan import ScanUnit

            return [UnitPartition(ScanUnit(0, (), 0))]
        return [UnitPartition(unit) for unit in plan.units]

    def read(self, partition):
        from .arrow_batches import unit_arrow_batches

        # Record rows come as Arrow column buffers built natively where plog._native loads
        # in this (executor) process, else from the reference rows: the same rows either way.
        yield from unit_arrow_batches(partition.unit, self.filter, self.level)

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

Decoding Confluent-framed keys and values (Schema Registry wire format; record level only;
:mod:`plog.spark_tasks.decode` has the columns and the rules):

* ``decode``: ``confluent`` (or ``auto``: Avro, Protobuf or JSON Schema, as the schema the
  frame names says), or ``avro``/``protobuf``/``json-schema`` to decode only that type
  (others get a reason), or ``off`` (the default). Adds ``value_decoded`` STRING (the JSON
  text ``plog consume --value-format auto`` prints), ``value_schema_id`` INT and
  ``value_decode_error`` STRING (the reason a value is not decoded; the run goes on).
* ``decode_key``: the same for keys (default ``off``): ``key_decoded``, ``key_schema_id``,
  ``key_decode_error``.
* ``schemas``: other log directories holding a ``_schemas`` topic (comma-separated or a JSON
  list), as ``--schemas``; ``schema_registry``: a registry URL (``GET /schemas/ids/{id}``),
  as ``--schema-registry``. Schemas are looked up in the ``_schemas`` topic under the read
  paths first, then ``schemas``, then the URL.
* ``subject``: a subject whose latest Avro (or JSON Schema) version types the struct
  column ``value_struct``, with ``value_struct_error`` (:mod:`plog.spark_tasks.struct_column`
  has the type mapping); ``key_subject`` the same for ``key_struct`` with ``decode_key``.
  Values written with any version of the subject convert (Avro schema resolution); others
  give a null struct and the reason.

An unknown option value, a ``schemas`` path without ``_schemas`` or a ``subject`` that is not
there fails the query with one line; a record that does not decode never does.
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

    def _decode_plan(self):
        """The decode plan (None without decoding), built once on the driver side: ``schema()``
        and ``reader()`` may run in different worker processes, the plan travels pickled."""
        if not hasattr(self, "_plan"):
            from .decode import decode_plan

            options = {str(k).lower(): v for k, v in self.options.items()}
            level = options.get("level") or "record"
            self._plan = decode_plan(options, _paths(options), level) if _decoding(options) else None
        return self._plan

    def schema(self):
        from .schema import spark_schema

        schema = spark_schema(self.options.get("level", "record") or "record")
        plan = self._decode_plan()
        if plan is not None:
            from pyspark.sql import types as T

            schema = T.StructType(schema.fields + plan.spark_fields())
        return schema

    def reader(self, schema):
        return PlogReader(dict(self.options), self._decode_plan())


_DECODE_OPTIONS = ("decode", "decode_key", "schemas", "schema_registry", "subject", "key_subject")


def _decoding(options: dict) -> bool:
    return any(options.get(name) not in (None, "") for name in _DECODE_OPTIONS)


class PlogReader(DataSourceReader):
    def __init__(self, options: dict, decode=None):
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
        self.decode = decode

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
        batches = unit_arrow_batches(partition.unit, self.filter, self.level)
        if self.decode is None:
            yield from batches
            return
        from pyspark.sql import types as T

        from .decode import ColumnDecoder
        from .schema import arrow_schema, spark_schema

        # One resolver per partition: each schema is compiled once per unit, not per record.
        full = T.StructType(spark_schema(self.level).fields + self.decode.spark_fields())
        decoder = ColumnDecoder(self.decode, arrow_schema(full))
        for batch in batches:
            yield decoder.extend(batch)

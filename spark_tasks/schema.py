"""The schemas of the ``plog`` Spark data source, and Arrow record batches built to them.

``level=record`` (the default) has one row per record; ``level=batch`` one row per
record batch (or legacy v0/v1 entry). The columns, in order:

record: topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, timestamp_type INT,
key BINARY, value BINARY, headers ARRAY<STRUCT<key STRING, value BINARY>>, base_offset BIGINT,
producer_id BIGINT, producer_epoch SMALLINT, base_sequence INT, codec STRING,
is_transactional BOOLEAN, is_control BOOLEAN, segment STRING, position BIGINT

batch: topic, partition, base_offset, last_offset BIGINT, records INT, first_timestamp
TIMESTAMP, max_timestamp TIMESTAMP, timestamp_type INT, size INT, magic TINYINT, codec,
producer_id, producer_epoch, base_sequence, partition_leader_epoch INT, is_transactional,
is_control, crc_valid BOOLEAN, segment, position

``timestamp`` is null for records without one (v0 messages, Kafka's -1); ``timestamp_type``
is 0 CreateTime, 1 LogAppendTime, -1 none (the numbering of Spark's Kafka source).
``segment`` is the ``.log`` file's path and ``position`` the byte position of the batch in it.
Keys, values and header values stay binary.

Rows travel as Arrow record batches whose schema equals Spark's own conversion of these
types exactly (Spark rejects any difference), built column by column: Spark's per-row
tuple converter costs 3-4x more.
"""

from __future__ import annotations

RECORD_FIELDS = (
    ("topic", "string"), ("partition", "int"), ("offset", "bigint"), ("timestamp", "timestamp"),
    ("timestamp_type", "int"), ("key", "binary"), ("value", "binary"), ("headers", "headers"),
    ("base_offset", "bigint"), ("producer_id", "bigint"), ("producer_epoch", "smallint"),
    ("base_sequence", "int"), ("codec", "string"), ("is_transactional", "boolean"),
    ("is_control", "boolean"), ("segment", "string"), ("position", "bigint"),
)

BATCH_FIELDS = (
    ("topic", "string"), ("partition", "int"), ("base_offset", "bigint"), ("last_offset", "bigint"),
    ("records", "int"), ("first_timestamp", "timestamp"), ("max_timestamp", "timestamp"),
    ("timestamp_type", "int"), ("size", "int"), ("magic", "tinyint"), ("codec", "string"),
    ("producer_id", "bigint"), ("producer_epoch", "smallint"), ("base_sequence", "int"),
    ("partition_leader_epoch", "int"), ("is_transactional", "boolean"), ("is_control", "boolean"),
    ("crc_valid", "boolean"), ("segment", "string"), ("position", "bigint"),
)

LEVELS = {"record": RECORD_FIELDS, "batch": BATCH_FIELDS}


def fields_for(level: str):
    try:
        return LEVELS[level]
    except KeyError:
        from plog.engine.errors import ScanError

        raise ScanError(f"option level: expected record or batch, got {level!r}") from None


def spark_schema(level: str = "record"):
    """The Spark ``StructType`` of a level."""
    from pyspark.sql import types as T

    simple = {
        "string": T.StringType(), "int": T.IntegerType(), "bigint": T.LongType(), "smallint": T.ShortType(),
        "tinyint": T.ByteType(), "boolean": T.BooleanType(), "binary": T.BinaryType(),
        "timestamp": T.TimestampType(),
    }
    headers = T.ArrayType(T.StructType([T.StructField("key", T.StringType()),
                                        T.StructField("value", T.BinaryType())]))
    return T.StructType([T.StructField(name, headers if kind == "headers" else simple[kind])
                         for name, kind in fields_for(level)])


def ddl(level: str = "record") -> str:
    """The schema as a DDL string (documentation, error messages)."""
    kinds = {"headers": "ARRAY<STRUCT<key: STRING, value: BINARY>>"}
    return ", ".join(f"{name} {kinds.get(kind, kind.upper())}" for name, kind in fields_for(level))


_MAX_MS = ((1 << 63) - 1) // 1000  # larger (hostile) ms timestamps overflow microseconds: null


class ArrowBuilder:
    """Accumulates rows (tuples in field order, timestamps in epoch ms) column by column
    and turns them into a ``pyarrow.RecordBatch`` of ``arrow_schema``.

    Memory is bounded by the caller flushing: :attr:`full` turns true after
    ``max_rows`` rows or ``max_bytes`` bytes of keys and values.
    """

    def __init__(self, arrow_schema, fields, *, max_rows: int = 8192, max_bytes: int = 8 << 20):
        import pyarrow as pa

        self._pa = pa
        self.schema = arrow_schema
        self.kinds = [kind for _name, kind in fields]
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self._columns: list[list] = [[] for _ in fields]
        self._rows = 0
        self._bytes = 0
        self._binary = [i for i, k in enumerate(self.kinds) if k == "binary"]

    @property
    def full(self) -> bool:
        return self._rows >= self.max_rows or self._bytes >= self.max_bytes

    def __len__(self) -> int:
        return self._rows

    def add(self, row) -> None:
        for column, value in zip(self._columns, row):
            column.append(value)
        self._rows += 1
        for i in self._binary:
            value = row[i]
            if value is not None:
                self._bytes += len(value)

    def flush(self):
        """The rows so far as one RecordBatch (None when there are none); starts afresh."""
        if not self._rows:
            return None
        pa = self._pa
        arrays = []
        for column, kind, field in zip(self._columns, self.kinds, self.schema):
            if kind == "timestamp":
                column = [None if t is None or t < 0 or t > _MAX_MS else t * 1000 for t in column]
            elif kind == "headers":
                column = [[{"key": k, "value": v} for k, v in hs] for hs in column]
            arrays.append(pa.array(column, type=field.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._columns = [[] for _ in self.kinds]
        self._rows = 0
        self._bytes = 0
        return batch


def arrow_schema(level="record"):
    """The Arrow schema Spark expects for a level, or for a Spark ``StructType`` (the record
    columns plus decoded ones): Spark's own conversion of it."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(level) if isinstance(level, str) else level, timezone="UTC")

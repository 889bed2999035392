"""The typed struct column of the ``plog`` data source's ``subject`` option: a Spark type
built from one subject's latest schema, and the conversion of each decoded value (the JSON
text the resolver renders) to that type.

**Avro** (the subject's latest version is the *reader* schema; named types of its
references are resolved): record -> STRUCT (fields in schema order), array -> ARRAY, map ->
MAP<STRING, ...>, enum -> STRING, fixed and bytes -> BINARY, int -> INT, long -> BIGINT,
float -> FLOAT, double -> DOUBLE, boolean, string, null -> VOID; a union of null and one
type -> that type (nullable); a union of several non-null types -> STRUCT<member0, member1,
...> (one field per non-null branch in schema order, the branch taken set, the others null:
spark-avro's mapping). Logical types: ``timestamp-millis``/``-micros`` -> TIMESTAMP (UTC),
``local-timestamp-millis``/``-micros`` -> TIMESTAMP_NTZ, ``date`` -> DATE,
``decimal(p, s)`` -> DECIMAL(p, s) (p <= 38; wider decimals -> STRING, their decimal text),
``uuid`` -> STRING; ``time-millis``/``time-micros`` stay INT/BIGINT and ``duration`` BINARY.
Unsupported (the option fails at planning, naming the type): recursive types.

A value written with another version of the subject converts by Avro's schema resolution
by name: writer fields the reader lacks are dropped, reader fields the writer lacks take
their default (an error without one), int widens to long/float/double, a bare value fills a
nullable or union reader field whose branch matches, an enum symbol the reader lacks takes
the enum's default. Anything else (a field whose type changed incompatibly) is a
conversion error for that row: a null struct and the reason, never a failed job.

**JSON Schema**: ``object`` with ``properties`` -> STRUCT (properties in order),
``object`` with only ``additionalProperties`` a schema -> MAP<STRING, ...>, ``array`` with
``items`` -> ARRAY, ``string`` -> STRING, ``integer`` -> BIGINT, ``number`` -> DOUBLE,
``boolean``; a ``type`` list of one type and ``"null"`` -> that type. Any other schema
(``$ref``, ``oneOf``/``anyOf``, several types, none) -> STRING holding the JSON text of
that part of the value. Properties missing from a value are null; extra ones are dropped.

**Protobuf** subjects are not supported for the struct column (``value_decoded`` holds their
JSON; Spark's ``from_json`` can type it).

Nodes are plain picklable objects (the plan travels to executors with the reader).
"""

from __future__ import annotations

import decimal
import json
from typing import Any

from plog.engine.errors import ScanError
from plog.spark_tasks.errors import SparkError

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class Mismatch(SparkError):
    """A value that does not convert to the struct's type; ``where`` is the field path. Caught
    per record (decode.py): it becomes the row's ``*_struct_error``, never a failed job."""

    def __init__(self, where: str, what: str):
        super().__init__(f"{where or 'the value'}: {what}")
        self.where = where


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class Node:
    """One type of the tree: its Spark type, and ``convert(json_value, path)``."""

    def spark_type(self):
        raise NotImplementedError

    def convert(self, v, path: str):
        raise NotImplementedError

    def default(self, v, path: str):
        """An Avro field default (Avro's JSON, a union's default being its first branch's)."""
        return self.convert(v, path)


class Prim(Node):
    def __init__(self, kind: str):
        self.kind = kind

    def spark_type(self):
        from pyspark.sql import types as T

        return {"boolean": T.BooleanType(), "int": T.IntegerType(), "long": T.LongType(), "float": T.FloatType(),
                "double": T.DoubleType(), "string": T.StringType(), "bytes": T.BinaryType(),
                "null": T.NullType()}[self.kind]

    def convert(self, v, path: str):
        k = self.kind
        if k == "null":
            if v is not None:
                raise Mismatch(path, f"expected null, got {_kind(v)}")
            return None
        if k == "boolean" and isinstance(v, bool):
            return v
        if k in ("int", "long") and isinstance(v, int) and not isinstance(v, bool):
            lo, hi = _INT32 if k == "int" else _INT64
            if not lo <= v <= hi:
                raise Mismatch(path, f"{v} is out of range for {k}")
            return v
        if k in ("float", "double"):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            if v in _FLOATS:
                return _FLOATS[v]
        if k == "string" and isinstance(v, str):
            return v
        if k == "bytes" and isinstance(v, str):
            return _latin1(v, path)
        raise Mismatch(path, f"expected {k}, got {_kind(v)}")


def _latin1(v: str, path: str) -> bytes:
    try:
        return v.encode("latin-1")
    except UnicodeEncodeError:
        raise Mismatch(path, "expected bytes (code points 0-255)") from None


class Logical(Node):
    """An Avro logical type whose Spark type is not its underlying one."""

    def __init__(self, logical: str, underlying: Node, precision: int = 0, scale: int = 0):
        self.logical = logical
        self.underlying = underlying
        self.precision = precision
        self.scale = scale

    def spark_type(self):
        from pyspark.sql import types as T

        lt = self.logical
        if lt in ("timestamp-millis", "timestamp-micros"):
            return T.TimestampType()
        if lt in ("local-timestamp-millis", "local-timestamp-micros"):
            return T.TimestampNTZType()
        if lt == "date":
            return T.DateType()
        if lt == "decimal" and 0 < self.precision <= 38:
            return T.DecimalType(self.precision, self.scale)
        return T.StringType()  # uuid, wide decimals

    def convert(self, v, path: str):
        raw = self.underlying.convert(v, path)
        lt = self.logical
        if lt.endswith("-millis"):
            # pyarrow takes microseconds; beyond Spark's range: null, as the record columns do
            return raw * 1000 if -(1 << 63) // 1000 <= raw <= ((1 << 63) - 1) // 1000 else None
        if lt.endswith("-micros") or lt == "date" or lt == "uuid":
            return raw
        # decimal: big-endian two's complement unscaled value
        unscaled = int.from_bytes(raw, "big", signed=True)
        value = decimal.Decimal(unscaled).scaleb(-self.scale)
        if 0 < self.precision <= 38:
            if len(str(abs(unscaled))) > self.precision:
                raise Mismatch(path, f"{value} has more than {self.precision} digits")
            return value
        return str(value)


class Enum(Node):
    def __init__(self, name: str, symbols: list[str], fallback: str | None):
        self.name = name
        self.symbols = frozenset(symbols)
        self.fallback = fallback

    def spark_type(self):
        from pyspark.sql import types as T

        return T.StringType()

    def convert(self, v, path: str):
        if not isinstance(v, str):
            raise Mismatch(path, f"expected a symbol of enum {self.name}, got {_kind(v)}")
        if v in self.symbols:
            return v
        if self.fallback is not None:
            return self.fallback
        raise Mismatch(path, f"{v!r} is not a symbol of enum {self.name}")


class Fixed(Node):
    def __init__(self, name: str, size: int):
        self.name = name
        self.size = size

    def spark_type(self):
        from pyspark.sql import types as T

        return T.BinaryType()

    def convert(self, v, path: str):
        if not isinstance(v, str):
            raise Mismatch(path, f"expected fixed {self.name}, got {_kind(v)}")
        out = _latin1(v, path)
        if len(out) != self.size:
            raise Mismatch(path, f"expected {self.size} bytes of fixed {self.name}, got {len(out)}")
        return out


class Array(Node):
    def __init__(self, items: Node):
        self.items = items

    def spark_type(self):
        from pyspark.sql import types as T

        return T.ArrayType(self.items.spark_type())

    def convert(self, v, path: str):
        if not isinstance(v, list):
            raise Mismatch(path, f"expected an array, got {_kind(v)}")
        item = self.items.convert
        return [item(x, f"{path}[{i}]") for i, x in enumerate(v)]


class Map(Node):
    def __init__(self, values: Node):
        self.values = values

    def spark_type(self):
        from pyspark.sql import types as T

        return T.MapType(T.StringType(), self.values.spark_type())

    def convert(self, v, path: str):
        if not isinstance(v, dict):
            raise Mismatch(path, f"expected a map, got {_kind(v)}")
        value = self.values.convert
        return [(k, value(x, f"{path}[{k!r}]")) for k, x in v.items()]


_NO_DEFAULT = object()


class Record(Node):
    """A struct: ``fields`` are ``(name, node, default)`` (``_NO_DEFAULT`` when none);
    ``strict`` (Avro) refuses a missing field without a default, JSON Schema leaves it null."""

    def __init__(self, name: str, fields: list[tuple[str, Node, Any]], strict: bool = True):
        self.name = name
        self.fields = fields
        self.strict = strict

    def spark_type(self):
        from pyspark.sql import types as T

        return T.StructType([T.StructField(name, node.spark_type()) for name, node, _d in self.fields])

    def convert(self, v, path: str):
        if not isinstance(v, dict):
            raise Mismatch(path, f"expected record {self.name}, got {_kind(v)}")
        out = {}
        for name, node, default in self.fields:
            where = _join(path, name)
            if name in v:
                out[name] = node.convert(v[name], where)
            elif default is not _NO_DEFAULT:
                out[name] = node.default(default, where)
            elif self.strict:
                raise Mismatch(where, "missing from the value, and the field has no default")
            else:
                out[name] = None
        return out


class Union(Node):
    """An Avro union: ``branches`` are ``(JSON branch name, node)`` of its non-null types.
    With one branch the column is that branch's type (nullable); with several a struct of
    ``member0..`` fields. Avro's JSON names the branch taken (``{"string": "x"}``); a bare
    value (written by a version whose field was not a union) fills the first branch it fits."""

    def __init__(self, branches: list[tuple[str, Node]], nullable: bool):
        self.branches = branches
        self.nullable = nullable

    def spark_type(self):
        from pyspark.sql import types as T

        if len(self.branches) == 1:
            return self.branches[0][1].spark_type()
        return T.StructType([T.StructField(f"member{i}", node.spark_type())
                             for i, (_n, node) in enumerate(self.branches)])

    def _wrap(self, i: int, value):
        if len(self.branches) == 1:
            return value
        return {f"member{j}": (value if j == i else None) for j in range(len(self.branches))}

    def convert(self, v, path: str):
        if v is None:
            if not self.nullable:
                raise Mismatch(path, "null is not a branch of the union")
            return None
        if isinstance(v, dict) and len(v) == 1:
            (name, inner), = v.items()
            for i, (branch, node) in enumerate(self.branches):
                if branch == name:
                    return self._wrap(i, node.convert(inner, path))
        for i, (_branch, node) in enumerate(self.branches):
            try:
                return self._wrap(i, node.convert(v, path))
            except Mismatch:
                continue
        raise Mismatch(path, f"{_kind(v)} fits no branch of the union")

    def default(self, v, path: str):
        if v is None and self.nullable:
            return None
        # Avro: a union's default is a value of its first branch (unwrapped)
        return self._wrap(0, self.branches[0][1].default(v, path))


class JsonText(Node):
    """A JSON Schema part with no Spark type of its own: the value's JSON text."""

    def spark_type(self):
        from pyspark.sql import types as T

        return T.StringType()

    def convert(self, v, path: str):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# -- Avro schema -> nodes --------------------------------------------------------------------------

_AVRO_PRIMS = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_LOGICAL = {"timestamp-millis": "long", "timestamp-micros": "long", "local-timestamp-millis": "long",
            "local-timestamp-micros": "long", "date": "int", "uuid": "string", "decimal": None}


def _branch_name(branch) -> str:
    """Avro's JSON name of a union branch (the resolver's rendering names branches so)."""
    if isinstance(branch, str):
        return branch
    t = branch.get("type")
    if t in ("record", "error", "enum", "fixed"):
        return branch["name"]
    return t if isinstance(t, str) else _branch_name(t)


def avro_node(schema, named: dict, stack: tuple = ()) -> Node:
    """The node of a parsed Avro schema (fastavro's ``parse_schema`` form: full names,
    later uses of a named type by name, ``named`` its name table)."""
    if isinstance(schema, str):
        if schema in _AVRO_PRIMS:
            return Prim(schema)
        if schema not in named:
            raise ScanError(f"the Avro type {schema} is not defined")
        return avro_node(named[schema], named, stack)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if not branches:
            return Prim("null")
        return Union([(_branch_name(b), avro_node(b, named, stack)) for b in branches], len(branches) < len(schema))
    t = schema["type"]
    logical = schema.get("logicalType")
    if isinstance(t, str) and t in _AVRO_PRIMS:
        base = Prim(t)
        if logical == "decimal" and t == "bytes":
            return Logical("decimal", base, int(schema.get("precision") or 0), int(schema.get("scale") or 0))
        if logical in _LOGICAL and _LOGICAL[logical] == t:
            return Logical(logical, base)
        return base
    if t in ("record", "error"):
        name = schema["name"]
        if name in stack:
            raise ScanError(f"the Avro record {name} is recursive: a Spark type cannot be")
        inner = stack + (name,)
        return Record(name, [(f["name"], avro_node(f["type"], named, inner), f.get("default", _NO_DEFAULT))
                             for f in schema["fields"]])
    if t == "enum":
        return Enum(schema["name"], list(schema["symbols"]), schema.get("default"))
    if t == "fixed":
        if logical == "decimal":
            return Logical("decimal", Fixed(schema["name"], schema["size"]), int(schema.get("precision") or 0),
                           int(schema.get("scale") or 0))
        return Fixed(schema["name"], int(schema["size"]))
    if t == "array":
        return Array(avro_node(schema["items"], named, stack))
    if t == "map":
        return Map(avro_node(schema["values"], named, stack))
    return avro_node(t, named, stack)  # {"type": {...}}


def avro_schema_node(text: str, references: list[str]) -> Node:
    """The node of an Avro schema ``text`` whose named types from references are defined by
    ``references`` (schema texts, dependencies first)."""
    from fastavro import parse_schema

    named: dict = {}
    try:
        for ref in references:
            parse_schema(json.loads(ref), named)
        parsed = parse_schema(json.loads(text), named)
    except Exception as e:  # fastavro raises several types for a bad schema
        raise ScanError(f"the Avro schema does not parse: {' '.join(str(e).split())}") from None
    return avro_node(parsed, named)


# -- JSON Schema -> nodes --------------------------------------------------------------------------

_JSON_PRIMS = {"string": "string", "integer": "long", "number": "double", "boolean": "boolean"}


class _Nullable(Node):
    def __init__(self, inner: Node):
        self.inner = inner

    def spark_type(self):
        return self.inner.spark_type()

    def convert(self, v, path: str):
        return None if v is None else self.inner.convert(v, path)


def json_schema_node(schema) -> Node:
    """The node of a JSON Schema document (the module docstring's mapping)."""
    if not isinstance(schema, dict):
        return JsonText()
    t = schema.get("type")
    if isinstance(t, list):
        kinds = [k for k in t if k != "null"]
        if len(kinds) != 1:
            return JsonText()
        return _Nullable(json_schema_node({**schema, "type": kinds[0]}))
    if t in _JSON_PRIMS:
        return _Nullable(Prim(_JSON_PRIMS[t]))
    if t == "array" and isinstance(schema.get("items"), dict):
        return _Nullable(Array(json_schema_node(schema["items"])))
    if t == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
        return _Nullable(Record(str(schema.get("title") or "object"),
                                [(name, json_schema_node(sub), _NO_DEFAULT)
                                 for name, sub in schema["properties"].items()], strict=False))
    if t == "object" and isinstance(schema.get("additionalProperties"), dict):
        return _Nullable(Map(json_schema_node(schema["additionalProperties"])))
    return JsonText()


__all__ = ["Mismatch", "Node", "avro_node", "avro_schema_node", "json_schema_node"]

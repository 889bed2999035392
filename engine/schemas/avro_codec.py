"""Avro payloads (Confluent's ``KafkaAvroSerializer``: the binary encoding of one datum) decoded
with ``fastavro``, and rendered as JSON in Avro's own JSON encoding.

**The JSON mapping** is the Avro specification's JSON encoding, which Confluent's
``kafka-avro-console-consumer`` prints and its console producer reads back:

* null, boolean, int, long, double and string are the JSON literal, number and string;
  ``float`` is the shortest decimal that reads back to the same 32-bit value (``0.1``, not
  ``0.10000000149011612``); NaN and the infinities, which JSON cannot hold, are the strings
  ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``;
* ``bytes`` and ``fixed`` are a JSON string whose code points 0-255 are the bytes
  (``"\\u00ff\\u0000"`` is ``ff 00``);
* a record is an object with its fields in schema order, a map an object, an array an array,
  an enum its symbol;
* a union value is ``null`` for the null branch, else an object naming the branch taken:
  ``{"string": "x"}``, ``{"com.acme.Address": {...}}``, ``{"array": [...]}``;
* logical types are shown as their underlying type: ``timestamp-millis`` a long of
  milliseconds, ``date`` an int of days, ``decimal`` its bytes (two's complement), ``uuid``
  a string.

The union branch taken is exact, not guessed from the value: the schema the payload is read
with for rendering wraps each non-null union branch in a one-field record (a record's binary
encoding is its fields', so the bytes read the same) and ``fastavro`` names the record it
read. Floats are read through a one-field record too, so a float is told from a double.

:meth:`AvroCodec.decode` gives the Python value ``fastavro`` reads with the registry's schema
(logical types as ``datetime``, ``Decimal``, ``UUID``...), which is what confluent-kafka's
``AvroDeserializer`` returns.

Named types from other subjects (``references``, by full name) are parsed first, into the
same name table, as the registry and the serializers resolve them.
"""

from __future__ import annotations

import io
import json
import math
import struct
from typing import Any, Callable

from plog.formats import native
from plog.formats.schema_registry import SchemaReference, SchemaValue

from plog.engine.schemas.errors import PayloadError, SchemaCompileError

#: How many references deep a schema may go (a cycle is reported, not followed for ever).
MAX_REFERENCE_DEPTH = 32

_F32 = "\x00f32"  # the field of the record a float is read through (no Avro name can be this)
_TOP = "plog.top"
_PACK_F = struct.Struct(">f").pack
_SPECIAL = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _branch_name(branch) -> str:
    """How Avro's JSON encoding names a union branch: a primitive's or named type's (full) name,
    ``array`` or ``map``."""
    if isinstance(branch, str):
        return branch
    t = branch.get("type")
    if t in ("record", "error", "enum", "fixed"):
        return branch["name"]
    return t if isinstance(t, str) else _branch_name(t)


def _render_form(schema):
    """The schema that reads the same bytes with union branches and floats labelled (module doc)."""
    if isinstance(schema, str):
        if schema == "float":
            return {"type": "record", "name": "plog.float32", "fields": [{"name": _F32, "type": "float"}]}
        return schema
    if isinstance(schema, list):
        return [b if b == "null" else
                {"type": "record", "name": _branch_name(b), "fields": [{"name": "v", "type": _render_form(b)}]}
                for b in schema]
    t = schema["type"]
    if t in ("record", "error"):
        return {"type": "record", "name": schema["name"],
                "fields": [{"name": f["name"], "type": _render_form(f["type"])} for f in schema["fields"]]}
    if t == "array":
        return {"type": "array", "items": _render_form(schema["items"])}
    if t == "map":
        return {"type": "map", "values": _render_form(schema["values"])}
    if t == "enum":
        return {"type": "enum", "name": schema["name"], "symbols": schema["symbols"]}
    if t == "fixed":
        return {"type": "fixed", "name": schema["name"], "size": schema["size"]}
    return _render_form(t)  # a primitive with a logicalType: its underlying type


def _top(schema, named: dict) -> dict:
    """``schema`` as the one field of a parsed record, so that any top-level schema (a union,
    a primitive) reads with the name table ``named``."""
    return {"type": "record", "name": _TOP, "fields": [{"name": "v", "type": schema}],
            "__fastavro_parsed": True, "__named_schemas": named}


def _float32(x: float) -> Any:
    if x != x:
        return "NaN"
    if x in _SPECIAL:
        return _SPECIAL[x]
    packed = _PACK_F(x)
    for digits in range(1, 10):
        short = float(f"{x:.{digits}g}")
        try:
            if _PACK_F(short) == packed:
                return short
        except OverflowError:  # rounded up past the largest float (3.403e+38): more digits
            continue
    return x


def to_avro_json(value) -> Any:
    """A value read with the render form as a JSON-ready value (module docstring mapping)."""
    if value is None or value is True or value is False or type(value) in (int, str):
        return value
    t = type(value)
    if t is float:
        if value != value:
            return "NaN"
        return _SPECIAL.get(value, value)
    if t is dict:
        if len(value) == 1 and _F32 in value:
            return _float32(value[_F32])
        return {k: to_avro_json(v) for k, v in value.items()}
    if t is tuple:  # (branch name, {"v": value}): a union
        return {value[0]: to_avro_json(value[1]["v"])}
    if t is list:
        return [to_avro_json(v) for v in value]
    if t in (bytes, bytearray):
        return bytes(value).decode("latin-1")
    return str(value)


_PRIMITIVES = frozenset(["null", "boolean", "int", "long", "float", "double", "bytes", "string"])


class _NoProgram(Exception):
    """A schema shape the native renderer is not given (the reference renders it)."""


def _native_program(schema, named: dict) -> tuple[list, int]:
    """The node table of ``schema`` for ``plog._native.avro_program`` (native/src/avro_json.rs):
    ``(tag, argument)`` pairs, children by index, each named type compiled once (so recursive
    types point back to themselves). Labels and names are pre-rendered JSON strings, the union
    labels :func:`_branch_name`'s, as the render form names its branches."""
    nodes: list = []
    by_name: dict[str, int] = {}

    def reserve(name: str | None = None) -> int:
        nodes.append(None)
        if name is not None:
            by_name[name] = len(nodes) - 1
        return len(nodes) - 1

    def label(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)

    def build(s) -> int:
        if isinstance(s, str):
            if s in _PRIMITIVES:
                i = reserve()
                nodes[i] = (s, None)
                return i
            if s in by_name:
                return by_name[s]
            if s in named:
                return build(named[s])
            raise _NoProgram(f"unknown type {s!r}")
        if isinstance(s, list):
            i = reserve()
            nodes[i] = ("union", [(None if b == "null" else label(_branch_name(b)), build(b)) for b in s])
            return i
        t = s.get("type")
        if t in ("record", "error"):
            if s["name"] in by_name:
                return by_name[s["name"]]
            i = reserve(s["name"])
            nodes[i] = ("record", [(label(f["name"]), build(f["type"])) for f in s["fields"]])
            return i
        if t == "enum":
            i = reserve(s["name"])
            nodes[i] = ("enum", [(label(sym), sym) for sym in s["symbols"]])
            return i
        if t == "fixed":
            i = reserve(s["name"])
            nodes[i] = ("fixed", int(s["size"]))
            return i
        if t in ("array", "map"):
            i = reserve()
            nodes[i] = (t, build(s["items"] if t == "array" else s["values"]))
            return i
        return build(t)  # a primitive with a logicalType: rendered as its underlying type

    root = build(schema)
    return nodes, root


class AvroCodec:
    """A decoder for payloads written with one Avro schema (and its references).

    With the native core active, :meth:`render` runs ``plog._native.avro_render_json`` over
    the payload (the same text, from one pass over the bytes) and the reference path below for
    any payload it hands back (anything unusual, including every payload that does not decode,
    so the reasons stay the reference's)."""

    schema_type = "AVRO"

    def __init__(self, value: SchemaValue, lookup: Callable[[SchemaReference], SchemaValue | None]):
        from fastavro import parse_schema

        named: dict = {}
        self._parse_references(value, lookup, named, set(), 0)
        try:
            parsed = parse_schema(json.loads(value.schema), named)
        except Exception as e:  # fastavro raises several types for a bad schema
            raise SchemaCompileError(f"the Avro schema does not parse: {_why(e)}") from None
        bare = {k: v for k, v in parsed.items() if not k.startswith("__")} if isinstance(parsed, dict) else parsed
        self._decode_schema = _top(bare, named)
        self._render_schema = _top(_render_form(bare), {name: _render_form(s) for name, s in named.items()})
        self._program = None
        self._paths: dict[tuple, list[str]] = {}
        if native.active():
            try:
                self._program = native.module.avro_program(*_native_program(bare, named))
            except (_NoProgram, KeyError, TypeError, ValueError, RecursionError):
                self._program = None  # the reference renders every payload of this schema

    def _parse_references(self, value: SchemaValue, lookup, named: dict, seen: set, depth: int) -> None:
        from fastavro import parse_schema

        if depth > MAX_REFERENCE_DEPTH:
            raise SchemaCompileError(f"references deeper than {MAX_REFERENCE_DEPTH} (a cycle?)")
        for ref in value.references:
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            target = lookup(ref)
            if target is None:
                raise SchemaCompileError(f"the referenced schema {ref.name} (subject {ref.subject} version "
                                         f"{ref.version}) is not known")
            self._parse_references(target, lookup, named, seen, depth + 1)
            try:
                parse_schema(json.loads(target.schema), named)
            except Exception as e:
                raise SchemaCompileError(f"the referenced schema {ref.name} does not parse: {_why(e)}") from None

    def _read(self, schema: dict, payload: bytes, **options):
        from fastavro import schemaless_reader

        fo = io.BytesIO(payload)
        try:
            result = schemaless_reader(fo, schema, None, **options)
        except Exception as e:  # EOFError, IndexError, UnicodeDecodeError, ValueError...
            raise PayloadError(f"the payload does not match its Avro schema: {_why(e)}") from None
        left = len(payload) - fo.tell()
        if left:
            raise PayloadError(f"the payload does not match its Avro schema: {left} byte{'' if left == 1 else 's'} "
                               "left after the value")
        return result["v"]

    def decode(self, payload: bytes, indexes=None):
        """The value as ``fastavro`` reads it (logical types converted)."""
        return self._read(self._decode_schema, payload)

    def render(self, payload: bytes, indexes=None) -> str:
        """The value in Avro's JSON encoding, as compact JSON text."""
        if self._program is not None:
            try:
                text = native.module.avro_render_json(self._program, payload)
            except native.NativeFormatError:
                text = None  # a fault of the native unit: the reference decides
            if text is not None:
                return text
        return self.render_reference(payload)

    def render_prefixed(self, framed: bytes, start: int) -> str | None:
        """The text of the datum at ``framed[start:]``, or None when it does not render (the
        resolver's shortcut for prefixed values: it then takes the whole way, which says why)."""
        if self._program is not None:
            try:
                text = native.module.avro_render_json(self._program, framed, start)
            except native.NativeFormatError:
                text = None
            if text is not None:
                return text
        try:
            return self.render_reference(framed[start:])
        except Exception:  # noqa: BLE001  (the resolver's whole way names the reason)
            return None

    def extract_prefixed(self, framed: bytes, start: int, path: tuple[str, ...]) -> tuple[bool, Any] | None:
        """``(found, value)`` at ``path`` of the datum at ``framed[start:]`` as ``scan --where``
        walks its JSON (``plog._native.avro_extract``), or None where the caller takes the whole
        way (no native program, or a payload or path the native walk leaves to it)."""
        if self._program is None:
            return None
        names = self._paths.get(path)
        if names is None:
            names = self._paths[path] = [json.dumps(name, ensure_ascii=False) for name in path]
        try:
            return native.module.avro_extract(self._program, framed, start, names)
        except native.NativeFormatError:
            return None

    def render_reference(self, payload: bytes) -> str:
        """:meth:`render` on the pure-Python path (fastavro, :func:`to_avro_json`, ``json``)."""
        value = to_avro_json(self._read(self._render_schema, payload, return_record_name=True))
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _why(e: Exception) -> str:
    if isinstance(e, EOFError):
        return "the payload ends before the value does"
    text = " ".join(str(e).split())
    return text or type(e).__name__.replace("Error", " error").lower()


__all__ = ["AvroCodec", "MAX_REFERENCE_DEPTH", "to_avro_json"]

"""Confluent-framed keys and values decoded by the ``plog`` data source (``decode``,
``decode_key``, ``schemas``, ``schema_registry``, ``subject``, ``key_subject`` options).

:func:`decode_plan` runs on the driver, once per read: it checks the options, finds the
schema sources (:func:`plog.engine.schemas.resolver.open_resolver`: the ``_schemas`` topic
under the read paths, then each ``schemas`` path, then the registry URL) and, for
``subject``, builds the struct column's type from the subject's latest schema
(:mod:`.struct_column`). The :class:`DecodePlan` travels to the executors with the reader.

**Why the schemas are shipped from the driver** rather than read again on each executor: the
driver must read them anyway (a ``subject``'s Spark type is part of the table's schema, and a
bad ``schemas`` path must fail the query at once, in one line); a registry's state is small
(kilobytes to a few MB pickled, far less than one work unit's records); every executor then
decodes with exactly the state the struct type was built from, even if the ``_schemas``
files change during the job; and executors do not each replay the ``_schemas`` topic once
per partition. A registry URL is shipped as a URL: executors ask it themselves, once per
schema id per partition (the source caches its answers).

:class:`ColumnDecoder` runs on an executor, one per partition (work unit): it builds one
:class:`~plog.engine.schemas.resolver.SchemaResolver` over the shipped sources (each schema
compiled once per partition, never per record) and appends the decoded columns to every
Arrow batch of the unit, whichever path (native or reference) built the batch. The columns
are built in Python per record.

Columns (``value_*``; ``key_*`` alike with ``decode_key``):

* ``value_decoded`` STRING: the JSON text ``plog consume --value-format auto`` prints for the
  value (Avro's JSON encoding, Protobuf's JSON mapping, the JSON Schema document's JSON);
* ``value_schema_id`` INT: the schema id the value is framed with (for a GUID frame, the id
  of the schema the GUID names when it is known); null when the value is not framed;
* ``value_decode_error`` STRING: why the value is not decoded (the resolver's reason: not
  framed, unknown id, a schema that does not parse, a payload that does not match); null
  when decoded;
* with ``subject``: ``value_struct`` (the typed value) and ``value_struct_error`` STRING
  (null when ``value_struct`` is filled: else the decode reason, that the value's schema is
  not a version of the subject, or where the value does not convert to the latest version).

A null value (a tombstone) gives nulls in every column, errors included (as ``consume``
shows a null value: not a decoding failure).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from plog.engine.errors import ScanError

#: ``decode``/``decode_key`` values -> the schema type forced (None: any, the framing says).
FORMATS = {"confluent": None, "auto": None, "avro": "AVRO", "protobuf": "PROTOBUF", "json-schema": "JSON"}
_OFF = ("", "off", "none", "raw")
_PARTITION_FOLDER = re.compile(r"^.+-\d+$")


@dataclass
class StructPlan:
    """The struct column of one subject: its latest version's type (``node``) and the ids of
    every version (rows framed with one of them, or whose schema names the subject, convert)."""

    subject: str
    version: int
    schema_type: str
    ids: frozenset
    node: object

    def spark_type(self):
        return self.node.spark_type()


@dataclass
class FieldPlan:
    """What is decoded of the key or of the value."""

    name: str  # "key" or "value"
    fmt: str
    struct: StructPlan | None = None

    @property
    def expect(self) -> str | None:
        return FORMATS[self.fmt]

    def spark_fields(self) -> list:
        from pyspark.sql import types as T

        out = [T.StructField(f"{self.name}_decoded", T.StringType()),
               T.StructField(f"{self.name}_schema_id", T.IntegerType()),
               T.StructField(f"{self.name}_decode_error", T.StringType())]
        if self.struct is not None:
            out += [T.StructField(f"{self.name}_struct", self.struct.spark_type()),
                    T.StructField(f"{self.name}_struct_error", T.StringType())]
        return out


@dataclass
class DecodePlan:
    """What executors need to decode: the fields and the schema sources (module docstring)."""

    fields: list[FieldPlan]
    sources: list = field(default_factory=list)

    def spark_fields(self) -> list:
        return [f for plan in self.fields for f in plan.spark_fields()]


def _format(options: dict, name: str) -> str | None:
    raw = options.get(name)
    value = "" if raw is None else str(raw).strip().lower()
    if value in _OFF:
        return None
    if value not in FORMATS:
        raise ScanError(f"option {name}: expected confluent, avro, protobuf, json-schema or off, got {raw!r}")
    return value


def _list(raw) -> list[str]:
    if raw is None or not str(raw).strip():
        return []
    try:
        found = json.loads(raw)
    except ValueError:
        found = [p for p in str(raw).split(",") if p.strip()]
    return [str(p).strip() for p in ([found] if isinstance(found, str) else found)]


def _schema_dirs(paths: list[str]) -> list[str]:
    """Where the default ``_schemas`` is looked for: each read path, or a partition folder's
    log directory (only a partition folder's parent: any other folder's may be a whole disk)."""
    out = []
    for p in paths:
        p = os.path.dirname(p) if _PARTITION_FOLDER.match(os.path.basename(p)) else p
        if p not in out:
            out.append(p)
    return out


def decode_plan(options: dict, paths: list[str], level: str) -> DecodePlan | None:
    """The plan of the decode options (None when nothing is decoded); raises
    :class:`ScanError` (one line) for a bad option."""
    value_fmt, key_fmt = _format(options, "decode"), _format(options, "decode_key")
    schemas = _list(options.get("schemas"))
    url = (options.get("schema_registry") or "").strip() or None
    subject = (options.get("subject") or "").strip() or None
    key_subject = (options.get("key_subject") or "").strip() or None
    if value_fmt is None and key_fmt is None:
        given = [n for n, v in (("schemas", schemas), ("schema_registry", url), ("subject", subject),
                                ("key_subject", key_subject)) if v]
        if given:
            raise ScanError(f"option {given[0]} needs option decode (confluent, avro, protobuf or json-schema)")
        return None
    if level != "record":
        raise ScanError("option decode needs level=record (batch rows have no keys or values)")
    if subject and value_fmt is None:
        raise ScanError("option subject needs option decode")
    if key_subject and key_fmt is None:
        raise ScanError("option key_subject needs option decode_key")
    resolver = _open_resolver(paths, schemas, url)
    fields = []
    if key_fmt is not None:
        fields.append(FieldPlan("key", key_fmt, struct_plan(resolver, key_subject, "key_subject") if key_subject
                                else None))
    if value_fmt is not None:
        fields.append(FieldPlan("value", value_fmt, struct_plan(resolver, subject, "subject") if subject else None))
    return DecodePlan(fields, list(resolver.sources))


def _open_resolver(paths: list[str], schemas: list[str], url: str | None):
    from plog.engine.schemas.errors import SchemaSourceError
    from plog.engine.schemas.resolver import open_resolver

    for p in schemas:
        if not os.path.exists(p):
            raise ScanError(f"option schemas: {p}: no such file or directory")
    try:
        return open_resolver(_schema_dirs(paths), schemas_paths=[os.path.abspath(p) for p in schemas],
                             registry_url=url)
    except SchemaSourceError as e:
        option = "schema_registry" if url and getattr(e, "source", None) == url else "schemas"
        raise ScanError(f"option {option}: {e}") from None
    except OSError as e:
        raise ScanError(f"option schemas: {e.filename}: {e.strerror}") from None


# -- the struct column's plan (driver) -------------------------------------------------------------


def _latest(resolver, subject: str):
    from plog.engine.schemas.errors import SchemaSourceError

    for source in resolver.sources:
        try:
            found = source.version(subject, -1)
        except SchemaSourceError as e:
            raise ScanError(f"option subject: {e}") from None
        if found is not None:
            return found
    asked = ", ".join(s.label for s in resolver.sources) or "no schema source (no _schemas topic under the paths)"
    raise ScanError(f"option subject: no subject {subject!r} with a live version in {asked}")


def _reference_texts(resolver, value, seen: set, depth: int = 0) -> list[str]:
    """The schema texts ``value``'s references name, dependencies first."""
    if depth > 32:
        raise ScanError("option subject: references deeper than 32 (a cycle?)")
    out = []
    for ref in value.references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        target = next((t for s in resolver.sources for t in [s.version(ref.subject, ref.version)] if t is not None),
                      None)
        if target is None:
            raise ScanError(f"option subject: the referenced schema {ref.name} (subject {ref.subject} version "
                            f"{ref.version}) is not known")
        out += _reference_texts(resolver, target, seen, depth + 1) + [target.schema]
    return out


def struct_plan(resolver, subject: str, option: str = "subject") -> StructPlan:
    """The struct column of ``subject``'s latest version (raises :class:`ScanError`)."""
    from .struct_column import avro_schema_node, json_schema_node

    latest = _latest(resolver, subject)
    ids = {latest.id}
    for registry in resolver.registries:
        ids.update(v.id for v in registry.state.versions(subject, include_deleted=True))
    try:
        if latest.schema_type == "AVRO":
            node = avro_schema_node(latest.schema, _reference_texts(resolver, latest, set()))
        elif latest.schema_type == "JSON":
            try:
                doc = json.loads(latest.schema)
            except ValueError:
                raise ScanError("the JSON Schema does not parse") from None
            node = json_schema_node(doc)
        else:
            raise ScanError(f"{latest.schema_type} subjects have no struct column (value_decoded holds the JSON; "
                            f"Spark's from_json can type it)")
    except ScanError as e:
        message = str(e)
        if message.startswith("option "):
            raise
        raise ScanError(f"option {option}: {subject} version {latest.version} (id {latest.id}): {message}") from None
    return StructPlan(subject, latest.version, latest.schema_type, frozenset(ids), node)


# -- the columns (executor) ------------------------------------------------------------------------


class ColumnDecoder:
    """Appends the decoded columns to a unit's Arrow batches (module docstring)."""

    def __init__(self, plan: DecodePlan, arrow_schema):
        from plog.engine.schemas.resolver import SchemaResolver

        self.plan = plan
        self.schema = arrow_schema  # the whole batch's, decoded columns included
        self.resolver = SchemaResolver(plan.sources)
        self._guid_ids: dict = {}

    def extend(self, batch):
        import pyarrow as pa

        headers = batch.column("headers").to_pylist()
        headers = [[(h["key"], h["value"]) for h in hs] if hs else () for hs in headers]
        arrays = list(batch.columns)
        for fp in self.plan.fields:
            columns = self._field_columns(fp, batch.column(fp.name).to_pylist(), headers)
            if fp.struct is not None:
                columns[3] = _struct_array(columns[3], columns[4], self.schema.field(len(arrays) + 3).type)
            for column in columns:
                arrays.append(column if isinstance(column, pa.Array) else
                              pa.array(column, type=self.schema.field(len(arrays)).type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _schema_id(self, decoded) -> int | None:
        if decoded.schema_id is not None or decoded.guid is None:
            return decoded.schema_id
        guid = decoded.guid
        if guid not in self._guid_ids:
            found = None
            for source in self.resolver.sources:
                try:
                    found = source.by_guid(guid)
                except Exception:  # a registry that does not answer: the id stays unknown
                    found = None
                if found is not None:
                    break
            self._guid_ids[guid] = None if found is None else found.id
        return self._guid_ids[guid]

    def _field_columns(self, fp: FieldPlan, data: list, headers: list) -> list[list]:
        decode = self.resolver.decode
        is_key = fp.name == "key"
        expect = fp.expect
        struct = fp.struct
        texts, ids, errors, structs, struct_errors = [], [], [], [], []
        for value, hs in zip(data, headers):
            if value is None:
                texts.append(None), ids.append(None), errors.append(None)
                structs.append(None), struct_errors.append(None)
                continue
            d = decode(value, hs, is_key=is_key, expect=expect)
            schema_id = self._schema_id(d)
            texts.append(d.json)
            ids.append(schema_id)
            errors.append(d.reason)
            if struct is not None:
                got, why = _to_struct(struct, d, schema_id)
                structs.append(got)
                struct_errors.append(why)
        if struct is None:
            return [texts, ids, errors]
        return [texts, ids, errors, structs, struct_errors]


def _struct_array(values: list, errors: list, typ):
    """The struct column as Arrow; a value Arrow refuses (which the conversion should have
    caught) becomes a null struct with the reason in ``errors``, never a failed task."""
    import pyarrow as pa

    try:
        return pa.array(values, type=typ)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    for i, v in enumerate(values):
        if v is not None:
            try:
                pa.array([v], type=typ)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                values[i] = None
                errors[i] = f"does not convert to the struct column: {' '.join(str(e).split())}"
    return pa.array(values, type=typ)


def _to_struct(plan: StructPlan, d, schema_id: int | None):
    """``(struct value, None)`` or ``(None, reason)`` for a decoded key or value."""
    from .struct_column import Mismatch

    if d.json is None:
        return None, d.reason
    if schema_id not in plan.ids and d.subject != plan.subject:
        about = f" (subject {d.subject} version {d.version})" if d.subject else ""
        return None, f"schema id {schema_id}{about} is not a version of subject {plan.subject}"
    try:
        return plan.node.convert(json.loads(d.json), ""), None
    except Mismatch as e:
        return None, f"does not convert to subject {plan.subject} version {plan.version}: {e}"
    except (TypeError, ValueError, ArithmeticError) as e:
        return None, f"does not convert to subject {plan.subject} version {plan.version}: {e}"


__all__ = ["ColumnDecoder", "DecodePlan", "FORMATS", "decode_plan", "struct_plan"]

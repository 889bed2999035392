"""Decoding a Confluent-framed key or value with the schema its id names: one call per record,
which never raises for a record's bytes.

:meth:`SchemaResolver.render` is what a command that shows records calls (``dump``,
``consume``, ``scan``, the Spark source): it returns ``(json_text, None)`` for a decoded key or
value, or ``(None, reason)`` to show the bytes raw, the reason saying why:

* not framed: ``null value``, ``the first byte of the value is 0x7b, not a Confluent magic
  byte (0 or 1)``, ``truncated: ...``;
* ``unknown schema id 42`` (or GUID), naming the sources asked;
* the schema does not parse or compile (``schema id 7: the Avro schema does not parse: ...``),
  or a reference it needs is missing;
* the payload does not match its schema (``schema id 7: the payload does not match its Avro
  schema: 3 bytes left after the value``), or a Protobuf message index names no message.

A JSON Schema value checked with ``validate_json`` and found invalid is returned decoded
*with* a reason (a warning). :meth:`SchemaResolver.decode` returns the same as a
:class:`Decoded` with the schema's id, type, subject and version, and :meth:`SchemaResolver.value`
the decoded Python value (for predicates on fields).

Schemas are looked up in the sources in order (:mod:`.sources`): the first that has the id
wins; references are looked up in the same source first. Each schema is compiled once
(failures too: a schema that does not parse is not parsed again for every record).
A source that cannot be asked (a registry URL that does not answer) is asked once: its
error becomes part of the reason of the records it could have decoded.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from typing import Any, NamedTuple, Sequence

from plog.formats import native
from plog.formats.confluent_wire import Frame, WireFormatError, parse_frame, split_payload
from plog.formats.schema_registry import AVRO, DEFAULT_TOPIC, JSON, PROTOBUF, SchemaReference, SchemaValue

from plog.engine.schemas.errors import PayloadError, SchemaCompileError, SchemaSourceError
from plog.engine.schemas.sources import (
    LoadedRegistry,
    RegistryLogSource,
    RegistryUrlSource,
    SchemaFilesSource,
    SchemaSource,
    load_registry,
)


class Decoded(NamedTuple):
    """A key or value as :meth:`SchemaResolver.decode` found it. ``json`` is None when it is to
    be shown raw (``reason`` says why); with ``json`` set, ``reason`` is a warning or None."""

    json: str | None
    reason: str | None
    schema_id: int | None = None
    guid: uuid.UUID | None = None
    schema_type: str | None = None
    subject: str | None = None
    version: int | None = None
    value: Any = None


class _Compiled(NamedTuple):
    schema: SchemaValue | None
    codec: Any  # a codec, or None when ``error`` says why there is none
    error: str | None
    source: SchemaSource | None


class SchemaResolver:
    """Decodes framed keys and values with schemas from ``sources`` (module docstring).

    ``json_names``: Protobuf fields under their JSON (lowerCamelCase) names, as Confluent's
    console consumer prints them; False keeps the ``.proto`` names. ``validate_json``: check
    JSON Schema values against their schema (needs the ``jsonschema`` package).
    """

    def __init__(self, sources: Sequence[SchemaSource], *, json_names: bool = True, validate_json: bool = False,
                 registries: Sequence[LoadedRegistry] = ()):
        self.sources = list(sources)
        self.registries = list(registries)
        self.json_names = json_names
        self.validate_json = validate_json
        #: How many keys and values were shown raw, by reason (for a summary after a run).
        self.raw_reasons: Counter = Counter()
        self._compiled: dict[tuple, _Compiled] = {}
        #: The 4 id bytes of a magic-0 prefix -> (codec, schema type, Decoded fields) for the Avro
        #: schemas and the Protobuf schemas the native renderer holds: :meth:`decode`'s shortcut
        #: (same result, fewer steps).
        self._prefixed: dict[bytes, tuple] = {}
        self._dead: dict[int, str] = {}
        if validate_json:
            from plog.engine.schemas.json_codec import jsonschema_available

            if not jsonschema_available():
                raise SchemaSourceError("validating JSON Schema values needs the jsonschema package "
                                        "(pip install 'plog[jsonschema]')")

    # -- finding and compiling schemas ----------------------------------------------------------

    def _ask(self, source: SchemaSource, method: str, *args) -> SchemaValue | None:
        key = id(source)
        if key in self._dead:
            return None
        try:
            return getattr(source, method)(*args)
        except SchemaSourceError as e:
            self._dead[key] = str(e)
            return None

    def _lookup_reference(self, first: SchemaSource | None):
        def lookup(ref: SchemaReference) -> SchemaValue | None:
            order = ([first] if first is not None else []) + [s for s in self.sources if s is not first]
            for source in order:
                found = self._ask(source, "version", ref.subject, ref.version)
                if found is not None:
                    return found
            return None

        return lookup

    def _unknown(self, what: str) -> str:
        asked = ", ".join(s.label for s in self.sources) or "no schema source"
        failures = "; ".join(self._dead.values())
        return f"unknown schema {what} (not in {asked}{f'; {failures}' if failures else ''})"

    def compiled(self, frame: Frame) -> _Compiled:
        """The codec of the schema a frame names (cached, failures too)."""
        key = (frame.schema_id, frame.guid)
        found = self._compiled.get(key)
        if found is not None:
            return found
        schema, source = None, None
        for candidate in self.sources:
            schema = (self._ask(candidate, "by_id", frame.schema_id) if frame.schema_id is not None
                      else self._ask(candidate, "by_guid", frame.guid))
            if schema is not None:
                source = candidate
                break
        if schema is None:
            result = _Compiled(None, None, self._unknown(frame.id_text), None)
        else:
            try:
                result = _Compiled(schema, self._codec(schema, source), None, source)
            except SchemaCompileError as e:
                result = _Compiled(schema, None, f"schema {frame.id_text}: {e}", source)
            except Exception as e:  # a schema is input too: whatever a library raises on it stays its reason
                result = _Compiled(schema, None, f"schema {frame.id_text} cannot be used: {_text(e)}", source)
        self._compiled[key] = result
        if frame.schema_id is not None and schema is not None and result.codec is not None \
                and (schema.schema_type == AVRO or getattr(result.codec, "_plan", None) is not None):
            self._prefixed[frame.schema_id.to_bytes(4, "big")] = (
                result.codec, schema.schema_type, (frame.schema_id, None, *_about(schema)))
        return result

    def _codec(self, schema: SchemaValue, source: SchemaSource):
        lookup = self._lookup_reference(source)
        if schema.schema_type == AVRO:
            from plog.engine.schemas.avro_codec import AvroCodec

            return AvroCodec(schema, lookup)
        if schema.schema_type == PROTOBUF:
            from plog.engine.schemas.protobuf_codec import ProtobufCodec

            dirs = [d for s in self.sources for d in s.include_dirs]
            return ProtobufCodec(schema, lookup, include_dirs=dirs, json_names=self.json_names)
        if schema.schema_type == JSON:
            from plog.engine.schemas.json_codec import JsonSchemaCodec

            return JsonSchemaCodec(schema, lookup, validate=self.validate_json)
        raise SchemaCompileError(f"unknown schema type {schema.schema_type}")

    # -- one record ---------------------------------------------------------------------------------

    def decode(self, data: bytes | None, headers: Sequence = (), *, is_key: bool = False,
               expect: str | None = None, want_value: bool = False) -> Decoded:
        """Decode a key (``is_key``) or value; ``expect`` a schema type (``AVRO``, ``PROTOBUF``,
        ``JSON``) to refuse any other; ``want_value`` to also get the Python value."""
        if not headers and not want_value and type(data) is bytes and data[:1] == b"\x00":
            # The common case, shortened: a magic-0 prefix of an Avro schema already compiled,
            # no header that could carry another id. A payload that does not render goes the
            # whole way below, which says why.
            fast = self._prefixed.get(data[1:5])
            if fast is not None and (expect is None or expect == fast[1]):
                text = fast[0].render_prefixed(data, 5)
                if text is not None:
                    return Decoded(text, None, *fast[2])
        frame = parse_frame(data, headers, is_key=is_key)
        if not frame.framed:
            return self._raw(Decoded(None, frame.reason))
        compiled = self.compiled(frame)
        schema = compiled.schema
        ids = (frame.schema_id, frame.guid)
        if compiled.codec is None:
            return self._raw(Decoded(None, compiled.error, *ids, *_about(schema)))
        if expect is not None and schema.schema_type != expect:
            return self._raw(Decoded(None, f"schema {frame.id_text} is {schema.schema_type}, not {expect}", *ids,
                                     *_about(schema)))
        codec = compiled.codec
        try:
            indexes, payload = split_payload(frame, protobuf=schema.schema_type == PROTOBUF)
            if schema.schema_type == JSON:
                value = codec.decode(payload)
                return Decoded(codec.dumps(value), codec.problems(value), *ids, *_about(schema),
                               value if want_value else None)
            if want_value:
                value = codec.decode(payload, indexes)
                text = codec.render(payload, indexes)
                return Decoded(text, None, *ids, *_about(schema), value)
            return Decoded(codec.render(payload, indexes), None, *ids, *_about(schema))
        except (PayloadError, WireFormatError) as e:
            reason = e.reason if isinstance(e, WireFormatError) else str(e)
            return self._raw(Decoded(None, f"schema {frame.id_text}: {reason}", *ids, *_about(schema)))
        except Exception as e:  # hostile bytes: the decoders' own errors are not all typed
            return self._raw(Decoded(None, f"schema {frame.id_text}: the payload does not decode: {_text(e)}", *ids,
                                     *_about(schema)))

    def extract(self, data: bytes | None, headers: Sequence, path: tuple[str, ...], *,
                is_key: bool = False) -> tuple[bool, Any] | None:
        """The scalar at ``path`` of a key or value's JSON, as ``scan --where`` walks it
        (engine/inspect/scan_filter.py, ``_walk``), without rendering it: ``(True, value)``
        (None, bool, int, float or str), ``(False, None)`` where the path leads nowhere, or
        None where the caller takes the whole way (:meth:`render`, ``json.loads``, its walk).
        Answered for Avro values with a magic-0 prefix and no id header, on the native path;
        a key or value that does not decode is always None here (the whole way says why)."""
        if self._prefixed and not headers and type(data) is bytes and data[:1] == b"\x00":
            fast = self._prefixed.get(data[1:5])
            if fast is not None:
                return fast[0].extract_prefixed(data, 5, path)
        return None

    @property
    def can_mask(self) -> bool:
        """Whether :meth:`where_mask` may answer: the native core is on and an Avro schema has
        been compiled (a caller checks this before building the values list)."""
        return native.active() and any(getattr(v[0], "_program", None) is not None for v in self._prefixed.values())

    def where_mask(self, values: list, conditions: Sequence[tuple[tuple[str, ...], str, Any]]) -> bytes | None:
        """``scan --where`` conditions on the values of many records at once (native path):
        one byte per value, 0 when the conditions (``(path, op, literal)`` on the value, all
        to hold) do not all hold, 1 when they do, 2 when the caller must decide on the whole
        way (:meth:`render`, ``json.loads``, its walk). ``values``: the framed bytes, None for
        a null value, any other object for a record the caller looks at itself (one with
        headers: they may carry another id). None when nothing can be answered here (no
        native core, no Avro schema compiled yet, a literal this path does not compare)."""
        if not self.can_mask:
            return None
        programs = {k: v[0]._program for k, v in self._prefixed.items() if getattr(v[0], "_program", None) is not None}
        if not programs:
            return None
        conds = [([json.dumps(name, ensure_ascii=False) for name in path], op, literal)
                 for path, op, literal in conditions]
        try:
            return native.module.avro_where(programs, values, conds)
        except native.NativeFormatError:
            return None

    def _raw(self, decoded: Decoded) -> Decoded:
        self.raw_reasons[decoded.reason] += 1
        return decoded

    def render(self, data: bytes | None, headers: Sequence = (), is_key: bool = False,
               expect: str | None = None) -> tuple[str | None, str | None]:
        """``(json_text, None)``, ``(json_text, warning)`` or ``(None, reason to show it raw)``."""
        decoded = self.decode(data, headers, is_key=is_key, expect=expect)
        return decoded.json, decoded.reason

    def value(self, data: bytes | None, headers: Sequence = (), is_key: bool = False) -> tuple[Any, str | None]:
        """``(python value, None)`` or ``(None, reason)``: Avro as fastavro reads it, Protobuf a
        message, JSON Schema the parsed JSON."""
        decoded = self.decode(data, headers, is_key=is_key, want_value=True)
        return (decoded.value, decoded.reason) if decoded.json is not None else (None, decoded.reason)


def _text(e: Exception) -> str:
    return " ".join(str(e).split()) or "no reason given"


def _about(schema: SchemaValue | None) -> tuple:
    if schema is None:
        return (None, None, None)
    return (schema.schema_type, schema.subject, schema.version)


def open_resolver(paths: Sequence[str | os.PathLike] = (), *, schemas_paths: Sequence[str | os.PathLike] = (),
                  schema_files: str | os.PathLike | None = None, registry_url: str | None = None,
                  topic: str = DEFAULT_TOPIC, json_names: bool = True, validate_json: bool = False) -> SchemaResolver:
    """A resolver over the sources in their order: the ``_schemas`` topic under ``paths`` (the
    directories being read; a path without it is passed over), under each of ``schemas_paths``
    (it must be there), the schema files directory, then the registry URL."""
    from plog.engine.schemas.topic_reader import find_partitions

    registries, seen = [], set()
    for path in paths:
        try:
            replicas = find_partitions(path, topic)
        except (SchemaSourceError, OSError):
            continue
        if not any(r.path in seen for r in replicas):
            loaded = load_registry(path, topic)
            seen.update(r.path for r in replicas)
            registries.append(loaded)
    for path in schemas_paths:
        loaded = load_registry(path, topic)
        if loaded.report.partition not in seen:
            seen.add(loaded.report.partition)
            registries.append(loaded)
    sources: list[SchemaSource] = [RegistryLogSource(r) for r in registries]
    if schema_files is not None:
        sources.append(SchemaFilesSource(schema_files))
    if registry_url is not None:
        sources.append(RegistryUrlSource(registry_url))
    return SchemaResolver(sources, json_names=json_names, validate_json=validate_json, registries=registries)


__all__ = ["Decoded", "SchemaResolver", "open_resolver"]

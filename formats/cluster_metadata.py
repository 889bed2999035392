"""KRaft metadata records: the values of ``__cluster_metadata`` batches and snapshots.

Each record of a non-control batch (in a ``__cluster_metadata-0/*.log`` segment, a
``<offset>-<epoch>.checkpoint`` snapshot or ``bootstrap.checkpoint``) has no key and a
value framed by Kafka's ``AbstractApiMessageSerde``::

    uvarint frame version (1)   uvarint apiKey   uvarint version   message (flexible)

The apiKey names the record type (:class:`~plog.formats.metadata_schemas.MetadataRecordType`)
and the message is the schema of that type at ``version``; trailing bytes are an error.
Each of the three header numbers is read as a Java int and must not exceed 32767; a value
that wraps negative (5-byte varints of 2**31 and above) is cut to a Java ``short``.

:func:`dump_metadata_payload` gives the text ``kafka-dump-log.sh --cluster-metadata-decoder``
prints after ``payload: `` -- the same in Kafka 4.x (Java ``org.apache.kafka.tools``) and
3.9 (Scala ``kafka.tools``), except for the schema set (``kafka_version=3``: no
ClearElrRecord, no ``cordonedLogDirs``)::

    {"type":"<MetadataRecordType name>","version":<int>,"data":<JsonConverter output>}

or, when Kafka's serde throws, ``Error at <offset>, skipping. <exception message>`` with
the messages Kafka gives (``Error while reading frame version``, ``Value for type was too
large.``, ``Could not deserialize metadata record with frame version 0. ...``,
``org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 6``,
``Failed to deserialize record with type 3``, ``Found 2 byte(s) of garbage after 3``).

The message reader here follows Kafka's *generated* readers rather than
:func:`plog.formats.protocol.decode`, because the two differ on odd input:

* there is no version check: a version above the schema's highest reads (and prints) as
  the highest, a negative one as version 0 -- but a nested struct (an element of
  ``endPoints``, ``features``, ``entity``) refuses a version above its highest;
* a known tagged field is read from the stream at the current position, whatever size its
  tag header announces (unknown tags skip exactly their size);
* a known tag number in a version where that field does not exist is an error
  ("Tag N is not valid for version V"), not an unknown tag.

Strings are printed as Java decodes their bytes (:func:`java_text`: invalid UTF-8 becomes
U+FFFD, an encoded surrogate ``ED A0..BF xx`` one U+FFFD where Python's "replace" gives
three); non-finite doubles as Jackson's quoted ``"NaN"`` / ``"Infinity"``. Finite doubles
(ClientQuotaRecord ``value``) come from :func:`~plog.formats.protocol.jackson_dumps`:
Kafka's text depends on the JVM there (Java 17 prints ``1e23`` as ``9.999999999999999E22``).

On well-formed input the result is the dict :func:`~plog.formats.protocol.decode` gives
(tagged fields at their defaults when absent, unknown tags as raw bytes under
``"_tagged"``, strings decoded with ``surrogateescape``), so :func:`encode_metadata_value`
(built on :func:`~plog.formats.protocol.encode`) writes it back byte for byte.
"""

from __future__ import annotations

import math
import struct as _struct
import uuid as _uuid
from typing import Any, Mapping, NamedTuple

from .errors import SchemaError
from .java import string_from_escaped
from .metadata_schemas import SCHEMAS_3, SCHEMAS_4, MetadataRecordType
from .protocol import (
    MAX_STRING_LENGTH,
    Array,
    Field,
    Struct,
    default_value,
    encode,
    jackson_dumps,
    read_uvarint,
    to_kafka_json,
    write_uvarint,
)

__all__ = [
    "FRAME_VERSION",
    "MetadataRecordType",
    "MetadataRecord",
    "MetadataParseError",
    "UnknownMetadataTypeError",
    "schemas_for",
    "decode_metadata_value",
    "encode_metadata_value",
    "metadata_json",
    "dump_metadata_payload",
    "java_text",
]

#: The only frame version Kafka reads or writes (``AbstractApiMessageSerde``).
FRAME_VERSION = 1

_FRAME_VERSION_0 = (
    "Could not deserialize metadata record with frame version 0. "
    "Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported."
)


class MetadataParseError(SchemaError):
    """A metadata record value Kafka's ``MetadataRecordSerde`` refuses.

    ``kafka_message`` is the exception message Kafka's DumpLogSegments prints after
    ``Error at <offset>, skipping. ``; ``reason`` (``str()``) says what is wrong in
    plog's own words, with the byte position in the value.
    """

    def __init__(self, kafka_message: str, reason: str, position: int | None = None):
        self.kafka_message = kafka_message
        super().__init__(reason, position)


class UnknownMetadataTypeError(MetadataParseError):
    """An apiKey that is not a metadata record type of the chosen Kafka version."""

    def __init__(self, api_key: int, kafka_version: int, position: int | None = None):
        self.api_key = api_key
        super().__init__(
            f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}",
            f"unknown metadata record type {api_key} (Kafka {_VERSION_NAMES[kafka_version]})",
            position,
        )


class MetadataRecord(NamedTuple):
    """A decoded metadata record value: unpacks as ``(type, version, fields)``.

    ``type`` is the MetadataRecordType name (``"PARTITION_RECORD"``), ``version`` the
    version as written (a Java short, possibly outside the schema's range), ``fields`` the
    decoded struct (see the module docstring).
    """

    type: str
    version: int
    fields: dict

    @property
    def record_type(self) -> MetadataRecordType:
        return MetadataRecordType[self.type]

    @property
    def api_key(self) -> int:
        return int(MetadataRecordType[self.type])


_VERSION_NAMES = {4: "4.x", 3: "3.9"}


def schemas_for(kafka_version: int = 4) -> Mapping[MetadataRecordType, Struct]:
    """The record schemas of Kafka 4.x (``4``) or 3.9 (``3``)."""
    if kafka_version == 4:
        return SCHEMAS_4
    if kafka_version == 3:
        return SCHEMAS_3
    raise ValueError(f"kafka_version must be 3 or 4, not {kafka_version!r}")


def _effective_version(schema: Struct, version: int) -> int:
    """The version whose fields Kafka's generated code reads for ``version``: every field
    condition is ``version >= N``, so out-of-range versions behave like the nearest end."""
    versions = schema.versions()
    return min(max(version, versions.start), versions.stop - 1)


# --------------------------------------------------------------------------- the frame


def _java_short_header(buf: bytes, pos: int, entity: str) -> tuple[int, int]:
    """``AbstractApiMessageSerde.unsignedIntToShort``: a uvarint read as a Java int, refused
    above Short.MAX_VALUE, then cast to short."""
    try:
        raw, new_pos = read_uvarint(buf, pos, len(buf), entity)
    except SchemaError as e:
        reason = f"metadata record {entity}: {e.reason}"
        raise MetadataParseError(f"Error while reading {entity}", reason, pos) from None
    val = raw - (1 << 32) if raw & 0x80000000 else raw
    if val > 0x7FFF:
        raise MetadataParseError(
            f"Value for {entity} was too large.", f"metadata record {entity} {val} is larger than 32767", pos
        )
    return ((val + 0x8000) & 0xFFFF) - 0x8000, new_pos


def decode_metadata_value(value: bytes | bytearray | memoryview | None, kafka_version: int = 4) -> MetadataRecord:
    """Decode one metadata record value as Kafka's ``MetadataRecordSerde.read`` does.

    Returns a :class:`MetadataRecord` (``type, version, fields``). Raises
    :class:`MetadataParseError` (a :class:`~plog.formats.errors.SchemaError`) for anything
    Kafka refuses, with Kafka's message in ``kafka_message``; :class:`UnknownMetadataTypeError`
    for an apiKey the chosen version does not know. A null value is refused as Kafka does
    (reading the frame version of a null buffer fails).
    """
    schemas = schemas_for(kafka_version)
    if value is None:
        raise MetadataParseError("Error while reading frame version", "metadata record value is null", 0)
    buf = bytes(value)
    frame, pos = _java_short_header(buf, 0, "frame version")
    if frame == 0:
        raise MetadataParseError(_FRAME_VERSION_0, "metadata record frame version 0 (KRaft 2.8 preview)", 0)
    if frame != FRAME_VERSION:
        raise MetadataParseError(
            f"Could not deserialize metadata record due to unknown frame version {frame}"
            f"(only frame version {FRAME_VERSION} is supported)",
            f"metadata record frame version {frame} is not {FRAME_VERSION}",
            0,
        )
    type_pos = pos
    api_key, pos = _java_short_header(buf, pos, "type")
    version, pos = _java_short_header(buf, pos, "version")
    try:
        record_type = MetadataRecordType(api_key)
        schema = schemas[record_type]
    except (ValueError, KeyError):
        raise UnknownMetadataTypeError(api_key, kafka_version, type_pos) from None
    try:
        fields, pos = _read_message(schema, version, buf, pos)
    except SchemaError as e:
        raise MetadataParseError(
            f"Failed to deserialize record with type {api_key}", f"{schema.name} v{version}: {e.reason}", e.position
        ) from None
    if pos < len(buf):
        left = len(buf) - pos
        raise MetadataParseError(
            f"Found {left} byte(s) of garbage after {api_key}",
            f"{schema.name} v{version}: {left} unexpected bytes after the record",
            pos,
        )
    return MetadataRecord(record_type.name, version, fields)


def encode_metadata_value(
    record_type: "MetadataRecordType | int | str", version: int, fields: Mapping, kafka_version: int = 4
) -> bytes:
    """A value as Kafka's ``MetadataRecordSerde.write`` frames it: frame version 1, apiKey,
    version, then the message (missing fields take their defaults). Raises SchemaError."""
    rt = MetadataRecordType[record_type] if isinstance(record_type, str) else MetadataRecordType(record_type)
    schema = schemas_for(kafka_version).get(rt)
    if schema is None:
        raise SchemaError(f"{rt.name} does not exist in Kafka {_VERSION_NAMES[kafka_version]}")
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, int(rt))
    write_uvarint(out, version)
    out += encode(schema, version, fields)
    return bytes(out)


# --------------------------------------------------------------------------- JSON


def metadata_json(record: MetadataRecord, kafka_version: int = 4) -> dict:
    """The JSON tree DumpLogSegments builds: ``{"type", "version", "data"}``."""
    schema = schemas_for(kafka_version)[record.record_type]
    data = to_kafka_json(schema, _effective_version(schema, record.version), _java_strings(record.fields))
    return {"type": record.type, "version": record.version, "data": _jackson_doubles(data)}


#: The Java string Kafka builds from the bytes of a decoded ``surrogateescape`` string.
java_text = string_from_escaped


def _java_strings(node: Any) -> Any:
    if isinstance(node, str):
        return java_text(node)
    if isinstance(node, dict):
        return {k: _java_strings(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_java_strings(v) for v in node]
    return node


def _jackson_doubles(node: Any) -> Any:
    # Jackson writes non-finite doubles as quoted strings (QUOTE_NON_NUMERIC_NUMBERS is on
    # by default): "NaN", "Infinity", "-Infinity".
    if isinstance(node, float) and not math.isfinite(node):
        if math.isnan(node):
            return "NaN"
        return "Infinity" if node > 0 else "-Infinity"
    if isinstance(node, dict):
        return {k: _jackson_doubles(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_jackson_doubles(v) for v in node]
    return node


def dump_metadata_payload(value: bytes | None, offset: int, kafka_version: int = 4) -> str:
    """The text ``kafka-dump-log.sh --cluster-metadata-decoder`` prints after ``payload: ``
    for a record at ``offset`` (Kafka 4.x with ``kafka_version=4``, 3.9 with ``3``)."""
    try:
        record = decode_metadata_value(value, kafka_version)
    except MetadataParseError as e:
        return f"Error at {offset}, skipping. {e.kafka_message}"
    return jackson_dumps(metadata_json(record, kafka_version))


# --------------------------------------------------------------------------- Kafka's generated reader

_FIXED = {
    "int8": _struct.Struct(">b"),
    "int16": _struct.Struct(">h"),
    "uint16": _struct.Struct(">H"),
    "int32": _struct.Struct(">i"),
    "int64": _struct.Struct(">q"),
    "float64": _struct.Struct(">d"),
}


class _In:
    """A bounded cursor over the value; every failure is a SchemaError with a position."""

    __slots__ = ("buf", "pos", "end", "version", "raw_version", "highest")

    def __init__(self, buf: bytes, pos: int, version: int, raw_version: int, highest: int):
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.version = version  # the version whose fields are read
        self.raw_version = raw_version  # the version as written
        self.highest = highest  # the message's highest version (nested structs check it)

    def take(self, n: int, what: str) -> int:
        p = self.pos
        if n > self.end - p:
            raise SchemaError(f"{what} needs {n} bytes but only {self.end - p} remain", p)
        self.pos = p + n
        return p

    def uvarint(self, what: str) -> int:
        """A Java ``readUnsignedVarint``, returned as the Java int it becomes."""
        v, self.pos = read_uvarint(self.buf, self.pos, self.end, what)
        return v - (1 << 32) if v & 0x80000000 else v

    def length(self, what: str) -> int:
        """A compact length (``uvarint - 1``, Java int arithmetic)."""
        n = self.uvarint(what) - 1
        return n + (1 << 32) if n < -(1 << 31) else n


def _read_message(schema: Struct, version: int, buf: bytes, pos: int) -> tuple[dict, int]:
    r = _In(buf, pos, _effective_version(schema, version), version, schema.versions().stop - 1)
    fields = _read_struct(r, schema)
    return fields, r.pos


def _read_struct(r: _In, st: Struct) -> dict:
    version = r.version
    out: dict = {}
    for f in st.fields:
        if not f.present_in(version):
            continue
        if f.tagged_in(version):
            out[f.name] = default_value(f, version)
            continue
        out[f.name] = _read_value(r, f, f.type, f.nullable_in(version))
    # The generated switch has a case for every tagged field of the struct, whatever the
    # version; a case whose field is not in this version throws.
    known = {f.tagged: f for f in st.fields if f.tagged is not None}
    unknown: dict[int, bytes] = {}
    count = r.uvarint("tagged field count")
    for _ in range(max(count, 0)):
        tag_pos = r.pos
        tag = r.uvarint("tag")
        size = r.uvarint(f"size of tag {tag}")
        f = known.get(tag)
        if f is None:
            if size < 0:
                raise SchemaError(f"unknown tag {tag} has negative size {size}", tag_pos)
            p = r.take(size, f"unknown tag {tag}")
            unknown[tag & 0xFFFFFFFF] = r.buf[p : p + size]
            continue
        if not f.tagged_in(version):
            raise SchemaError(f"Tag {tag} is not valid for version {r.raw_version}", tag_pos)
        # Kafka reads a known tagged field in place and never looks at its size again.
        out[f.name] = _read_value(r, f, f.type, f.nullable_in(version))
    if unknown:
        out["_tagged"] = unknown
    return out


def _read_value(r: _In, f: Field, t: Any, nullable: bool) -> Any:
    if isinstance(t, str):
        fixed = _FIXED.get(t)
        if fixed is not None:
            p = r.take(fixed.size, f"{t} field {f.name}")
            return fixed.unpack_from(r.buf, p)[0]
        if t == "bool":
            p = r.take(1, f"bool field {f.name}")
            return r.buf[p] != 0
        if t == "uuid":
            p = r.take(16, f"uuid field {f.name}")
            return _uuid.UUID(bytes=r.buf[p : p + 16])
        lp = r.pos
        n = r.length(f"{t} length of field {f.name}")
        if n < 0:
            if nullable:
                return None
            raise SchemaError(f"non-nullable field {f.name} was serialized as null", lp)
        if t == "string":
            if n > MAX_STRING_LENGTH:
                raise SchemaError(f"string field {f.name} had invalid length {n}", lp)
            p = r.take(n, f"string field {f.name}")
            return r.buf[p : p + n].decode("utf-8", "surrogateescape")
        if t == "bytes":
            p = r.take(n, f"bytes field {f.name}")
            return r.buf[p : p + n]
        raise AssertionError(t)
    if isinstance(t, Array):
        lp = r.pos
        n = r.length(f"array length of field {f.name}")
        if n < 0:
            if nullable:
                return None
            raise SchemaError(f"non-nullable field {f.name} was serialized as null", lp)
        if n > r.end - r.pos:
            raise SchemaError(
                f"Tried to allocate a collection of size {n}, but there are only {r.end - r.pos} bytes remaining.",
                lp,
            )
        el = t.element
        if isinstance(el, Struct):
            if n and r.raw_version > r.highest:
                raise SchemaError(f"Can't read version {r.raw_version} of {el.name}", lp)
            return [_read_struct(r, el) for _ in range(n)]
        return [_read_value(r, f, el, False) for _ in range(n)]
    raise AssertionError(f"metadata schemas have no nested non-array struct ({f.name})")

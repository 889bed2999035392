"""A small schema-driven codec for Kafka's generated-message wire format.

Kafka describes every internal record (``__consumer_offsets`` and ``__transaction_state``
keys and values, control-record values, the consumer protocol's subscription and
assignment) with a JSON message schema, and its build generates a Java class per schema.
Here the schemas are Python data: a :class:`Struct` is a list of :class:`Field`\\ s, each
field has a type, the versions it exists in, the versions where it may be null, and
optionally a tag. One interpreter (:func:`decode` / :func:`encode`) handles them all.

Version strings use Kafka's notation: ``"3"``, ``"0-4"``, ``"2+"``, ``"none"``.

Non-flexible versions (``flexible_versions`` does not contain the version)::

    int8 int16 int32 int64   big-endian two's complement (1, 2, 4, 8 bytes)
    uint16 uint32            big-endian unsigned
    float64                  IEEE 754 big-endian
    bool                     1 byte, 0 = false, anything else = true
    uuid                     16 bytes, most significant half first
    string                   int16 length, UTF-8 bytes; length -1 = null
    bytes                    int32 length, bytes;       length -1 = null
    array                    int32 count, elements;     count  -1 = null
    struct                   its fields in order; a nullable struct is preceded by an
                             int8 marker (-1 = null, 1 = present)

Flexible versions change the variable-length types and add tagged fields::

    string / bytes           unsigned varint (length + 1), bytes; 0 = null
    array                    unsigned varint (count + 1), elements; 0 = null
    every struct ends with   unsigned varint N, then N x (uvarint tag, uvarint size, data)
                             in ascending tag order

A tagged field is written only when its value differs from the field's default; inside
its ``size`` bytes it uses the ordinary flexible encoding of its type. Tags this code does
not know are kept, as raw bytes, in the struct dict under ``"_tagged"`` (``{tag: bytes}``,
present only when non-empty) and written back by :func:`encode`.

Decoded structs are plain dicts keyed by Kafka's JSON field names (the schema name with
its first letter lower-cased, as Kafka's generated ``JsonConverter`` prints them, e.g.
``"offset"``, ``"leaderEpoch"``, ``"kRaftVersion"``), in schema order. Strings are
decoded as UTF-8 with ``surrogateescape`` so that invalid bytes survive a round trip
unchanged; :func:`java_string` gives the text Java would show (U+FFFD replacements).

Every read is bounded: a length or count larger than the bytes that remain is a
:class:`~plog.formats.errors.SchemaError` naming the struct, field and byte position, never
an allocation. Kafka's own generated readers apply the same rule to arrays ("Tried to
allocate a collection of size N, but there are only M bytes remaining").

:func:`to_kafka_json` and :func:`jackson_dumps` reproduce what Kafka's generated
``*JsonConverter.write(message, version)`` followed by Jackson's ``JsonNode.toString()``
prints: fields in schema order, tagged fields only when not at their default, unknown
tagged fields omitted, int8/16/32/64 as JSON numbers, bytes as padded standard base64,
uuids in Kafka's ``Uuid.toString()`` form (URL-safe base64 without padding).
"""

from __future__ import annotations

import base64
import math
import struct as _struct
import uuid as _uuid
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence, Union

from .errors import SchemaError
from .java import int32, string_from_escaped

__all__ = [
    "Versions",
    "Array",
    "Field",
    "Struct",
    "UnknownRecordTypeError",
    "ZERO_UUID",
    "decode",
    "encode",
    "decode_all",
    "default_value",
    "struct_defaults",
    "read_uvarint",
    "write_uvarint",
    "java_string",
    "kafka_uuid_str",
    "to_kafka_json",
    "jackson_dumps",
]

ZERO_UUID = _uuid.UUID(int=0)

# Kafka's Type.STRING / compact string readers reject lengths above Short.MAX_VALUE.
MAX_STRING_LENGTH = 0x7FFF

_UNSET: Any = object()


class UnknownRecordTypeError(SchemaError):
    """A coordinator record whose key version (record type) has no schema here.

    Kafka's coordinator serdes raise ``UnknownRecordTypeException`` for these and
    ``DumpLogSegments`` prints ``Unknown record type N at offset O, skipping.``, so callers
    may want to tell this case apart from a struct that fails to decode.
    """

    def __init__(self, record_type: int, what: str, position: int | None = 0):
        self.record_type = record_type
        super().__init__(f"Unknown record type {record_type} in {what} key", position)


# --------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class Versions:
    """An inclusive version range, parsed from Kafka's ``"a"``, ``"a-b"``, ``"a+"``,
    ``"none"`` notation. ``"a+"`` is open-ended (up to int16 max)."""

    lowest: int
    highest: int

    @classmethod
    def parse(cls, spec: "str | Versions | None") -> "Versions":
        if isinstance(spec, Versions):
            return spec
        if spec is None or spec == "none":
            return NO_VERSIONS
        spec = spec.strip()
        if spec.endswith("+"):
            return cls(int(spec[:-1]), 0x7FFF)
        if "-" in spec:
            lo, hi = spec.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(spec), int(spec))

    def __contains__(self, version: int) -> bool:
        return self.lowest <= version <= self.highest

    @property
    def empty(self) -> bool:
        return self.lowest > self.highest

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.lowest, self.highest + 1))

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.highest == 0x7FFF:
            return f"{self.lowest}+"
        if self.lowest == self.highest:
            return str(self.lowest)
        return f"{self.lowest}-{self.highest}"


NO_VERSIONS = Versions(0, -1)

# --------------------------------------------------------------------------- schema types

# Fixed-width primitives: name -> (struct format, size). bool and uuid are handled apart.
_FIXED = {
    "int8": (">b", 1),
    "int16": (">h", 2),
    "uint16": (">H", 2),
    "int32": (">i", 4),
    "uint32": (">I", 4),
    "int64": (">q", 8),
    "float64": (">d", 8),
}
_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}
PRIMITIVE_TYPES = frozenset(_FIXED) | {"bool", "uuid", "string", "bytes"}


@dataclass(frozen=True, eq=False)
class Array:
    """``[]element``: an array of a primitive type name or of a :class:`Struct`."""

    element: "Union[str, Struct]"

    def __post_init__(self) -> None:
        if isinstance(self.element, str) and self.element not in PRIMITIVE_TYPES:
            raise ValueError(f"unknown array element type {self.element!r}")


FieldType = Union[str, Array, "Struct"]


@dataclass(frozen=True, eq=False)
class Field:
    """One field of a struct.

    ``tagged`` is the tag number of a tagged field; ``tagged_versions`` defaults to
    ``versions`` (Kafka requires it to be open-ended and within the flexible versions).
    ``default`` follows Kafka's rules when not given: 0 / false / "" / empty bytes / the
    zero uuid / an empty array / a struct of defaults; pass ``None`` for ``"default":
    "null"``.
    """

    name: str
    type: FieldType
    versions: str = "0+"
    nullable_versions: str = "none"
    tagged: int | None = None
    tagged_versions: str | None = None
    default: Any = _UNSET

    def __post_init__(self) -> None:
        if isinstance(self.type, str) and self.type not in PRIMITIVE_TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")
        object.__setattr__(self, "_versions", Versions.parse(self.versions))
        object.__setattr__(self, "_nullable", Versions.parse(self.nullable_versions))
        if self.tagged is None:
            tagged = NO_VERSIONS
        else:
            tagged = Versions.parse(self.tagged_versions or self.versions)
        object.__setattr__(self, "_tagged_versions", tagged)

    def present_in(self, version: int) -> bool:
        return version in self._versions  # type: ignore[attr-defined]

    def nullable_in(self, version: int) -> bool:
        return version in self._nullable  # type: ignore[attr-defined]

    def tagged_in(self, version: int) -> bool:
        return version in self._tagged_versions  # type: ignore[attr-defined]


@dataclass(frozen=True, eq=False)
class Struct:
    """A message (top level) or a nested struct.

    Only the top-level struct's ``valid_versions`` and ``flexible_versions`` matter;
    nested structs inherit flexibility from the message they are part of.
    """

    name: str
    fields: Sequence[Field]
    valid_versions: str = "0"
    flexible_versions: str = "none"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "_valid", Versions.parse(self.valid_versions))
        object.__setattr__(self, "_flexible", Versions.parse(self.flexible_versions))
        tags = [f.tagged for f in self.fields if f.tagged is not None]
        if len(tags) != len(set(tags)):
            raise ValueError(f"struct {self.name}: duplicate tag")

    def supports(self, version: int) -> bool:
        return version in self._valid  # type: ignore[attr-defined]

    def is_flexible(self, version: int) -> bool:
        return version in self._flexible  # type: ignore[attr-defined]

    def versions(self) -> range:
        v: Versions = self._valid  # type: ignore[attr-defined]
        return range(v.lowest, v.highest + 1)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def __repr__(self) -> str:
        return f"Struct({self.name!r}, valid={self.valid_versions}, flexible={self.flexible_versions})"


# --------------------------------------------------------------------------- defaults


def default_value(f: Field, version: int) -> Any:
    """The value Kafka gives ``f`` when it is absent (and never writes for a tagged field)."""
    if f.default is not _UNSET:
        d = f.default
        return list(d) if isinstance(d, list) else d
    t = f.type
    if isinstance(t, Array):
        return []
    if isinstance(t, Struct):
        return struct_defaults(t, version)
    if t == "string":
        return ""
    if t == "bytes":
        return b""
    if t == "bool":
        return False
    if t == "uuid":
        return ZERO_UUID
    if t == "float64":
        return 0.0
    return 0


def struct_defaults(st: Struct, version: int) -> dict:
    """A dict holding every field of ``st`` present in ``version`` at its default."""
    return {f.name: default_value(f, version) for f in st.fields if f.present_in(version)}


def _is_default(f: Field, version: int, value: Any) -> bool:
    """Kafka's "non-default value" check that decides whether a tagged field is written."""
    default = default_value(f, version)
    if value is None or default is None:
        return value is None and default is None
    if isinstance(default, dict):
        if not isinstance(value, Mapping) or value.get("_tagged"):
            return False
        return {k: v for k, v in value.items() if k != "_tagged"} == default
    if isinstance(default, bool) or isinstance(value, bool):
        return value is default
    if isinstance(default, float):
        # Double.compare semantics: -0.0 is not the default 0.0.
        return isinstance(value, (int, float)) and _struct.pack(">d", float(value)) == _struct.pack(">d", default)
    if isinstance(default, bytes):
        return isinstance(value, (bytes, bytearray, memoryview)) and bytes(value) == default
    if isinstance(default, list):
        return isinstance(value, (list, tuple)) and list(value) == default
    return type(value) is type(default) and value == default


# --------------------------------------------------------------------------- unsigned varints


def read_uvarint(buf, pos: int, end: int | None = None, what: str = "unsigned varint") -> tuple[int, int]:
    """Read Kafka's ``readUnsignedVarint`` at ``pos`` (bounded by ``end``): at most 5 bytes,
    the value kept to 32 bits as Java does (returned unsigned, 0..2**32-1).
    Raises SchemaError."""
    if end is None:
        end = len(buf)
    result = 0
    shift = 0
    start = pos
    for _ in range(5):
        if pos >= end:
            raise SchemaError(f"{what} runs past the end of the buffer", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFF, pos
        shift += 7
    raise SchemaError(f"{what} is too long: the most significant bit in the 5th byte is set", start)


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value > 0xFFFFFFFF:
        raise SchemaError(f"unsigned varint value {value} is out of range")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


# --------------------------------------------------------------------------- decoding


class _Reader:
    __slots__ = ("buf", "pos", "end", "where")

    def __init__(self, buf, pos: int, end: int, where: str):
        self.buf = buf
        self.pos = pos
        self.end = end
        self.where = where

    def fail(self, reason: str, position: int) -> SchemaError:
        return SchemaError(f"{self.where}: {reason}", position)

    def take(self, n: int, what: str) -> int:
        p = self.pos
        if n > self.end - p:
            raise self.fail(f"{what} needs {n} bytes but only {self.end - p} remain", p)
        self.pos = p + n
        return p

    def fixed(self, fmt: str, size: int, what: str):
        p = self.take(size, what)
        return _struct.unpack_from(fmt, self.buf, p)[0]

    def uvarint(self, what: str) -> int:
        if self.pos >= self.end:
            raise self.fail(f"{what} needs 1 byte but none remain", self.pos)
        value, self.pos = read_uvarint(self.buf, self.pos, self.end, f"{self.where}: {what}")
        return value


def decode(schema: Struct, version: int, buf, pos: int = 0, end: int | None = None) -> tuple[dict, int]:
    """Decode one ``schema`` struct at ``version`` from ``buf[pos:end]``.

    Returns ``(fields, new_pos)``. Bytes after the struct are left alone: Kafka's readers do
    not require the buffer to be exhausted, and callers decide whether trailing bytes
    matter. Raises :class:`SchemaError` for an unsupported version or undecodable bytes.
    """
    if not schema.supports(version):
        raise SchemaError(f"{schema.name}: unknown version {version} (valid versions {schema.valid_versions})", pos)
    if end is None:
        end = len(buf)
    if pos < 0 or pos > end:
        raise SchemaError(f"{schema.name}: start position {pos} is outside the buffer", pos)
    r = _Reader(buf, pos, end, f"{schema.name} v{version}")
    value = _read_struct(r, schema, version, schema.is_flexible(version))
    return value, r.pos


def decode_all(schema: Struct, version: int, buf) -> dict:
    """Decode a struct that must fill ``buf`` exactly (trailing bytes are a SchemaError)."""
    value, pos = decode(schema, version, buf)
    if pos != len(buf):
        raise SchemaError(f"{schema.name} v{version}: {len(buf) - pos} unexpected bytes after the struct", pos)
    return value


def _read_struct(r: _Reader, st: Struct, version: int, flexible: bool) -> dict:
    out: dict = {}
    tagged: dict[int, Field] = {}
    for f in st.fields:
        if not f.present_in(version):
            continue
        if flexible and f.tagged_in(version):
            # Placeholder keeps schema order for printing; the tagged section fills it.
            out[f.name] = default_value(f, version)
            tagged[f.tagged] = f  # type: ignore[index]
            continue
        out[f.name] = _read_value(r, f, f.type, version, flexible, f.nullable_in(version))
    if flexible:
        _read_tagged_section(r, out, tagged, version)
    return out


def _read_tagged_section(r: _Reader, out: dict, tagged: Mapping[int, Field], version: int) -> None:
    count = int32(r.uvarint("tagged field count"))
    unknown: dict[int, bytes] = {}
    # A negative count reads nothing in Java's `for (i = 0; i < n; i++)`; mirror that.
    for _ in range(max(count, 0)):
        tag = r.uvarint("tag")
        size_pos = r.pos
        size = int32(r.uvarint(f"size of tag {tag}"))
        if size < 0:
            raise r.fail(f"tag {tag} has negative size {size}", size_pos)
        start = r.take(size, f"tag {tag}")
        f = tagged.get(tag)
        if f is None:
            unknown[tag] = bytes(r.buf[start : start + size])
            continue
        sub = _Reader(r.buf, start, start + size, r.where)
        out[f.name] = _read_value(sub, f, f.type, version, True, f.nullable_in(version))
        if sub.pos != sub.end:
            left = sub.end - sub.pos
            raise r.fail(f"tagged field {f.name} (tag {tag}) left {left} of its {size} bytes unread", sub.pos)
    if unknown:
        out["_tagged"] = unknown


def _read_length(r: _Reader, f: Field, flexible: bool, wide: bool, kind: str) -> tuple[int, int]:
    """Read a string/bytes/array length prefix. Returns (length, position of the prefix)."""
    p = r.pos
    if flexible:
        length = int32(r.uvarint(f"{kind} length of field {f.name}") - 1)  # compact: N + 1, 0 is null
    elif wide:
        length = r.fixed(">i", 4, f"{kind} length of field {f.name}")
    else:
        length = r.fixed(">h", 2, f"{kind} length of field {f.name}")
    return length, p


def _check_length(r: _Reader, length: int, what: str, length_pos: int) -> None:
    # Report against the length field itself: that is the byte that is wrong.
    if length > r.end - r.pos:
        raise r.fail(f"{what} has length {length} but only {r.end - r.pos} bytes remain", length_pos)


def _read_value(r: _Reader, f: Field, t: FieldType, version: int, flexible: bool, nullable: bool) -> Any:
    if isinstance(t, str):
        spec = _FIXED.get(t)
        if spec is not None:
            return r.fixed(spec[0], spec[1], f"{t} field {f.name}")
        if t == "bool":
            p = r.take(1, f"bool field {f.name}")
            return r.buf[p] != 0
        if t == "uuid":
            p = r.take(16, f"uuid field {f.name}")
            return _uuid.UUID(bytes=bytes(r.buf[p : p + 16]))
        if t == "string":
            length, lp = _read_length(r, f, flexible, False, "string")
            if length < 0:
                # Kafka's generated readers treat any negative length as null.
                if nullable:
                    return None
                raise r.fail(f"non-nullable field {f.name} was serialized as null", lp)
            if length > MAX_STRING_LENGTH:
                raise r.fail(f"string field {f.name} had invalid length {length}", lp)
            _check_length(r, length, f"string field {f.name}", lp)
            p = r.take(length, f"string field {f.name}")
            return bytes(r.buf[p : p + length]).decode("utf-8", "surrogateescape")
        if t == "bytes":
            length, lp = _read_length(r, f, flexible, True, "bytes")
            if length < 0:
                if nullable:
                    return None
                raise r.fail(f"non-nullable field {f.name} was serialized as null", lp)
            _check_length(r, length, f"bytes field {f.name}", lp)
            p = r.take(length, f"bytes field {f.name}")
            return bytes(r.buf[p : p + length])
        raise AssertionError(t)
    if isinstance(t, Array):
        count, lp = _read_length(r, f, flexible, True, "array")
        if count < 0:
            if nullable:
                return None
            raise r.fail(f"non-nullable field {f.name} was serialized as null", lp)
        if count > r.end - r.pos:
            raise r.fail(
                f"array field {f.name}: tried to allocate a collection of size {count}, "
                f"but there are only {r.end - r.pos} bytes remaining",
                lp,
            )
        el = t.element
        if isinstance(el, Struct):
            return [_read_struct(r, el, version, flexible) for _ in range(count)]
        return [_read_value(r, f, el, version, flexible, False) for _ in range(count)]
    # A nested struct (not in an array).
    if nullable:
        marker = r.fixed(">b", 1, f"null marker of struct field {f.name}")
        if marker < 0:
            return None
    return _read_struct(r, t, version, flexible)


# --------------------------------------------------------------------------- encoding


def encode(schema: Struct, version: int, value: Mapping) -> bytes:
    """Encode ``value`` (a dict keyed by JSON field names) as ``schema`` at ``version``.

    Fields missing from ``value`` take their defaults; keys for fields that do not exist in
    ``version`` are ignored. Known tagged fields are written only when not at their default;
    unknown ones come from ``value["_tagged"]``. Raises :class:`SchemaError` for values that
    do not fit their types.
    """
    if not schema.supports(version):
        raise SchemaError(f"{schema.name}: unknown version {version} (valid versions {schema.valid_versions})")
    out = bytearray()
    _write_struct(out, schema, version, schema.is_flexible(version), value, schema.name)
    return bytes(out)


def _write_struct(out: bytearray, st: Struct, version: int, flexible: bool, value: Mapping, path: str) -> None:
    if not isinstance(value, Mapping):
        raise SchemaError(f"{path}: expected a dict for struct {st.name}, got {type(value).__name__}")
    tagged: list[tuple[int, bytes]] = []
    for f in st.fields:
        if not f.present_in(version):
            continue
        v = value.get(f.name, _UNSET)
        if v is _UNSET:
            v = default_value(f, version)
        fpath = f"{path}.{f.name}"
        if flexible and f.tagged_in(version):
            if _is_default(f, version, v):
                continue
            buf = bytearray()
            _write_value(buf, f, f.type, version, True, f.nullable_in(version), v, fpath)
            tagged.append((f.tagged, bytes(buf)))  # type: ignore[arg-type]
            continue
        _write_value(out, f, f.type, version, flexible, f.nullable_in(version), v, fpath)
    raw = value.get("_tagged") or {}
    if not flexible:
        if raw:
            raise SchemaError(f"{path}: tagged fields given, but version {version} of {st.name} is not flexible")
        return
    known = {t for t, _ in tagged}
    for tag, data in raw.items():
        if tag in known:
            raise SchemaError(f"{path}: unknown tagged field {tag} collides with a known field's tag")
        tagged.append((int(tag), bytes(data)))
    tagged.sort(key=lambda td: td[0])
    write_uvarint(out, len(tagged))
    for tag, data in tagged:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


def _write_length(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        write_uvarint(out, n + 1)
    elif wide:
        out += _struct.pack(">i", n)
    else:
        out += _struct.pack(">h", n)


def _write_value(
    out: bytearray, f: Field, t: FieldType, version: int, flexible: bool, nullable: bool, v: Any, path: str
) -> None:
    if isinstance(t, str):
        spec = _FIXED.get(t)
        if spec is not None:
            if t == "float64":
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise SchemaError(f"{path}: expected a float, got {v!r}")
                out += _struct.pack(">d", float(v))
                return
            lo, hi = _INT_RANGES[t]
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise SchemaError(f"{path}: {v!r} is not a valid {t}")
            out += _struct.pack(spec[0], v)
            return
        if t == "bool":
            if not isinstance(v, bool):
                raise SchemaError(f"{path}: expected a bool, got {v!r}")
            out.append(1 if v else 0)
            return
        if t == "uuid":
            if not isinstance(v, _uuid.UUID):
                raise SchemaError(f"{path}: expected a uuid.UUID, got {v!r}")
            out += v.bytes
            return
        if v is None:
            if not nullable:
                raise SchemaError(f"{path}: null given for a non-nullable {t} field")
            _write_length(out, -1, flexible, t == "bytes")
            return
        if t == "string":
            if not isinstance(v, str):
                raise SchemaError(f"{path}: expected a str, got {type(v).__name__}")
            try:
                data = v.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError as e:
                raise SchemaError(f"{path}: string cannot be encoded as UTF-8 ({e.reason})") from None
            if len(data) > MAX_STRING_LENGTH:
                raise SchemaError(f"{path}: string of {len(data)} bytes is longer than {MAX_STRING_LENGTH}")
            _write_length(out, len(data), flexible, False)
            out += data
            return
        if t == "bytes":
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise SchemaError(f"{path}: expected bytes, got {type(v).__name__}")
            _write_length(out, len(v), flexible, True)
            out += v
            return
        raise AssertionError(t)
    if isinstance(t, Array):
        if v is None:
            if not nullable:
                raise SchemaError(f"{path}: null given for a non-nullable array field")
            _write_length(out, -1, flexible, True)
            return
        if isinstance(v, (str, bytes, Mapping)) or not isinstance(v, Sequence):
            raise SchemaError(f"{path}: expected a list, got {type(v).__name__}")
        _write_length(out, len(v), flexible, True)
        el = t.element
        for i, item in enumerate(v):
            if isinstance(el, Struct):
                _write_struct(out, el, version, flexible, item, f"{path}[{i}]")
            else:
                _write_value(out, f, el, version, flexible, False, item, f"{path}[{i}]")
        return
    if nullable:
        if v is None:
            out.append(0xFF)
            return
        out.append(0x01)
    elif v is None:
        raise SchemaError(f"{path}: null given for a non-nullable struct field")
    _write_struct(out, t, version, flexible, v, path)


# --------------------------------------------------------------------------- Kafka-style JSON


#: The text Java's ``new String(bytes, UTF_8)`` gives for a decoded string: bytes kept by
#: ``surrogateescape`` become U+FFFD by the JDK's rules.
java_string = string_from_escaped


def kafka_uuid_str(u: _uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def to_kafka_json(schema: Struct, version: int, value: Mapping) -> dict:
    """The JSON tree Kafka's generated ``JsonConverter.write(value, version)`` builds.

    The result holds only dicts, lists, str, int, float, bool and None, in Kafka's key
    order; pass it to :func:`jackson_dumps` for Kafka's exact text.
    """
    return _struct_json(schema, version, schema.is_flexible(version), value)


def _struct_json(st: Struct, version: int, flexible: bool, value: Mapping) -> dict:
    node: dict = {}
    for f in st.fields:
        if not f.present_in(version):
            continue
        v = value.get(f.name, _UNSET)
        if v is _UNSET:
            v = default_value(f, version)
        if flexible and f.tagged_in(version) and _is_default(f, version, v):
            continue
        node[f.name] = _value_json(f.type, version, flexible, v)
    return node


def _value_json(t: FieldType, version: int, flexible: bool, v: Any) -> Any:
    if v is None:
        return None
    if isinstance(t, Array):
        return [_value_json(t.element, version, flexible, item) for item in v]
    if isinstance(t, Struct):
        return _struct_json(t, version, flexible, v)
    if t == "string":
        return java_string(v)
    if t == "bytes":
        return base64.b64encode(bytes(v)).decode("ascii")
    if t == "uuid":
        return kafka_uuid_str(v)
    if t == "float64":
        return float(v)
    return v


_JSON_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _jackson_string(s: str) -> str:
    # Jackson escapes '"', '\\' and control characters below 0x20 (short forms where they
    # exist, otherwise \\u00XX with upper-case hex); everything else is written as is.
    parts = ['"']
    for ch in s:
        if ch in _JSON_SHORT_ESCAPES:
            parts.append(_JSON_SHORT_ESCAPES[ch])
        elif ch < " ":
            parts.append(f"\\u{ord(ch):04X}")
        else:
            parts.append(ch)
    parts.append('"')
    return "".join(parts)


def _java_double(d: float) -> str:
    """Java's ``Double.toString``: plain notation for 1e-3 <= |d| < 1e7, otherwise
    ``d.dddE<n>``; always a fractional digit; shortest round-trip digits (JDK 19+)."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        return repr(d)  # Python's repr is plain notation with a '.' in this range
    from decimal import Decimal  # here: start-up time (rarely needed)

    sign, digits, exponent = Decimal(repr(d)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    sci_exp = exponent + len(digits) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{sci_exp}"


def jackson_dumps(node: Any) -> str:
    """Serialize a JSON tree as Jackson's ``JsonNode.toString()`` does: no whitespace,
    Jackson's string escaping, Java number formatting."""
    if node is None:
        return "null"
    if node is True:
        return "true"
    if node is False:
        return "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, float):
        # Jackson's WRITE_NAN_AS_STRINGS (on by default): "NaN", "Infinity", "-Infinity" quoted.
        return _java_double(node) if math.isfinite(node) else f'"{_java_double(node)}"'
    if isinstance(node, str):
        return _jackson_string(node)
    if isinstance(node, Mapping):
        return "{" + ",".join(f"{_jackson_string(str(k))}:{jackson_dumps(v)}" for k, v in node.items()) + "}"
    if isinstance(node, (list, tuple)):
        return "[" + ",".join(jackson_dumps(v) for v in node) + "]"
    raise TypeError(f"cannot serialize {type(node).__name__} as JSON")

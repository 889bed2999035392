"""The records of a Schema Registry's ``_schemas`` topic (``kafkastore.topic``), as Confluent's
registry writes and reads them (its ``SchemaRegistrySerializer``, Jackson JSON, UTF-8).

Every record's key is a JSON object naming its ``keytype``; the value is a JSON object whose
shape the key type decides, or null (a tombstone). Field names and the order the registry
writes them in:

======================  ==================================================  ===============================================
keytype                 key                                                 value
======================  ==================================================  ===============================================
``SCHEMA``              ``{"keytype","subject","version","magic":1}``      ``{"subject","version","id","schemaType"?,
                                                                            "references"?,"metadata"?,"ruleSet"?,
                                                                            "md5"?,"schema","deleted"}``
``CONFIG``              ``{"keytype","subject"?,"magic":0}``                ``{"subject"?,"compatibilityLevel"?,
                                                                            "normalize"?,"alias"?, ...}``
``MODE``                ``{"keytype","subject"?,"magic":0}``                ``{"subject"?,"mode"}``
``DELETE_SUBJECT``      ``{"keytype","subject","magic":0}``                 ``{"subject","version"}``
``CLEAR_SUBJECT``       ``{"keytype","subject","magic":0}``                 ``{"subject"}``
``NOOP``                ``{"keytype":"NOOP","magic":0}``                    null (ignored whatever it holds)
``CONTEXT``             ``{"keytype","tenant","context"}``                  context metadata (kept as it is)
``ASSOC``               association identity                                association (kept as it is)
======================  ==================================================  ===============================================

Rules the registry's reader applies, and this module follows:

* An absent (or null) ``subject`` in a CONFIG or MODE key is the global one; Jackson leaves
  out empty fields (``NON_EMPTY``), so the global config key is ``{"keytype":"CONFIG","magic":0}``.
* A key is identified by its type, subject and version (the registry's store orders keys with
  a comparator that ignores ``magic``); a SCHEMA key's ``magic`` must be 0 or 1.
* ``schemaType`` absent or null is ``AVRO``; ``references`` absent is none; ``deleted`` absent
  is false (a soft-deleted version has ``"deleted": true``).
* A CONFIG or MODE value without ``subject`` (written by old registries) takes the key's.
* A key that is not JSON, or has an unknown ``keytype``, and a value that does not match its
  key type, are skipped by the registry ("Failed to deserialize"): :func:`parse_key` and
  :func:`parse_value` raise :class:`RegistryRecordError` saying why, and the engine skips and
  reports them.

A schema's **GUID** (what magic byte 1 frames carry) is the registry's MD5 of the schema: the
schema text (UTF-8), each reference's name, subject and version (int32, big-endian), then,
when present, a byte 1 and the metadata (tags: each name then its values, in sorted order;
properties: each name then value, sorted; sensitive names, sorted), then a byte 1 and the
rule set (each migration, domain and encoding rule: name, doc, kind, mode, type, sorted tags,
sorted params, expr, onSuccess, onFailure, a byte 1 if disabled; then enableAt). Sorted means
Java's ``String`` order. A value's ``md5`` field (base64), when the registry wrote one,
is the GUID's bytes. :func:`schema_guid` computes it.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from .errors import FormatError
from .java import compare_key

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
NOOP = "NOOP"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
CONTEXT = "CONTEXT"
ASSOC = "ASSOC"
KEY_TYPES = (SCHEMA, CONFIG, MODE, NOOP, DELETE_SUBJECT, CLEAR_SUBJECT, CONTEXT, ASSOC)

AVRO = "AVRO"
PROTOBUF = "PROTOBUF"
JSON = "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)

#: The default topic name of a registry's store (``kafkastore.topic``).
DEFAULT_TOPIC = "_schemas"

_INT32 = struct.Struct(">i")


class RegistryRecordError(FormatError):
    """A ``_schemas`` key or value the registry itself would not read (it skips such records)."""


@dataclass(frozen=True)
class SchemaReference:
    """A reference from one schema to another registered one: ``name`` is how the referring
    schema names it (an Avro full name, a ``.proto`` import path, a JSON Schema ``$ref``)."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class RegistryKey:
    """A ``_schemas`` key. ``identity`` is what tells two keys apart in the registry's store."""

    keytype: str
    subject: str | None = None
    version: int | None = None
    magic: int = 0
    #: Every field of the key as read (for the key types plog only carries along).
    fields: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def identity(self) -> tuple:
        if self.keytype in (CONTEXT, ASSOC):
            others = {k: v for k, v in self.fields.items() if k not in ("keytype", "magic")}
            return self.keytype, json.dumps(others, sort_keys=True)
        return self.keytype, self.subject, self.version


@dataclass(frozen=True)
class SchemaValue:
    """A SCHEMA value: one version of a subject. ``fields`` keeps every field as read, in the
    order read, so a record can be written back as the registry wrote it."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False
    md5: str | None = None
    metadata: dict | None = None
    rule_set: dict | None = None
    fields: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def guid(self) -> uuid.UUID:
        return schema_guid(self)


@dataclass(frozen=True)
class SubjectValue:
    """A CONFIG, MODE, DELETE_SUBJECT or CLEAR_SUBJECT value (or a CONTEXT/ASSOC one, kept
    as read): ``subject`` (None: global), ``version`` (DELETE_SUBJECT's watermark), ``mode``
    (MODE), and every field as read."""

    subject: str | None = None
    version: int | None = None
    mode: str | None = None
    fields: dict = field(default_factory=dict, compare=False, repr=False)


def _json_object(data: bytes, what: str) -> dict:
    try:
        obj = json.loads(bytes(data).decode("utf-8"), object_pairs_hook=dict)
    except UnicodeDecodeError as e:
        raise RegistryRecordError(f"the {what} is not UTF-8 (byte {e.start})") from None
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        raise RegistryRecordError(f"the {what} is not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise RegistryRecordError(f"the {what} is not a JSON object")
    return obj


def _opt_str(obj: dict, name: str, what: str) -> str | None:
    v = obj.get(name)
    if v is not None and not isinstance(v, str):
        raise RegistryRecordError(f'the {what}\'s "{name}" is not a string')
    return v


def _int(obj: dict, name: str, what: str, *, required: bool = True) -> int | None:
    v = obj.get(name)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise RegistryRecordError(f'the {what}\'s "{name}" is {"missing" if v is None else "not an integer"}')
    return v


def parse_key(data: bytes | None) -> RegistryKey:
    """A ``_schemas`` record key. Raises :class:`RegistryRecordError` for a key the registry
    would skip: null, not a JSON object, an unknown ``keytype``, a SCHEMA key without subject
    or version or with a magic other than 0 or 1."""
    if data is None:
        raise RegistryRecordError("null key")
    obj = _json_object(data, "key")
    keytype = obj.get("keytype")
    if keytype not in KEY_TYPES:
        raise RegistryRecordError("unknown keytype" + (f" {keytype!r}" if isinstance(keytype, str) else ""))
    magic = obj.get("magic", 0)
    if isinstance(magic, bool) or not isinstance(magic, int):
        raise RegistryRecordError('the key\'s "magic" is not an integer')
    subject = _opt_str(obj, "subject", "key") if keytype not in (NOOP, CONTEXT, ASSOC) else None
    version = None
    if keytype == SCHEMA:
        if subject is None:
            raise RegistryRecordError("a SCHEMA key without a subject")
        version = _int(obj, "version", "key")
        if magic not in (0, 1):
            raise RegistryRecordError(f"a SCHEMA key with magic {magic} (the registry reads 0 and 1)")
    elif keytype in (DELETE_SUBJECT, CLEAR_SUBJECT) and subject is None:
        raise RegistryRecordError(f"a {keytype} key without a subject")
    return RegistryKey(keytype, subject, version, magic, obj)


def _references(obj: dict) -> tuple[SchemaReference, ...]:
    raw = obj.get("references")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RegistryRecordError('the value\'s "references" is not a list')
    refs = []
    for r in raw:
        if not isinstance(r, dict):
            raise RegistryRecordError('a reference in "references" is not an object')
        name, subject = _opt_str(r, "name", "reference"), _opt_str(r, "subject", "reference")
        version = _int(r, "version", "reference")
        if name is None or subject is None:
            raise RegistryRecordError("a reference without a name or a subject")
        refs.append(SchemaReference(name, subject, version))
    return tuple(refs)


def _schema_value(obj: dict, key: RegistryKey) -> SchemaValue:
    schema = obj.get("schema")
    if not isinstance(schema, str):
        raise RegistryRecordError('a SCHEMA value without a "schema" string')
    schema_type = _opt_str(obj, "schemaType", "value") or AVRO
    deleted = obj.get("deleted", False)
    if not isinstance(deleted, bool):
        raise RegistryRecordError('the value\'s "deleted" is not true or false')
    metadata, rule_set = obj.get("metadata"), obj.get("ruleSet")
    if metadata is not None and not isinstance(metadata, dict) or rule_set is not None and not isinstance(rule_set,
                                                                                                        dict):
        raise RegistryRecordError('the value\'s "metadata" or "ruleSet" is not an object')
    return SchemaValue(
        subject=_opt_str(obj, "subject", "value") or key.subject,
        version=_int(obj, "version", "value", required=False) or key.version,
        id=_int(obj, "id", "value"),
        schema=schema,
        schema_type=schema_type,
        references=_references(obj),
        deleted=deleted,
        md5=_opt_str(obj, "md5", "value"),
        metadata=metadata,
        rule_set=rule_set,
        fields=obj,
    )


def parse_value(key: RegistryKey, data: bytes | None) -> SchemaValue | SubjectValue | None:
    """The value of a record whose key is ``key``: None for a tombstone (and for every NOOP
    record, whose value the registry never reads). Raises :class:`RegistryRecordError` for a
    value the registry would skip."""
    if data is None or key.keytype == NOOP:
        return None
    obj = _json_object(data, "value")
    if key.keytype == SCHEMA:
        return _schema_value(obj, key)
    subject = _opt_str(obj, "subject", "value") if key.keytype not in (CONTEXT, ASSOC) else None
    if subject is None:
        subject = key.subject  # old registries wrote CONFIG and MODE values without it
    version = _int(obj, "version", "value", required=key.keytype == DELETE_SUBJECT)
    mode = _opt_str(obj, "mode", "value") if key.keytype == MODE else None
    return SubjectValue(subject, version, mode, obj)


# -- writing records back (export) -----------------------------------------------------------


def dump_json(obj: Any) -> bytes:
    """Compact JSON in UTF-8, as the registry's Jackson writes it (no spaces, non-ASCII as is)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def schema_key_json(subject: str, version: int) -> bytes:
    return dump_json({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def schema_value_json(value: SchemaValue, *, deleted: bool | None = None) -> bytes:
    """``value`` as the registry writes it, with ``deleted`` set when given (fields read
    are kept in their order; ``deleted`` stays last, where the registry writes it)."""
    obj = dict(value.fields) if value.fields else {
        "subject": value.subject, "version": value.version, "id": value.id,
        **({"schemaType": value.schema_type} if value.schema_type != AVRO else {}),
        **({"references": [r.to_json() for r in value.references]} if value.references else {}),
        "schema": value.schema,
    }
    obj.pop("deleted", None)
    obj["deleted"] = value.deleted if deleted is None else deleted
    return dump_json(obj)


# -- the schema GUID ---------------------------------------------------------------------------


def _sorted_java(items) -> list:
    return sorted(items, key=compare_key)


def _text(md, value) -> None:
    if value is not None:
        md.update(str(value).encode("utf-8"))


def _hash_metadata(md, metadata: dict) -> None:
    tags = metadata.get("tags") or {}
    for name in _sorted_java(tags):
        _text(md, name)
        for v in _sorted_java(set(tags[name] or ())):
            _text(md, v)
    props = metadata.get("properties") or {}
    for name in _sorted_java(props):
        _text(md, name)
        _text(md, props[name])
    for name in _sorted_java(set(metadata.get("sensitive") or ())):
        _text(md, name)


def _hash_rule(md, rule: dict) -> None:
    for name in ("name", "doc", "kind", "mode", "type"):
        _text(md, rule.get(name))
    for tag in _sorted_java(set(rule.get("tags") or ())):
        _text(md, tag)
    params = rule.get("params") or {}
    for name in _sorted_java(params):
        _text(md, name)
        _text(md, params[name])
    for name in ("expr", "onSuccess", "onFailure"):
        _text(md, rule.get(name))
    if rule.get("disabled"):
        md.update(b"\x01")


def schema_guid(value: SchemaValue) -> uuid.UUID:
    """The schema's GUID, as the registry computes it (module docstring)."""
    if value.md5:
        try:
            raw = base64.b64decode(value.md5, validate=True)
        except ValueError:
            raw = b""
        if len(raw) == 16:
            return uuid.UUID(bytes=raw)
    import hashlib  # here: loading OpenSSL is most of this module's import time

    md = hashlib.md5()
    md.update(value.schema.encode("utf-8", "surrogatepass"))
    for ref in value.references:
        md.update(ref.name.encode("utf-8", "surrogatepass"))
        md.update(ref.subject.encode("utf-8", "surrogatepass"))
        md.update(_INT32.pack(ref.version))
    if value.metadata is not None:
        md.update(b"\x01")
        _hash_metadata(md, value.metadata)
    if value.rule_set is not None:
        md.update(b"\x01")
        for group in ("migrationRules", "domainRules", "encodingRules"):
            for rule in value.rule_set.get(group) or ():
                _hash_rule(md, rule)
        _text(md, value.rule_set.get("enableAt"))
    return uuid.UUID(bytes=md.digest())


__all__ = [
    "ASSOC", "AVRO", "CLEAR_SUBJECT", "CONFIG", "CONTEXT", "DEFAULT_TOPIC", "DELETE_SUBJECT", "JSON", "KEY_TYPES",
    "MODE", "NOOP", "PROTOBUF", "RegistryKey", "RegistryRecordError", "SCHEMA", "SCHEMA_TYPES", "SchemaReference",
    "SchemaValue", "SubjectValue", "dump_json", "parse_key", "parse_value", "schema_guid", "schema_key_json",
    "schema_value_json",
]

"""Protobuf payloads (Confluent's ``KafkaProtobufSerializer``: message indexes, then the message's
wire bytes) decoded with the ``protobuf`` runtime, after turning the schema the registry
stores into descriptors.

**From ``.proto`` text to descriptors.** The registry stores a Protobuf schema as ``.proto``
text (the canonical form it prints); another schema it imports is a *reference* whose
``name`` is the import path. plog compiles them with ``protoc`` itself, the compiler that
ships inside the ``grpcio-tools`` wheel (run as ``python -m grpc_tools.protoc``, its
documented command, in a child process): protoc is the reference implementation of the
language (proto2, proto3 and editions, name scoping, maps, groups, extensions, options), so
the descriptors are exactly the ones the producing application compiled, and its errors
name the line and column. A child process also keeps a crash of the C++ parser on hostile
text out of plog. Each schema is compiled once per run (the resolver caches codecs); a
compile takes about 0.1 s.

The files are laid out in a temporary directory: the schema itself, each reference under its
import path (references of references too), and the imports the registry treats as
built in and never stores: ``google/protobuf/*.proto`` (protoc's own copies),
``google/type/*.proto`` (from the ``googleapis-common-protos`` package, when installed) and
Confluent's ``confluent/meta.proto``, ``confluent/type/decimal.proto`` and
``confluent/type/variant.proto`` (written by plog: their messages and field numbers below).
A schema or reference stored as a base64 ``FileDescriptorProto`` (what confluent-kafka's
Python serializer registers) is used as it is, through protoc's ``--descriptor_set_in``.
A directory of schema files may be added to the include path, for imports by file name.

**Map entries written out.** A schema the registry derived from a compiled descriptor (what
the Java and Python serializers register) prints each map field as a nested message with
``option map_entry = true`` and a ``repeated`` field of it. protoc refuses that option in
source text, though the wire format is the same; plog removes the option before compiling
and sets it again on those messages' descriptors (so they decode, and render as JSON
objects, as maps).

**Which message.** The frame's message indexes select it, as the registry's own
``ProtobufSchema.toMessageName`` does: ``[i]`` the i-th top-level message of the schema's file
in declaration order, ``[i, j]`` the j-th message nested in that one. Messages declared in the
text count (map entries written out, as above, included); the entries protoc makes for a
``map<K, V>`` field do not, as they are not in the text. A schema stored as a serialized
descriptor counts every nested message of it.

**The JSON mapping** is Protobuf's canonical JSON mapping as Confluent's
``kafka-protobuf-console-consumer`` prints it (``JsonFormat.printer().includingDefaultValueFields()``):
fields under their JSON names (lowerCamelCase; ``json_names=False`` keeps the ``.proto``
names), fields without presence shown with their default values, 64-bit integers as
strings, bytes in base64, enums by name, well-known types in their JSON forms (a
``Timestamp`` as RFC 3339 text, wrappers as their value).

**The native renderer.** With the native core active, :meth:`ProtobufCodec.render` (and
:meth:`~ProtobufCodec.render_prefixed`, the resolver's shortcut, which reads the message
indexes too) writes that text straight from the wire bytes with a plan compiled once per
schema (native/src/protobuf_json.rs; :func:`_native_plan`): the same text, byte for byte.
Whatever the plan does not render exactly (a well-known type set, a map of more than one
entry, a singular message repeated on the wire, any payload that does not decode, ...) is
handed back and takes the reference path above, so its text and reasons are unchanged.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Sequence

from plog.formats import native
from plog.formats.schema_registry import SchemaReference, SchemaValue

from plog.engine.schemas.errors import PayloadError, SchemaCompileError

MAX_REFERENCE_DEPTH = 32
#: Seconds a protoc run may take (a schema is a few kilobytes: this only bounds a hang).
PROTOC_TIMEOUT = 120

#: The registry's built-in imports written by plog (same package, names and field numbers
#: as Confluent's files; options are left out: they do not change the wire format).
CONFLUENT_BUILTINS = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; repeated Rule rules = 4; }
message Rule { string name = 1; string doc = 2; string expr = 3; string sql = 4; }
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
""",
    "confluent/type/variant.proto": """syntax = "proto3";
package confluent.type;
message Variant { bytes metadata = 1; bytes value = 2; }
""",
}

#: ``message XEntry {`` followed by ``option map_entry = true;`` (module docstring).
_MAP_ENTRY_OPTION = re.compile(r"(\bmessage\s+(\w+)\s*\{\s*)option\s+map_entry\s*=\s*true\s*;")

_WELL_KNOWN = ("any", "api", "descriptor", "duration", "empty", "field_mask", "source_context", "struct",
               "timestamp", "type", "wrappers")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _serialized(text: str):
    """The ``FileDescriptorProto`` of a schema stored in the serialized form, or None for text."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    compact = text.strip()
    if not compact or not _BASE64.fullmatch(compact):
        return None
    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(compact, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    return fdp if fdp.message_type or fdp.enum_type or fdp.name or fdp.package else None


def _without_map_entry_options(text: str) -> tuple[str, set[str]]:
    """``text`` without its ``option map_entry = true;`` statements, and the names of the
    messages that had one."""
    names: set[str] = set()

    def drop(m: re.Match) -> str:
        names.add(m.group(2))
        return m.group(1)

    return _MAP_ENTRY_OPTION.sub(drop, text), names


def _nested(messages, prefix: str):
    """(full name, DescriptorProto) of every message in ``messages`` and below, depth first."""
    for m in messages:
        name = f"{prefix}.{m.name}" if prefix else m.name
        yield name, m
        yield from _nested(m.nested_type, name)


def _is_entry_shape(message) -> bool:
    return [(f.name, f.number) for f in message.field] == [("key", 1), ("value", 2)]


def _safe_path(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and "\\" not in name and "\0" not in name \
        and all(p not in ("", ".", "..") for p in parts) and name.endswith(".proto")


def _googleapis_root() -> str | None:
    """The directory holding ``google/type/*.proto`` of ``googleapis-common-protos``, if installed."""
    try:
        spec = importlib.util.find_spec("google.type")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if os.path.isfile(os.path.join(location, "date.proto")):
            return os.path.dirname(os.path.dirname(location))
    return None


def builtin_file(name: str):
    """The ``FileDescriptorProto`` of a built-in import the runtime knows (well-known types,
    ``google/type`` when installed), or None."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    module = None
    if name.startswith("google/protobuf/") and name[16:-6] in _WELL_KNOWN:
        module = f"google.protobuf.{name[16:-6]}_pb2"
    elif name.startswith("google/type/") and name.endswith(".proto"):
        module = f"google.type.{name[12:-6]}_pb2"
    if module is None:
        return None
    try:
        importlib.import_module(module)
        fd = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        return None
    fdp = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(fdp)
    return fdp


class ProtobufCodec:
    """A decoder for payloads written with one Protobuf schema (and its references)."""

    schema_type = "PROTOBUF"

    def __init__(self, value: SchemaValue, lookup: Callable[[SchemaReference], SchemaValue | None], *,
                 include_dirs: Sequence[str] = (), json_names: bool = True):
        self.main_name = f"plog_schema_{value.id}.proto"
        self.json_names = json_names
        # Map entries protoc made for ``map<K, V>`` fields of text schemas: not counted by indexes.
        self._synthetic: set[str] = set()
        files: dict[str, SchemaValue] = {}
        self._collect(value, lookup, files, 0)
        descriptors = self._compile(value, files, include_dirs)
        self._pool, self._main = self._build_pool(descriptors)
        self._classes: dict[tuple, type] = {}
        #: The native renderer's plan (module docstring of native/src/protobuf_json.rs) and the
        #: plan's message for each message-index path; None: the reference renders everything.
        self._plan = None
        self._roots: dict[tuple, int] = {}
        if native.active():
            try:
                self._plan, self._roots = _native_plan(self._pool, self._main, self._synthetic, json_names)
            except (_NoPlan, AttributeError, KeyError, TypeError, ValueError, RecursionError):
                self._plan = None

    def _collect(self, value: SchemaValue, lookup, files: dict, depth: int) -> None:
        if depth > MAX_REFERENCE_DEPTH:
            raise SchemaCompileError(f"references deeper than {MAX_REFERENCE_DEPTH} (a cycle?)")
        for ref in value.references:
            if ref.name in files:
                continue
            if not _safe_path(ref.name):
                raise SchemaCompileError(f"the reference name {ref.name!r} is not a relative .proto path")
            target = lookup(ref)
            if target is None:
                raise SchemaCompileError(f"the referenced schema {ref.name} (subject {ref.subject} version "
                                         f"{ref.version}) is not known")
            files[ref.name] = target
            self._collect(target, lookup, files, depth + 1)

    def _compile(self, value: SchemaValue, files: dict[str, SchemaValue], include_dirs) -> list:
        """Every ``FileDescriptorProto`` of the schema and its imports."""
        texts = {name: v.schema for name, v in files.items() if _serialized(v.schema) is None}
        given = {name: _serialized(v.schema) for name, v in files.items() if name not in texts}
        main = _serialized(value.schema)
        if main is None:
            texts[self.main_name] = value.schema
        else:
            main.name = self.main_name
        for name, fdp in given.items():
            fdp.name = name
        out = list(given.values())
        if texts:
            entries = {}
            for name, text in texts.items():
                texts[name], entries[name] = _without_map_entry_options(text)
            compiled = self._run_protoc(texts, given, include_dirs)
            names = {f.name for f in out}
            for fdp in compiled:
                if fdp.name in texts:
                    self._restore_map_entries(fdp, entries[fdp.name])
            out += [f for f in compiled if f.name not in names]
        if main is not None:
            out.append(main)
        return out

    def _restore_map_entries(self, fdp, explicit: set[str]) -> None:
        """Note the map entries protoc made, and mark as map entries again the messages whose
        ``option map_entry = true`` was taken out of the text."""
        package = fdp.package
        for name, message in _nested(fdp.message_type, package):
            if message.options.map_entry:
                self._synthetic.add(name)
            elif message.name in explicit and _is_entry_shape(message):
                message.options.map_entry = True

    def _run_protoc(self, texts: dict[str, str], given: dict, include_dirs) -> list:
        from google.protobuf import descriptor_pb2
        from google.protobuf.message import DecodeError

        tmp = tempfile.mkdtemp(prefix="plog-proto-")
        try:
            src = os.path.join(tmp, "src")
            for name, text in {**{n: t for n, t in CONFLUENT_BUILTINS.items() if n not in given}, **texts}.items():
                path = os.path.join(src, *name.split("/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                    f.write(text)
            out = os.path.join(tmp, "out.pb")
            args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{src}", *(f"-I{d}" for d in include_dirs)]
            root = _googleapis_root()
            if root is not None:
                args.append(f"-I{root}")
            if given:
                given_set = descriptor_pb2.FileDescriptorSet(file=list(given.values()))
                with open(os.path.join(tmp, "in.pb"), "wb") as f:
                    f.write(given_set.SerializeToString())
                args.append(f"--descriptor_set_in={os.path.join(tmp, 'in.pb')}")
            args += ["--include_imports", f"--descriptor_set_out={out}", *sorted(texts)]
            try:
                run = subprocess.run(args, capture_output=True, timeout=PROTOC_TIMEOUT, cwd=tmp)
            except subprocess.TimeoutExpired:
                raise SchemaCompileError(f"protoc did not finish in {PROTOC_TIMEOUT} s") from None
            if run.returncode != 0:
                raise SchemaCompileError(f"the Protobuf schema does not compile: {self._protoc_error(run.stderr)}")
            try:
                with open(out, "rb") as f:
                    return list(descriptor_pb2.FileDescriptorSet.FromString(f.read()).file)
            except (OSError, DecodeError) as e:
                raise SchemaCompileError(f"protoc wrote no descriptors ({e})") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _protoc_error(self, stderr: bytes) -> str:
        lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "warning:" not in ln] or lines or ["protoc failed"]
        text = errors[0]
        if "No module named grpc_tools" in text:
            return "protoc is not installed (the grpcio-tools package)"
        text = re.sub(r"^\S*/src/", "", text)
        return text.replace(f"{self.main_name}:", "line ", 1) if text.startswith(self.main_name) else text

    def _build_pool(self, descriptors: list):
        from google.protobuf import descriptor_pool

        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()

        visiting: set[str] = set()

        def add(fdp) -> None:
            if fdp.name in added:
                return
            if fdp.name in visiting:
                raise SchemaCompileError(f"the imports of {fdp.name} form a cycle")
            visiting.add(fdp.name)
            for dep in fdp.dependency:
                if dep not in added:
                    known = by_name.get(dep) or builtin_file(dep)
                    if known is None:
                        raise SchemaCompileError(f"the import {dep} is not known")
                    add(known)
            try:
                pool.Add(fdp)
            except (TypeError, ValueError) as e:
                raise SchemaCompileError(f"the Protobuf descriptors do not load: {' '.join(str(e).split())}") from None
            added.add(fdp.name)

        by_name = {f.name: f for f in descriptors}
        for fdp in descriptors:
            add(fdp)
        return pool, by_name[self.main_name]

    def _message_class(self, indexes: Sequence[int] | None):
        from google.protobuf import message_factory

        key = tuple(indexes or (0,))
        cls = self._classes.get(key)
        if cls is not None:
            return cls
        types, names = self._main.message_type, [self._main.package] if self._main.package else []
        for depth, i in enumerate(key):
            prefix = ".".join(names)
            types = [t for t in types if (f"{prefix}.{t.name}" if prefix else t.name) not in self._synthetic]
            if i >= len(types):
                where = "top-level messages" if depth == 0 else f"messages nested in {prefix}"
                raise PayloadError(f"the message indexes {list(key)} name no message (the schema has {len(types)} "
                                   f"{where})")
            names.append(types[i].name)
            types = types[i].nested_type
        cls = message_factory.GetMessageClass(self._pool.FindMessageTypeByName(".".join(names)))
        self._classes[key] = cls
        return cls

    def decode(self, payload: bytes, indexes: Sequence[int] | None = None):
        """The payload as a message of the type the indexes select."""
        from google.protobuf.message import DecodeError

        msg = self._message_class(indexes)()
        try:
            msg.ParseFromString(payload)
        except (DecodeError, RuntimeError, ValueError) as e:
            raise PayloadError(f"the payload does not match its Protobuf schema: {' '.join(str(e).split())}") from None
        return msg

    def to_dict(self, msg) -> dict:
        from google.protobuf import json_format

        return json_format.MessageToDict(msg, always_print_fields_with_no_presence=True,
                                         preserving_proto_field_name=not self.json_names,
                                         descriptor_pool=self._pool)

    def render(self, payload: bytes, indexes: Sequence[int] | None = None) -> str:
        """The message as compact JSON text (module docstring's mapping). With the native core
        active, ``plog._native.protobuf_render_json`` writes it from the wire bytes; any payload
        it hands back (anything unusual, every payload that does not decode) takes the
        reference path, so the text and the reasons are the reference's."""
        if self._plan is not None:
            root = self._roots.get(tuple(indexes or (0,)))
            if root is not None:
                try:
                    text = native.module.protobuf_render_json(self._plan, payload, 0, root)
                except native.NativeFormatError:
                    text = None  # a fault of the native unit: the reference decides
                if text is not None:
                    return text
        return self.render_reference(payload, indexes)

    def render_prefixed(self, framed: bytes, start: int) -> str | None:
        """The text of the message at ``framed[start:]`` (message indexes first), or None when
        it does not render here (the resolver's shortcut for prefixed values: it then takes the
        whole way, which says why)."""
        if self._plan is None:
            return None
        try:
            return native.module.protobuf_render_json(self._plan, framed, start)
        except native.NativeFormatError:
            return None

    def extract_prefixed(self, framed: bytes, start: int, path: tuple[str, ...]) -> None:
        """The resolver's ``--where`` shortcut: never answered here (the whole way runs)."""
        return None

    def render_reference(self, payload: bytes, indexes: Sequence[int] | None = None) -> str:
        """:meth:`render` on the pure-Python path (the runtime's parse, ``MessageToDict``, ``json``)."""
        msg = self.decode(payload, indexes)
        try:
            value = self.to_dict(msg)
        except Exception as e:  # json_format's errors (an Any of an unknown type, ...)
            raise PayloadError(f"the message has no JSON form: {' '.join(str(e).split())}") from None
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _NoPlan(Exception):
    """A schema the native renderer is not given (the reference renders it)."""


#: Field types of the native plan (``FieldDescriptor.TYPE_*`` numbers); groups (10) are not.
_PLAN_KINDS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
               8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32",
               18: "sint64"}
_TYPE_MESSAGE, _TYPE_ENUM = 11, 14


def _repeated(f) -> bool:
    """``is_repeated`` (newer runtimes) or the label (older ones, which have no such property)."""
    found = getattr(f, "is_repeated", None)
    return bool(found) if found is not None else f.label == 3


def _required(f) -> bool:
    found = getattr(f, "is_required", None)
    return bool(found) if found is not None else f.label == 2


def _enum_json_option() -> bool:
    """Whether the runtime knows the ``pb.enumvalue.json`` option (enum names json_format
    would take from it: then no native plan)."""
    from google.protobuf import descriptor_pool

    try:
        descriptor_pool.Default().FindExtensionByName("pb.enumvalue.json")
    except KeyError:
        return False
    return True


def _index_paths(main, synthetic: set[str]):
    """(message-index path, full name) of every message :meth:`ProtobufCodec._message_class`
    selects, the same walk."""
    out = []

    def walk(types, names: list[str], path: tuple) -> None:
        prefix = ".".join(names)
        kept = [t for t in types if (f"{prefix}.{t.name}" if prefix else t.name) not in synthetic]
        for i, t in enumerate(kept):
            out.append((path + (i,), ".".join(names + [t.name])))
            walk(t.nested_type, names + [t.name], path + (i,))

    walk(main.message_type, [main.package] if main.package else [], ())
    return out


def _native_plan(pool, main, synthetic: set[str], json_names: bool):
    """``plog._native.protobuf_plan`` of the schema (native/src/protobuf_json.rs) and the plan's
    message for each message-index path. Types json_format renders its own way (well-known
    types), groups, closed enums, required fields and custom defaults are marked unsupported:
    the native renderer hands any payload that needs them back to the reference."""
    if _enum_json_option():
        raise _NoPlan("enum values may carry JSON names")
    messages: list = []
    enums: list = []
    by_message: dict[str, int] = {}
    by_enum: dict[str, int] = {}

    def enum_index(e) -> int:
        if e.full_name not in by_enum:
            by_enum[e.full_name] = len(enums)
            enums.append([(number, json.dumps(v.name, ensure_ascii=False)) for number, v in e.values_by_number.items()])
        return by_enum[e.full_name]

    def field_kind(f) -> tuple[str, int | None]:
        if f.type == _TYPE_MESSAGE:
            return "message", message_index(f.message_type)
        if f.type == _TYPE_ENUM:
            if f.enum_type.is_closed or f.enum_type.full_name == "google.protobuf.NullValue":
                return "unsupported", None
            return "enum", enum_index(f.enum_type)
        kind = _PLAN_KINDS.get(f.type)
        if kind is None or (not f.has_presence and not _repeated(f) and f.default_value not in (0, "", b"")):
            return "unsupported", None
        return kind, None

    def message_index(d) -> int:
        if d.full_name in by_message:
            return by_message[d.full_name]
        i = by_message[d.full_name] = len(messages)
        messages.append(None)
        if d.full_name.startswith("google.protobuf.") or d.extension_ranges \
                or any(_required(f) for f in d.fields):
            messages[i] = (False, [])
            return i
        fields = []
        for f in d.fields:
            kind, arg = field_kind(f)
            is_map = f.type == _TYPE_MESSAGE and f.message_type.GetOptions().map_entry
            name = json.dumps(f.json_name if json_names else f.name, ensure_ascii=False)
            oneof = f.containing_oneof.index if f.containing_oneof is not None else None
            fields.append((f.number, name, kind, arg, _repeated(f), bool(is_map), f.has_presence, oneof))
        messages[i] = (True, fields)
        return i

    roots: dict[tuple, int] = {}
    for path, name in _index_paths(main, synthetic):
        roots[path] = message_index(pool.FindMessageTypeByName(name))
    plan = native.module.protobuf_plan(messages, enums, [(list(p), m) for p, m in roots.items()])
    return plan, roots


__all__ = ["CONFLUENT_BUILTINS", "ProtobufCodec", "builtin_file"]

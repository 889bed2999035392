"""The native Avro renderer (native/src/avro_json.rs) against the reference (fastavro,
``to_avro_json``, ``json.dumps``): for random data of many schema shapes (references,
recursion, unions of every kind, maps, arrays, enums, fixed, logical types, top-level
primitives and unions) the text is identical and the native pass answers for every one; for
hostile bytes (truncated, bytes flipped, bytes appended, random) it answers the reference's
text or None (then the reference runs and says why), never anything else. Exact equality."""

from __future__ import annotations

import io
import json
import math
import random
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "native"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_twins import native_module  # noqa: E402,F401  (the fixture)

from plog.engine.schemas.avro_codec import AvroCodec  # noqa: E402
from plog.engine.schemas.errors import PayloadError  # noqa: E402
from plog.formats.schema_registry import SchemaReference, SchemaValue  # noqa: E402

ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme.common",
           "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}
ORDER = {
    "type": "record", "name": "Order", "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ship_to", "type": ["null", "com.acme.common.Address"]},
        {"name": "bill_to", "type": "com.acme.common.Address"},
        {"name": "amount", "type": ["int", "string", "double", "float", "boolean", "bytes"]},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "_q9"]}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long", {"type": "array", "items": "float"}]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 4}},
        {"name": "again", "type": ["null", "Md5", "Status", {"type": "map", "values": "double"}]},
        {"name": "ratio", "type": "float"},
        {"name": "big", "type": "double"},
    ],
}
NODE = {"type": "record", "name": "Node", "fields": [
    {"name": "label", "type": "string"},
    {"name": "children", "type": {"type": "array", "items": "Node"}},
    {"name": "next", "type": ["null", "Node"]},
]}
SCHEMAS = {
    "order": (ORDER, [ADDRESS]),
    "recursive": (NODE, []),
    "string": ("string", []),
    "float": ("float", []),
    "double": ("double", []),
    "bytes": ("bytes", []),
    "long": ({"type": "long", "logicalType": "timestamp-micros"}, []),
    "union": (["null", "string", "com.acme.common.Address", {"type": "array", "items": ["null", "int"]}], [ADDRESS]),
    "map": ({"type": "map", "values": {"type": "map", "values": "boolean"}}, []),
}

_TEXT = ["", "a", "é", "\"\\", "\x00\x01\x1f\x7f", "\n\r\t\b\f", "日本", "🎉", "\u2028\u2029", "x" * 40]


def _float(rnd: random.Random) -> float:
    choice = rnd.randrange(6)
    if choice == 0:
        return rnd.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 1e16, 1e15, 1e-5, 1e-4, 0.1, 5e-324, 1.7e308])
    if choice == 1:
        return struct.unpack("<d", rnd.randbytes(8))[0]
    if choice == 2:
        return float(rnd.randrange(-10**6, 10**6))
    return rnd.uniform(-1e6, 1e6) * 10.0 ** rnd.randrange(-30, 30)


def _f32(rnd: random.Random) -> float:
    if rnd.random() < 0.5:
        return struct.unpack("<f", rnd.randbytes(4))[0]
    return struct.unpack("<f", struct.pack("<f", max(-3.4e38, min(3.4e38, _float(rnd)))))[0]


def _long(rnd: random.Random) -> int:
    return rnd.choice([0, -1, 1, 2**63 - 1, -2**63, rnd.randrange(-2**63, 2**63), rnd.randrange(-1000, 1000)])


def random_value(schema, named: dict, rnd: random.Random, depth: int = 0):
    """A random datum of a parsed schema, in the form fastavro writes (unions as tuples)."""
    if isinstance(schema, str):
        if schema in named:
            return random_value(named[schema], named, rnd, depth)
        return {
            "null": lambda: None, "boolean": lambda: rnd.random() < 0.5, "int": lambda: rnd.randrange(-2**31, 2**31),
            "long": lambda: _long(rnd), "float": lambda: _f32(rnd), "double": lambda: _float(rnd),
            "bytes": lambda: rnd.randbytes(rnd.randrange(6)), "string": lambda: rnd.choice(_TEXT),
        }[schema]()
    if isinstance(schema, list):
        options = [b for b in schema if depth < 4 or b == "null"] or schema
        branch = rnd.choice(options)
        return random_value(branch, named, rnd, depth + 1)
    t = schema["type"]
    if t in ("record", "error"):
        return {f["name"]: random_value(f["type"], named, rnd, depth + 1) for f in schema["fields"]}
    if t == "enum":
        return rnd.choice(schema["symbols"])
    if t == "fixed":
        return rnd.randbytes(schema["size"])
    if t == "array":
        return [random_value(schema["items"], named, rnd, depth + 1) for _ in range(rnd.randrange(4 if depth < 4 else 1))]
    if t == "map":
        return {f"k{i}{rnd.choice(_TEXT)}": random_value(schema["values"], named, rnd, depth + 1)
                for i in range(rnd.randrange(4 if depth < 4 else 1))}
    if schema.get("logicalType"):
        return random_value(t, named, rnd, depth)  # written as its underlying type
    return random_value(t, named, rnd, depth)


def _codec(name: str) -> tuple[AvroCodec, object, dict]:
    schema, refs = SCHEMAS[name]
    values = {f"ref{i}": SchemaValue(f"ref{i}", 1, 100 + i, json.dumps(r)) for i, r in enumerate(refs)}
    value = SchemaValue(f"{name}-value", 1, 1, json.dumps(schema),
                        references=tuple(SchemaReference(f"r{i}", f"ref{i}", 1) for i in range(len(refs))))
    codec = AvroCodec(value, lambda ref: values.get(ref.subject))
    import fastavro

    named: dict = {}
    for r in refs:
        fastavro.parse_schema(r, named, _write_hint=False)
    parsed = fastavro.parse_schema(schema, named, _write_hint=False)
    return codec, parsed, named


def _write(parsed, named, datum) -> bytes:
    import fastavro

    wrapper = {"type": "record", "name": "plog.w", "fields": [{"name": "v", "type": parsed}],
               "__fastavro_parsed": True, "__named_schemas": named}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, wrapper, {"v": _writable(datum)})
    return buf.getvalue()


def _writable(datum):
    return datum  # fastavro picks union branches from the Python type


def _reference(codec: AvroCodec, payload: bytes):
    try:
        return codec.render_reference(payload)
    except PayloadError:
        return None


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_native_text_is_the_references(native_module, name):
    codec, parsed, named = _codec(name)
    assert codec._program is not None
    rnd = random.Random(f"avro-{name}")
    for _ in range(300):
        payload = _write(parsed, named, random_value(parsed, named, rnd))
        mine = native_module.avro_render_json(codec._program, payload)
        assert mine is not None and mine == codec.render_reference(payload), payload


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_hostile_bytes_are_the_references_or_left_to_it(native_module, name):
    codec, parsed, named = _codec(name)
    rnd = random.Random(f"hostile-{name}")
    answered = 0
    for _ in range(150):
        good = _write(parsed, named, random_value(parsed, named, rnd))
        mutants = [good[:k] for k in range(len(good))] + [good + rnd.randbytes(rnd.randrange(1, 4))]
        for _ in range(6):
            b = bytearray(good)
            if b:
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            mutants.append(bytes(b))
        mutants.append(rnd.randbytes(rnd.randrange(40)))
        mutants.append(b"\xff" * 11)
        for payload in mutants:
            mine = native_module.avro_render_json(codec._program, payload)
            if mine is None:
                continue
            answered += 1
            assert mine == _reference(codec, payload), payload
            assert codec.render(payload) == mine
    assert answered  # the check is not vacuous


def test_a_repeated_map_key_is_left_to_the_reference(native_module):
    codec, _, _ = _codec("map")
    payload = bytes([4, 2]) + b"a" + bytes([0]) + bytes([2]) + b"a" + bytes([2, 2]) + b"b" + bytes([1, 0, 0])
    assert native_module.avro_render_json(codec._program, payload) is None
    assert codec.render(payload) == codec.render_reference(payload) == '{"a":{"b":true}}'


def test_float_rendering_of_every_kind(native_module):
    codec, _, _ = _codec("float")
    rnd = random.Random(7)
    patterns = [0, 1, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000, 0x3DCCCCCD]
    patterns += [rnd.getrandbits(32) for _ in range(3000)]
    for bits in patterns:
        payload = struct.pack("<I", bits)
        assert native_module.avro_render_json(codec._program, payload) == codec.render_reference(payload), hex(bits)
    codec, _, _ = _codec("double")
    for _ in range(3000):
        payload = rnd.randbytes(8)
        assert native_module.avro_render_json(codec._program, payload) == codec.render_reference(payload), payload


def _names(schema, named: dict, depth: int = 0) -> set[str]:
    """Field names and union branch labels of a schema: the names a --where path uses."""
    if depth > 6:
        return set()
    if isinstance(schema, str):
        return _names(named[schema], named, depth + 1) if schema in named else set()
    if isinstance(schema, list):
        from plog.engine.schemas.avro_codec import _branch_name

        out = {_branch_name(b) for b in schema if b != "null"}
        for b in schema:
            out |= _names(b, named, depth + 1)
        return out
    t = schema["type"]
    if t in ("record", "error"):
        out = {f["name"] for f in schema["fields"]}
        for f in schema["fields"]:
            out |= _names(f["type"], named, depth + 1)
        return out
    if t in ("array", "map"):
        return _names(schema["items" if t == "array" else "values"], named, depth + 1)
    return set()


def _typed(value):
    return type(value).__name__, value if value == value else "nan"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_extract_is_the_where_walk_of_the_rendered_json(native_module, name):
    """``avro_extract`` (scan --where's shortcut) finds what ``scan_filter._walk`` finds in the
    reference's JSON, or leaves the record to it; never anything else."""
    from plog.engine.inspect.scan_filter import _MISSING, _walk

    codec, parsed, named = _codec(name)
    names = sorted(_names(parsed, named)) + ["nope", "string"]
    rnd = random.Random(f"extract-{name}")
    answered = 0
    for _ in range(300):
        payload = _write(parsed, named, random_value(parsed, named, rnd))
        if rnd.random() < 0.2:
            b = bytearray(payload)
            b[rnd.randrange(len(b))] = rnd.randrange(256)
            payload = bytes(b)
        reference = _reference(codec, payload)
        for _ in range(4):
            path = tuple(rnd.choice(names) for _ in range(rnd.randrange(0, 4)))
            got = codec.extract_prefixed(b"\0\0\0\0\1" + payload, 5, path)
            if got is None:
                continue
            answered += 1
            assert reference is not None, payload  # a payload that does not render is never answered
            walked = _walk(json.loads(reference), path)
            found, value = got
            assert found == (walked is not _MISSING), (path, reference)
            if found:
                assert _typed(value) == _typed(walked), (path, reference)
    assert answered or name == "map"  # a map on the way is always left to the whole way


def _literal(rnd: random.Random):
    return rnd.choice([0, 1, -1, 7, 2**63 - 1, 2**70, 0.5, -2.5, float("nan"), 1e300, "", "a", "NEW", "PAID", "42",
                       "-7", "é", None, True, False])


def test_where_mask_is_the_where_of_the_rendered_json(native_module, tmp_path):
    """``SchemaResolver.where_mask`` (scan --where on a batch's values at once) says 1 exactly
    where every condition holds on the reference's JSON (scan_filter's walk and comparisons),
    0 where one does not, or 2 (left to the caller); None for a literal it does not compare."""
    from registry_records import schema_record, write_schemas_topic

    from plog.engine.inspect.scan_filter import _MISSING, holds, parse_where
    from plog.engine.schemas.resolver import open_resolver

    schema, refs = SCHEMAS["order"]
    dd = write_schemas_topic(tmp_path / "data", [schema_record("address-value", 1, 1, json.dumps(refs[0])),
                                                 schema_record("order-value", 1, 2, json.dumps(schema),
                                                               references=[("r", "address-value", 1)])])
    resolver = open_resolver([dd])
    _, parsed, named = _codec("order")
    rnd = random.Random("where")
    values = []
    for _ in range(400):
        payload = b"\x00\x00\x00\x00\x02" + _write(parsed, named, random_value(parsed, named, rnd))
        if rnd.random() < 0.1:
            b = bytearray(payload)
            b[rnd.randrange(5, len(b))] = rnd.randrange(256)
            payload = bytes(b)
        values.append(payload)
    values += [None, b"\x00\x00\x00\x00\x63xx", b"{}", True]
    assert resolver.where_mask(values, [(("id",), "=", 1)]) is None  # nothing compiled yet
    resolver.render(values[0])
    names = ["id", "ship_to", "bill_to", "city", "zip", "amount", "status", "tags", "ratio", "big", "digest", "again",
             "string", "int", "nope"]
    ops = ["=", "!=", "<", "<=", ">", ">="]
    answered = 0
    for _ in range(200):
        conds = [(tuple(rnd.choice(names) for _ in range(rnd.randrange(1, 3))), rnd.choice(ops), _literal(rnd))
                 for _ in range(rnd.randrange(1, 3))]
        mask = resolver.where_mask(values, conds)
        if any(isinstance(lit, int) and not isinstance(lit, bool) and abs(lit) >= 2**63 for _, _, lit in conds):
            assert mask is None
            continue
        assert mask is not None and len(mask) == len(values)
        parsed_conds = [c._replace(path=p, op=o, literal=lit) for c, (p, o, lit)
                        in zip(parse_where(" and ".join(["value.x = 1"] * len(conds))), conds)]
        for value, m in zip(values, mask):
            assert m in (0, 1, 2)
            if m == 2:
                continue
            answered += 1
            text = resolver.render(value)[0] if isinstance(value, bytes) else None
            doc = _MISSING if text is None else json.loads(text)
            expected = doc is not _MISSING and all(holds(c, doc) for c in parsed_conds)
            assert m == expected, (conds, text)
        assert mask[-1] == 2 and mask[-4] == 0  # a record with headers is the caller's; a null value never holds
    assert answered

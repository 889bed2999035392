"""The native Protobuf renderer (native/src/protobuf_json.rs) against the reference (the
``protobuf`` runtime's parse, ``json_format.MessageToDict``, ``json.dumps``): for random
messages over every scalar type (extremes, NaN, the infinities, -0.0), nested and recursive
messages, repeated fields packed and unpacked, maps, oneofs, proto3 ``optional``, enums
(unknown numbers too), unknown fields, values on the wire equal to the defaults, message
indexes and payloads written by confluent-kafka's ``ProtobufSerializer``, the text is
identical; for hostile bytes (truncated, bytes flipped, bytes appended, random, wrong wire
types, lengths past the end) it is the reference's text or None (then the reference runs and
says why), never anything else. Exact equality."""

from __future__ import annotations

import base64
import math
import random
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_twins import native_module  # noqa: E402,F401  (the fixture)

from plog.engine.schemas.errors import PayloadError  # noqa: E402
from plog.engine.schemas.protobuf_codec import ProtobufCodec  # noqa: E402
from plog.formats.confluent_wire import encode_prefix  # noqa: E402
from plog.formats.schema_registry import SchemaValue  # noqa: E402

PROTO = """syntax = "proto3";
package twins;

import "google/protobuf/timestamp.proto";

message Scalars {
  int32 i32 = 1;
  int64 i64 = 2;
  uint32 u32 = 3;
  uint64 u64 = 4;
  sint32 s32 = 5;
  sint64 s64 = 6;
  fixed32 f32 = 7;
  fixed64 f64 = 8;
  sfixed32 sf32 = 9;
  sfixed64 sf64 = 10;
  bool flag = 11;
  float ratio = 12;
  double big = 13;
  string text = 14;
  bytes blob = 15;
  Color color = 16;
}

enum Color {
  RED = 0;
  GREEN = 1;
  BLUE = 2;
}

message Everything {
  message Inner {
    string name = 1;
    repeated sint64 values = 2;
    Inner child = 3;
  }
  enum Mode {
    MODE_UNSET = 0;
    FAST = 5;
    SLOW = -3;
  }
  Scalars scalars = 20;
  repeated int32 packed_ints = 1;
  repeated int64 unpacked_longs = 2 [packed = false];
  repeated double doubles = 3;
  repeated float floats = 4 [packed = false];
  repeated bool flags = 5;
  repeated Color colors = 6;
  repeated string names = 7;
  repeated bytes blobs = 8;
  repeated Inner inners = 9;
  map<string, int32> counts = 10;
  map<int64, Inner> by_id = 11;
  map<bool, string> by_flag = 12;
  map<uint32, Color> by_num = 13;
  oneof choice {
    string label = 14;
    int64 number = 15;
    Inner nested = 16;
    double weight = 17;
  }
  optional int32 maybe = 18;
  optional string maybe_text = 19;
  Mode mode = 21;
  fixed64 last_field = 536870911;
  google.protobuf.Timestamp at = 22;
  Inner inner = 23;
  string json_Name_x = 24 [json_name = "custom"];
}

message Tree {
  string label = 1;
  repeated Tree kids = 2;
}
"""

_TEXT = ["", "a", "é", "\"\\", "\x00\x01\x1f\x7f", "\n\r\t\b\f", "日本", "🎉", "\u2028\u2029", "x" * 40]
_INT_RANGES = {"i32": (-2**31, 2**31), "i64": (-2**63, 2**63), "u32": (0, 2**32), "u64": (0, 2**64),
               "s32": (-2**31, 2**31), "s64": (-2**63, 2**63), "f32": (0, 2**32), "f64": (0, 2**64),
               "sf32": (-2**31, 2**31), "sf64": (-2**63, 2**63)}


def _codec(text: str = PROTO, *, json_names: bool = True, schema_id: int = 1) -> ProtobufCodec:
    return ProtobufCodec(SchemaValue("twins-value", 1, schema_id, text, "PROTOBUF"), lambda ref: None,
                         json_names=json_names)


@pytest.fixture(scope="module")
def codec(native_module):
    c = _codec()
    assert c._plan is not None
    return c


def _int(rnd: random.Random, lo: int, hi: int) -> int:
    return rnd.choice([0, lo, hi - 1, max(lo, -1), 1, rnd.randrange(lo, hi), rnd.randrange(max(lo, -300), 300)])


def _f32(rnd: random.Random) -> float:
    if rnd.random() < 0.4:
        return struct.unpack("<f", rnd.randbytes(4))[0]
    x = rnd.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 0.1, 1.25, -3.0, 3.4028234663852886e38, 1e-45,
                    1.17549435e-38, 16777217.0, 1e7, 1e-5, 123456.7, 1234565.0, 8765432.5, 2.5e10,
                    rnd.uniform(-1e6, 1e6)])
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _f64(rnd: random.Random) -> float:
    if rnd.random() < 0.4:
        return struct.unpack("<d", rnd.randbytes(8))[0]
    return rnd.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 0.1, 1e16, 1e15, 1e-5, 1e-4, 5e-324, 1.7e308,
                       rnd.uniform(-1e6, 1e6) * 10.0 ** rnd.randrange(-30, 30)])


def _scalars(cls, rnd: random.Random):
    m = cls()
    for name, (lo, hi) in _INT_RANGES.items():
        if rnd.random() < 0.7:
            setattr(m, name, _int(rnd, lo, hi))
    if rnd.random() < 0.7:
        m.flag = rnd.random() < 0.5
    if rnd.random() < 0.7:
        m.ratio = _f32(rnd)
    if rnd.random() < 0.7:
        m.big = _f64(rnd)
    if rnd.random() < 0.7:
        m.text = rnd.choice(_TEXT)
    if rnd.random() < 0.7:
        m.blob = rnd.randbytes(rnd.randrange(7))
    if rnd.random() < 0.7:
        m.color = rnd.choice([0, 1, 2, 7, -1])  # open enum: unknown numbers kept
    return m


def _inner(cls, rnd: random.Random, depth: int = 0):
    m = cls(name=rnd.choice(_TEXT), values=[_int(rnd, -2**63, 2**63) for _ in range(rnd.randrange(3))])
    if depth < 3 and rnd.random() < 0.4:
        m.child.CopyFrom(_inner(cls, rnd, depth + 1))
    return m


def random_everything(codec: ProtobufCodec, rnd: random.Random, *, big_maps: bool = False):
    cls = codec._message_class((1,))
    inner = codec._message_class((1, 0))
    m = cls()
    if rnd.random() < 0.7:
        m.scalars.CopyFrom(_scalars(codec._message_class((0,)), rnd))
    n = lambda: rnd.randrange(4)  # noqa: E731
    m.packed_ints.extend(_int(rnd, -2**31, 2**31) for _ in range(n()))
    m.unpacked_longs.extend(_int(rnd, -2**63, 2**63) for _ in range(n()))
    m.doubles.extend(_f64(rnd) for _ in range(n()))
    m.floats.extend(_f32(rnd) for _ in range(n()))
    m.flags.extend(rnd.random() < 0.5 for _ in range(n()))
    m.colors.extend(rnd.choice([0, 1, 2, 9]) for _ in range(n()))
    m.names.extend(rnd.choice(_TEXT) for _ in range(n()))
    m.blobs.extend(rnd.randbytes(rnd.randrange(5)) for _ in range(n()))
    for _ in range(n()):
        m.inners.add().CopyFrom(_inner(inner, rnd))
    entries = 3 if big_maps else 2  # at most one entry: the runtime's order of more is its hash table's
    for _ in range(rnd.randrange(entries)):
        m.counts[rnd.choice(_TEXT)] = _int(rnd, -2**31, 2**31)
    for _ in range(rnd.randrange(entries)):
        m.by_id[_int(rnd, -2**63, 2**63)].CopyFrom(_inner(inner, rnd))
    for _ in range(rnd.randrange(entries)):
        m.by_flag[rnd.random() < 0.5] = rnd.choice(_TEXT)
    for _ in range(rnd.randrange(entries)):
        m.by_num[_int(rnd, 0, 2**32)] = rnd.choice([0, 1, 2, 5])
    choice = rnd.randrange(5)
    if choice == 1:
        m.label = rnd.choice(_TEXT)
    elif choice == 2:
        m.number = _int(rnd, -2**63, 2**63)
    elif choice == 3:
        m.nested.CopyFrom(_inner(inner, rnd))
    elif choice == 4:
        m.weight = _f64(rnd)
    if rnd.random() < 0.5:
        m.maybe = _int(rnd, -2**31, 2**31)
    if rnd.random() < 0.5:
        m.maybe_text = rnd.choice(_TEXT)
    if rnd.random() < 0.6:
        m.mode = rnd.choice([0, 5, -3, 4])
    if rnd.random() < 0.3:
        m.last_field = _int(rnd, 0, 2**64)
    if rnd.random() < 0.5:
        m.inner.CopyFrom(_inner(inner, rnd))
    if rnd.random() < 0.3:
        m.json_Name_x = "c"
    return m


def _reference(codec: ProtobufCodec, payload: bytes, indexes=(1,)):
    try:
        return codec.render_reference(payload, list(indexes))
    except PayloadError:
        return None


def _native(native_module, codec: ProtobufCodec, payload: bytes, indexes=(1,)):
    return native_module.protobuf_render_json(codec._plan, payload, 0, codec._roots[tuple(indexes)])


def test_random_messages_render_as_the_reference(native_module, codec):
    rnd = random.Random("protobuf-twins")
    for _ in range(600):
        payload = random_everything(codec, rnd).SerializeToString()
        mine = _native(native_module, codec, payload)
        assert mine is not None and mine == codec.render_reference(payload, [1]), payload
        assert codec.render(payload, [1]) == mine


def test_every_scalar_type_and_its_extremes(native_module, codec):
    cls = codec._message_class((0,))
    rnd = random.Random("scalars")
    for _ in range(800):
        payload = _scalars(cls, rnd).SerializeToString()
        mine = _native(native_module, codec, payload, (0,))
        assert mine is not None and mine == codec.render_reference(payload, [0]), payload
    extremes = cls(i32=-2**31, i64=-2**63, u32=2**32 - 1, u64=2**64 - 1, s32=-2**31, s64=2**63 - 1, f32=2**32 - 1,
                   f64=2**64 - 1, sf32=-2**31, sf64=-2**63, flag=True, ratio=-0.0, big=-0.0, text="\x00", blob=b"\xff",
                   color=-5)
    payload = extremes.SerializeToString()
    assert _native(native_module, codec, payload, (0,)) == codec.render_reference(payload, [0])
    for x in (math.nan, math.inf, -math.inf, 3.4028234663852886e38, 1e-45, 0.1, 16777216.0):
        payload = cls(ratio=x, big=x).SerializeToString()
        assert _native(native_module, codec, payload, (0,)) == codec.render_reference(payload, [0])


def test_recursive_messages_and_the_names_as_written(native_module):
    for json_names in (True, False):
        c = _codec(json_names=json_names)
        rnd = random.Random(f"names-{json_names}")
        for _ in range(100):
            payload = random_everything(c, rnd).SerializeToString()
            assert _native(native_module, c, payload) == c.render_reference(payload, [1])
    c = _codec()
    tree = c._message_class((2,))
    t = tree(label="root")
    node = t
    for i in range(30):
        node = node.kids.add(label=f"k{i}")
        node.kids.add()
    payload = t.SerializeToString()
    assert _native(native_module, c, payload, (2,)) == c.render_reference(payload, [2])


def _tag(number: int, wt: int) -> bytes:
    return _varint(number << 3 | wt)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len(number: int, data: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(data)) + data


def test_hand_written_wire_forms(native_module, codec):
    """Defaults on the wire, values repeated (last wins), packed and unpacked mixed, unknown
    fields of every wire type, oneof members switching, zero-length packed runs."""
    scalars = [
        _tag(1, 0) + _varint(0) + _tag(14, 2) + b"\x00",  # zeros on the wire: not set, printed as defaults
        _tag(1, 0) + _varint(5) + _tag(1, 0) + _varint(0),  # last wins: 0, not set
        _tag(1, 0) + _varint(0) + _tag(1, 0) + _varint(7),
        _tag(12, 5) + struct.pack("<f", -0.0),  # -0.0 is set (bits)
        _tag(13, 1) + struct.pack("<d", 0.0),
        _tag(16, 0) + _varint(-1),  # an unknown enum number
        _tag(16, 0) + _varint(0),
        _tag(99, 0) + _varint(5) + _tag(98, 1) + b"\x01" * 8 + _len(97, b"abc") + _tag(96, 5) + b"\x02" * 4,
        _tag(3, 0) + _varint(2**32 - 1) + _tag(5, 0) + _varint(2**32 - 1) + _tag(1, 0) + _varint(-(2**31)),
        _tag(14, 2) + _varint(2) + "é".encode(),
        _tag(11, 0) + _varint(1) + _tag(11, 0) + _varint(0),
        b"",
    ]
    for payload in scalars:
        mine = _native(native_module, codec, payload, (0,))
        assert mine is not None and mine == codec.render_reference(payload, [0]), payload
    everything = [
        _len(1, _varint(1) + _varint(-2)) + _tag(1, 0) + _varint(3) + _len(1, b""),  # packed, unpacked, empty run
        _len(1, b""),  # an empty packed run only: not set
        _len(2, _varint(1) + _varint(2)) + _tag(2, 0) + _varint(9),  # packed on a [packed = false] field
        _len(4, struct.pack("<ff", 1.5, -0.0)),
        _len(14, b"x") + _tag(15, 0) + _varint(3),  # oneof: the last member wins
        _tag(15, 0) + _varint(3) + _len(14, b"y"),
        _len(16, _len(1, b"n")) + _tag(17, 1) + struct.pack("<d", 2.5),
        _tag(18, 0) + _varint(0),  # optional: set though 0
        _tag(21, 0) + _varint(-3) + _tag(536870911, 1) + b"\x00" * 8,
        _len(10, _len(1, b"k") + _tag(2, 0) + _varint(4)),  # a map entry
        _len(10, _tag(2, 0) + _varint(4)),  # no key
        _len(10, _len(1, b"k")),  # no value
        _len(11, _tag(1, 0) + _varint(-5)),  # a message value missing: its defaults
        _len(12, _tag(1, 0) + _varint(1) + _len(2, b"yes")),
        _len(13, _tag(1, 0) + _varint(7) + _tag(2, 0) + _varint(4)),
        _len(10, _len(1, b"k") + _tag(2, 0) + _varint(4) + _tag(1, 2) + b"\x01j"),  # key twice: last wins
        _len(9, b"") + _len(9, _len(1, b"a")),
        _len(20, b"") + _len(24, b"c"),
    ]
    for payload in everything:
        mine = _native(native_module, codec, payload)
        assert mine is not None and mine == codec.render_reference(payload, [1]), payload


def test_what_is_left_to_the_reference(native_module, codec):
    """Cases the native pass hands back (None), where the reference's own answer stands."""
    cases = [
        _len(23, _len(1, b"a")) + _len(23, _len(1, b"b")),  # a singular message twice: merged by the runtime
        _len(10, _len(1, b"a")) + _len(10, _len(1, b"b")),  # two map entries: the runtime's hash order
        _len(22, _tag(1, 0) + _varint(5)),  # a Timestamp: json_format's own form
        _tag(14, 0) + _varint(1),  # a wrong wire type: an unknown field to the runtime
        _tag(3, 3) + _tag(3, 4),  # a group
        _len(7, b"\xff"),  # invalid UTF-8 in a string
        _tag(0, 0) + _varint(1),  # field number 0
        _len(14, b"\xff") + _tag(15, 0) + _varint(3),  # a replaced oneof member: parsed all the same
        _len(16, _len(1, b"\xff")) + _tag(15, 0) + _varint(1),
        _len(19, b"\xff") + _len(19, b"ok"),  # a replaced value: parsed all the same
        _len(12, _tag(10, 5) + b"\x00" * 4),  # a map entry with an unknown field: not an entry to the runtime
        _len(10, _len(1, b"k") + _tag(2, 0) + _varint(4) + _tag(3, 0) + _varint(1)),
        _overlong(1 << 3, 5) + _varint(1),  # a tag or a length longer than 5 bytes
        _len(14, b"") + _overlong(2 << 3 | 2, 0) + _overlong(1, 5) + b"x",
    ]
    for payload in cases:
        assert _native(native_module, codec, payload) is None, payload
        assert _outcome(lambda: codec.render(payload, [1])) == _outcome(lambda: codec.render_reference(payload, [1]))


def _outcome(render):
    try:
        return render()
    except PayloadError as e:
        return "raw", str(e)


def test_hostile_bytes_are_the_references_or_left_to_it(native_module, codec):
    rnd = random.Random("protobuf-hostile")
    answered = 0
    for _ in range(300):
        good = random_everything(codec, rnd).SerializeToString()
        mutants = [good[:k] for k in range(0, len(good), max(1, len(good) // 25))]
        mutants.append(good + rnd.randbytes(rnd.randrange(1, 4)))
        for _ in range(12):
            b = bytearray(good)
            for _ in range(rnd.randrange(1, 4)):
                if b:
                    k, op = rnd.randrange(len(b)), rnd.randrange(3)
                    if op == 0:
                        b[k] = rnd.randrange(256)
                    elif op == 1:
                        del b[k]
                    else:
                        b[k:k] = rnd.randbytes(rnd.randrange(1, 3))
            mutants.append(bytes(b))
        mutants += [rnd.randbytes(rnd.randrange(40)), b"\xff" * 11, b"\x0a\xff\xff\xff\xff\x0f"]
        for payload in mutants:
            mine = _native(native_module, codec, payload)
            if mine is None:
                continue
            answered += 1
            assert mine == _reference(codec, payload), payload
    assert answered  # the check is not vacuous


def test_message_indexes_of_the_frame(native_module, codec):
    """``render_prefixed`` reads the frame's message indexes ([0] in its one-byte form, [1],
    [1, 0], [2]) as the resolver's whole way does; indexes that name no message, or that do
    not decode, are left to it."""
    rnd = random.Random("indexes")
    inner = codec._message_class((1, 0))
    for indexes, payload in [((0,), _scalars(codec._message_class((0,)), rnd).SerializeToString()),
                             ((1,), random_everything(codec, rnd).SerializeToString()),
                             ((1, 0), _inner(inner, rnd).SerializeToString()),
                             ((2,), b"\x0a\x01t")]:
        framed = encode_prefix(1, message_indexes=list(indexes)) + payload
        assert codec.render_prefixed(framed, 5) == codec.render_reference(payload, list(indexes))
    long_form = encode_prefix(1) + b"\x02\x00" + b"\x08\x03"  # [0] written out, not in its short form
    assert codec.render_prefixed(long_form, 5) == codec.render_reference(b"\x08\x03", [0]) is not None
    for bad in (encode_prefix(1, message_indexes=[5]), encode_prefix(1, message_indexes=[1, 7]),
                encode_prefix(1) + b"\x01", encode_prefix(1) + b"\x7f", encode_prefix(1) + b"\x80\x80\x80\x80\x80\x00"):
        assert codec.render_prefixed(bad + b"\x0a\x01t", 5) is None


def test_the_resolver_gives_the_same_answer_both_ways(native_module, tmp_path):
    """The resolver's shortcut for prefixed values (the native text) and its whole way (the
    reference) agree on the text, the ids and the reasons a value is shown raw."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "schemas"))
    from registry_records import schema_record, write_schemas_topic

    from plog.engine.schemas.resolver import open_resolver

    dd = write_schemas_topic(tmp_path / "data", [schema_record("twins-value", 1, 3, PROTO, "PROTOBUF")])
    from plog.formats.confluent_wire import parse_frame

    fast, slow = open_resolver([dd]), open_resolver([dd])
    frame = parse_frame(encode_prefix(3, message_indexes=[1]))
    codec = fast.compiled(frame).codec
    assert codec._plan is not None
    slow.compiled(frame).codec._plan = None  # the reference renders everything there
    rnd = random.Random("resolver")
    values = []
    for _ in range(100):
        values.append(encode_prefix(3, message_indexes=[1]) + random_everything(codec, rnd).SerializeToString())
    values += [v[:len(v) // 2] for v in values[:20]] + [encode_prefix(3, message_indexes=[4]) + b"", encode_prefix(3)]
    for v in values:
        got = fast.decode(v)
        ref = slow.decode(v, [("unrelated", b"")])  # a header: the whole way
        assert got == ref, v


@pytest.fixture(scope="module")
def serializer_payloads(native_module):
    """Payloads written by confluent-kafka's ``ProtobufSerializer`` (its in-process registry
    client), with the schema it registered (a base64 ``FileDescriptorProto``)."""
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    producer = _codec()  # the producing application's classes: the same .proto compiled by protoc
    client = MockSchemaRegistryClient({"url": "mock://twins"})
    rnd = random.Random("serializer")
    out = []
    for indexes in ((0,), (1,), (1, 0)):
        cls = producer._message_class(indexes)
        ser = ProtobufSerializer(cls, client, {"use.deprecated.format": False, "auto.register.schemas": True})
        for _ in range(60):
            if indexes == (0,):
                msg = _scalars(cls, rnd)
            elif indexes == (1,):
                msg = random_everything(producer, rnd)
            else:
                msg = _inner(cls, rnd)
            out.append(ser(msg, SerializationContext("twins", MessageField.VALUE)))
    registered = client.get_schema(int.from_bytes(out[0][1:5], "big"))
    return out, registered.schema_str


def test_serializer_payloads(native_module, serializer_payloads):
    from plog.formats.confluent_wire import parse_frame, split_payload

    payloads, schema_str = serializer_payloads
    base64.b64decode(schema_str, validate=True)  # the serialized form the serializer registers
    codec = ProtobufCodec(SchemaValue("twins-value", 1, 1, schema_str, "PROTOBUF"), lambda ref: None)
    assert codec._plan is not None
    text = _codec()  # the same schema as .proto text: the same message indexes, the same text
    for framed in payloads:
        indexes, payload = split_payload(parse_frame(framed), protobuf=True)
        mine = codec.render_prefixed(framed, 5)
        assert mine is not None and mine == codec.render_reference(payload, indexes), framed
        assert text.render_prefixed(framed, 5) == mine


def test_proto2_and_editions_features_fall_back_where_needed(native_module):
    text = """syntax = "proto2";
package p2;
message Old {
  enum E { A = 1; B = 2; }
  optional int32 a = 1 [default = 7];
  optional E e = 2;
  repeated int32 r = 3;
  optional string s = 4;
}
message Req { required int32 x = 1; }
"""
    c = _codec(text)
    assert c._plan is not None
    for payload in (b"", _tag(1, 0) + _varint(0), _tag(3, 0) + _varint(4) + _len(4, b"s"), _tag(2, 0) + _varint(2)):
        mine = _native(native_module, c, payload, (0,))
        if mine is not None:
            assert mine == c.render_reference(payload, [0])
    assert _native(native_module, c, _tag(1, 0) + _varint(3), (0,)) == c.render_reference(_tag(1, 0) + _varint(3), [0])
    assert _native(native_module, c, _tag(2, 0) + _varint(2), (0,)) is None  # a closed enum
    assert _native(native_module, c, _tag(1, 0) + _varint(1), (1,)) is None  # required fields


def test_the_reference_path_runs_without_a_plan(monkeypatch):
    """Without the native core (PLOG_NATIVE=0) the codec has no plan and renders as before."""
    from plog.formats import native

    monkeypatch.setattr(native, "module", None)
    c = _codec()
    assert c._plan is None and c.render_prefixed(encode_prefix(1) + b"", 5) is None
    assert c.render(_tag(1, 0) + _varint(3), [0]).startswith('{"i32":3,')


def test_long_and_deep_payloads(native_module, codec):
    """A payload past the GIL-release threshold (and the same bytes in a bytearray, which is
    rendered with the GIL held), and nesting: 50 levels rendered, 80 left to the reference."""
    cls = codec._message_class((1,))
    big = cls(packed_ints=list(range(-50_000, 50_000)), names=["é" * 100] * 1000).SerializeToString()
    assert len(big) > 256 * 1024
    want = codec.render_reference(big, [1])
    assert _native(native_module, codec, big) == want
    assert native_module.protobuf_render_json(codec._plan, bytearray(big), 0, codec._roots[(1,)]) == want
    tree = codec._message_class((2,))
    for depth, rendered in ((50, True), (80, False)):
        t = tree(label="0")
        node = t
        for i in range(depth):
            node = node.kids.add(label=str(i))
        payload = t.SerializeToString()
        mine = _native(native_module, codec, payload, (2,))
        assert (mine is not None) == rendered
        assert codec.render(payload, [2]) == codec.render_reference(payload, [2])
        if rendered:
            assert mine == codec.render_reference(payload, [2])


def test_registry_text_with_references_and_written_out_map_entries(native_module, tmp_path):
    """The schemas as the registry stores them (canonical text: a map field written out as its
    entry message with ``option map_entry = true``, a reference to another subject's file, a
    Timestamp): the resolver's native shortcut and its reference path give the same answers,
    and the shortcut answers for every value without a Timestamp set."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "schemas"))
    from registry_records import schema_record, write_schemas_topic
    from test_oracle_confluent import ADDRESS_PROTO, ORDER_PROTO, REGISTRY_ORDER_PROTO, compile_protos

    from plog.engine.schemas.resolver import open_resolver
    from plog.formats.confluent_wire import parse_frame

    pool = compile_protos(tmp_path / "src", {"common/address.proto": ADDRESS_PROTO, "order.proto": ORDER_PROTO})
    from google.protobuf import message_factory

    order = message_factory.GetMessageClass(pool.FindMessageTypeByName("com.acme.Order"))
    dd = write_schemas_topic(tmp_path / "data", [
        schema_record("common/address.proto", 1, 1, ADDRESS_PROTO, "PROTOBUF"),
        schema_record("orders-value", 1, 2, REGISTRY_ORDER_PROTO, "PROTOBUF",
                      [("common/address.proto", "common/address.proto", 1)]),
    ])
    fast, slow = open_resolver([dd]), open_resolver([dd])
    head = encode_prefix(2, message_indexes=[1])
    codec = fast.compiled(parse_frame(head)).codec
    assert codec._plan is not None
    slow.compiled(parse_frame(head)).codec._plan = None
    rnd = random.Random("registry-text")
    for i in range(200):
        o = order(id=_int(rnd, -2**63, 2**63), status=rnd.choice([0, 1, 2, 3]), big=_int(rnd, 0, 2**64))
        if rnd.random() < 0.5:
            o.customer.name = rnd.choice(_TEXT)
            o.customer.address.lines.extend(rnd.choice(_TEXT) for _ in range(rnd.randrange(3)))
        if rnd.random() < 0.5:
            o.counts[rnd.choice(_TEXT)] = _int(rnd, -2**31, 2**31)
        if rnd.random() < 0.5:
            o.lines.add(sku=rnd.choice(_TEXT), qty=_int(rnd, -2**31, 2**31), price=_f64(rnd))
        if rnd.random() < 0.5:
            o.discount = _f32(rnd)
        if rnd.random() < 0.3:
            o.token = rnd.randbytes(rnd.randrange(5))
        timestamp = i % 7 == 0
        if timestamp:
            o.created.seconds = 1_700_000_000
        value = head + o.SerializeToString()
        assert (codec.render_prefixed(value, 5) is None) == timestamp
        assert fast.decode(value) == slow.decode(value, [("unrelated", b"")]), value


def _overlong(n: int, extra: int) -> bytes:
    """``n`` as a varint padded with ``extra`` continuation bytes (a non-canonical form)."""
    out = bytearray(_varint(n))
    if extra:
        out[-1] |= 0x80
        out += b"\x80" * (extra - 1) + b"\x00"
    return bytes(out)


def _token(rnd: random.Random, depth: int = 0) -> bytes:
    """One field of hostile but plausible wire bytes: any field number and wire type, tags,
    lengths and values in non-canonical (overlong) forms, lengths past the end, nesting."""
    number = rnd.choice([1, 2, 3, 4, 7, 9, 10, 12, 14, 15, 16, 18, 20, 23, 99, 0, 536870911, 536870912])
    wt = rnd.choice([0, 0, 1, 2, 2, 2, 5, 3, 4, 6])
    extra = lambda: rnd.choice([0, 0, 0, 1, 4, 5, 9])  # noqa: E731
    tag = _overlong(number << 3 | wt, extra())
    if wt == 0:
        return tag + _overlong(rnd.choice([0, 1, 2, 2**31, 2**32, 2**63, 2**64 - 1, rnd.randrange(300)]), extra())
    if wt == 1:
        return tag + rnd.randbytes(8)
    if wt == 5:
        return tag + rnd.randbytes(4)
    if wt == 2:
        body = b"".join(_token(rnd, depth + 1) for _ in range(rnd.randrange(3))) if depth < 3 and rnd.random() < 0.5 \
            else rnd.choice([b"", b"ok", "é".encode(), b"\xff", rnd.randbytes(rnd.randrange(6))])
        length = len(body) + rnd.choice([0, 0, 0, 0, 1, -1]) if body else len(body)
        return tag + _overlong(max(0, length), extra()) + body
    return tag


def test_hostile_wire_forms_are_the_references_or_left_to_it(native_module, codec):
    rnd = random.Random("wire-forms")
    answered = 0
    for _ in range(4000):
        payload = b"".join(_token(rnd) for _ in range(rnd.randrange(1, 6)))
        indexes = rnd.choice([(1,), (0,), (1, 0)])
        mine = _native(native_module, codec, payload, indexes)
        if mine is None:
            continue
        answered += 1
        assert mine == _reference(codec, payload, indexes), (indexes, payload)
    assert answered

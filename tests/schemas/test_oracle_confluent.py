"""The independent oracle: confluent-kafka's own serializers (``AvroSerializer``,
``ProtobufSerializer``, ``JSONSerializer``) and its in-process registry client write framed
records; the registry's subjects are written as ``_schemas`` records (as the registry writes
them: ``.proto`` text, references) into a plog data directory with plog's producer, next to
a topic holding the framed records; plog reads both back from the files and decodes the
records to the values the serializers were given."""

from __future__ import annotations

import base64
import datetime
import decimal
import hashlib
import json
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, header_schema_id_serializer
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.schema_registry_client import RegisteredSchema
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from registry_records import schema_record, write_schemas_topic  # noqa: E402

from plog.engine.schemas.resolver import open_resolver  # noqa: E402
from plog.engine.storage.discovery import partitions  # noqa: E402
from plog.engine.storage.file_records import FileBatches  # noqa: E402


class GuidRegistry(MockSchemaRegistryClient):
    """confluent-kafka's in-process registry, giving each schema the GUID a real registry gives
    it (the MD5 of its text and references) instead of a random one."""

    def register_schema_full_response(self, subject_name, schema, normalize_schemas=False):
        found = self._store.get_registered_schema_by_schema(subject_name, schema)
        if found is not None:
            return found
        md = hashlib.md5(schema.schema_str.encode())
        for ref in schema.references or ():
            md.update(ref.name.encode() + ref.subject.encode() + struct.pack(">i", ref.version))
        latest = self._store.get_latest_version(subject_name)
        version = 1 if latest is None else latest.version + 1
        return self._store.set(RegisteredSchema(schema_id=1, guid=str(uuid.UUID(bytes=md.digest())), schema=schema,
                                                subject=subject_name, version=version))


def registry_records(client, text_of=lambda schema: schema.schema_str):
    """The ``_schemas`` SCHEMA records of every subject version in ``client``, in id order."""
    versions = []
    for subject in client.get_subjects():
        for version in client.get_versions(subject):
            versions.append(client.get_version(subject, version))
    versions.sort(key=lambda rs: rs.schema_id)
    return [schema_record(rs.subject, rs.version, rs.schema_id, text_of(rs.schema), rs.schema.schema_type or "AVRO",
                          [(r.name, r.subject, r.version) for r in rs.schema.references or ()])
            for rs in versions]


def topic_records(data_dir: Path, topic: str):
    """(key, value, headers) of every record of ``topic``-0, read back from its segments."""
    part = next(p for p in partitions(str(data_dir)) if p.topic_partition.topic == topic)
    out = []
    for seg in part.segments:
        for batch in FileBatches(seg.log):
            out += [(r.key, r.value, r.headers) for r in batch.records()]
    return out


def write_topic(data_dir: Path, topic: str, records) -> None:
    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.clients.producer import Producer

    dd = DataDir.open(data_dir, create=True)
    with Producer(dd, linger_ms=0) as producer:
        for key, value, headers in records:
            producer.send(topic, value=value, key=key, headers=headers, partition=0)


# -- Avro ----------------------------------------------------------------------------------------------

ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme.common",
           "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}
ORDER = {
    "type": "record", "name": "Order", "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ship_to", "type": ["null", "com.acme.common.Address"], "default": None},
        {"name": "bill_to", "type": "com.acme.common.Address"},
        {"name": "amount", "type": ["int", "string", "double"]},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 4}},
        {"name": "blob", "type": "bytes"},
        {"name": "ratio", "type": "float"},
    ],
}
ORDERS = [
    {"id": 1, "ship_to": None, "bill_to": {"city": "Paris", "zip": "75001"}, "amount": 5, "status": "NEW",
     "created": datetime.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=datetime.timezone.utc),
     "day": datetime.date(2024, 5, 1), "price": decimal.Decimal("12.34"),
     "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"), "tags": ["a", "é"], "attrs": {"x": 1, "y": None},
     "digest": b"\x00\x01\xfe\xff", "blob": b"\xff\x00", "ratio": 0.1},
    {"id": -2, "ship_to": {"city": "Lyon", "zip": None}, "bill_to": {"city": "Nice", "zip": None},
     "amount": "n/a", "status": "PAID",
     "created": datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc), "day": datetime.date(1969, 12, 31),
     "price": decimal.Decimal("-0.05"), "ref": uuid.UUID(int=0), "tags": [], "attrs": {}, "digest": b"abcd",
     "blob": b"", "ratio": -2.5},
]
# Avro's JSON encoding of the two (what Confluent's console consumer prints).
ORDERS_JSON = [
    {"id": 1, "ship_to": None, "bill_to": {"city": "Paris", "zip": {"string": "75001"}}, "amount": {"int": 5},
     "status": "NEW", "created": 1714564800123, "day": 19844, "price": "\u0004\u00d2",
     "ref": "12345678-1234-5678-1234-567812345678", "tags": ["a", "é"], "attrs": {"x": {"long": 1}, "y": None},
     "digest": "\u0000\u0001\u00fe\u00ff", "blob": "\u00ff\u0000", "ratio": 0.1},
    {"id": -2, "ship_to": {"com.acme.common.Address": {"city": "Lyon", "zip": None}},
     "bill_to": {"city": "Nice", "zip": None}, "amount": {"string": "n/a"}, "status": "PAID", "created": 0,
     "day": -1, "price": "\u00fb", "ref": "00000000-0000-0000-0000-000000000000", "tags": [], "attrs": {},
     "digest": "abcd", "blob": "", "ratio": -2.5},
]


@pytest.fixture(scope="module")
def avro_world(tmp_path_factory):
    client = GuidRegistry({"url": "mock://avro"})
    client.register_schema("address-value", Schema(json.dumps(ADDRESS), "AVRO"))
    schema = Schema(json.dumps(ORDER), "AVRO", [SchemaReference("com.acme.common.Address", "address-value", 1)])
    prefix = AvroSerializer(client, schema, conf={"auto.register.schemas": True})
    header = AvroSerializer(client, schema, conf={"schema.id.serializer": header_schema_id_serializer})
    records = []
    for order in ORDERS:
        records.append((None, prefix(order, SerializationContext("orders", MessageField.VALUE)), []))
        headers = []
        value = header(order, SerializationContext("orders", MessageField.VALUE, headers))
        records.append((None, value, headers))
    dd = write_schemas_topic(tmp_path_factory.mktemp("avro") / "data", registry_records(client))
    write_topic(dd, "orders", records)
    return client, dd


def test_avro_values_match_the_serializers_input(avro_world):
    client, dd = avro_world
    resolver = open_resolver([dd])
    read = topic_records(dd, "orders")
    assert len(read) == 4
    deserializer = AvroDeserializer(client)
    for i, (key, value, headers) in enumerate(read):
        expected = ORDERS[i // 2]
        if i % 2:  # the GUID in a header, the bare Avro datum as the value
            assert headers and headers[0][0] == "__value_schema_id" and value[:1] != b"\x00"
        decoded, reason = resolver.value(value, headers)
        assert reason is None
        ratio = decoded.pop("ratio")
        assert ratio == pytest.approx(expected["ratio"]) and decoded == {k: v for k, v in expected.items()
                                                                         if k != "ratio"}
        if not i % 2:  # confluent-kafka's own deserializer agrees (it reads the prefix form)
            theirs = deserializer(value, SerializationContext("orders", MessageField.VALUE))
            theirs.pop("ratio")
            assert theirs == decoded
        text, reason = resolver.render(value, headers)
        assert reason is None and json.loads(text) == ORDERS_JSON[i // 2]


def test_avro_json_is_what_fastavros_json_writer_writes(avro_world):
    """An independent Avro JSON encoder (fastavro's json_writer) writes the same JSON for
    the record (its union branches are unambiguous here; floats aside)."""
    import io

    import fastavro

    client, dd = avro_world
    named = {}
    fastavro.parse_schema(ADDRESS, named)
    parsed = fastavro.parse_schema(ORDER, named)
    resolver = open_resolver([dd])
    _, value, headers = topic_records(dd, "orders")[2]
    out = io.StringIO()
    fastavro.json_writer(out, parsed, [{**ORDERS[1], "ratio": -2.5}])
    assert json.loads(resolver.render(value, headers)[0]) == json.loads(out.getvalue())


# -- Protobuf ------------------------------------------------------------------------------------------

ADDRESS_PROTO = """syntax = "proto3";
package com.acme.common;

message Address {
  string city = 1;
  repeated string lines = 2;
}
"""
# The producing application's .proto (what its classes are compiled from).
ORDER_PROTO = """syntax = "proto3";
package com.acme;
import "common/address.proto";
import "google/protobuf/timestamp.proto";

message Customer { int64 id = 1; string name = 2; com.acme.common.Address address = 3; }
message Order {
  message Line { string sku = 1; int32 qty = 2; double price = 3; }
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  int64 id = 1;
  Customer customer = 2;
  repeated Line lines = 3;
  map<string, int32> counts = 4;
  Status status = 5;
  google.protobuf.Timestamp created = 6;
  oneof payment { string card = 7; bytes token = 8; }
  optional float discount = 9;
  uint64 big = 10;
  message Note { string text = 1; }
}
"""
# The same file as the registry stores it: its canonical text of the descriptor the serializer
# registered (ProtobufSchema from a FileDescriptorProto: fully qualified types, the map field
# written out as its entry message with ``option map_entry = true``, nested types in
# descriptor order).
REGISTRY_ORDER_PROTO = """syntax = "proto3";
package com.acme;

import "common/address.proto";
import "google/protobuf/timestamp.proto";

message Customer {
  int64 id = 1;
  string name = 2;
  .com.acme.common.Address address = 3;
}
message Order {
  int64 id = 1;
  .com.acme.Customer customer = 2;
  repeated .com.acme.Order.Line lines = 3;
  repeated .com.acme.Order.CountsEntry counts = 4;
  .com.acme.Order.Status status = 5;
  .google.protobuf.Timestamp created = 6;
  optional float discount = 9;
  uint64 big = 10;

  oneof payment {
    string card = 7;
    bytes token = 8;
  }

  message Line {
    string sku = 1;
    int32 qty = 2;
    double price = 3;
  }
  message CountsEntry {
    option map_entry = true;
  
    string key = 1;
    int32 value = 2;
  }
  message Note {
    string text = 1;
  }
  enum Status {
    NEW = 0;
    PAID = 1;
    SHIPPED = 2;
  }
}
"""


def compile_protos(tmp: Path, files: dict[str, str]) -> descriptor_pool.DescriptorPool:
    """The producing application's classes: the .proto files compiled by protoc (grpcio-tools)."""
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    out = tmp / "set.pb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", "--include_imports",
                    f"--descriptor_set_out={out}", *files], check=True)
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(f)
    return pool


def _messages(pool):
    cls = {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))
           for n in ("com.acme.Order", "com.acme.Order.Line", "com.acme.Order.Note", "com.acme.Customer")}
    order = cls["com.acme.Order"](id=-7, status=2, card="4111", big=2**64 - 1, discount=0.5)
    order.customer.id = 2**40
    order.customer.name = "Ann"
    order.customer.address.city = "Paris"
    order.customer.address.lines.extend(["1 rue X", "2e étage"])
    order.counts["a"] = 3
    order.lines.add(sku="x", qty=2, price=1.5)
    order.created.seconds, order.created.nanos = 1700000000, 5000
    empty = cls["com.acme.Order"]()
    line = cls["com.acme.Order.Line"](sku="q", qty=-1)
    note = cls["com.acme.Order.Note"](text="n")
    customer = cls["com.acme.Customer"](id=1)
    return [("orders", order), ("orders", empty), ("lines", line), ("notes", note), ("customers", customer)]


@pytest.fixture(scope="module", params=["text", "serialized"])
def proto_world(request, tmp_path_factory):
    """``text``: ``_schemas`` holds the .proto text, as the registry stores it; ``serialized``: the
    base64 FileDescriptorProto confluent-kafka's serializer registers (also readable)."""
    tmp = tmp_path_factory.mktemp("proto")
    pool = compile_protos(tmp / "src", {"common/address.proto": ADDRESS_PROTO, "order.proto": ORDER_PROTO})
    client = MockSchemaRegistryClient({"url": "mock://proto"})
    messages = _messages(pool)
    records = []
    for topic, msg in messages:
        serializer = ProtobufSerializer(type(msg), client, {"use.deprecated.format": False})
        records.append((None, serializer(msg, SerializationContext(topic, MessageField.VALUE)), []))
    texts = {"common/address.proto": ADDRESS_PROTO, "order.proto": REGISTRY_ORDER_PROTO}

    def text_of(schema):
        name = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.schema_str)).name
        return texts[name] if request.param == "text" else schema.schema_str

    dd = write_schemas_topic(tmp / "data", registry_records(client, text_of))
    write_topic(dd, "mixed", records)
    return client, dd, messages


def test_protobuf_messages_match_the_serializers_input(proto_world):
    client, dd, messages = proto_world
    resolver = open_resolver([dd])
    read = topic_records(dd, "mixed")
    # message indexes [1] (Order), [1, 0] (Order.Line), [1, 2] (Order.Note: after the map entry), [0]
    assert [v[5:8] for _, v, _ in read] == [b"\x02\x02\x08", b"\x02\x02", b"\x04\x02\x00", b"\x04\x02\x04",
                                            b"\x00\x08\x01"]
    for (topic, original), (_, value, headers) in zip(messages, read):
        mine, reason = resolver.value(value, headers)
        assert reason is None, reason
        assert mine.DESCRIPTOR.full_name == original.DESCRIPTOR.full_name
        assert json_format.MessageToDict(mine) == json_format.MessageToDict(original)
        theirs = ProtobufDeserializer(type(original), {"use.deprecated.format": False})(
            value, SerializationContext(topic, MessageField.VALUE))
        assert theirs == original
        text, reason = resolver.render(value, headers)
        assert reason is None
        assert json.loads(text) == json_format.MessageToDict(original, always_print_fields_with_no_presence=True)


def test_protobuf_json_mapping(proto_world):
    """Confluent's console consumer's mapping: JSON names, defaults shown, 64-bit integers as
    strings, enums by name, a Timestamp in RFC 3339; json_names=False keeps the .proto names."""
    _, dd, _ = proto_world
    _, value, headers = topic_records(dd, "mixed")[0]
    doc = json.loads(open_resolver([dd]).render(value, headers)[0])
    assert doc["id"] == "-7" and doc["big"] == "18446744073709551615" and doc["status"] == "SHIPPED"
    assert doc["created"] == "2023-11-14T22:13:20.000005Z" and doc["customer"]["address"]["lines"][1] == "2e étage"
    assert doc["card"] == "4111" and doc["discount"] == 0.5 and doc["counts"] == {"a": 3}
    empty = json.loads(open_resolver([dd]).render(*topic_records(dd, "mixed")[1][1:])[0])
    assert empty["id"] == "0" and empty["lines"] == [] and "discount" not in empty  # proto3 optional: presence
    plain = json.loads(open_resolver([dd], json_names=False).render(value, headers)[0])
    assert "card" in plain and plain["customer"]["address"]["city"] == "Paris"


# -- JSON Schema ---------------------------------------------------------------------------------------

PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                         "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name"]}


def test_json_schema_values(tmp_path):
    client = MockSchemaRegistryClient({"url": "mock://json"})
    serializer = JSONSerializer(json.dumps(PERSON), client)
    people = [{"name": "Ann", "age": 31, "tags": ["x", "ü"]}, {"name": "Bo"}]
    values = [serializer(p, SerializationContext("people", MessageField.VALUE)) for p in people]
    dd = write_schemas_topic(tmp_path / "data", registry_records(client))
    resolver = open_resolver([dd], validate_json=True)
    for person, value in zip(people, values):
        text, reason = resolver.render(value)
        assert reason is None and json.loads(text) == person
    # a value the serializer would have refused: decoded, with the reason it does not validate
    bad = values[0][:5] + json.dumps({"age": -1}).encode()
    text, reason = resolver.render(bad)
    assert json.loads(text) == {"age": -1}
    assert reason.startswith("the value does not validate against its JSON schema")
    assert open_resolver([dd]).render(bad) == ('{"age":-1}', None)  # validation is off by default


def test_protobuf_map_syntax_indexes_count_declared_messages(tmp_path):
    """A schema registered as .proto text with ``map<K, V>`` fields: the registry's
    toMessageName counts the messages of the text, not the entries protoc makes for maps."""
    from plog.formats.confluent_wire import encode_prefix

    pool = compile_protos(tmp_path / "src", {"common/address.proto": ADDRESS_PROTO, "order.proto": ORDER_PROTO})
    dd = write_schemas_topic(tmp_path / "data", [
        schema_record("common/address.proto", 1, 1, ADDRESS_PROTO, "PROTOBUF"),
        schema_record("orders-value", 1, 2, ORDER_PROTO, "PROTOBUF", [("common/address.proto", "common/address.proto", 1)]),
    ])
    note = message_factory.GetMessageClass(pool.FindMessageTypeByName("com.acme.Order.Note"))(text="hi")
    resolver = open_resolver([dd])
    assert resolver.render(encode_prefix(2, message_indexes=[1, 1]) + note.SerializeToString()) == ('{"text":"hi"}', None)
    text, reason = resolver.render(encode_prefix(2, message_indexes=[1, 2]) + b"")
    assert text is None and reason == ("schema id 2: the message indexes [1, 2] name no message (the schema has 2 "
                                       "messages nested in com.acme.Order)")

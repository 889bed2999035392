"""The ``plog`` data source's ``decode`` options: Confluent-framed records written by
confluent-kafka's own serializers (Avro over four versions of a subject with a reference,
JSON Schema, Protobuf; prefix and header-carried GUID frames) into a plog data directory
whose ``_schemas`` topic holds the schemas as the registry writes them. The decoded columns
equal what the resolver and ``plog consume --value-format auto`` give; the struct column of
one subject holds typed values for every version that converts, and a reason for the rest;
bad options fail in one line."""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
import struct
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, header_schema_id_serializer
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.common.schema_registry_client import RegisteredSchema
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "schemas"))
from cli_run import plog  # noqa: E402
from registry_records import schema_record, write_schemas_topic  # noqa: E402

pytestmark = pytest.mark.spark

ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme.common",
           "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}
CUSTOMER_V1 = {"type": "record", "name": "Customer", "fields": [{"name": "name", "type": "string"}]}
# Version 1 has a string id: its records do not convert to the latest version's long.
ORDER_V0 = {"type": "record", "name": "Order", "namespace": "com.acme",
            "fields": [{"name": "id", "type": "string"}]}
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "com.acme",
            "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": CUSTOMER_V1},
                       {"name": "tags", "type": {"type": "array", "items": "string"}},
                       {"name": "note", "type": "string"}]}
ORDER_V2 = {"type": "record", "name": "Order", "namespace": "com.acme",
            "fields": ORDER_V1["fields"][:3] + [
                {"name": "note", "type": ["null", "string"], "default": None},
                {"name": "amount", "type": ["int", "string", "double"], "default": 0}]}
CUSTOMER_V3 = {"type": "record", "name": "Customer",
               "fields": [{"name": "name", "type": "string"},
                          {"name": "address", "type": ["null", "com.acme.common.Address"], "default": None}]}
ORDER_V3 = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": CUSTOMER_V3},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "amount", "type": ["int", "string", "double"], "default": 0},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 0},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
     "default": "\u0000"},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}, "default": {}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}, "default": "NEW"},
    {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 4}, "default": "\u0000\u0000\u0000\u0000"},
    {"name": "ratio", "type": "float", "default": 0.0},
    {"name": "matrix", "type": {"type": "array", "items": {"type": "array", "items": "int"}}, "default": []},
]}
KEY = {"type": "record", "name": "OrderKey", "namespace": "com.acme", "fields": [{"name": "id", "type": "long"}]}
PERSON = {"type": "object", "title": "Person",
          "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]},
                         "emails": {"type": "array", "items": {"type": "string"}},
                         "extra": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
NOTE_PROTO = 'syntax = "proto3";\npackage com.acme;\nmessage Note { string text = 1; int32 n = 2; }\n'

V3_FULL = {"id": 7, "customer": {"name": "Ann", "address": {"city": "Paris", "zip": "75001"}}, "tags": ["a", "é"],
           "note": "hi", "amount": "n/a", "created": datetime.datetime(2024, 5, 1, 12, 0, 0, 123000,
                                                                       tzinfo=datetime.timezone.utc),
           "day": datetime.date(2024, 5, 1), "price": decimal.Decimal("12.34"), "attrs": {"x": 1, "y": None},
           "status": "PAID", "digest": b"\x00\x01\xfe\xff", "ratio": 0.5, "matrix": [[1, 2], [], [3]]}
V3_NULLS = {"id": -8, "customer": {"name": "Bob", "address": None}, "tags": [], "note": None, "amount": 2.5,
            "created": datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc),
            "day": datetime.date(1969, 12, 31), "price": decimal.Decimal("-0.05"), "attrs": {}, "status": "NEW",
            "digest": b"abcd", "ratio": -2.0, "matrix": []}

TOPIC = "orders"
BROKEN_ID = 50


class GuidRegistry(MockSchemaRegistryClient):
    """confluent-kafka's in-process registry, giving each schema the GUID a real registry gives
    it (the MD5 of its text and references: plog finds a GUID frame's schema by it)."""

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


def _registry_records(client):
    versions = [client.get_version(s, v) for s in client.get_subjects() for v in client.get_versions(s)]
    versions.sort(key=lambda rs: rs.schema_id)
    return [schema_record(rs.subject, rs.version, rs.schema_id, rs.schema.schema_str, rs.schema.schema_type or "AVRO",
                          [(r.name, r.subject, r.version) for r in rs.schema.references or ()]) for rs in versions]


def _note_class(tmp: Path):
    """The Note message class, compiled from its .proto by protoc (grpcio-tools)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    (tmp / "note.proto").write_text(NOTE_PROTO)
    out = tmp / "set.pb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"--descriptor_set_out={out}",
                    "note.proto"], check=True)
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("com.acme.Note"))


def _avro(client, schema, refs=(), header=False):
    conf = {"auto.register.schemas": True}
    if header:
        conf["schema.id.serializer"] = header_schema_id_serializer
    return AvroSerializer(client, Schema(json.dumps(schema), "AVRO", list(refs)), conf=conf)


def _records(client, tmp: Path):
    """(key, value, headers) of the orders topic, one per offset (the tests name them by offset)."""
    client.register_schema("address-value", Schema(json.dumps(ADDRESS), "AVRO"))
    ref = [SchemaReference("com.acme.common.Address", "address-value", 1)]
    v0, v1, v2, v3 = (_avro(client, ORDER_V0), _avro(client, ORDER_V1), _avro(client, ORDER_V2),
                      _avro(client, ORDER_V3, ref))
    v3_header = _avro(client, ORDER_V3, ref, header=True)
    key = _avro(client, KEY)
    person = JSONSerializer(json.dumps(PERSON), client)
    note_cls = _note_class(tmp)
    note = ProtobufSerializer(note_cls, client, {"use.deprecated.format": False})

    def ctx(field=MessageField.VALUE, topic=TOPIC, headers=None):
        return SerializationContext(topic, field, headers)

    # serialized in version order: each serializer registers its schema on first use
    values = [v0({"id": "x"}, ctx()),
              v1({"id": 1, "customer": {"name": "Ann"}, "tags": ["t"], "note": "n"}, ctx()),
              v2({"id": 2, "customer": {"name": "Cy"}, "tags": [], "note": None, "amount": 5}, ctx()),
              v3(V3_FULL, ctx())]
    header_ctx_headers: list = []
    header_value = v3_header(V3_NULLS, ctx(headers=header_ctx_headers))
    k = key({"id": 7}, ctx(MessageField.KEY))
    v3_id = client.get_latest_version("orders-value").schema_id
    return [
        (b"k0", values[0], []),                                                   # 0: version 1, no convert
        (None, values[1], []),                                                    # 1: version 2
        (None, values[2], []),                                                    # 2: version 3
        (k, values[3], []),                                                       # 3: version 4, prefix
        (None, header_value, header_ctx_headers),                                 # 4: version 4, GUID header
        (b"\x00\x00\x00", b'{"plain":true}', []),                                 # 5: not framed
        (None, b"\x00\x00\x00\x00\x63payload", []),                               # 6: unknown id
        (None, None, []),                                                         # 7: tombstone
        (None, person({"name": "Eve", "age": None, "emails": ["e@x"], "extra": 3},
                      ctx(topic="people")), []),                                  # 8: JSON Schema
        (None, note(note_cls(text="hello", n=3), ctx(topic="notes")), []),       # 9: Protobuf
        (None, b"\x00" + struct.pack(">i", BROKEN_ID) + b"\x02", []),            # 10: bad schema
        (None, b"\x00" + struct.pack(">i", v3_id) + b"\x0e", []),                # 11: truncated
    ]


def _write_topic(data_dir: Path, records) -> None:
    from plog.engine.clients.producer import Producer
    from plog.engine.cluster.data_dir import DataDir

    with Producer(DataDir.open(data_dir, create=True), linger_ms=0) as producer:
        for k, v, h in records:
            producer.send(TOPIC, value=v, key=k, headers=h, partition=0, timestamp_ms=1700000000000)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """``(data dir with _schemas and orders, a second data dir with orders alone, client)``."""
    tmp = tmp_path_factory.mktemp("decode")
    client = GuidRegistry({"url": "mock://spark-decode"})
    records = _records(client, tmp)
    schemas = _registry_records(client) + [schema_record("broken-value", 1, BROKEN_ID, '{"type": "nope"}')]
    dd = write_schemas_topic(tmp / "data", schemas)
    _write_topic(dd, records)
    bare = tmp / "bare"
    _write_topic(bare, records)
    return dd, bare, client


def frame(spark, path, **options):
    reader = spark.read.format("plog").option("topics", TOPIC)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(str(path))


def by_offset(df) -> dict:
    return {r["offset"]: r for r in df.collect()}


def _topic_rows(path):
    from plog.engine.inspect import scan as S

    return [r for r in S.scan_records([str(path)]) if r.topic == TOPIC]


# -- the JSON columns ------------------------------------------------------------------------------


def test_decoded_columns_equal_the_resolver(spark, world):
    from plog.engine.schemas.resolver import open_resolver

    dd, _bare, _client = world
    rows = by_offset(frame(spark, dd, decode="confluent", decode_key="confluent"))
    resolver = open_resolver([dd])
    records = _topic_rows(dd)
    assert sorted(rows) == [r.offset for r in records] == list(range(12))
    for rec in records:
        row = rows[rec.offset]
        for field, data in (("key", rec.key), ("value", rec.value)):
            if data is None:
                assert (row[f"{field}_decoded"], row[f"{field}_schema_id"], row[f"{field}_decode_error"]) \
                    == (None, None, None)
                continue
            d = resolver.decode(data, rec.headers, is_key=field == "key")
            assert row[f"{field}_decoded"] == d.json, (rec.offset, field)
            assert row[f"{field}_decode_error"] == d.reason, (rec.offset, field)
            if d.guid is None:
                assert row[f"{field}_schema_id"] == d.schema_id
    # the frames the records carry, and the reasons of those that do not decode
    assert [rows[o]["value_decode_error"] is None for o in range(12)] == [True] * 5 + [False, False, True, True,
                                                                                       True, False, False]
    assert rows[4]["value_schema_id"] == rows[3]["value_schema_id"]  # a GUID header: the id it names
    assert rows[5]["value_schema_id"] is None and "not a Confluent magic byte" in rows[5]["value_decode_error"]
    assert rows[6]["value_schema_id"] == 99 and rows[6]["value_decode_error"].startswith("unknown schema id 99")
    assert rows[10]["value_schema_id"] == BROKEN_ID and "does not parse" in rows[10]["value_decode_error"]
    assert "payload" in rows[11]["value_decode_error"]
    assert rows[0]["key_decode_error"].startswith("the first byte of the key is 0x6b")
    assert json.loads(rows[3]["key_decoded"]) == {"id": 7} and rows[3]["key_decode_error"] is None
    assert rows[5]["key_decode_error"].startswith("truncated")
    assert json.loads(rows[9]["value_decoded"]) == {"text": "hello", "n": 3}
    assert json.loads(rows[8]["value_decoded"])["name"] == "Eve"


def test_decoded_text_is_what_consume_prints(spark, world, capsys):
    dd, _bare, _client = world
    rows = by_offset(frame(spark, dd, decode="confluent"))
    code, out, _err = plog(capsys, "consume", TOPIC, "-e", "-q", "--data-dir", str(dd), "--format", "jsonl",
                           "--value-format", "auto")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 12
    code, out, _err = plog(capsys, "consume", TOPIC, "-e", "-q", "--data-dir", str(dd), "--format", "%o\t%v\n",
                           "--value-format", "auto")
    printed = dict(line.split("\t", 1) for line in out.splitlines() if line)
    for line in lines:
        row = rows[line["offset"]]
        assert row["value_decode_error"] == line.get("value_decode_error")
        if "value_schema_id" in line:
            carrier = line["value_schema_id"]  # consume prints a GUID frame's GUID; Spark the id it names
            assert row["value_schema_id"] == (carrier if isinstance(carrier, int) else rows[3]["value_schema_id"])
            assert row["value_decoded"] == printed[str(line["offset"])]  # the exact text
        else:
            assert row["value_decoded"] is None


def test_forced_type_refuses_the_others(spark, world):
    from plog.engine.schemas.resolver import open_resolver

    dd, _bare, _client = world
    rows = by_offset(frame(spark, dd, decode="protobuf"))
    resolver = open_resolver([dd])
    for rec in _topic_rows(dd):
        if rec.value is not None:
            json_text, reason = resolver.render(rec.value, rec.headers, expect="PROTOBUF")
            assert (rows[rec.offset]["value_decoded"], rows[rec.offset]["value_decode_error"]) == (json_text, reason)
    assert rows[9]["value_decoded"] is not None
    assert rows[3]["value_decode_error"].endswith("is AVRO, not PROTOBUF")
    assert "key_decoded" not in rows[3].asDict()


def test_record_columns_stay_as_they_are(spark, world):
    dd, _bare, _client = world
    plain = frame(spark, dd)
    decoded = frame(spark, dd, decode="confluent", decode_key="avro", subject="orders-value")
    base = plain.columns
    assert decoded.columns[:len(base)] == base
    assert decoded.columns[len(base):] == ["key_decoded", "key_schema_id", "key_decode_error", "value_decoded",
                                           "value_schema_id", "value_decode_error", "value_struct",
                                           "value_struct_error"]
    assert [tuple(r) for r in decoded.select(*base).collect()] == [tuple(r) for r in plain.collect()]
    # filters go on working: the decoded columns follow the rows kept
    some = frame(spark, dd, decode="confluent", offset_lo=3, offset_hi=5).collect()
    assert [(r["offset"], r["value_schema_id"]) for r in some] == [(3, some[0]["value_schema_id"]),
                                                                    (4, some[0]["value_schema_id"])]


def test_schemas_option_and_no_source(spark, world):
    dd, bare, _client = world
    rows = by_offset(frame(spark, bare, decode="confluent"))
    assert rows[3]["value_decoded"] is None
    assert rows[3]["value_decode_error"].startswith("unknown schema id") and "no schema source" in \
        rows[3]["value_decode_error"]
    with_schemas = by_offset(frame(spark, bare, decode="confluent", schemas=str(dd)))
    direct = by_offset(frame(spark, dd, decode="confluent"))
    assert [with_schemas[o]["value_decoded"] for o in range(12)] == [direct[o]["value_decoded"] for o in range(12)]


class _Registry(BaseHTTPRequestHandler):
    """A Schema Registry's ``GET /schemas/ids/{id}`` for the schemas of ``SCHEMAS``."""

    SCHEMAS: dict = {}

    def do_GET(self):  # noqa: N802 (http.server's name)
        found = self.SCHEMAS.get(self.path)
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(json.dumps(found).encode() if found else b'{"error_code":40403,"message":"not found"}')

    def log_message(self, *args):
        pass


def test_schema_registry_url(spark, world):
    dd, bare, client = world
    rs = client.get_version("orders-value", 3)
    _Registry.SCHEMAS = {f"/schemas/ids/{rs.schema_id}": {"schema": rs.schema.schema_str}}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        rows = by_offset(frame(spark, bare, decode="avro", schema_registry=url))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    direct = by_offset(frame(spark, dd, decode="avro"))
    assert rows[2]["value_decoded"] == direct[2]["value_decoded"] is not None
    assert rows[1]["value_decoded"] is None and "the registry at" in rows[1]["value_decode_error"]


# -- the struct column -----------------------------------------------------------------------------


def test_struct_type_comes_from_the_latest_version(spark, world):
    dd, _bare, _client = world
    df = frame(spark, dd, decode="confluent", subject="orders-value")
    assert df.schema["value_struct"].dataType.simpleString() == (
        "struct<id:bigint,customer:struct<name:string,address:struct<city:string,zip:string>>,tags:array<string>,"
        "note:string,amount:struct<member0:int,member1:string,member2:double>,created:timestamp,day:date,"
        "price:decimal(9,2),attrs:map<string,bigint>,status:string,digest:binary,ratio:float,"
        "matrix:array<array<int>>>")
    assert df.schema["value_struct_error"].dataType.simpleString() == "string"


def test_struct_values_for_every_version_that_converts(spark, world):
    dd, _bare, _client = world
    rows = by_offset(frame(spark, dd, decode="confluent", subject="orders-value"))
    got = {o: (rows[o]["value_struct"].asDict(recursive=True) if rows[o]["value_struct"] is not None else None)
           for o in rows}
    defaults = {"created": datetime.datetime(1970, 1, 1), "day": datetime.date(1970, 1, 1),
                "price": decimal.Decimal("0.00"), "attrs": {}, "status": "NEW", "digest": bytearray(4),
                "ratio": 0.0, "matrix": []}
    utc = datetime.timezone.utc

    def local(ts):  # Spark hands TIMESTAMP values back in the session time zone (UTC), naive
        return ts.astimezone(utc).replace(tzinfo=None)

    assert got[1] == {"id": 1, "customer": {"name": "Ann", "address": None}, "tags": ["t"], "note": "n",
                      "amount": {"member0": 0, "member1": None, "member2": None}, **defaults}
    assert got[2] == {"id": 2, "customer": {"name": "Cy", "address": None}, "tags": [], "note": None,
                      "amount": {"member0": 5, "member1": None, "member2": None}, **defaults}
    assert got[3] == {**V3_FULL, "created": local(V3_FULL["created"]), "amount": {"member0": None, "member1": "n/a",
                                                                                  "member2": None},
                      "digest": bytearray(V3_FULL["digest"])}
    assert got[4] == {**V3_NULLS, "created": local(V3_NULLS["created"]),
                      "amount": {"member0": None, "member1": None, "member2": 2.5},
                      "digest": bytearray(b"abcd")}
    assert all(rows[o]["value_struct_error"] is None for o in (1, 2, 3, 4))
    # rows the struct does not take, each with its reason; the tombstone is null throughout
    assert got[0] is None and rows[0]["value_struct_error"] == \
        "does not convert to subject orders-value version 4: id: expected long, got string"
    assert rows[8]["value_struct_error"].startswith(f"schema id {rows[8]['value_schema_id']} (subject people-value")
    assert rows[8]["value_struct_error"].endswith("is not a version of subject orders-value")
    assert "is not a version of subject orders-value" in rows[9]["value_struct_error"]
    for o in (5, 6, 10, 11):
        assert got[o] is None and rows[o]["value_struct_error"] == rows[o]["value_decode_error"]
    assert got[7] is None and rows[7]["value_struct_error"] is None


def test_struct_column_with_sql(spark, world):
    dd, _bare, _client = world
    frame(spark, dd, decode="confluent", subject="orders-value").createOrReplaceTempView("plog_decoded")
    rows = spark.sql("SELECT offset, value_struct.customer.name AS name, value_struct.attrs['x'] AS x "
                     "FROM plog_decoded WHERE value_struct.id > 1 ORDER BY offset").collect()
    assert [tuple(r) for r in rows] == [(2, "Cy", None), (3, "Ann", 1)]


def test_json_schema_subject(spark, world):
    dd, _bare, _client = world
    df = frame(spark, dd, decode="confluent", subject="people-value")
    assert df.schema["value_struct"].dataType.simpleString() == \
        "struct<name:string,age:bigint,emails:array<string>,extra:string>"
    rows = by_offset(df)
    assert rows[8]["value_struct"].asDict() == {"name": "Eve", "age": None, "emails": ["e@x"], "extra": "3"}
    assert rows[3]["value_struct"] is None and "is not a version of subject people-value" in \
        rows[3]["value_struct_error"]


def test_key_subject(spark, world):
    dd, _bare, _client = world
    rows = by_offset(frame(spark, dd, decode_key="confluent", key_subject="orders-key"))
    assert rows[3]["key_struct"].asDict() == {"id": 7}
    assert rows[0]["key_struct"] is None and rows[0]["key_struct_error"] == rows[0]["key_decode_error"]
    assert "value_decoded" not in rows[3].asDict()


# -- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("options, message", [
    ({"decode": "xml"}, "option decode: expected confluent, avro, protobuf, json-schema or off, got 'xml'"),
    ({"decode": "confluent", "decode_key": "yes"}, "option decode_key: expected confluent"),
    ({"subject": "orders-value"}, "option subject needs option decode"),
    ({"schemas": "/nowhere"}, "option schemas needs option decode"),
    ({"decode_key": "avro", "subject": "orders-value"}, "option subject needs option decode"),
    ({"decode": "confluent", "level": "batch"}, "option decode needs level=record"),
    ({"decode": "confluent", "schemas": "/nowhere/at/all"}, "option schemas: /nowhere/at/all: no such file"),
    ({"decode": "confluent", "subject": "nope-value"}, "option subject: no subject 'nope-value'"),
    ({"decode": "confluent", "subject": "notes-value"}, "PROTOBUF subjects have no struct column"),
    ({"decode": "confluent", "subject": "broken-value"}, "option subject: broken-value version 1 (id 50): "
                                                         "the Avro schema does not parse"),
    ({"decode": "confluent", "schema_registry": "ftp://x"}, "option schema_registry: ftp://x: not an http://"),
])
def test_bad_options_are_one_line_errors(spark, world, options, message):
    dd, _bare, _client = world
    with pytest.raises(Exception) as e:
        frame(spark, dd, **options).schema
    assert message in str(e.value)


def test_schemas_path_without_a_registry_topic(spark, world, tmp_path):
    dd, bare, _client = world
    with pytest.raises(Exception) as e:
        frame(spark, dd, decode="confluent", schemas=str(bare)).schema
    assert f"option schemas: {bare}: no _schemas-0 partition folder" in str(e.value)


def test_decode_off_is_the_plain_table(spark, world):
    from plog.spark_tasks.schema import spark_schema

    dd, _bare, _client = world
    assert frame(spark, dd, decode="off").schema == spark_schema("record")


# -- the type mapping's edges (no Spark job) ---------------------------------------------------------


def test_avro_mapping_edges():
    from plog.engine.errors import ScanError
    from plog.spark_tasks.struct_column import Mismatch, avro_schema_node

    node = avro_schema_node(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}},
        {"name": "i", "type": "int"},
        {"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 1}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "f", "type": "double"},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "nothing", "type": "null"},
    ]}), [])
    assert node.spark_type().simpleString() == \
        "struct<e:string,i:int,wide:string,local:timestamp_ntz,f:double,u:string,nothing:void>"
    got = node.convert({"e": "B", "i": 3, "wide": "\u00ff", "local": 5, "f": "NaN", "u": "x", "nothing": None}, "")
    assert got["e"] == "A" and got["wide"] == "-0.1" and got["local"] == 5 and got["f"] != got["f"]
    with pytest.raises(Mismatch, match=r"^i: 2147483648 is out of range for int$"):
        node.convert({**got, "i": 1 << 31, "e": "A", "wide": "", "f": 1}, "")
    with pytest.raises(Mismatch, match="^i: missing from the value, and the field has no default$"):
        node.convert({"e": "A"}, "")
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(ScanError, match="recursive"):
        avro_schema_node(json.dumps(recursive), [])


def test_json_schema_mapping_edges():
    from plog.spark_tasks.struct_column import Mismatch, json_schema_node

    node = json_schema_node({"type": "object", "properties": {
        "m": {"type": "object", "additionalProperties": {"type": "number"}},
        "any": {}, "both": {"type": ["string", "integer"]}, "n": {"type": "integer"}}})
    assert node.spark_type().simpleString() == "struct<m:map<string,double>,any:string,both:string,n:bigint>"
    assert node.convert({"m": {"a": 1}, "any": [1, {"b": None}], "both": "x", "extra": 1}, "") == \
        {"m": [("a", 1.0)], "any": '[1,{"b":null}]', "both": '"x"', "n": None}
    with pytest.raises(Mismatch, match="^n: expected long, got string$"):
        node.convert({"n": "1"}, "")
    assert json_schema_node(True).spark_type().simpleString() == "string"

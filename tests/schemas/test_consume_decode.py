"""``plog consume --value-format/--key-format`` (and kcat's ``-s``): Confluent-framed records
written by confluent-kafka's own serializers (Avro, JSON Schema) into a plog data directory
whose ``_schemas`` topic holds the schemas as the registry writes them; jsonl, json, template
and text output line for line; records that do not decode (unknown id, not framed, another
schema type) shown raw with the reason, counted on stderr, exit 0."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_run import plog  # noqa: E402
from registry_records import schema_record, write_schemas_topic  # noqa: E402

ORDER = {"type": "record", "name": "Order", "namespace": "com.acme",
         "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}
KEY = {"type": "record", "name": "OrderKey", "namespace": "com.acme", "fields": [{"name": "id", "type": "long"}]}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}}
TS = 1700000000000


def framed_records():
    """(key, value, headers) of the topic, and the registry's SCHEMA records; ids 1 (Order),
    2 (OrderKey), 3 (Person, JSON Schema), in registration order."""
    client = MockSchemaRegistryClient({"url": "mock://consume"})
    client.register_schema("orders-value", Schema(json.dumps(ORDER), "AVRO"))
    client.register_schema("orders-key", Schema(json.dumps(KEY), "AVRO"))
    value = AvroSerializer(client, Schema(json.dumps(ORDER), "AVRO"), conf={"auto.register.schemas": False,
                                                                           "use.latest.version": True})
    key = AvroSerializer(client, Schema(json.dumps(KEY), "AVRO"), conf={"auto.register.schemas": False,
                                                                       "use.latest.version": True})
    person = JSONSerializer(json.dumps(PERSON), client)
    ctx_v = SerializationContext("orders", MessageField.VALUE)
    ctx_k = SerializationContext("orders", MessageField.KEY)
    records = [
        (b"k1", value({"id": 1, "note": "é"}, ctx_v), []),
        (key({"id": 2}, ctx_k), value({"id": 2, "note": None}, ctx_v), []),
        (None, b"\x00\x00\x00\x00\x63payload", []),  # unknown id 99
        (None, b'{"plain":true}', []),  # not framed
        (None, None, []),  # a tombstone stays null
        (None, person({"name": "Ann"}, SerializationContext("people", MessageField.VALUE)), []),
    ]
    schemas = []
    for subject in ("orders-value", "orders-key", "people-value"):
        rs = client.get_latest_version(subject)
        schemas.append(schema_record(subject, rs.version, rs.schema_id, rs.schema.schema_str,
                                     rs.schema.schema_type or "AVRO"))
    return records, schemas


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from plog.engine.clients.producer import Producer
    from plog.engine.cluster.data_dir import DataDir

    records, schemas = framed_records()
    path = tmp_path_factory.mktemp("consume") / "data"
    write_schemas_topic(path, schemas)
    with Producer(DataDir.open(path), linger_ms=0) as producer:
        for k, v, h in records:
            producer.send("orders", value=v, key=k, headers=h, partition=0, timestamp_ms=TS)
    return str(path)


def consume(capsys, data_dir, *args):
    return plog(capsys, "consume", "orders", "-e", "--data-dir", data_dir, *args)


NOT_IN = "not in _schemas in "
UNKNOWN = "unknown schema id 99"
UNFRAMED = "the first byte of the value is 0x7b, not a Confluent magic byte (0 or 1)"


def _head(offset: int) -> str:
    return f'{{"topic":"orders","partition":0,"offset":{offset},"timestamp":{TS},"timestamp_type":"CreateTime",'


def test_jsonl_value_auto(capsys, data_dir):
    code, out, err = consume(capsys, data_dir, "--format", "jsonl", "--value-format", "auto")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == _head(0) + '"key":"k1","value":{"id":1,"note":{"string":"é"}},"value_schema_id":1,"headers":[]}'
    assert lines[1] == (_head(1) + '"key":"\\u0000\\u0000\\u0000\\u0000\\u0002\\u0004","value":{"id":2,"note":null},'
                        '"value_schema_id":1,"headers":[]}')
    assert lines[2] == (_head(2) + '"key":null,"value":"\\u0000\\u0000\\u0000\\u0000cpayload",'
                        f'"value_decode_error":"{UNKNOWN} ({NOT_IN}{data_dir})","headers":[]}}')
    assert lines[3] == (_head(3) + '"key":null,"value":"{\\"plain\\":true}",'
                        f'"value_decode_error":"{UNFRAMED}","headers":[]}}')
    assert lines[4] == _head(4) + '"key":null,"value":null,"headers":[]}'
    assert lines[5] == _head(5) + '"key":null,"value":{"name":"Ann"},"value_schema_id":3,"headers":[]}'
    assert len(lines) == 6
    summary = err.splitlines()
    assert summary[0] == "consumed 6 record(s) from orders"
    assert summary[1] == f"1 value(s) shown raw: {UNFRAMED}"  # most frequent first, then by reason
    assert summary[2] == f"1 value(s) shown raw: {UNKNOWN} ({NOT_IN}{data_dir})"
    assert len(summary) == 3


def test_key_and_value_with_kcat_spelling(capsys, data_dir):
    code, out, err = consume(capsys, data_dir, "-J", "-s", "avro", "--offset", "1:+1")
    assert code == 0
    assert out == (_head(1) + '"key":{"id":2},"key_schema_id":2,"value":{"id":2,"note":null},"value_schema_id":1,'
                   '"headers":[]}\n')
    assert err == "consumed 1 record(s) from orders\n"


def test_forced_type_refuses_another(capsys, data_dir):
    code, out, err = consume(capsys, data_dir, "-f", "%o %v\\n", "-s", "value=avro", "--offset", "5")
    assert code == 0
    assert out == '5 \x00\x00\x00\x00\x03{"name":"Ann"}\n'  # the frame's bytes, as without decoding
    assert err.splitlines()[1] == "1 value(s) shown raw: schema id 3 is JSON, not AVRO"


def test_template_prints_decoded_json(capsys, data_dir):
    code, out, err = consume(capsys, data_dir, "-f", "%o %k %v\\n", "--value-format", "avro", "--offset", "0:2",
                             "-q")
    assert code == 0
    assert out == '0 k1 {"id":1,"note":{"string":"é"}}\n' + out.splitlines()[1] + "\n"
    assert out.splitlines()[1].endswith(' {"id":2,"note":null}')
    assert err == ""


def test_text_and_json_arrays(capsys, data_dir):
    code, out, _ = consume(capsys, data_dir, "--value-format", "auto", "--offset", "0:2", "-q")
    assert code == 0 and out == '{"id":1,"note":{"string":"é"}}\n{"id":2,"note":null}\n'
    code, out, _ = consume(capsys, data_dir, "--format", "json", "--value-format", "auto", "--offset", "3:5", "-q")
    assert code == 0
    assert json.loads(out) == [
        {"topic": "orders", "partition": 0, "offset": 3, "timestamp": TS, "timestamp_type": "CreateTime",
         "key": None, "value": '{"plain":true}', "value_decode_error": UNFRAMED, "headers": []},
        {"topic": "orders", "partition": 0, "offset": 4, "timestamp": TS, "timestamp_type": "CreateTime",
         "key": None, "value": None, "headers": []},
    ]


def test_raw_default_is_unchanged(capsys, data_dir):
    code, out, err = consume(capsys, data_dir, "--format", "jsonl", "--offset", "3:+1")
    assert code == 0
    assert out == _head(3) + '"key":null,"value":"{\\"plain\\":true}","headers":[]}\n'
    assert err == "consumed 1 record(s) from orders\n"


def test_schemas_from_another_directory(capsys, data_dir, tmp_path):
    """Records copied to a data directory without _schemas: --schemas names where they are."""
    from plog.engine.clients.producer import Producer
    from plog.engine.cluster.data_dir import DataDir

    records, _ = framed_records()
    other = tmp_path / "other"
    with Producer(DataDir.open(other, create=True), linger_ms=0) as producer:
        producer.send("orders", value=records[0][1], partition=0, timestamp_ms=TS)
    code, out, err = plog(capsys, "consume", "orders", "-e", "-q", "--data-dir", str(other), "--value-format", "auto")
    assert code == 0 and out.encode("utf-8", "surrogateescape")[:1] == b"\x00"
    code, out, err = plog(capsys, "consume", "orders", "-e", "--data-dir", str(other), "--value-format", "auto",
                          "--schemas", data_dir)
    assert code == 0 and out == '{"id":1,"note":{"string":"é"}}\n'
    assert err == "consumed 1 record(s) from orders\n"


@pytest.mark.parametrize("args, message", [
    (["--value-format", "xml"], "--value-format: unknown format 'xml'; choose one of auto, raw, avro, protobuf, "
                                "json-schema"),
    (["-s", "value=<i"], "-s value=<i: unknown format '<i'; choose one of auto, raw, avro, protobuf, json-schema "
                         "(kcat's pack formats are not supported)"),
    (["-s", "head=avro"], "-s head=avro: expected key=FORMAT, value=FORMAT or FORMAT (both)"),
    (["-s", "value=avro", "--value-format", "raw"], "the value is given two formats: --value-format (raw) and "
                                                    "-s value=avro (avro); give one"),
    (["--schemas", "/nonexistent"], "--schemas and --schema-registry need --value-format or --key-format (auto, "
                                    "avro, protobuf or json-schema)"),
])
def test_bad_options(capsys, data_dir, args, message):
    code, out, err = consume(capsys, data_dir, *args)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


class _Registry(BaseHTTPRequestHandler):
    """A Schema Registry's GET /schemas/ids/{id} for the Order schema, id 1."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path != "/schemas/ids/1":
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"error_code":40403,"message":"Schema not found"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(json.dumps({"schema": json.dumps(ORDER)}).encode())

    def log_message(self, *args):
        pass


def test_schema_registry_url(capsys, tmp_path):
    """No _schemas on disk: -r (kcat's) / --schema-registry asks a registry; one that does not
    answer leaves the value raw with the reason, exit 0."""
    import socket
    import threading

    from plog.engine.clients.producer import Producer
    from plog.engine.cluster.data_dir import DataDir

    records, _ = framed_records()
    other = tmp_path / "other"
    with Producer(DataDir.open(other, create=True), linger_ms=0) as producer:
        producer.send("orders", value=records[1][1], partition=0, timestamp_ms=TS)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code, out, err = plog(capsys, "consume", "orders", "-e", "-q", "-d", str(other), "-s", "value=avro", "-r", url)
        assert code == 0 and out == '{"id":2,"note":null}\n'
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    code, out, err = plog(capsys, "consume", "orders", "-e", "-d", str(other), "-J", "--value-format", "auto",
                          "--schema-registry", dead)
    assert code == 0
    line = json.loads(out)
    assert line["value"] == "\x00\x00\x00\x00\x01\x04\x00"
    assert line["value_decode_error"].startswith(f"unknown schema id 1 (not in the registry at {dead}")
    assert "does not answer" in line["value_decode_error"]
    assert err.splitlines()[1].startswith("1 value(s) shown raw: unknown schema id 1 (not in the registry at ")

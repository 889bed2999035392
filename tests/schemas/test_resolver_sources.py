"""engine/schemas/resolver.py on hostile records (truncated frames, unknown ids, schemas that do
not parse, payloads that do not match: shown raw with the reason, never an exception), and the
other sources of schemas: schema files by id (with and without an export's index), a registry
URL (a local HTTP server standing in for the registry's REST API), the order of sources."""

from __future__ import annotations

import io
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import fastavro
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from registry_records import schema_record, write_schemas_topic  # noqa: E402

from plog.engine.schemas.errors import SchemaSourceError  # noqa: E402
from plog.engine.schemas.resolver import SchemaResolver, open_resolver  # noqa: E402
from plog.engine.schemas.sources import RegistryUrlSource, SchemaFilesSource  # noqa: E402
from plog.formats.confluent_wire import VALUE_SCHEMA_ID_HEADER, encode_prefix  # noqa: E402

POINT = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}]}
PROTO = 'syntax = "proto3";\npackage p;\nmessage A { int32 n = 1; }\n'


def avro(schema, value) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_schemas_topic(tmp_path_factory.mktemp("hostile") / "data", [
        schema_record("point-value", 1, 1, json.dumps(POINT)),
        schema_record("broken-value", 1, 2, '{"type": "record", "name": "B", "fields": [{"name": "x"'),
        schema_record("badref-value", 1, 3, '{"type":"record","name":"C","fields":[{"name":"a","type":"Missing"}]}',
                      references=[("Missing", "missing-value", 1)]),
        schema_record("proto-value", 1, 4, PROTO, "PROTOBUF"),
        schema_record("badproto-value", 1, 5, 'syntax = "proto3";\nmessage A { int32 n = ; }\n', "PROTOBUF"),
        schema_record("json-value", 1, 6, '{"type": "object"}', "JSON"),
        schema_record("gone-value", 1, 7, '"string"'),
        (schema_record("gone-value", 1, 7, '"string"')[0], None),  # hard-deleted; its record is still in the log
        schema_record("pbbad-value", 1, 8, _descriptor_naming_an_unknown_type(), "PROTOBUF"),
    ])


def _descriptor_naming_an_unknown_type() -> str:
    """A serialized FileDescriptorProto (the form confluent-kafka's Python client registers)
    whose field's type exists nowhere."""
    import base64

    from google.protobuf import descriptor_pb2 as d

    field = d.FieldDescriptorProto(name="b", number=1, type=d.FieldDescriptorProto.TYPE_MESSAGE,
                                   label=d.FieldDescriptorProto.LABEL_OPTIONAL, type_name=".nope.B")
    fdp = d.FileDescriptorProto(name="x.proto", syntax="proto3", message_type=[d.DescriptorProto(name="A",
                                                                                                 field=[field])])
    return base64.b64encode(fdp.SerializeToString()).decode()


@pytest.fixture(scope="module")
def resolver(data_dir):
    return open_resolver([data_dir])


GOOD = encode_prefix(1) + avro(POINT, {"x": 1, "y": -2})


@pytest.mark.parametrize("data, headers, reason", [
    (GOOD[:3], (), "truncated: the value has 3 bytes, a magic byte 0 and a schema id need 5"),
    (b"plain text", (), "the first byte of the value is 0x70, not a Confluent magic byte (0 or 1)"),
    (encode_prefix(99) + b"x", (), "unknown schema id 99 (not in _schemas in {dd})"),
    (GOOD[:6], (), "schema id 1: the payload does not match its Avro schema: the payload ends before the value does"),
    (GOOD + b"\x00", (), "schema id 1: the payload does not match its Avro schema: 1 byte left after the value"),
    (encode_prefix(2) + b"\x02", (), "schema id 2: the Avro schema does not parse: "),
    (encode_prefix(3) + b"\x02", (), "schema id 3: the referenced schema Missing (subject missing-value version 1) "
                                     "is not known"),
    (encode_prefix(4, message_indexes=[0]) + b"\x08", (), "schema id 4: the payload does not match its Protobuf "
                                                          "schema: "),
    (encode_prefix(4, message_indexes=[3]) + b"", (), "schema id 4: the message indexes [3] name no message (the "
                                                      "schema has 1 top-level messages)"),
    (encode_prefix(4) + b"\x05", (), "schema id 4: impossible Protobuf message-index count -3"),
    (encode_prefix(5) + b"\x00", (), "schema id 5: the Protobuf schema does not compile: line 2:23: Expected field "
                                     "number."),
    (encode_prefix(6) + b"{not json", (), "schema id 6: the payload is not JSON: "),
    (encode_prefix(6) + b"\xff", (), "schema id 6: the payload is not UTF-8 (byte 0)"),
    (b"x", [(VALUE_SCHEMA_ID_HEADER, b"\x09")], "the first byte of the header __value_schema_id is 0x09, not a "
                                                 "Confluent magic byte (0 or 1)"),
    (encode_prefix(7) + b"\x04\xff\xfe", (), "schema id 7: the payload does not match its Avro schema: 'utf-8' "
                                              "codec can't decode byte 0xff"),
    (encode_prefix(8) + b"\x00", (), "schema id 8: the Protobuf descriptors do not load: "),
])
def test_hostile_records_are_raw_with_the_reason(resolver, data_dir, data, headers, reason):
    text, why = resolver.render(data, headers)
    assert text is None
    assert why.startswith(reason.format(dd=data_dir)), why


def test_decoded_and_raw_counts(data_dir):
    resolver = open_resolver([data_dir])
    assert resolver.render(GOOD) == ('{"x":1,"y":-2}', None)
    assert resolver.render(encode_prefix(4, message_indexes=[0]) + b"\x08\x05") == ('{"n":5}', None)
    assert resolver.render(encode_prefix(6) + b' {"a": [1, 2.5]} ') == ('{"a":[1,2.5]}', None)
    # a hard-deleted schema whose record is still in the log decodes old data
    assert resolver.render(encode_prefix(7) + b"\x04hi") == ('"hi"', None)
    resolver.render(encode_prefix(99) + b"x")
    resolver.render(encode_prefix(99) + b"y")
    assert list(resolver.raw_reasons.values()) == [2]
    # the same schema is compiled once, a failure too
    assert resolver.compiled(resolver_frame(99)) is resolver.compiled(resolver_frame(99))


def resolver_frame(schema_id):
    from plog.formats.confluent_wire import parse_frame

    return parse_frame(encode_prefix(schema_id) + b"x")


def test_keys_and_forced_types(resolver):
    key = encode_prefix(1) + avro(POINT, {"x": 0, "y": 0})
    assert resolver.render(key, is_key=True) == ('{"x":0,"y":0}', None)
    assert resolver.render(key, expect="PROTOBUF") == (None, "schema id 1 is AVRO, not PROTOBUF")
    decoded = resolver.decode(key)
    assert (decoded.schema_id, decoded.schema_type, decoded.subject, decoded.version) == (1, "AVRO", "point-value", 1)
    assert resolver.value(key) == ({"x": 0, "y": 0}, None)


def test_a_directory_without_schemas_is_passed_over(tmp_path, data_dir):
    (tmp_path / "empty").mkdir()
    resolver = open_resolver([tmp_path / "empty", data_dir])
    assert resolver.render(GOOD)[0] == '{"x":1,"y":-2}'
    with pytest.raises(SchemaSourceError, match="looking for the _schemas topic"):
        open_resolver(schemas_paths=[tmp_path / "empty"])


# -- schema files ----------------------------------------------------------------------------------------


def test_schema_files_by_id(tmp_path):
    files = tmp_path / "schemas"
    files.mkdir()
    (files / "10.avsc").write_text(json.dumps(POINT))
    (files / "11.proto").write_text('syntax = "proto3";\nimport "common.proto";\nmessage B { C c = 1; }\n')
    (files / "common.proto").write_text('syntax = "proto3";\nmessage C { string s = 1; }\n')  # imported by name
    resolver = open_resolver(schema_files=files)
    assert resolver.render(encode_prefix(10) + avro(POINT, {"x": 3, "y": 4})) == ('{"x":3,"y":4}', None)
    assert resolver.render(encode_prefix(11, message_indexes=[0]) + b"\x0a\x03\x0a\x01z") == ('{"c":{"s":"z"}}', None)
    assert resolver.render(encode_prefix(12) + b"x")[1].startswith(f"unknown schema id 12 (not in schema files in {files}")


def test_schema_files_with_an_export_index(tmp_path):
    """An export's index gives subjects, versions and references: Avro named types across files."""
    files = tmp_path / "export"
    files.mkdir()
    (files / "1.avsc").write_text(json.dumps(POINT))
    line = {"type": "record", "name": "Line", "fields": [{"name": "a", "type": "Point"}, {"name": "b", "type": "Point"}]}
    (files / "2.avsc").write_text(json.dumps(line))
    (files / "index.json").write_text(json.dumps({"schemas": [
        {"subject": "point", "version": 1, "id": 1, "schemaType": "AVRO", "references": []},
        {"subject": "line-value", "version": 3, "id": 2, "schemaType": "AVRO",
         "references": [{"name": "Point", "subject": "point", "version": 1}]},
    ]}))
    source = SchemaFilesSource(files)
    assert source.version("point", -1).id == 1 and source.by_id(2).version == 3
    value = avro({**line, "fields": [{"name": "a", "type": POINT}, {"name": "b", "type": "Point"}]},
                 {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 4}})
    assert SchemaResolver([source]).render(encode_prefix(2) + value) == ('{"a":{"x":1,"y":2},"b":{"x":3,"y":4}}', None)
    (files / "index.json").write_text("[1, 2]")
    with pytest.raises(SchemaSourceError, match="not a schema index"):
        SchemaFilesSource(files)


# -- a registry URL ----------------------------------------------------------------------------------------


class _Registry(BaseHTTPRequestHandler):
    answers: dict = {}
    asked: list = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).asked.append((self.path, self.headers.get("Authorization")))
        body = self.answers.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"error_code":40403,"message":"Schema not found"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def registry_url():
    _Registry.asked = []
    _Registry.answers = {
        "/schemas/ids/21": {"schema": json.dumps({"type": "record", "name": "L", "fields": [{"name": "p", "type": "Point"}]}),
                            "references": [{"name": "Point", "subject": "point-value", "version": 1}]},
        "/subjects/point-value/versions/1": {"subject": "point-value", "version": 1, "id": 20,
                                             "schema": json.dumps(POINT)},
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://user:s%40cret@127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_registry_url_with_references_cached(registry_url):
    resolver = open_resolver(registry_url=registry_url)
    value = encode_prefix(21) + avro({"type": "record", "name": "L", "fields": [{"name": "p", "type": POINT}]},
                                     {"p": {"x": 5, "y": 6}})
    for _ in range(3):
        assert resolver.render(value) == ('{"p":{"x":5,"y":6}}', None)
    for _ in range(2):
        text, reason = resolver.render(encode_prefix(22) + b"x")
        assert text is None and reason.startswith("unknown schema id 22 (not in the registry at http://127.0.0.1:")
    paths = [p for p, _ in _Registry.asked]
    assert paths == ["/schemas/ids/21", "/subjects/point-value/versions/1", "/schemas/ids/22"]  # each asked once
    assert {auth for _, auth in _Registry.asked} == {"Basic dXNlcjpzQGNyZXQ="}  # user:s@cret


def test_a_registry_that_does_not_answer(registry_url, data_dir):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    resolver = open_resolver([data_dir], registry_url=dead)
    assert resolver.render(GOOD)[0] == '{"x":1,"y":-2}'  # the log's schemas come first
    text, reason = resolver.render(encode_prefix(50) + b"x")
    assert text is None and "the registry at http://127.0.0.1:" in reason and "does not answer" in reason
    with pytest.raises(SchemaSourceError, match="not an http:// or https:// URL"):
        RegistryUrlSource("ftp://example.invalid/")

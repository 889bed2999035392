"""``plog schemas ls|show|export``: ``_schemas`` records as the registry writes them, produced
into a plog data directory with plog's own producer, read back through the CLI; the export
produced back with ``plog produce _schemas --input-format jsonl`` rebuilds the same registry;
a damaged segment is read past (exit 3, the skipped bytes named)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_run import plog  # noqa: E402
from registry_records import (  # noqa: E402
    NOOP_KEY,
    config_record,
    delete_subject_record,
    mode_record,
    schema_record,
    write_schemas_topic,
)

ADDRESS = '{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"}]}'
ORDER_V1 = ('{"type":"record","name":"Order","namespace":"com.acme","fields":[{"name":"id","type":"long"},'
            '{"name":"to","type":"Address"}]}')
ORDER_V2 = ('{"type":"record","name":"Order","namespace":"com.acme","fields":[{"name":"id","type":"long"},'
            '{"name":"to","type":"Address"},{"name":"note","type":["null","string"],"default":null}]}')
PROTO = 'syntax = "proto3";\npackage p;\n\nmessage Ping {\n  int64 at = 1;\n}\n'
REF = [("com.acme.Address", "address", 1)]

RECORDS = [
    (NOOP_KEY, None),
    config_record(None, "BACKWARD"),
    schema_record("address", 1, 1, ADDRESS),
    schema_record("orders-value", 1, 2, ORDER_V1, references=REF),
    schema_record("orders-value", 2, 3, ORDER_V2, references=REF),
    schema_record("ping-value", 1, 4, PROTO, "PROTOBUF"),
    schema_record("old-value", 1, 5, '"string"'),
    delete_subject_record("old-value", 1),  # soft-deleted
    schema_record("gone-value", 1, 6, '"long"'),
    (schema_record("gone-value", 1, 6, '"long"')[0], None),  # hard-deleted
    config_record("orders-value", "FULL"),
    mode_record(None, "READWRITE"),
]

LS_TABLE = """\
SUBJECT       VERSION  ID  TYPE      DELETED  REFERENCES
address             1   1  AVRO      no       -
old-value           1   5  AVRO      soft     -
orders-value        1   2  AVRO      no       com.acme.Address=address/1
orders-value        2   3  AVRO      no       com.acme.Address=address/1
ping-value          1   4  PROTOBUF  no       -
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Path:
    return write_schemas_topic(tmp_path_factory.mktemp("cli") / "data", RECORDS)


def test_ls_table(registry, capsys):
    code, out, err = plog(capsys, "schemas", "ls", str(registry))
    assert (code, out) == (0, LS_TABLE)
    assert err == f"read {len(RECORDS)} records of {registry}/broker-1/_schemas-0\n"


def test_ls_all_json_csv_and_text(registry, capsys):
    code, out, _ = plog(capsys, "schemas", "ls", str(registry), "--all", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and [(r["subject"], r["version"], r["id"], r["deleted"], r["hard_deleted"]) for r in rows] == [
        ("address", 1, 1, False, False), ("gone-value", 1, 6, False, True), ("old-value", 1, 5, True, False),
        ("orders-value", 1, 2, False, False), ("orders-value", 2, 3, False, False), ("ping-value", 1, 4, False, False)]
    assert rows[3]["references"] == [{"name": "com.acme.Address", "subject": "address", "version": 1}]
    assert rows[5]["type"] == "PROTOBUF" and len(rows[0]["guid"]) == 36
    _, out, _ = plog(capsys, "schemas", "ls", str(registry), "--subject", "orders-value", "--format", "csv")
    assert list(csv.reader(io.StringIO(out)))[1:] == [
        ["orders-value", "1", "2", "AVRO", "no", "com.acme.Address=address/1"],
        ["orders-value", "2", "3", "AVRO", "no", "com.acme.Address=address/1"]]
    _, out, _ = plog(capsys, "schemas", "ls", str(registry), "-s", "ping-value", "--format", "text")
    assert out == "ping-value\t1\t4\tPROTOBUF\tno\t-\n"


def test_show(registry, capsys):
    code, out, _ = plog(capsys, "schemas", "show", str(registry), "orders-value")
    assert code == 0
    head, schema = out.split("\n\n", 1)
    assert head.splitlines()[:4] == ["subject: orders-value", "version: 2", "id: 3", "type: AVRO"]
    assert head.splitlines()[5:] == ["deleted: no", "references: com.acme.Address = address version 1"]
    assert json.loads(schema) == json.loads(ORDER_V2) and schema.startswith('{\n  "type": "record"')
    _, out, _ = plog(capsys, "schemas", "show", str(registry), "orders-value", "--version", "1", "--format", "json")
    doc = json.loads(out)
    assert (doc["version"], doc["id"], doc["schema"]) == (1, 2, ORDER_V1)
    _, out, _ = plog(capsys, "schemas", "show", str(registry), "--id", "4", "--raw")
    assert out == PROTO
    _, out, _ = plog(capsys, "schemas", "show", str(registry), "--guid", json.loads(
        plog(capsys, "schemas", "show", str(registry), "--id", "6", "-f", "json")[1])["guid"], "--raw")
    assert out == '"long"\n'  # a hard-deleted schema still in the log, found by its GUID
    assert plog(capsys, "schemas", "show", str(registry), "old-value")[0] == 1  # no version that is not deleted
    _, out, _ = plog(capsys, "schemas", "show", str(registry), "old-value", "-V", "1", "-f", "jsonl")
    assert json.loads(out)["deleted"] is True and out.count("\n") == 1


@pytest.mark.parametrize("args, code, message", [
    (["show", "{dd}", "nosuch"], 1, "plog: error: no subject 'nosuch' in {dd}/broker-1/_schemas-0\n"),
    (["show", "{dd}", "orders-value", "-V", "9"], 1,
     "plog: error: subject 'orders-value' has no version 9 in {dd}/broker-1/_schemas-0\n"),
    (["show", "{dd}", "--id", "77"], 1, "plog: error: no schema id 77 in {dd}/broker-1/_schemas-0\n"),
    (["show", "{dd}", "orders-value", "-V", "two"], 2,
     "plog: error: --version 'two': expected a version number (1, 2, ...) or latest\n"),
    (["show", "{dd}", "orders-value", "--id", "2"], 2, "plog: error: give one of: SUBJECT, --id ID, --guid GUID\n"),
    (["show", "{dd}", "--guid", "xyz"], 2,
     "plog: error: --guid 'xyz': expected a GUID (8-4-4-4-12 hexadecimal digits)\n"),
    (["show", "{dd}", "--id", "2", "--raw", "-f", "json"], 2,
     "plog: error: --raw prints the schema as text: leave out --format\n"),
    (["ls", "{dd}", "--subject", "nosuch"], 1, "plog: error: no subject 'nosuch' in {dd}/broker-1/_schemas-0\n"),
    (["ls", "{dd}", "--topic", "_other"], 1,
     "plog: error: {dd}: no _other-0 partition folder (a Schema Registry's store; another topic name can be given)\n"),
])
def test_bad_requests(registry, capsys, args, code, message):
    got, _out, err = plog(capsys, "schemas", *[a.format(dd=registry) for a in args])
    assert (got, err.splitlines()[-1] + "\n") == (code, message.format(dd=registry))


def test_export_and_rebuild(registry, tmp_path, capsys):
    from cli_fixtures import run

    from plog.engine.schemas.resolver import open_resolver
    from plog.formats.confluent_wire import encode_prefix

    out_dir = tmp_path / "backup"
    code, out, err = plog(capsys, "schemas", "export", str(registry), str(out_dir), "--all")
    assert code == 0 and out == ""
    assert err.splitlines()[-1] == (f"wrote 6 schema files, index.json (6 subject versions) and _schemas.jsonl "
                                    f"(8 records) to {out_dir}")
    assert sorted(p.name for p in out_dir.iterdir()) == ["1.avsc", "2.avsc", "3.avsc", "4.proto", "5.avsc", "6.avsc",
                                                         "_schemas.jsonl", "index.json"]
    assert (out_dir / "4.proto").read_text() == PROTO and (out_dir / "3.avsc").read_text() == ORDER_V2
    index = json.loads((out_dir / "index.json").read_text())
    assert index["configs"] == [{"compatibilityLevel": "BACKWARD"},
                                {"subject": "orders-value", "compatibilityLevel": "FULL"}]
    assert index["modes"] == [{"mode": "READWRITE"}]
    assert [(e["subject"], e["file"], e["hard_deleted"]) for e in index["schemas"]][:2] == [
        ("address", "1.avsc", False), ("gone-value", "6.avsc", True)]
    lines = [json.loads(line) for line in (out_dir / "_schemas.jsonl").read_text().splitlines()]
    # the store in record order; the soft delete carried by the SCHEMA value, so no DELETE_SUBJECT;
    # no hard-deleted schema
    assert [(json.loads(r["key"])["keytype"], json.loads(r["key"]).get("subject")) for r in lines] == [
        ("CONFIG", None), ("SCHEMA", "address"), ("SCHEMA", "orders-value"), ("SCHEMA", "orders-value"),
        ("SCHEMA", "ping-value"), ("SCHEMA", "old-value"), ("CONFIG", "orders-value"), ("MODE", None)]
    assert json.loads(lines[5]["value"]) == {"subject": "old-value", "version": 1, "id": 5, "schema": '"string"',
                                             "deleted": True}
    assert lines[1] == {"partition": 0, "key": RECORDS[2][0].decode(), "value": RECORDS[2][1].decode()}
    # a new registry's topic, produced from the export, rebuilds the same registry
    rebuilt = tmp_path / "rebuilt"
    code, _, err = run(["produce", "_schemas", "--input-format", "jsonl", "-q", "-d", str(rebuilt)],
                       stdin=(out_dir / "_schemas.jsonl").read_bytes())
    assert code == 0, err
    assert plog(capsys, "schemas", "ls", str(rebuilt))[1] == LS_TABLE
    # the exported files are a source of schemas by id (references through the index)
    resolver = open_resolver(schema_files=out_dir)
    assert resolver.render(encode_prefix(3) + b"\x02\x0aParis\x00") == (
        '{"id":1,"to":{"city":"Paris"},"note":null}', None)


def test_a_damaged_segment_is_read_past(registry, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(registry, broken)
    segment = broken / "broker-1" / "_schemas-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    # the batch of offset 3 (orders-value v1): find it by its key and flip a byte of its value
    at = data.index(b'"subject":"orders-value","version":1,"id":2')
    data[at + 5] ^= 0x20
    segment.write_bytes(bytes(data))
    code, out, err = plog(capsys, "schemas", "ls", str(broken))
    assert code == 3
    assert "orders-value        1" not in out and "orders-value        2   3" in out
    warning = err.splitlines()[0]
    assert warning.startswith("plog: warning: skipped bytes ") and warning.endswith(
        f"of {segment}: the batch's checksum does not match")


def test_schemas_of_a_partition_folder_and_replicas(registry, tmp_path, capsys):
    from plog.engine.cluster.data_dir import DataDir

    code, out, _ = plog(capsys, "schemas", "ls", str(registry / "broker-1" / "_schemas-0"))
    assert (code, out) == (0, LS_TABLE)
    # three brokers, a replica of _schemas on each: the one that reaches furthest is read
    cluster = tmp_path / "cluster"
    DataDir.init(cluster, brokers=3).create_topic("_schemas", 1, 3)
    write_schemas_topic(cluster, RECORDS)
    lagging = cluster / "broker-2" / "_schemas-0" / "00000000000000000000.log"
    lagging.write_bytes(lagging.read_bytes()[:200])  # a follower that fell behind (and was cut short)
    code, out, err = plog(capsys, "schemas", "ls", str(cluster))
    assert (code, out) == (0, LS_TABLE)
    assert err.splitlines()[-1].startswith(f"read {len(RECORDS)} records of {cluster}/broker-") and "other replicas: " in err
    assert "broker-2" not in err.splitlines()[-1].split(" (other replicas")[0]

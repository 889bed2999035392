"""``plog scan --where``: the predicate language on decoded keys and values (parse errors, the
comparison rules) and a search over records framed by confluent-kafka's serializers (the
fixture of test_consume_decode), in one and in two processes; records that do not decode
never match."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_run import plog  # noqa: E402
from test_consume_decode import data_dir  # noqa: E402,F401  (the module-scoped fixture)

from plog.engine.errors import ScanError  # noqa: E402
from plog.engine.inspect.scan_filter import Condition, ScanFilter, holds, parse_where  # noqa: E402


def test_parse_where():
    assert parse_where("value.customer.id = 42 and key.\"a b\" != 'x\\'y' and value.n >= -1.5e2 and value.z = null") \
        == (Condition("value", ("customer", "id"), "=", 42), Condition("key", ("a b",), "!=", "x'y"),
            Condition("value", ("n",), ">=", -150.0), Condition("value", ("z",), "=", None))
    assert parse_where("value = true") == (Condition("value", (), "=", True),)


@pytest.mark.parametrize("text, message", [
    ("val.a = 1", "expected a path starting with key or value (value.customer.id), got 'val'"),
    ("value.a == 1", "expected a number, 'text', null, true or false, got '='"),
    ("value.a =", "expected a number, 'text', null, true or false, got 'the end'"),
    ("value.a = 1 or value.b = 2", "expected 'and' or the end, got 'or'"),
    ("value.a < null", "< compares numbers or text, not null"),
    ("value. = 1", "expected a field name after '.', got '='"),
    ("value.a = @", "cannot read '@' (at character 11)"),
])
def test_parse_errors(text, message):
    with pytest.raises(ScanError) as e:
        parse_where(text)
    assert message in str(e.value)


@pytest.mark.parametrize("text, value, expected", [
    ("value.a = 42", {"a": 42}, True),
    ("value.a = 42", {"a": 42.0}, True),
    ("value.a = 42", {"a": "42"}, True),  # Protobuf's int64 as text
    ("value.a = 'x'", {"a": {"string": "x"}}, True),  # an Avro union branch
    ("value.a.city = 'Lyon'", {"a": {"com.acme.Address": {"city": "Lyon"}}}, True),
    ("value.a = null", {"a": None}, True),
    ("value.a = null", {}, False),  # missing: false, also for !=
    ("value.a != 1", {}, False),
    ("value.a != 1", {"a": 2}, True),
    ("value.a = 1", {"a": True}, False),  # a boolean is not a number
    ("value.a < 'b'", {"a": "a"}, True),
    ("value.a < 'b'", {"a": 1}, False),  # no order between text and numbers
    ("value.a >= 1.5", {"a": 2}, True),
    ("value.a = 1", {"a": [1]}, False),
])
def test_holds(text, value, expected):
    (cond,) = parse_where(text)
    assert holds(cond, value) is expected


def test_filter_travels_as_options():
    flt = ScanFilter(where="value.id = 1", schema_paths=("/a", "/b"))
    assert ScanFilter.from_options(flt.to_options()) == flt


def _offsets(out: str) -> list[int]:
    return [json.loads(line)["offset"] for line in out.splitlines()]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_scan_where_search(capsys, data_dir, jobs):
    code, out, err = plog(capsys, "scan", data_dir, "-j", jobs, "-t", "orders", "--where", "value.id >= 1")
    assert code == 0 and _offsets(out) == [0, 1]
    assert err.splitlines()[0] == "plog scan: 2 matching records"
    code, out, _ = plog(capsys, "scan", data_dir, "-j", jobs, "-q", "--where", "value.note = 'é' and key.id = 2")
    assert code == 0 and out == ""  # offset 0's key is not framed: never matches a key condition
    code, out, _ = plog(capsys, "scan", data_dir, "-j", jobs, "-q", "--where", "key.id = 2 and value.note = null")
    assert code == 0 and _offsets(out) == [1]
    code, out, _ = plog(capsys, "scan", data_dir, "-j", jobs, "-q", "--where", "value.name = 'Ann'")
    assert code == 0 and _offsets(out) == [5]
    line = json.loads(out)
    assert line["value"] == '\x00\x00\x00\x00\x03{"name":"Ann"}'  # the record as search writes it


@pytest.mark.parametrize("args, message", [
    (["--where", "value.id = = 2"], "Invalid value for --where: 'value.id = = 2': expected a number"),
    (["--schemas", "/x"], "--schemas is for --where"),
    (["--mode", "stats", "--where", "value.id = 1"], "--key/--value-contains/--header/--where filter records"),
])
def test_bad_options(capsys, data_dir, args, message):
    code, out, err = plog(capsys, "scan", data_dir, *args)
    assert code == 2 and out == "" and message in err


EVENT = {"type": "record", "name": "Event", "namespace": "twin",
         "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "int"},
                    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
                    {"name": "note", "type": ["null", "string"], "default": None},
                    {"name": "score", "type": "double"}]}


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory):
    """A topic of Avro-framed values in batches of every kind the batch-at-a-time --where
    meets: tombstones, unframed values, an unknown id, records with headers, keys, gzip."""
    import io

    import fastavro

    from plog.engine.clients.producer import Producer
    from plog.engine.cluster.data_dir import DataDir
    from registry_records import schema_record, write_schemas_topic

    parsed = fastavro.parse_schema(EVENT)
    path = tmp_path_factory.mktemp("where-twins") / "data"
    write_schemas_topic(path, [schema_record("events-value", 1, 1, json.dumps(EVENT))])

    def framed(i: int) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"id": i, "qty": i % 11, "kind": "ABC"[i % 3],
                                                 "note": None if i % 4 else f"n{i % 5}", "score": i / 8})
        return b"\x00\x00\x00\x00\x01" + buf.getvalue()

    for codec in ("none", "gzip"):
        with Producer(DataDir.open(path), linger_ms=10_000, batch_size=2048, compression_type=codec) as producer:
            for i in range(1500):
                value = (None if i % 97 == 0 else b"plain" if i % 89 == 0
                         else b"\x00\x00\x00\x00\x09xx" if i % 83 == 0 else framed(i))
                headers = [("h", b"1")] if i % 53 == 0 else None
                producer.send("events", value=value, key=b"k%d" % (i % 7), headers=headers, partition=0,
                              timestamp_ms=TS_TWIN + i)
    return str(path)


TS_TWIN = 1700000000000


@pytest.mark.parametrize("args", [
    ["--where", "value.qty = 7"],
    ["--where", "value.qty >= 9 and value.kind != 'B'"],
    ["--where", "value.note = 'n3'"],
    ["--where", "value.note = null and value.score > 100"],
    ["--where", "value.qty = 3", "--key", "k3"],
    ["--where", "value.qty < 2", "--header", "h=1"],
    ["--where", "value.kind = 'C'", "--offset-range", "100:2200"],
])
def test_where_same_on_both_paths(events_dir, args):
    """The native search (batch-at-a-time --where, the other predicates in Rust) and the
    reference (PLOG_NATIVE=0) print the same records, in the same order."""
    import os
    import subprocess

    from cli_run import plog_exe

    outs = []
    for native in ("1", "0"):
        proc = subprocess.run([plog_exe(), "scan", events_dir, "-t", "events", "-j", "1", "--format", "jsonl",
                               *args], capture_output=True, env={**os.environ, "PLOG_NATIVE": native})
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    assert outs[0].count(b"\n") > 0

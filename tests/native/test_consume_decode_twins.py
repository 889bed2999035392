"""``plog consume --format jsonl`` with decoded keys and values on both paths: the native
batch renderer (``render_consume`` with ``ConsumeDecoders``: the schemas compiled so far, a
record it cannot render handed to ``RecordDecoding.jsonl`` and the native pass going on
after it) and the pure-Python path (``PLOG_NATIVE=0``) print the same bytes and the same
summary, over Avro and Protobuf values, framed keys, unknown ids, unframed values, nulls,
records with headers (an id may come from a header) and windows cut by ``--offset`` and
``--count``."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "schemas"))
sys.path.insert(0, str(HERE))

from cli_run import plog_exe  # noqa: E402
from native_twins import native_module  # noqa: E402,F401  (the fixture)
from registry_records import schema_record, write_schemas_topic  # noqa: E402
from test_protobuf_twins import PROTO, _codec, random_everything  # noqa: E402

from plog.formats.confluent_wire import encode_prefix  # noqa: E402

ORDER = {"type": "record", "name": "Order", "namespace": "twins",
         "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
                    {"name": "amount", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}
KEY = {"type": "record", "name": "OrderKey", "namespace": "twins", "fields": [{"name": "id", "type": "long"}]}
TS = 1700000000000


def _avro(schema, datum) -> bytes:
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, native_module):
    from plog.engine.clients.producer import Producer
    from plog.engine.cluster.data_dir import DataDir

    path = tmp_path_factory.mktemp("decode-twins") / "data"
    write_schemas_topic(path, [schema_record("t-value", 1, 1, json.dumps(ORDER)),
                               schema_record("p-value", 1, 2, PROTO, "PROTOBUF"),
                               schema_record("t-key", 1, 3, json.dumps(KEY))])
    codec = _codec()
    rnd = random.Random(25)
    DataDir.open(path).create_topic("t", 2)
    with Producer(DataDir.open(path), linger_ms=10_000, batch_size=4096) as producer:
        for i in range(2500):
            kind = i % 13
            if kind < 6:
                value = encode_prefix(1) + _avro(ORDER, {"id": i, "note": None if i % 3 else "é\n\"", "amount": i / 7,
                                                         "tags": ["a"] * (i % 3)})
            elif kind < 10:
                value = encode_prefix(2, message_indexes=[1]) + random_everything(codec, rnd).SerializeToString()
            elif kind == 10:
                value = encode_prefix(9) + b"unknown id"
            elif kind == 11:
                value = None if i % 2 else b'{"plain":true}'
            else:
                value = encode_prefix(1) + b"\xff"  # a payload that does not decode
            key = encode_prefix(3) + _avro(KEY, {"id": i}) if i % 4 == 0 else (b"k%d" % i if i % 4 == 1 else None)
            headers = [("trace", b"x")] if i % 37 == 0 else None
            producer.send("t", value=value, key=key, headers=headers, partition=i % 2, timestamp_ms=TS + i)
    return str(path)


def _consume(data_dir: str, native: str, *args: str) -> tuple[int, bytes, bytes]:
    proc = subprocess.run([plog_exe(), "consume", "t", "-e", "--data-dir", data_dir, "--format", "jsonl", *args],
                          capture_output=True, env={**os.environ, "PLOG_NATIVE": native})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("args", [
    ["--value-format", "auto"],
    ["--value-format", "auto", "--key-format", "auto"],
    ["--value-format", "avro"],
    ["--value-format", "protobuf", "--key-format", "avro"],
    ["--value-format", "auto", "--offset", "100:900", "-p", "0"],
    ["--value-format", "auto", "--count", "777"],
    ["-s", "value=avro"],
], ids=" ".join)
def test_decoded_jsonl_is_the_same_on_both_paths(data_dir, args):
    native_run, reference_run = _consume(data_dir, "1", *args), _consume(data_dir, "0", *args)
    assert native_run == reference_run
    code, out, err = native_run
    assert code == 0 and out.count(b"\n") >= 700
    assert b'_schema_id":' in out and b"shown raw" in err


def test_the_native_decoders_render_most_records(data_dir, native_module):
    """The batch renderer leaves to the reference only what it must: the records with an id
    it has not compiled yet (the first of each schema), undecodable ones and those with
    headers; every other one is rendered natively."""
    from plog.engine.clients.console_io import RecordDecoding
    from plog.engine.clients.consumer_loop import ConsumeLoop
    from plog.engine.clients.record_io import RenderedPoll
    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.offset_spec import parse_offset_range
    from plog.engine.schemas.resolver import open_resolver

    dd = DataDir.open(data_dir)
    decoding = RecordDecoding(open_resolver([dd.path]), value_format="auto")
    fmt = decoding.batch_format()
    handed = []
    real = RenderedPoll._take_records
    RenderedPoll._take_records = lambda self, *a: handed.append(a) or real(self, *a)
    try:
        loop = ConsumeLoop.open(dd, "t", parse_offset_range("earliest"), exit_at_end=True)
        out = b"".join(loop.rendered(fmt))
        loop.close()
    finally:
        RenderedPoll._take_records = real
    assert out.count(b"\n") == 2500
    # Unknown ids (1 in 13), unframed values (1 in 26), undecodable ones (1 in 13), headers
    # (1 in 37) and the first of each schema: about 1 in 5.
    assert 0 < len(handed) < 2500 * 0.25

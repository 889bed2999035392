"""``plog dump --value-decoder confluent`` (``--key-decoder``; ``avro``/``protobuf``/``json-schema``
to force one type): records framed by confluent-kafka's serializers (the fixture of
test_consume_decode) dumped from a plog data directory whose ``_schemas`` topic sits in the same
log directory; the payload printed as its JSON, a record that does not decode printed as
Kafka's string decoder prints it and its reason counted once on stderr; exit 0."""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_run import plog  # noqa: E402
from test_consume_decode import TS, data_dir  # noqa: E402,F401  (the module-scoped fixture)

UNFRAMED = "the first byte of the value is 0x7b, not a Confluent magic byte (0 or 1)"


def _segment(data_dir: str) -> str:
    (seg,) = glob.glob(os.path.join(data_dir, "*", "orders-0", "00000000000000000000.log"))
    return seg


def _records(out: str) -> list[str]:
    """The record lines, from ``payload:`` or ``key:`` on (the metadata before is Kafka's)."""
    lines = [line for line in out.splitlines() if line.startswith("| offset: ")]
    return [line.split(" headerKeys: []", 1)[1][1:] for line in lines]


def test_value_decoder_confluent_text(capsys, data_dir):
    seg = _segment(data_dir)
    code, out, err = plog(capsys, "dump", "--value-decoder", "confluent", seg)
    assert code == 0
    assert _records(out) == [
        'key: k1 payload: {"id":1,"note":{"string":"é"}}',
        'key: \x00\x00\x00\x00\x02\x04 payload: {"id":2,"note":null}',
        "payload: \x00\x00\x00\x00cpayload",  # unknown id 99: as Kafka's StringDecoder prints it
        'payload: {"plain":true}',
        "",  # a tombstone: no payload, as in Kafka's text
        'payload: {"name":"Ann"}',
    ]
    log_dir = os.path.dirname(os.path.dirname(seg))
    assert err.splitlines() == [
        f"1 key(s)/value(s) printed undecoded: {UNFRAMED}",
        f"1 key(s)/value(s) printed undecoded: unknown schema id 99 (not in _schemas in {log_dir})",
    ]


def test_without_the_option_the_text_is_kafkas(capsys, data_dir):
    code, out, err = plog(capsys, "dump", "--print-data-log", _segment(data_dir))
    assert code == 0 and err == ""
    assert _records(out)[0] == "key: k1 payload: \x00\x00\x00\x00\x01\x02\x02\x04é"


def test_key_decoder_and_forced_type(capsys, data_dir):
    code, out, err = plog(capsys, "dump", "--key-decoder", "confluent", "--value-decoder", "avro",
                          _segment(data_dir))
    assert code == 0
    records = _records(out)
    assert records[1] == 'key: {"id":2} payload: {"id":2,"note":null}'
    assert records[5] == 'payload: \x00\x00\x00\x00\x03{"name":"Ann"}'
    assert "1 key(s)/value(s) printed undecoded: schema id 3 is JSON, not AVRO" in err.splitlines()


def test_jsonl_value_decoded(capsys, data_dir):
    code, out, _ = plog(capsys, "dump", "--format", "jsonl", "--value-decoder", "confluent", _segment(data_dir))
    assert code == 0
    records = [json.loads(line) for line in out.splitlines() if '"type":"record"' in line]
    assert [r["value_decoded"] for r in records] == [
        {"id": 1, "note": {"string": "é"}}, {"id": 2, "note": None}, "\x00\x00\x00\x00cpayload", '{"plain":true}',
        None, {"name": "Ann"}]
    assert records[0]["value"] == "\x00\x00\x00\x00\x01\x02\x02\x04é"  # the raw field as without decoding


def test_single_file_elsewhere_needs_schemas(capsys, data_dir, tmp_path):
    """A segment copied out of its log directory: no _schemas beside it; --schemas names one."""
    seg = str(tmp_path / "00000000000000000000.log")
    shutil.copy(_segment(data_dir), seg)
    code, out, err = plog(capsys, "dump", "--value-decoder", "confluent", seg)
    assert code == 0 and _records(out)[0] == "key: k1 payload: \x00\x00\x00\x00\x01\x02\x02\x04é"
    assert "2 key(s)/value(s) printed undecoded: unknown schema id 1 (not in no schema source)" in err.splitlines()
    code, out, err = plog(capsys, "dump", "--value-decoder", "confluent", "--schemas", data_dir, seg)
    assert code == 0 and _records(out)[0] == 'key: k1 payload: {"id":1,"note":{"string":"é"}}'


@pytest.mark.parametrize("args, code, message", [
    (["--schemas", "/nonexistent"], 2, "--schemas and --schema-registry need --value-decoder or --key-decoder "
                                       "confluent (or avro, protobuf, json-schema)"),
    (["--value-decoder", "avro5"], 2, "unknown decoder 'avro5': choose one of string, hex, base64, json, int, long, "
                                      "confluent, avro, protobuf, json-schema"),
    (["--value-decoder", "confluent", "--schemas", "/nonexistent"], 1, "/nonexistent"),
])
def test_bad_options(capsys, data_dir, args, code, message):
    got, out, err = plog(capsys, "dump", *args, _segment(data_dir))
    assert got == code and out == ""
    assert message in err and len(err.strip().splitlines()) == 1

"""``plog dump --format jsonl`` carries every field the text dump shows, plus header values.

For every corpus file the text and the JSON lines of the same dump are compared field by
field: each ``name: value`` pair of a text line must equal the JSON field of the same name in
snake_case (``baseOffset`` -> ``base_offset``), the one JSON convention of every plog command.
"""

from __future__ import annotations

import base64
import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout

import pytest

from conftest import corpus_files, distinct_contents
from plog.cli.main import main
from plog.formats.java import utf8_decode as java_utf8_decode

FILES = distinct_contents(
    corpus_files(lambda f: f.endswith((".log", ".index", ".timeindex", ".snapshot", ".checkpoint", ".txnindex"))))
SMALL = [p for p in FILES if p.stat().st_size <= (1 << 20)]
PAIR = re.compile(r"(\w+): (\[[^\]]*\]|\S+)")
TEXT_TO_JSON = {"isvalid": "is_valid"}  # Kafka prints the batch's isValid in lower case


def _json_name(label: str) -> str:
    """The JSON field of a text label: Kafka's camelCase name in snake_case."""
    return TEXT_TO_JSON.get(label) or re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), label)


def run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(["dump", *args])
        except SystemExit as e:
            code = e.code or 0
    return code, out.getvalue()


def _value(text: str):
    if text in ("true", "false"):
        return text == "true"
    if text == "OptionalLong.empty":
        return None
    m = re.fullmatch(r"OptionalLong\[(-?\d+)\]", text)
    if m:
        return int(m.group(1))
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if text.startswith("["):
        return [k for k in text[1:-1].split(",") if k]
    return text


CONTROL = re.compile(r" (endTxnMarker: (\w+) coordinatorEpoch: (-?\d+)|(LeaderChange:|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters) (\{.*\})|controlType: (\w+)\((\d+)\))$")


def _text_fields(line: str) -> dict:
    fields = {}
    control = CONTROL.search(line) if line.startswith("| ") else None
    if control:
        line = line[: control.start()]
        if control.group(2):
            # coordinatorEpoch: the marker's value, Kafka's own JSON (camelCase, as Kafka encodes it).
            fields["control"] = {"control_type": control.group(2), "coordinatorEpoch": int(control.group(3))}
        elif control.group(4):
            fields["control"] = {"value": json.loads(control.group(5))}
        else:
            fields["control"] = {"control_type": control.group(6), "type_id": int(control.group(7))}
    for name, value in PAIR.findall(line.split(" key: ")[0].split(" payload: ")[0]):
        if name in ("CreateTime", "LogAppendTime", "NoTimestampType"):
            fields["timestamp_type"] = name
            name = "timestamp"
        fields[_json_name(name)] = _value(value)
    return fields


def _decode(value):
    if value is None or isinstance(value, str):
        return value
    # The text dump shows bytes as Java's new String(bytes, UTF_8) does.
    return java_utf8_decode(base64.b64decode(value["base64"]))


@pytest.mark.parametrize("path", SMALL, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_jsonl_carries_every_text_field(corpus, path):
    opts = ["--deep-iteration"] if path.suffix in (".log", ".checkpoint") else []
    code_t, text = run(*opts, str(path))
    code_j, jsonl = run(*opts, "--format", "jsonl", str(path))
    assert code_t == code_j
    objects = [json.loads(line) for line in jsonl.split("\n")[:-1]]
    lines = text.split("\n")[:-1]
    assert lines[0] == f"Dumping {path}"
    body = [line for line in lines[1:] if not line.startswith(("Log starting offset", "Snapshot end offset", "KRaft bootstrap"))]
    # The end-of-run reports are stderr lines in text and objects in jsonl.
    reports = ("non-consecutive-offsets", "index-mismatch", "timeindex-mismatch", "timeindex-out-of-order",
               "timeindex-offset-not-found")
    records = [o for o in objects if o["type"] not in ("file",) + reports]
    assert len(body) == len(records), (body[:3], records[:3])
    for line, obj in zip(body, records):
        fields = _text_fields(line)
        if "timestamp" in fields and obj["type"] == "batch":
            fields["max_timestamp"] = fields.pop("timestamp")
        for name, value in fields.items():
            if obj["type"] == "producer-state" and name == "current_txn_first_offset":
                assert obj[name] == value
                continue
            assert name in obj, (name, line, obj)
            if name == "control":
                got = dict(obj["control"], **obj["control"].get("value", {}))
                for k, v in value.items():
                    assert got.get(k) == v or (k == "value" and obj["control"]["value"] == v), (line, obj)
                continue
            assert obj[name] == value, (name, line, obj)
        if obj["type"] == "record" and "headers" in obj:
            assert [h["key"] for h in obj["headers"]] == obj["header_keys"]


@pytest.mark.parametrize("path", [p for p in SMALL if p.suffix == ".log"][:25], ids=lambda p: str(p.relative_to(p.parents[2])))
def test_jsonl_keys_and_values_equal_the_printed_data(corpus, path):
    _, text = run("--print-data-log", str(path))
    _, jsonl = run("--print-data-log", "--format", "jsonl", str(path))
    records = [o for o in map(json.loads, jsonl.split("\n")[:-1]) if o["type"] == "record" and "control" not in o]
    # Each record's printed line, by offset (the first such line, as a search would find it;
    # looked up once rather than searched for per record: these segments hold ~30k records).
    printed_at: dict[str, str] = {}
    for line in text.split("\n"):
        if line.startswith("| offset: "):
            printed_at.setdefault(line.split(" ", 3)[2], line)
    for obj in records:
        key, value = _decode(obj["key"]), _decode(obj["value"])
        if (key and "\n" in key) or (value and "\n" in value):
            continue
        printed = printed_at[str(obj["offset"])]
        assert printed.endswith((f" payload: {value}" if value is not None else ""))
        if key is not None:
            assert f" key: {key}" in printed


def test_jsonl_is_binary_safe(tmp_path):
    from plog.engine.storage.log import Log
    from plog.engine.storage.log_config import LogConfig

    from plog.formats.record_batch import encode_batch
    from plog.formats.records import Record

    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(encode_batch([Record(0, 1700000000000, b"\xff\xfe", b"\x00\x80", (("h", b"\xc3"), ("ok", None)))]))
    log.close()
    _, jsonl = run("--print-data-log", "--format", "jsonl", str(tmp_path / "t-0" / "00000000000000000000.log"))
    record = [o for o in map(json.loads, jsonl.split("\n")[:-1]) if o["type"] == "record"][0]
    assert record["key"] == {"base64": base64.b64encode(b"\xff\xfe").decode()}
    assert record["value"] == {"base64": base64.b64encode(b"\x00\x80").decode()}
    assert record["headers"] == [{"key": "h", "value": {"base64": "ww=="}}, {"key": "ok", "value": None}]


SNAKE = re.compile(r"[a-z][a-z0-9_]*")


@pytest.mark.parametrize("path", [p for p in SMALL if p.suffix in (".log", ".snapshot", ".txnindex", ".checkpoint")][:40],
                         ids=lambda p: str(p.relative_to(p.parents[2])))
def test_field_names_are_snake_case(corpus, path):
    """One JSON convention (issue 21, item 11): every field plog names is snake_case, as in
    ls, verify and lookup. Only what Kafka itself encodes as JSON (a control record's value,
    the decoders' key_decoded/value_decoded) keeps Kafka's names."""
    opts = ["--deep-iteration"] if path.suffix in (".log", ".checkpoint") else []
    _, jsonl = run(*opts, "--format", "jsonl", str(path))
    names = set()
    for obj in map(json.loads, jsonl.split("\n")[:-1]):
        names.update(obj)
        names.update(obj.get("control", {}))
    assert all(SNAKE.fullmatch(n) for n in names), sorted(n for n in names if not SNAKE.fullmatch(n))


TEXT_CHECKPOINTS = corpus_files(lambda f: f in (
    "recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint",
    "cleaner-offset-checkpoint", "leader-epoch-checkpoint", "partition.metadata", "meta.properties",
    ".kafka_cleanshutdown"))


@pytest.mark.parametrize("path", TEXT_CHECKPOINTS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_text_checkpoint_files_dump_their_entries(corpus, path):
    """Kafka's tool ignores these files; plog prints one line per entry, parsed with
    Kafka's rules, and the same entries as JSON."""
    from plog.formats import checkpoints as cp

    code, text = run(str(path))
    assert code == 0
    lines = text.split("\n")[:-1]
    assert lines[0] == f"Dumping {path}"
    _, jsonl = run("--format", "jsonl", str(path))
    objects = [json.loads(line) for line in jsonl.split("\n")[:-1]]
    data = path.read_bytes()
    if path.name.endswith("offset-checkpoint"):
        offsets = cp.parse_offset_checkpoint(data)
        assert len(lines) == 2 + len(offsets) and len(objects) == len(offsets)
        for (topic, partition), offset in offsets.items():
            assert f"topic: {topic} partition: {partition} offset: {offset}" in lines
            assert {"file": str(path), "type": "checkpoint-offset", "topic": topic, "partition": partition,
                    "offset": offset} in objects
    elif path.name == "leader-epoch-checkpoint":
        epochs = cp.parse_leader_epoch_checkpoint(data)
        assert lines[2:] == [f"epoch: {e.epoch} startOffset: {e.start_offset}" for e in epochs]
        assert [(o["epoch"], o["start_offset"]) for o in objects] == [tuple(e) for e in epochs]
    elif path.name == "partition.metadata":
        meta = cp.parse_partition_metadata(data)
        assert lines[1] == f"version: {meta.version} topicId: {cp.uuid_to_base64url(meta.topic_id)}"
        assert objects == [{"file": str(path), "type": "partition-metadata", "version": meta.version,
                            "topic_id": cp.uuid_to_base64url(meta.topic_id)}]
    elif path.name == "meta.properties":
        assert objects[0]["properties"] == cp.parse_properties(data)
        assert lines[1:] == [f"{k}={v}" for k, v in cp.parse_properties(data).items()]
    else:
        assert lines[1].startswith("Clean shutdown marker: ")
        assert objects[0]["broker_epoch"] == cp.parse_clean_shutdown(data)


def test_every_text_checkpoint_kind_is_in_the_corpus(corpus):
    assert {p.name for p in TEXT_CHECKPOINTS} >= {"recovery-point-offset-checkpoint", "leader-epoch-checkpoint",
                                                  "partition.metadata", "meta.properties", ".kafka_cleanshutdown"}

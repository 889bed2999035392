"""plog init / topics / produce / consume through the CLI: exact output, errors and exit
codes, the jsonl round trip (1,000,000 records) and dump jsonl fed back to produce."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import CORPUS
from plog.cli.main import app
from plog.engine.clients.partitioner import partition_for_key
from plog.formats.batches import BatchIterator

PLOG = [sys.executable, "-m", "plog.cli"]
runner = CliRunner()


def plog(*args, input=None):
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)


def run(*args, **kw):
    return subprocess.run([*PLOG, *args], capture_output=True, timeout=600, **kw)


@pytest.fixture
def d(tmp_path):
    return str(tmp_path / "data")


def test_init_topics_lifecycle(d):
    r = plog("init", "--brokers", "3", "--data-dir", d)
    assert r.exit_code == 0
    r = plog("topics", "create", "orders", "-p", "4", "-r", "2", "-c", "retention.ms=1000", "--data-dir", d)
    assert r.exit_code == 0, r.output
    r = plog("topics", "list", "--format", "json", "--data-dir", d)
    (row,) = json.loads(r.stdout)
    assert (row["topic"], row["partitions"], row["replication_factor"], row["configs"]) == \
        ("orders", 4, 2, {"retention.ms": "1000"})
    r = plog("topics", "describe", "orders", "--format", "jsonl", "--data-dir", d)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["partition"] for x in rows] == [0, 1, 2, 3]
    assert all(len(x["replicas"]) == 2 and x["leader"] == x["replicas"][0] and x["log_end_offset"] == 0
               for x in rows)
    r = plog("topics", "alter", "orders", "--partitions", "6", "--data-dir", d)
    assert r.exit_code == 0
    r = plog("topics", "describe", "orders", "--format", "csv", "--data-dir", d)
    assert r.stdout.splitlines()[0] == ("topic,partition,leader,leader_epoch,replicas,isr,high_watermark,"
                                        "log_start_offset,log_end_offset,size,segments,status")
    assert len(r.stdout.splitlines()) == 7
    r = plog("topics", "delete", "orders", "--data-dir", d)
    assert r.exit_code == 0
    assert json.loads(plog("topics", "list", "--format", "json", "--data-dir", d).stdout) == []


def test_topic_errors_are_one_line_with_exit_codes(d):
    plog("topics", "create", "t", "--data-dir", d)
    r = run("topics", "create", "t", "--data-dir", d)
    assert r.returncode == 1 and r.stderr.decode() == "plog: error: Topic 't' already exists.\n"
    r = run("topics", "create", "x", "-r", "3", "--data-dir", d)
    assert r.returncode == 1 and b"larger than available brokers: 1" in r.stderr
    r = run("topics", "create", "x", "-c", "nonsense", "--data-dir", d)
    assert r.returncode == 2
    r = run("topics", "describe", "nope", "--data-dir", d)
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"Traceback" not in r.stderr
    r = run("topics", "list", "--data-dir", d + "-missing")
    assert r.returncode == 1 and b"no plog data directory" in r.stderr


def test_produce_lines_with_keys_and_headers_then_consume_with_a_template(d):
    plog("topics", "create", "t", "-p", "3", "--data-dir", d)
    lines = "h1:a,h2:b\tk1\tv1\nh1:c\tk2\tv2 with\ttab\nNULL\tk3\tNULL\n"
    r = plog("produce", "t", "--headers", "--parse-key", "--null-marker", "NULL", "--data-dir", d, input=lines)
    assert r.exit_code == 0, r.output
    r = plog("consume", "t", "-e", "--format", "%k|%v|%h|%S\n", "--data-dir", d)
    got = sorted(r.stdout.splitlines())
    assert got == sorted(["k1|v1|h1=a,h2=b|2", "k2|v2 with\ttab|h1=c|11", "k3|||-1"])
    r = plog("consume", "t", "-e", "--format", "jsonl", "--data-dir", d)
    recs = {json.loads(x)["key"]: json.loads(x) for x in r.stdout.splitlines()}
    for key in ("k1", "k2", "k3"):
        assert recs[key]["partition"] == partition_for_key(key.encode(), 3)
    assert recs["k3"]["value"] is None and recs["k1"]["headers"] == [{"key": "h1", "value": "a"},
                                                                    {"key": "h2", "value": "b"}]


def test_a_bad_line_names_its_number_and_nothing_after_it_is_produced(d):
    r = run("produce", "t", "--key-separator", ":", "--data-dir", d, input=b"a:1\nb:2\nno separator\nc:3\n")
    assert r.returncode == 1
    assert r.stderr.decode().splitlines() == [
        # What it created on the way (issue 21, item 13), then the one error line.
        f"plog: no data directory at {d}: created one with 1 broker (plog init makes bigger ones; --no-create "
        "refuses)",
        "plog: topic t did not exist: created it with 1 partition(s), replication factor 1 (--no-create refuses)",
        "plog: error: line 3: No key separator found on line number 3: 'no separator' "
        "(produced 2 record(s) to t: partition 0: offsets 0..1 (2) before it)"]
    r = run("consume", "t", "-e", "--data-dir", d)
    assert r.stdout == b"1\n2\n"


def test_consume_offsets_counts_and_ranges(d):
    run("produce", "t", "--partition", "0", "--data-dir", d, input=b"".join(b"%d\n" % i for i in range(100)))
    def values(*args):
        r = run("consume", "t", "-q", "--data-dir", d, *args)
        assert r.returncode == 0, r.stderr
        return [int(x) for x in r.stdout.split()]
    assert values("-e") == list(range(100))
    assert values("-o", "-3", "-e") == [97, 98, 99]
    assert values("-o", "+95", "-e") == [95, 96, 97, 98, 99]
    assert values("-o", "10:13") == [10, 11, 12]
    assert values("-o", "50:+2") == [50, 51]
    assert values("-o", "latest", "-e") == []
    assert values("--count", "4") == [0, 1, 2, 3]
    assert values("-o", "@0", "--count", "1") == [0]
    r = run("consume", "t", "-o", "yesterday", "--data-dir", d)
    assert r.returncode == 2 and b"Invalid value for --offset: invalid offset range 'yesterday'" in r.stderr
    r = run("consume", "t", "--isolation-level", "dirty", "--data-dir", d)
    assert r.returncode == 2


def test_group_consume_commits_and_resumes(d):
    run("produce", "t", "--data-dir", d, input=b"".join(b"%d\n" % i for i in range(50)))
    r = run("consume", "t", "-g", "g1", "--count", "20", "-q", "--data-dir", d)
    assert r.stdout.split() == [b"%d" % i for i in range(20)]
    r = run("consume", "t", "-g", "g1", "-e", "-q", "--data-dir", d)
    assert r.stdout.split() == [b"%d" % i for i in range(20, 50)]
    r = run("consume", "t", "-g", "g1", "-e", "-q", "--data-dir", d)
    assert r.stdout == b""


def test_dump_jsonl_of_a_corpus_segment_rebuilds_the_same_records(d, tmp_path):
    segment = CORPUS / "ArthurArutunyan04__Backend_labs/kafka-data/oms_order_created-0/00000000000000000000.log"
    dump = run("dump", "--deep-iteration", "--format", "jsonl", str(segment))
    assert dump.returncode == 0
    r = run("produce", "copy", "--input-format", "jsonl", "--data-dir", d, input=dump.stdout)
    assert r.returncode == 0, r.stderr
    out = run("consume", "copy", "-e", "--format", "jsonl", "--data-dir", d)
    got = [json.loads(x) for x in out.stdout.splitlines()]
    expected = []
    for batch in BatchIterator(segment.read_bytes()):
        if batch.is_control:
            continue
        for rec in batch.records():
            expected.append((rec.key, rec.value, list(rec.headers), rec.timestamp))
    from plog.formats.binary_json import decode_bytes

    rebuilt = [(decode_bytes(g["key"]), decode_bytes(g["value"]),
                [(h["key"], decode_bytes(h["value"])) for h in g["headers"]], g["timestamp"]) for g in got]
    assert rebuilt == expected and len(expected) > 0


def test_round_trip_of_a_million_records_through_jsonl(tmp_path):
    """consume --format jsonl | produce --input-format jsonl into a new topic gives identical
    records: keys, tombstones, binary values and headers, 1,000,000 of them."""
    d = str(tmp_path / "data")
    gen = tmp_path / "gen.jsonl"
    import base64
    import random

    rnd = random.Random(6)
    with open(gen, "w") as f:
        for i in range(1_000_000):
            key = None if i % 7 == 0 else f"k{i % 1000}"
            value = None if i % 13 == 0 else (
                {"base64": base64.b64encode(rnd.randbytes(9)).decode()} if i % 5 == 0 else f"value-{i}")
            headers = [{"key": "h", "value": {"base64": "/wA="}}, {"key": "n", "value": None}] if i % 3 == 0 else []
            f.write(json.dumps({"key": key, "value": value, "headers": headers, "timestamp": 1_700_000_000_000 + i})
                    + "\n")
    for topic in ("src", "dst"):
        assert run("topics", "create", topic, "-p", "4", "--data-dir", d).returncode == 0
    assert run("produce", "src", "-i", "jsonl", "-F", str(gen), "-q", "--data-dir", d).returncode == 0
    first = tmp_path / "first.jsonl"
    consume = subprocess.Popen([*PLOG, "consume", "src", "-e", "-q", "-f", "jsonl", "--data-dir", d],
                               stdout=subprocess.PIPE)
    with open(first, "wb") as copy:
        produce = subprocess.Popen([*PLOG, "produce", "dst", "-i", "jsonl", "-q", "--data-dir", d],
                                   stdin=subprocess.PIPE)
        for chunk in iter(lambda: consume.stdout.read(1 << 20), b""):
            copy.write(chunk)
            produce.stdin.write(chunk)
        produce.stdin.close()
    assert consume.wait(600) == 0 and produce.wait(600) == 0
    second = run("consume", "dst", "-e", "-q", "-f", "jsonl", "--data-dir", d).stdout

    def records(lines):
        return sorted((r["partition"], r["offset"], json.dumps(r["key"]), json.dumps(r["value"]),
                       json.dumps(r["headers"]), r["timestamp"]) for r in map(json.loads, lines))

    a = records(first.read_bytes().splitlines())
    assert len(a) == 1_000_000
    assert a == records(second.splitlines())
    source = [json.loads(x) for x in gen.read_text().splitlines()[:1000]]
    by_ts = {r[5]: r for r in a}
    from plog.formats.binary_json import decode_bytes

    def raw(key, value, headers):  # bytes, whatever JSON form (text or base64) carried them
        return (decode_bytes(key), decode_bytes(value), [(h["key"], decode_bytes(h["value"])) for h in headers])

    for s in source:
        r = by_ts[s["timestamp"]]
        assert raw(json.loads(r[2]), json.loads(r[3]), json.loads(r[4])) == raw(s["key"], s["value"], s["headers"])


def test_a_batch_the_log_refuses_is_reported_not_swallowed(d):
    run("topics", "create", "c", "-c", "cleanup.policy=compact", "--data-dir", d)
    r = run("produce", "c", "--data-dir", d, input=b"no key\n")  # a compacted topic needs keys
    assert r.returncode == 1
    err = r.stderr.decode().splitlines()
    assert len(err) == 1 and err[0].startswith("plog: error: Compacted topic cannot accept message without key")
    r = run("produce", "c", "--key-separator", ":", "--data-dir", d, input=b"no key\n")
    assert r.returncode == 1 and "line 1: No key separator" in r.stderr.decode()

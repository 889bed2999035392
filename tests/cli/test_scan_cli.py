"""``plog scan`` in local processes (no Spark): stats, search, verify mode, damage and bad inputs.

Most runs go through the real entry point in this process (``cli_run.plog``); a few run the
installed ``plog`` script as a subprocess (a pipe into ``plog produce``, exit codes and stderr
of a real process). The generated data directory holds two log directories written by plog's
own ``LogManager``: ``orders-0``/``orders-1`` (several small segments, every fourth batch gzip)
in ``broker-a`` and ``events-0`` (one ~190 KB segment of an idempotent producer, so a 64 KiB
unit size cuts it at index entries) in ``broker-b``. Expected answers come from the records the
builder wrote and from ``plog.engine.inspect.scan`` (``scan_stats``/``scan_records``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cli_run import plog
from conftest import CORPUS
from plog.formats.binary_json import decode_bytes
from plog.engine.inspect.scan import ScanFilter, format_record_jsonl, plan_scan, scan_records, scan_stats
from plog.formats.batches import BatchIterator
from plog.formats.record_batch import encode_batch

_SCRIPT = Path(sys.executable).with_name("plog")
PLOG = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "plog.cli"]

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
BIN_KEY = b"\x01\x02bin"
JSONL_FIELDS = ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
                "segment", "position", "base_offset", "producer_id", "codec"]
STATS_FIELDS = {"topic", "partition", "log_dir", "records", "batches", "bytes", "first_offset", "last_offset",
                "min_timestamp", "max_timestamp", "codecs", "distinct_keys_estimate", "record_size", "producers",
                "problems"}
TABLE_HEADER = ["TOPIC", "PARTITION", "RECORDS", "BATCHES", "SIZE", "OFFSETS", "TIME_RANGE", "CODECS", "KEYS",
                "RECORD_SIZE", "PRODUCERS", "DAMAGE"]
SUMMARY = re.compile(r"^plog scan: (\d+) partition replicas?, (\d+) records, (\d+) bytes in (\d+) units?"
                     r"(, [^\n]*)?\nplog scan: stats done in \d+\.\d+s on (\d+) process(es)?\n$")
PROBLEM = re.compile(r"^plog scan: (?P<segment>/[^:]+\.log):(?P<position>\d+): (?P<message>.+)$")


# -- the generated data directory -------------------------------------------------------------


def _record(topic: str, partition: int, n: int):
    """Record ``n`` of a partition: (timestamp, key, value, headers), deterministic."""
    if n % 17 == 0:
        key = None
    elif n % 23 == 0:
        key = BIN_KEY
    else:
        key = b"order-%d" % (n % 40)
    status = b"ERROR" if n % 11 == 0 else b"ok"
    body = b"\xff\xfe\x00" if n % 13 == 0 else b""
    size = 500 if topic == "events" else 120 + (n * 37) % 150
    value = b"status=" + status + b" " + body + bytes([97 + n % 26]) * size
    headers = [("src", b"api" if n % 3 == 0 else b"web")]
    if n % 5 == 0:
        headers.append(("trace", None))
    if topic == "events" and n % 4 == 0:
        headers.append(("bin", b"\x80\x81"))
    ts = T0 + (100_000 if topic == "events" else 0) + partition * 7 + n * 1000
    return ts, key, value, headers


LAYOUT = {("orders", 0): ("broker-a", 100), ("orders", 1): ("broker-a", 90), ("events", 0): ("broker-b", 75)}
PER_BATCH = 5


def build_data_dir(root: Path) -> dict:
    """Write the data directory; return ``{(topic, partition): [(offset, ts, key, value, headers)]}``."""
    from plog.engine.storage.log_manager import LogManager

    dirs = [root / "broker-a", root / "broker-b"]
    written: dict = {}
    with LogManager(dirs, cluster_id="scan-cli-test") as lm:
        for (topic, partition), (log_dir, batches) in LAYOUT.items():
            config = {"segment.bytes": "30000" if topic == "orders" else "1000000",
                      "index.interval.bytes": "1024", "plog.fsync.on.produce": "false"}
            log = lm.get_or_create_log((topic, partition), config=config, topic_id=uuid.UUID(int=11),
                                       log_dir=root / log_dir)
            rows = written[(topic, partition)] = []
            for b in range(batches):
                recs = [(j, *_record(topic, partition, b * PER_BATCH + j)) for j in range(PER_BATCH)]
                kw = {"producer_id": 77, "producer_epoch": 0, "base_sequence": b * PER_BATCH} \
                    if topic == "events" else {}
                log.append_as_leader(encode_batch(recs, compression_codec=1 if b % 4 == 3 else 0, **kw))
                rows += [(b * PER_BATCH + j, *r[1:]) for j, r in enumerate(recs)]
    for d in dirs:
        os.remove(d / ".lock")
    return written


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("scan-cli") / "data"
    return root, build_data_dir(root)


@pytest.fixture
def data(built, tmp_path) -> Path:
    """A fresh copy of the data directory (tests may damage it)."""
    return Path(shutil.copytree(built[0], tmp_path / "data"))


@pytest.fixture(scope="module")
def pristine(built) -> Path:
    """The shared data directory, for tests that only read."""
    return built[0]


@pytest.fixture(scope="module")
def written(built) -> dict:
    return built[1]


def scan(capsys, *args):
    """``plog scan ARGS`` in process; stdout never has ANSI escapes, stderr never a traceback."""
    code, out, err = plog(capsys, "scan", *[str(a) for a in args])
    assert "\x1b" not in out
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err


def cells(line: str) -> list[str]:
    """A plain table row's cells (columns are separated by two or more spaces)."""
    return re.split(r" {2,}", line.strip())


def segments(data: Path, topic: str, partition: int) -> list[Path]:
    folder = next(data.glob(f"*/{topic}-{partition}"))
    return sorted(folder.glob("*.log"))


def batches_of(path: Path) -> list:
    return list(BatchIterator(path.read_bytes()))


def flip_in_batch(segment: Path, k: int) -> tuple[int, int, int]:
    """Flip a value byte of the ``k``-th batch of ``segment`` (its CRC then fails; its framing
    stays intact). Returns (position, last offset, records) of that batch."""
    batch = batches_of(segment)[k]
    assert batch.compression == 0
    buf = bytearray(segment.read_bytes())
    buf[batch.position + batch.size_in_bytes - 3] ^= 0x20
    segment.write_bytes(bytes(buf))
    return batch.position, batch.last_offset, batch.records_count


# -- stats --------------------------------------------------------------------------------------


def test_stats_table_on_a_corpus_log_dir(corpus, capsys):
    logdir = CORPUS / "berkayakcay__toy-node-log-collector/kafka-data"
    code, out, err = scan(capsys, logdir, "-j", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == TABLE_HEADER  # one log dir: no LOG_DIR column
    rows = [cells(line) for line in lines[1:]]
    expected = scan_stats([str(logdir)])
    assert [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows] == \
        [(s.topic, s.partition, s.records, s.batches) for s in expected] == \
        [("topic-logx-001", 0, 17, 17), ("topic-logx-001", 1, 16, 16), ("topic-logx-001", 2, 17, 17)]
    assert [(r[5], r[7], r[8], r[11]) for r in rows] == \
        [(f"0..{s.last_offset}", f"gzip:{s.batches}", "all null", "-") for s in expected]
    assert all(r[4].endswith(" KiB") and r[6].startswith("2024-09-1") and r[9].startswith("p50<=") for r in rows)
    m = SUMMARY.match(err)
    assert m and m.group(1, 2, 6) == ("3", "50", "1") and int(m[3]) == sum(s.bytes for s in expected)


def test_stats_keys_column_in_words(pristine, written, capsys):
    """issue 21, item 10: KEYS says "~N distinct" and "+ M null" (was "~N +M null", and
    "~0 +M null" for a partition without keys); the estimate is the json field's."""
    code, out, _ = scan(capsys, pristine, "--format", "csv", "-j", "1")
    assert code == 0
    rows = {(r["topic"], int(r["partition"])): r for r in csv.DictReader(io.StringIO(out))}
    code, out, _ = scan(capsys, pristine, "--format", "json", "-j", "1")
    for o in json.loads(out):
        nulls = sum(1 for r in written[(o["topic"], o["partition"])] if r[2] is None)
        assert nulls and o["null_keys"] == nulls
        assert rows[(o["topic"], o["partition"])]["keys"] == f"~{o['distinct_keys_estimate']} distinct + {nulls} null"


def test_stats_table_fits_the_terminal(corpus):
    """issue 21, item 10: on a terminal the table fits its width, leaving out the least
    needed columns (stderr names them, --wide shows them); a pipe gets every column."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cli_fixtures import TTY_COLS, run

    logdir = CORPUS / "berkayakcay__toy-node-log-collector/kafka-data"  # all columns: 184 wide
    plain = {"NO_COLOR": "1"}  # a terminal without styles: the table's cells as they are
    code, out, err = run(["scan", "-j", "1", logdir], tty=True, env={"COLUMNS": "80", **plain})
    assert code == 0, err
    lines = out.decode().splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "RECORDS", "BATCHES", "SIZE", "OFFSETS", "KEYS", "DAMAGE"]
    assert max(len(line) for line in lines) <= 80 and len(lines) == 4
    assert [cells(line)[-2:] for line in lines[1:]] == [["all null", "-"]] * 3
    assert err.decode().splitlines()[0] == ("plog scan: 4 columns left out to fit the terminal (TIME_RANGE, CODECS, "
                                            "RECORD_SIZE, PRODUCERS): --wide shows them")
    # The terminal's own width (the test terminal's: wider than this table), --wide, a pipe: every column.
    for args, tty, env in ((["-j", "1"], True, plain), (["-j", "1", "--wide"], True, {"COLUMNS": "80", **plain}),
                           (["-j", "1"], False, {"COLUMNS": "80"})):
        code, out, err = run(["scan", *args, logdir], tty=tty, env=env)
        assert code == 0 and out.decode().splitlines()[0].split() == TABLE_HEADER, (args, tty, env)
        assert "left out" not in err.decode() and TTY_COLS >= 184
    # --quiet: the same table, no note.
    code, out, err = run(["scan", "-j", "1", "-q", logdir], tty=True, env={"COLUMNS": "60", **plain})
    assert code == 0 and err == b""
    # (SIZE, TIME_RANGE and KEYS had to go; BATCHES, narrower, fits again)
    assert out.decode().splitlines()[0].split() == ["TOPIC", "PARTITION", "RECORDS", "BATCHES", "OFFSETS", "DAMAGE"]


def test_scan_without_a_path_scans_the_data_directory(pristine, capsys, monkeypatch, tmp_path):
    """issue 21, item 13: as recover and verify, no PATH is --data-dir, else $PLOG_DATA_DIR,
    else ./plog-data."""
    code, want, _ = scan(capsys, pristine, "--format", "json", "-j", "1")
    assert code == 0
    assert scan(capsys, "--format", "json", "-j", "1", "-d", pristine)[:2] == (0, want)
    monkeypatch.setenv("PLOG_DATA_DIR", str(pristine))
    assert scan(capsys, "--format", "json", "-j", "1")[:2] == (0, want)
    monkeypatch.delenv("PLOG_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    code, out, err = scan(capsys, "-j", "1")
    assert (code, out) == (1, "")
    assert err == "plog: error: no PATH given and no data directory at plog-data (set $PLOG_DATA_DIR or pass PATH)\n"
    (tmp_path / "plog-data").symlink_to(pristine)
    code, out, _ = scan(capsys, "--format", "json", "-j", "1")
    assert code == 0
    assert [o["records"] for o in json.loads(out)] == [o["records"] for o in json.loads(want)]


def test_stats_table_shows_every_replica_with_a_log_dir_column(corpus, capsys):
    """The corpus' three-broker cluster: invoice-0 on three log dirs is three rows."""
    root = CORPUS / "dipendrasaini__kafka-learnning-series"
    code, out, err = scan(capsys, root, "-j", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == TABLE_HEADER[:2] + ["LOG_DIR"] + TABLE_HEADER[2:]
    rows = [cells(line) for line in lines[1:]]
    expected = scan_stats([str(root)], jobs=1)
    assert [(r[0], int(r[1]), r[2], int(r[3]), int(r[4])) for r in rows] == \
        [(s.topic, s.partition, s.log_dir, s.records, s.batches) for s in expected]
    assert [(r[0], r[1]) for r in rows].count(("invoice", "0")) == 3 and len(rows) == 7
    replicas = [r for r in rows if r[:2] == ["invoice", "0"]]
    assert len({r[2] for r in replicas}) == 3 and len({tuple(r[3:]) for r in replicas}) == 1
    m = SUMMARY.match(err)
    assert m and (m[1], m[6]) == ("7", "2") and int(m[2]) == sum(s.records for s in expected)


def test_stats_formats_agree_with_the_engine_and_the_written_records(pristine, written, capsys):
    code, out, err = scan(capsys, pristine, "--format", "json", "-j", "1")
    assert code == 0
    objects = json.loads(out)
    assert all(STATS_FIELDS <= set(o) for o in objects)
    assert objects == [s.to_dict() for s in scan_stats([str(pristine)])]
    by_tp = {(o["topic"], o["partition"]): o for o in objects}
    assert list(by_tp) == [("events", 0), ("orders", 0), ("orders", 1)]
    for tp, rows in written.items():
        o = by_tp[tp]
        assert o["log_dir"] == str(pristine / LAYOUT[tp][0])
        assert (o["records"], o["batches"], o["first_offset"], o["last_offset"]) == \
            (len(rows), len(rows) // PER_BATCH, 0, len(rows) - 1)
        assert (o["min_timestamp"], o["max_timestamp"]) == (min(r[1] for r in rows), max(r[1] for r in rows))
        gzip = sum(1 for b in range(len(rows) // PER_BATCH) if b % 4 == 3)
        assert o["codecs"] == {"gzip": gzip, "none": len(rows) // PER_BATCH - gzip}
        keys = {r[2] for r in rows if r[2] is not None}
        assert abs(o["distinct_keys_estimate"] - len(keys)) <= 1
        assert o["null_keys"] == sum(1 for r in rows if r[2] is None)
        assert o["producers"] == (1 if tp[0] == "events" else 0) and o["problems"] == []
        assert o["record_size"]["max"] >= o["record_size"]["p99"] >= o["record_size"]["p50"] >= \
            o["record_size"]["min"] > 0

    code, out_jsonl, _ = scan(capsys, pristine, "--format", "jsonl", "-j", "1")
    assert code == 0 and [json.loads(line) for line in out_jsonl.splitlines()] == objects

    code, out_csv, _ = scan(capsys, pristine, "--format", "csv", "-j", "1")
    assert code == 0
    table = list(csv.reader(io.StringIO(out_csv)))
    assert table[0] == ["topic", "partition", "log_dir", "records", "batches", "size", "offsets", "time_range",
                        "codecs", "keys", "record_size", "producers", "damage"]
    assert [(r[0], int(r[1]), r[2], int(r[3]), int(r[4]), r[6], r[11], r[12]) for r in table[1:]] == \
        [(o["topic"], o["partition"], o["log_dir"], o["records"], o["batches"],
          f"{o['first_offset']}..{o['last_offset']}", str(o["producers"]), "") for o in objects]

    code, out_table, _ = scan(capsys, pristine, "-j", "1")
    lines = out_table.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["TOPIC", "PARTITION", "LOG_DIR"] and len(lines) == 4
    assert [line.split()[2] for line in lines[1:]] == [o["log_dir"] for o in objects]


def test_stats_do_not_depend_on_jobs_or_unit_size(pristine, capsys):
    outs = {}
    for args in (("-j", "1"), ("-j", "2"), ("-j", "2", "--unit-size", "64KiB"), ("-j", "1", "--unit-size", "64KiB")):
        code, outs[args], err = scan(capsys, pristine, "--format", "json", *args)
        assert code == 0 and SUMMARY.match(err)[6] == args[1]
        if "--unit-size" in args:
            assert int(SUMMARY.match(err)[4]) >= 5
    assert len(set(outs.values())) == 1
    # The 64 KiB plan really cuts the one big events segment at index entries.
    plan = plan_scan([str(pristine)], unit_bytes=64 << 10)
    cuts = [s for u in plan.units for s in u.slices if s.topic == "events" and s.start > 0]
    assert len(cuts) >= 2
    code, table1, _ = scan(capsys, pristine, "-j", "1")
    code, table2, _ = scan(capsys, pristine, "-j", "2", "--unit-size", "64KiB")
    assert table1 == table2


def test_stats_topic_and_offset_filters(pristine, written, capsys):
    code, out, err = scan(capsys, pristine, "--topic", "events", "--format", "json", "-j", "1")
    assert code == 0 and [(o["topic"], o["records"]) for o in json.loads(out)] == [("events", 75 * PER_BATCH)]
    assert SUMMARY.match(err)[1] == "1"
    for args in (("--topic", "orders,events"), ("-t", "orders", "-t", "events")):
        code, out, _ = scan(capsys, pristine, *args, "--format", "json", "-j", "1")
        assert code == 0 and len(json.loads(out)) == 3
    # A topic that is not there is a mistake, not an empty topic (kcat: "Unknown topic").
    code, out, err = scan(capsys, pristine, "--topic", "nope", "--format", "json")
    assert code == 1 and out == "" and err.startswith("plog: error: no topic 'nope' in ") and "events" in err

    code, out, _ = scan(capsys, pristine, "-t", "orders", "--offset-range", "10:20", "--format", "json", "-j", "1")
    objects = json.loads(out)
    assert code == 0
    assert objects == [s.to_dict() for s in scan_stats([str(pristine)], ScanFilter(frozenset({"orders"}), 10, 20))]
    assert [(o["records"], o["first_offset"], o["last_offset"]) for o in objects] == [(10, 10, 19)] * 2


def test_quiet_prints_nothing_on_stderr(pristine, capsys):
    code, out, err = scan(capsys, pristine, "--quiet", "-j", "1")
    assert code == 0 and err == "" and out.splitlines()[0].startswith("TOPIC")
    code, out, err = scan(capsys, pristine, "-q", "--key", "order-1")
    assert code == 0 and err == "" and out
    code, out, err = scan(capsys, pristine, "-q", "--mode", "verify", "-j", "1")
    assert code == 0 and err == "" and out == ""


# -- search -------------------------------------------------------------------------------------


def _has_header(r, key, value) -> bool:
    return any(k == key and v == value for k, v in r.headers)


IN_10S = (T0 + 10_000, T0 + 20_000)
SEARCHES = [
    (("--key", "order-7"), lambda r: r.key == b"order-7"),
    (("--key-hex", BIN_KEY.hex()), lambda r: r.key == BIN_KEY),
    (("--value-contains", "ERROR"), lambda r: r.value is not None and b"ERROR" in r.value),
    (("--value-contains-hex", "fffe00"), lambda r: r.value is not None and b"\xff\xfe\x00" in r.value),
    (("--header", "src=api"), lambda r: _has_header(r, "src", b"api")),
    (("--header", "src=api", "--header", "bin=\udc80\udc81"),
     lambda r: _has_header(r, "src", b"api") and _has_header(r, "bin", b"\x80\x81")),
    (("--key", "order-3", "--value-contains", "ERROR"), lambda r: r.key == b"order-3" and b"ERROR" in r.value),
    (("--mode", "search", "--offset-range", "10:20"), lambda r: 10 <= r.offset < 20),
    (("--mode", "search", "--offset-range", "5"), lambda r: r.offset == 5),
    (("--mode", "search", "--offset-range", "440:"), lambda r: r.offset >= 440),
    (("--header", "src=web", "--offset-range", ":3"), lambda r: r.offset < 3 and _has_header(r, "src", b"web")),
    (("--mode", "search", "--time-range", f"@{IN_10S[0]}:@{IN_10S[1]}"), lambda r: IN_10S[0] <= r.timestamp < IN_10S[1]),
    (("--mode", "search", "--time-range", "@2023-11-14T22:13:30Z:@2023-11-14T22:13:40Z"),
     lambda r: IN_10S[0] <= r.timestamp < IN_10S[1]),
    (("--mode", "search", "--time-range", "@2023-11-14T23:13:30+01:00:@2023-11-14T22:13:40.000Z"),
     lambda r: IN_10S[0] <= r.timestamp < IN_10S[1]),
    (("--key", "order-9", "--time-range", "@2023-11-14T22:15:00Z:"), lambda r: r.key == b"order-9"
     and r.timestamp >= T0 + 100_000),
    (("--value-contains", "ERROR", "--time-range", f":@{T0 + 50_000}", "-t", "orders"),
     lambda r: b"ERROR" in r.value and r.timestamp < T0 + 50_000 and r.topic == "orders"),
]


@pytest.fixture(scope="module")
def all_records(pristine):
    return list(scan_records([str(pristine)]))


@pytest.mark.parametrize("args,keep", SEARCHES, ids=[" ".join(a) for a, _ in SEARCHES])
def test_search_equals_a_brute_force_filter(pristine, all_records, capsys, args, keep):
    code, out, err = scan(capsys, pristine, "-j", "2", *args)
    assert code == 0, err
    expected = [r for r in all_records if keep(r)]
    assert expected, "the case must match something"
    assert out.encode("utf-8", "surrogateescape") == b"".join(format_record_jsonl(r) for r in expected)
    assert err.startswith(f"plog scan: {len(expected)} matching records\n")


@pytest.mark.parametrize("extra", [("-j", "1"), ("-j", "2", "--unit-size", "64KiB"), ("-j", "2", "--unit-size", "1KiB")])
def test_search_of_everything_is_every_record_once_whatever_the_units(pristine, written, all_records, capsys, extra):
    code, out, err = scan(capsys, pristine, "--mode", "search", *extra)
    assert code == 0
    assert out.encode("utf-8", "surrogateescape") == b"".join(format_record_jsonl(r) for r in all_records)
    assert len(all_records) == sum(len(rows) for rows in written.values())
    code, out, err = scan(capsys, pristine, "--mode", "search", "--time-range", "@2023-11-14T22:15:00Z:", *extra)
    assert code == 0 and out.count("\n") == sum(1 for r in all_records if r.timestamp >= T0 + 100_000)


def test_search_lines_carry_record_and_location(pristine, written, capsys):
    code, out, err = scan(capsys, pristine, "--value-contains-hex", "fffe00", "-j", "1")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines and all(list(o) == JSONL_FIELDS for o in lines)
    expected = sorted((t, p, row[0]) for (t, p), rows in written.items() for row in rows if b"\xff\xfe\x00" in row[3])
    assert [(o["topic"], o["partition"], o["offset"]) for o in lines] == expected
    for o in lines:
        offset, ts, key, value, headers = written[(o["topic"], o["partition"])][o["offset"]]
        assert (o["timestamp"], o["timestamp_type"]) == (ts, "CreateTime")
        assert decode_bytes(o["key"]) == key and decode_bytes(o["value"]) == value
        assert isinstance(o["value"], dict) and set(o["value"]) == {"base64"}  # not UTF-8
        assert [(h["key"], decode_bytes(h["value"])) for h in o["headers"]] == headers
        assert o["producer_id"] == (77 if o["topic"] == "events" else -1)
        # segment/position/base_offset name the batch holding the record.
        segment = Path(o["segment"])
        assert segment.parent.parent.parent == pristine and segment.suffix == ".log"
        (batch,) = [b for b in batches_of(segment) if b.position == o["position"]]
        assert batch.base_offset == o["base_offset"] <= o["offset"] <= batch.last_offset
        assert o["codec"] == ("gzip" if batch.compression == 1 else "none")
    assert {o["codec"] for o in lines} == {"gzip", "none"}


def test_search_output_file(pristine, capsys, tmp_path):
    code, stdout_version, _ = scan(capsys, pristine, "--key", "order-2", "-j", "1")
    assert code == 0 and stdout_version
    target = tmp_path / "found.jsonl"
    code, out, err = scan(capsys, pristine, "--key", "order-2", "-o", target, "--output-format", "jsonl", "-j", "1")
    n = stdout_version.count("\n")
    assert code == 0 and out == "" and err.startswith(f"plog scan: {n} matching records to {target}\n")
    assert target.read_text() == stdout_version
    code, out, err = scan(capsys, pristine, "--key", "order-3", "-o", target, "--output-format", "jsonl")
    assert code == 1 and out == ""
    assert err == f"plog: error: {target} exists (use --overwrite to replace it)\n"
    assert target.read_text() == stdout_version
    code, out, err = scan(capsys, pristine, "--key", "order-3", "-o", target, "--output-format", "jsonl",
                          "--overwrite")
    assert code == 0 and target.read_text() and all(json.loads(x)["key"] == "order-3"
                                                     for x in target.read_text().splitlines())


def test_search_jsonl_piped_into_plog_produce_rebuilds_the_records(pristine, tmp_path):
    """``plog scan ... | plog produce --input-format jsonl``: real processes, a real pipe."""
    d = str(tmp_path / "copy")
    r = subprocess.run([*PLOG, "topics", "create", "copy", "-p", "2", "--data-dir", d], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    scan_p = subprocess.Popen([*PLOG, "scan", str(pristine), "-t", "orders", "--header", "src=api", "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    produce = subprocess.run([*PLOG, "produce", "copy", "-i", "jsonl", "-q", "--data-dir", d],
                             stdin=scan_p.stdout, capture_output=True, timeout=120)
    scan_p.stdout.close()
    assert scan_p.wait(120) == 0 and scan_p.stderr.read() == b""
    assert produce.returncode == 0, produce.stderr
    consumed = subprocess.run([*PLOG, "consume", "copy", "-e", "-q", "-f", "jsonl", "--data-dir", d],
                              capture_output=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    got = [json.loads(line) for line in consumed.stdout.splitlines()]
    expected = [r for r in scan_records([str(pristine)], ScanFilter(frozenset({"orders"}), headers=(("src", b"api"),)))]
    assert len(expected) > 50

    def shape(partition, ts, key, value, headers):
        return partition, ts, key, value, [(k, v) for k, v in headers]

    want = sorted(shape(r.partition, r.timestamp, r.key, r.value, r.headers) for r in expected)
    have = sorted(shape(g["partition"], g["timestamp"], decode_bytes(g["key"]), decode_bytes(g["value"]),
                        [(h["key"], decode_bytes(h["value"])) for h in g["headers"]]) for g in got)
    assert have == want
    # Per partition, the order is kept too (offsets are new, assigned by the log).
    for p in (0, 1):
        assert [decode_bytes(g["value"]) for g in got if g["partition"] == p] == \
            [r.value for r in expected if r.partition == p]


# -- verify mode --------------------------------------------------------------------------------


VERIFY_SUMMARY = re.compile(r"^plog (scan|verify): (?:verified|checked) (\d+) files \((\d+) bytes, (\d+) batches\) "
                            r"in (\d+) partitions?: (\d+) errors?, (\d+) warnings?")


def _verify_both(capsys, path, *args):
    scan_code, scan_out, scan_err = scan(capsys, path, "--mode", "verify", "-j", "1", *args)
    verify_code, verify_out, verify_err = plog(capsys, "verify", str(path), "-j", "1", *args)
    a, b = VERIFY_SUMMARY.match(scan_err), VERIFY_SUMMARY.match(verify_err)
    assert a and b and a.groups()[1:] == b.groups()[1:]
    assert scan_code == verify_code and scan_out == verify_out
    return scan_code, scan_out, a


def test_verify_mode_equals_plog_verify_on_a_clean_dir(data, capsys):
    for fmt in ((), ("--format", "jsonl")):
        code, out, summary = _verify_both(capsys, data, *fmt)
        assert code == 0 and out == "" and summary[6] == "0" and summary[5] == "3"


def test_verify_mode_equals_plog_verify_on_the_corpus(corpus, capsys):
    code, out, summary = _verify_both(capsys, CORPUS / "William0423__kafka", "--format", "jsonl")
    assert code == 0 and summary[6] == "0" and int(summary[4]) == 8205


def test_verify_mode_equals_plog_verify_on_a_damaged_dir(data, capsys):
    seg = segments(data, "orders", 1)[1]
    position, last_offset, _ = flip_in_batch(seg, 2)
    code, out, summary = _verify_both(capsys, data)
    assert code == 3 and summary[6] == "1"
    assert f"{seg}:{position}: error[crc]:" in out
    code, out, summary = _verify_both(capsys, data, "--format", "jsonl")
    errors = [json.loads(x) for x in out.splitlines() if json.loads(x)["severity"] == "error"]
    assert code == 3 and [(e["check"], e["path"], e["position"]) for e in errors] == [("crc", str(seg), position)]


# -- damage in stats and search -----------------------------------------------------------------


def test_a_corrupt_batch_in_stats(data, written, capsys):
    seg = segments(data, "orders", 0)[1]
    position, last_offset, count = flip_in_batch(seg, 2)
    code, out, err = scan(capsys, data, "--format", "json", "-j", "2")
    assert code == 3
    problems = [line for line in err.splitlines() if PROBLEM.match(line)]
    assert problems == [f"plog scan: {seg}:{position}: batch at offset {last_offset} fails its CRC check; "
                        f"its records are not counted"]
    assert SUMMARY.match("\n".join(line for line in err.splitlines() if line not in problems) + "\n")
    by_tp = {(o["topic"], o["partition"]): o for o in json.loads(out)}
    assert by_tp[("orders", 0)]["records"] == len(written[("orders", 0)]) - count
    assert by_tp[("orders", 0)]["corrupt_batches"] == 1
    assert by_tp[("orders", 0)]["problems"] == [{"segment": str(seg), "position": position,
                                                 "message": problems[0].split(": ", 2)[2]}]
    for tp in (("orders", 1), ("events", 0)):
        assert by_tp[tp]["records"] == len(written[tp]) and by_tp[tp]["problems"] == []
    code, out, err = scan(capsys, data, "-j", "1")
    row = next(cells(line) for line in out.splitlines() if line.split()[:2] == ["orders", "0"])
    assert code == 3 and row[-1] == "1 corrupt batches, 1 problems"
    code, out, err = scan(capsys, data, "-q", "-j", "1")
    assert code == 3 and err == ""


def test_a_corrupt_batch_in_search(data, written, capsys):
    seg = segments(data, "orders", 0)[1]
    position, last_offset, count = flip_in_batch(seg, 2)
    code, out, err = scan(capsys, data, "--mode", "search", "-t", "orders", "-j", "2")
    assert code == 3
    offsets = [(o["partition"], o["offset"]) for o in map(json.loads, out.splitlines())]
    skipped = {(0, o) for o in range(last_offset - count + 1, last_offset + 1)}
    assert offsets == [(p, row[0]) for (t, p), rows in sorted(written.items()) if t == "orders" for row in rows
                       if (p, row[0]) not in skipped]
    assert err.splitlines()[:2] == [
        f"plog scan: {len(offsets)} matching records",
        f"plog scan: {seg}:{position}: batch at offset {last_offset} fails its CRC check; skipped"]


def test_a_torn_tail_in_a_real_process(data):
    seg = segments(data, "events", 0)[-1]
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x01\x00" + b"\x01" * 20)  # a header promising 256 bytes, then EOF
    r = subprocess.run([*PLOG, "scan", str(data), "-t", "events", "-f", "json"], capture_output=True, timeout=120,
                       env={**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color"})
    assert r.returncode == 3 and b"\x1b" not in r.stdout and b"Traceback" not in r.stderr
    (o,) = json.loads(r.stdout)
    assert o["records"] == 75 * PER_BATCH and len(o["problems"]) == 1
    lines = r.stderr.decode().splitlines()
    assert f"plog scan: {seg}:{size}: 32 trailing bytes are not a whole batch (a torn write?)" in lines


# -- bad inputs ---------------------------------------------------------------------------------


USAGE = [
    (("--offset-range", "a:b"), "--offset-range"),
    (("--offset-range", "-5:"), "--offset-range"),
    (("--offset-range", "20:10"), "--offset-range"),
    (("--offset-range", "3:-1"), "--offset-range"),
    (("--time-range", "10:20"), "--time-range"),
    (("--time-range", "@5"), "--time-range"),
    (("--time-range", "@20:@10"), "--time-range"),
    (("--time-range", "@yesterday:"), "--time-range"),
    (("--unit-size", "12parsecs"), "--unit-size"),
    (("--unit-size", "0"), "--unit-size"),
    (("--unit-size", "-64KiB"), "--unit-size"),
    (("--key", "k", "--mode", "stats"), "--mode"),
    (("--sql", "SELECT 1"), "--sql"),
    (("--mode", "sql"), "--sql"),
    (("--mode", "stats", "--sql", "SELECT 1"), "--sql"),
    (("--output-format", "jsonl"), "--output-format"),
    (("--key", "k", "--output", "out.parquet"), "--output"),
    (("--key", "k", "--output", "out.parquet", "--output-format", "parquet"), "--output"),
    (("--output", "x.jsonl", "--output-format", "jsonl"), "--output"),  # stats mode
    (("--mode", "verify", "--topic", "orders"), "--mode"),
    (("--mode", "verify", "--offset-range", "1:2"), "--mode"),
    (("--header", "novalue"), "--header"),
    (("--key", "a", "--key-hex", "61"), "--key"),
    (("--key-hex", "zz"), "--key-hex"),
    (("--value-contains", "a", "--value-contains-hex", "61"), "--value-contains"),
    (("--jobs", "0"), "--jobs"),
    (("--jobs", "2", "--spark"), "--jobs"),
    (("--format", "csv", "--mode", "verify"), "--format"),
    (("--format", "json", "--mode", "verify"), "--format"),
    (("--mode", "everything"), "--mode"),
]


@pytest.mark.parametrize("args,param", USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_usage_errors_exit_2_before_anything_runs(pristine, capsys, tmp_path, monkeypatch, args, param):
    monkeypatch.chdir(tmp_path)
    code, out, err = scan(capsys, pristine, *args)
    assert code == 2 and out == ""
    assert err.startswith("Usage: plog scan ") and err.rstrip("\n").splitlines()[-1].startswith("Error: ")
    assert param in err.splitlines()[-1]
    assert "plog scan:" not in err  # nothing ran: no summary
    assert os.listdir(tmp_path) == []  # no output written


def test_usage_errors_leave_spark_alone(pristine, capsys, monkeypatch):
    """--sql without --spark and --jobs with --spark fail before a session is even asked for."""
    from plog.spark_tasks import session

    def no_spark(*a, **kw):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "start", no_spark)
    for args in (("--sql", "SELECT 1"), ("--jobs", "2", "--spark"), ("--jobs", "1", "--master", "local[1]"),
                 ("--jobs", "1", "--conf", "spark.ui.enabled=false")):
        code, _, err = scan(capsys, pristine, *args)
        assert code == 2 and "Spark was started" not in err


def _one_line_error(code, out, err, expected_code=1):
    assert code == expected_code and out == ""
    assert err.startswith("plog: error: ") and err.count("\n") == 1
    return err[len("plog: error: "):-1]


def test_missing_paths(capsys, pristine, tmp_path):
    missing = tmp_path / "nope"
    assert _one_line_error(*scan(capsys, missing)) == f"{missing}: no such file or directory"
    assert _one_line_error(*scan(capsys, pristine, missing, "--key", "x")) == f"{missing}: no such file or directory"
    assert _one_line_error(*scan(capsys, missing, "--mode", "verify")) == f"{missing}: no such file or directory"


def test_files_are_refused_scan_reads_directories(capsys, pristine, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not kafka\n")
    msg = _one_line_error(*scan(capsys, text))
    assert msg == (f"{text}: not a directory; scan reads data directories, log directories or "
                   f"partition folders")
    seg = segments(pristine, "orders", 0)[0]
    msg = _one_line_error(*scan(capsys, seg))
    assert msg == f"{seg}: a segment file; scan reads directories (plog dump reads one segment)"
    msg = _one_line_error(*scan(capsys, seg, "--key", "order-1"))
    assert msg.startswith(f"{seg}: a segment file; scan reads directories")


def test_directories_without_kafka_data(capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    (other / "sub").mkdir(parents=True)
    (other / "readme.md").write_text("hi")
    for d in (empty, other):
        for args in ((), ("--key", "x"), ("--format", "json")):
            msg = _one_line_error(*scan(capsys, d, *args))
            assert msg.startswith(f"{d}: not a segment, partition folder, log directory or data directory")


def test_a_log_dir_without_partitions_is_an_empty_result(capsys, tmp_path):
    logdir = tmp_path / "kafka-logs"
    logdir.mkdir()
    (logdir / "meta.properties").write_text("version=0\nbroker.id=1\n")
    code, out, err = scan(capsys, logdir, "--format", "json")
    assert (code, json.loads(out)) == (0, [])
    assert err.startswith("plog scan: 0 partition replicas, 0 records, 0 bytes in 0 units\n")
    code, out, err = scan(capsys, logdir)
    assert code == 0 and out.split() == TABLE_HEADER
    code, out, err = scan(capsys, logdir, "--key", "x")
    assert (code, out) == (0, "") and err.startswith("plog scan: 0 matching records\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: chmod 000 does not stop root from reading a "
                                              "directory (test_unreadable_directory_simulated covers the path)")
def test_unreadable_directory(capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "orders-0").mkdir()
    locked.chmod(0)
    try:
        msg = _one_line_error(*scan(capsys, locked))
    finally:
        locked.chmod(0o755)
    assert msg == f"Permission denied: {locked}"


def test_unreadable_directory_simulated(capsys, tmp_path, monkeypatch):
    """What chmod 000 does for a non-root user: listing the directory raises EACCES."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.scandir

    def scandir(path="."):
        if os.path.abspath(os.fspath(path)) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for args in ((), ("--key", "x"), ("--mode", "verify")):
        msg = _one_line_error(*scan(capsys, locked, *args))
        assert msg == f"Permission denied: {locked}"


def test_bad_inputs_in_a_real_process(tmp_path):
    r = subprocess.run([*PLOG, "scan", str(tmp_path / "nope")], capture_output=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (1, b"", f"plog: error: {tmp_path / 'nope'}: no such file or "
                                                        f"directory\n".encode())
    r = subprocess.run([*PLOG, "scan", str(tmp_path), "--offset-range", "a:b"], capture_output=True, timeout=120)
    assert r.returncode == 2 and r.stdout == b"" and b"Traceback" not in r.stderr
    assert r.stderr.decode().splitlines()[-1].startswith("Error: Invalid value for --offset-range")


# -- help ---------------------------------------------------------------------------------------


def test_help_shows_examples_and_exit_status(capsys):
    code, out, err = scan(capsys, "--help")
    assert code == 0 and err == ""
    flat = " ".join(out.split())
    assert "Examples:" in out
    for example in ("plog scan /var/lib/kafka/data", "plog scan DIR --key order-42 --time-range",
                    "plog scan DIR --mode verify --spark"):
        assert example in flat
    assert ("Exit status: 0 done, nothing wrong found; 1 error (bad path, Spark cannot start); 2 usage error; "
            "3 the scan ran and found damage") in flat
    for option in ("--mode", "--jobs", "--unit-size", "--offset-range", "--time-range", "--key-hex",
                   "--value-contains-hex", "--header", "--output-format", "--overwrite", "--quiet"):
        assert option in out

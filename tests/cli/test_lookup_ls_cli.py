"""``plog lookup`` and ``plog ls`` through the Typer app (CliRunner), and their one-line
errors through ``main``'s error boundary."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
from typer.testing import CliRunner

from conftest import CORPUS
from plog.cli.main import app, main
from plog.engine.storage.discovery import log_dirs
from plog.engine.storage.file_records import FileBatches

INVOICE = CORPUS / "dipendrasaini__kafka-learnning-series/tmp/kafka-logs-2/invoice-1"
LSX = CORPUS / "BiggerBrain__kafka/data/lsx1-0"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def run_main(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


# -- lookup ------------------------------------------------------------------------------


def test_lookup_offset_text(corpus):
    r = invoke("lookup", INVOICE, "--offset", "45000")
    assert r.exit_code == 0, r.stderr
    rows = dict(line.split(None, 1) if not line.startswith("offset index") else ("offset index", line[14:])
                for line in r.stdout.splitlines())
    assert rows["offset"] == "45000"
    assert rows["partition"].startswith("invoice-1 (")
    assert rows["offsets"].startswith("[0, 99523)")
    assert rows["segment"].endswith("00000000000000030620.log (base offset 30620, 985789 bytes)")
    assert rows["batch"].startswith("baseOffset: 44620 lastOffset: 45115 count: 496 ")
    assert "position: 462109 CreateTime: 1718446827447 size: 16365 magic: 2 compresscodec: none" in rows["batch"]
    assert rows["batch"].endswith("isvalid: true")
    assert rows["record"] == "offset 45000, timestamp 1718446827442 (2024-06-15T10:20:27.442Z)"
    assert "Steps:" not in r.stdout


def test_lookup_explain_lists_the_steps(corpus):
    r = invoke("lookup", INVOICE, "-o", "-1", "--explain")  # -1: the last offset
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Steps:"
    steps = [line for line in lines if line.startswith("  ") and line.lstrip()[0].isdigit()]
    assert "log end offset 99523" in steps[2]
    assert "greatest base offset <= 99522" in steps[3]
    assert any("binary search for offset 99522" in s or ".index is missing" in s for s in steps)
    assert any(line.startswith("record") and "offset 99522" in line for line in lines)


def test_lookup_json_has_every_field(corpus):
    r = invoke("lookup", INVOICE, "--offset", "31000", "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["lookup"] == "offset" and data["query"] == "31000" and data["target"] == 31000
    assert data["segment_base_offset"] == 30620 and data["exact"] and data["record_offset"] == 31000
    assert data["batch"]["last_offset"] >= 31000 >= data["batch"]["base_offset"]
    assert data["batch"]["crc_valid"] is True and data["batch"]["codec"] == "none"
    assert data["index"]["kind"] == "offset" and isinstance(data["index"]["probes"], list)
    assert [s["name"] for s in data["steps"]][-2:] == ["batch", "record"]


def test_lookup_timestamps(corpus):
    r = invoke("lookup", INVOICE, "--timestamp", "@2024-06-15T10:20:27.442Z", "-f", "json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["kind"], data["found"], data["offset"], data["timestamp"]) == ("timestamp", True, 44986, 1718446827442)
    assert data["leader_epoch"] == 0 and data["time_index"]["kind"] == "time"
    for spec, offset in (("earliest", 0), ("-2", 0), ("latest", 99523), ("-1", 99523)):
        data = json.loads(invoke("lookup", INVOICE, "-t", spec, "-f", "json").stdout)
        assert (data["found"], data["offset"], data["timestamp"]) == (True, offset, -1), spec
    data = json.loads(invoke("lookup", INVOICE, "-t", "max", "-f", "json").stdout)
    assert (data["offset"], data["timestamp"]) == (99450, 1718446827865)
    r = invoke("lookup", INVOICE, "-t", "@2030-01-01")
    assert r.exit_code == 0 and any(line.startswith("offset") and "none" in line for line in r.stdout.splitlines())
    r = invoke("lookup", INVOICE, "-t", "1718446827442", "--explain")
    assert r.exit_code == 0 and "chosen" in r.stdout and "skipped" in r.stdout


@pytest.mark.parametrize("bare, with_at", [
    ("2024-06-15T10:20:27.442Z", "@2024-06-15T10:20:27.442Z"),
    ("2024-06-15T12:20:27.442+02:00", "@2024-06-15T10:20:27.442Z"),  # a zone, as with the @
    ("2024-06-15T10:20:27.442", "@2024-06-15T10:20:27.442Z"),  # UTC when none is named
    ("1718446827442", "@1718446827442"),
])
def test_lookup_timestamp_without_the_at(corpus, bare, with_at):
    """issue 21, item 13: --timestamp takes ms or ISO-8601 without the @ of the offset
    language (a time is all it can mean there), and answers as with it."""
    got = invoke("lookup", INVOICE, "--timestamp", bare, "-f", "json")
    want = invoke("lookup", INVOICE, "--timestamp", with_at, "-f", "json")
    assert (got.exit_code, want.exit_code) == (0, 0), got.output + want.output
    got, want = json.loads(got.stdout), json.loads(want.stdout)
    assert (got["target"], got["offset"], got["timestamp"]) == (1718446827442, 44986, 1718446827442)
    assert {k: v for k, v in got.items() if k != "query"} == {k: v for k, v in want.items() if k != "query"}


def test_lookup_bad_timestamp_names_the_forms(corpus, capsys):
    code, out, err = run_main(capsys, "lookup", LSX, "--timestamp", "yesterday")
    assert code == 2 and out == ""
    assert "invalid time 'yesterday'" in err and "<ISO-8601> or @<ISO-8601>" in err and "Traceback" not in err


def test_lookup_in_a_log_dir_and_a_segment_file(corpus):
    r = invoke("lookup", INVOICE.parent, "--topic", "invoice", "--partition", "1", "-o", "45000", "-f", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["batch"]["position"] == 462109
    r = invoke("lookup", INVOICE / "00000000000000030620.log", "-o", "earliest", "-f", "json")
    data = json.loads(r.stdout)
    assert (data["log_start_offset"], data["log_end_offset"], data["target"]) == (30620, 60492, 30620)


@pytest.mark.parametrize("args", [
    ["--offset", "1", "--timestamp", "2"],  # both
    [],  # neither
    ["--offset", "abc"],
    ["--timestamp", "@yesterday"],
    ["--timestamp", "-7"],
    ["--offset", "1", "--format", "xml"],
    ["--offset", "1", "--no-such-option"],
])
def test_lookup_usage_errors_exit_2(corpus, args):
    r = invoke("lookup", LSX, *args)
    assert r.exit_code == 2, r.output


def test_lookup_errors_are_one_line(corpus, capsys, tmp_path):
    code, out, err = run_main(capsys, "lookup", tmp_path / "missing", "-o", "1")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("plog: error: ") and "missing" in err
    code, out, err = run_main(capsys, "lookup", LSX, "-o", "14")
    assert code == 1 and err == f"plog: error: offset 14 is out of range [0, 14) of {LSX}\n"
    code, out, err = run_main(capsys, "lookup", INVOICE.parent.parent, "-o", "1")
    assert code == 1 and err.count("\n") == 1 and "--topic and --partition" in err
    code, out, err = run_main(capsys, "lookup", tmp_path, "-o", "1")
    assert code == 1 and err.count("\n") == 1 and "not a segment, partition folder" in err
    code, out, err = run_main(capsys, "lookup", LSX, "-o", "1", "-t", "1")
    assert code == 2 and "exactly one of --offset and --timestamp" in err


# -- ls ----------------------------------------------------------------------------------


def _scan(path: str) -> tuple[int | None, int | None]:
    logs = sorted(f for f in os.listdir(path) if f.endswith(".log"))
    if not logs:
        return None, None
    end = int(logs[-1][:20])
    for b in FileBatches(os.path.join(path, logs[-1])):
        end = b.next_offset
    return int(logs[0][:20]), end


def _log_dirs():
    if not CORPUS.is_dir():
        return []
    return [d.path for top in sorted(CORPUS.iterdir()) if top.is_dir() and top.name != "vectors"
            for d in log_dirs(str(top))]


@pytest.mark.parametrize("log_dir", _log_dirs(), ids=lambda p: os.path.relpath(p, CORPUS))
def test_ls_json_of_each_corpus_log_dir(corpus, log_dir):
    r = invoke("ls", log_dir, "--format", "json", "--quick")
    assert r.exit_code == 0, r.stderr
    (data,) = json.loads(r.stdout)
    assert data["path"] == log_dir and not data["partial"]
    expected = log_dirs(log_dir)[0].partitions
    assert [p["name"] for p in data["partitions"]] == [p.name for p in expected]
    for p in data["partitions"]:
        assert (p["first_offset"], p["log_end_offset"]) == _scan(p["path"]), p["name"]
        assert "segments" not in p
    assert data["shutdown"] in ("clean", "unclean", "running")
    assert data["topics"] == {t: sorted(ps) for t, ps in data["topics"].items()}


def test_ls_table_renders(corpus):
    r = invoke("ls", CORPUS / "ArthurArutunyan04__Backend_labs")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert out.startswith("Log dir ") and "directory.id MQHhtGhc9j1ncLM2pvl16w" in out
    assert "clean (.kafka_cleanshutdown, broker epoch 7118)" in out
    assert "12 partition(s) of 4 topic(s), 13 segment(s)" in out
    header = next(line for line in out.splitlines() if line.startswith("Partition"))
    assert header.split()[:6] == ["Partition", "Kind", "Segs", "Size", "Log", "start"]
    row = next(line for line in out.splitlines() if line.startswith("oms_order_created-1 "))
    assert row.split()[:7] == ["oms_order_created-1", "current", "1", "3.0", "MiB", "81908", "94646"]
    assert "snappy" in row and "12738" in row
    assert all(line == line.rstrip() for line in out.splitlines())
    assert "__consumer_offsets-19: 2 index file(s) without a .log" in out


def test_ls_data_dir_with_segments(corpus):
    root = CORPUS / "dipendrasaini__kafka-learnning-series"
    r = invoke("ls", root, "--segments")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.count("Log dir ") == 3
    assert r.stdout.count("invoice-0 segments") == 3
    data = json.loads(invoke("ls", root, "-f", "json", "--segments").stdout)
    assert [len(d["partitions"]) for d in data] == [1, 1, 5]
    seg = data[2]["partitions"][1]["segments"][1]
    assert (seg["base_offset"], seg["first_offset"], seg["next_offset"], seg["batches"]) == (30620, 30620, 60492, 65)
    r = invoke("ls", root, "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 7 and {row["log_end_offset"] for row in rows if row["partition"] == "invoice-0"} == {"100294"}
    r = invoke("ls", root, "-f", "csv", "--segments", "--topic", "invoice")
    assert len(list(csv.DictReader(io.StringIO(r.stdout)))) == 28


def test_ls_partition_folder(corpus):
    r = invoke("ls", INVOICE, "-f", "json")
    (data,) = json.loads(r.stdout)
    assert data["partial"] and [p["name"] for p in data["partitions"]] == ["invoice-1"]
    assert data["partitions"][0]["records"] == 99523


def test_ls_errors(corpus, capsys, tmp_path):
    code, out, err = run_main(capsys, "ls", tmp_path / "missing")
    assert code == 1 and out == "" and err.count("\n") == 1 and err.startswith("plog: error: ")
    code, out, err = run_main(capsys, "ls", tmp_path)
    assert code == 1 and err.count("\n") == 1 and "not a segment, partition folder" in err
    code, out, err = run_main(capsys, "ls", LSX.parent / "meta.properties")
    assert code == 1 and err.count("\n") == 1 and "not a segment file" in err
    assert invoke("ls", LSX, "--format", "yaml").exit_code == 2
    # No PATH and no data directory: one line saying so (it is not a usage error any more).
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err = run_main(capsys, "ls")
    finally:
        os.chdir(cwd)
    assert (code, out) == (1, "")
    assert err == "plog: error: no PATH given and no data directory at plog-data (set $PLOG_DATA_DIR or pass PATH)\n"


def test_ls_without_a_path_lists_the_data_directory(corpus, capsys, monkeypatch, tmp_path):
    """issue 21, item 13: as recover and verify, ls without PATH reads the data directory:
    --data-dir, else $PLOG_DATA_DIR, else ./plog-data."""
    log_dir = LSX.parent
    want = json.loads(invoke("ls", log_dir, "-f", "json").stdout)
    names = [p["name"] for d in want for p in d["partitions"]]
    assert names

    def listed(*args) -> list[str]:
        code, out, err = _main(capsys, "ls", "-f", "json", *args)
        assert code == 0, err
        return [p["name"] for d in json.loads(out) for p in d["partitions"]]

    assert listed("-d", log_dir) == listed("--data-dir", log_dir) == names
    monkeypatch.setenv("PLOG_DATA_DIR", str(log_dir))
    assert listed() == names
    monkeypatch.delenv("PLOG_DATA_DIR")
    (tmp_path / "plog-data").symlink_to(log_dir)
    monkeypatch.chdir(tmp_path)
    assert listed() == names


def _main(capsys, *args) -> tuple[int, str, str]:
    """``plog ARGS`` through main() that may succeed (run_main expects an exit code)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err

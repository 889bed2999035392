"""``plog verify`` through the Typer app (CliRunner): output shapes, exit codes, --jobs; its
one-line errors through ``main``'s error boundary; and a real subprocess run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS
from plog.cli.main import app, main

runner = CliRunner()
SEG0 = "orders-0/00000000000000000000"
TEXT_LINE = re.compile(r"^(?P<path>[^:]+)(?::(?P<pos>\d+))?: (?P<sev>error|warning)\[(?P<check>[a-z-]+)\]: "
                       r"(?P<msg>.+)$")
SUMMARY = re.compile(r"^plog verify: checked \d+ files? \(\d+ bytes?, \d+ batch(?:es)?\)"
                     r"(?: in \d+ partitions?| of \d+ segments?)?: "
                     r"(?P<errors>\d+) errors?, (?P<warnings>\d+) warnings?( \(--strict: warnings count\))?"
                     r"(?P<failed>; \d+ paths? could not be verified)?\n$")


def build_log_dir(root: Path) -> Path:
    from plog.engine.storage.log_manager import LogManager
    from plog.formats.record_batch import encode_batch

    config = {"segment.bytes": "20000", "index.interval.bytes": "1000", "plog.fsync.on.produce": "false"}
    with LogManager([root], cluster_id="verify-cli-test") as lm:
        for partition in range(3):
            log = lm.get_or_create_log(("orders", partition), config=config, topic_id=uuid.UUID(int=9))
            for i in range(40):
                log.append_as_leader(encode_batch([(j, 1_700_000_000_000 + 10 * i + j, b"k", b"v" * 150)
                                                   for j in range(4)]))
    os.remove(root / ".lock")
    return root


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return build_log_dir(tmp_path_factory.mktemp("verify-cli") / "logdir")


@pytest.fixture
def logdir(pristine, tmp_path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "logdir"))


def damage(logdir: Path) -> None:
    """One CRC error in orders-0 and one missing index (a warning) in orders-2."""
    path = logdir / f"{SEG0}.log"
    buf = bytearray(path.read_bytes())
    buf[5000] ^= 0x10
    path.write_bytes(bytes(buf))
    os.remove(logdir / "orders-2/00000000000000000000.index")


def invoke(*args):
    return runner.invoke(app, ["verify", *[str(a) for a in args]])


def run_main(capsys, *args) -> tuple[int, str, str]:
    """The console-script entry point in process: (exit code, stdout, stderr)."""
    try:
        main(["verify", *[str(a) for a in args]])
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_log_dir_exits_0_with_only_a_summary(logdir):
    r = invoke(logdir, "--jobs", "1")
    assert r.exit_code == 0 and r.stdout == ""
    m = SUMMARY.match(r.stderr)
    assert m and (m["errors"], m["warnings"]) == ("0", "0")
    assert "in 3 partitions" in r.stderr


def test_text_output_is_one_linter_line_per_finding(logdir):
    damage(logdir)
    r = invoke(logdir, "--jobs", "1")
    assert r.exit_code == 3
    lines = r.stdout.splitlines()
    parsed = [TEXT_LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [(m["path"], m["pos"], m["sev"], m["check"]) for m in parsed] == [
        (str(logdir / f"{SEG0}.log"), "4907", "error", "crc"),
        (str(logdir / "orders-2/00000000000000000000.index"), None, "warning", "index-missing"),
    ]
    m = SUMMARY.match(r.stderr)
    assert m and (m["errors"], m["warnings"]) == ("1", "1")


def test_jsonl_output(logdir):
    damage(logdir)
    r = invoke(logdir, "--format", "jsonl", "-j", "1")
    assert r.exit_code == 3
    objects = [json.loads(line) for line in r.stdout.splitlines()]
    assert [list(o) for o in objects] == [["severity", "check", "path", "position", "offset", "message"]] * 2
    assert objects[0] == {"severity": "error", "check": "crc", "path": str(logdir / f"{SEG0}.log"),
                          "position": 4907, "offset": 28, "message": objects[0]["message"]}
    assert "CRC-32C mismatch" in objects[0]["message"]
    assert objects[1]["severity"] == "warning" and objects[1]["position"] is None


def test_warnings_exit_0_unless_strict(logdir):
    os.remove(logdir / ".kafka_cleanshutdown")
    r = invoke(logdir)
    assert r.exit_code == 0 and "[clean-shutdown-missing]" in r.stdout
    r = invoke(logdir, "--strict")
    assert r.exit_code == 3 and r.stderr.endswith("1 warning (--strict: warnings count)\n")


def test_jobs_2_gives_the_same_output_as_jobs_1(logdir):
    damage(logdir)
    shutil.copytree(CORPUS / "William0423__kafka/kafka-logs", logdir.parent / "other")
    one = invoke(logdir, logdir.parent / "other", "--jobs", "1")
    two = invoke(logdir, logdir.parent / "other", "--jobs", "2")
    assert (one.exit_code, one.stdout, one.stderr) == (two.exit_code, two.stdout, two.stderr)
    assert one.exit_code == 3 and one.stdout.count("\n") >= 4


def test_quiet_and_max_findings(logdir):
    index = logdir / f"{SEG0}.index"
    index.write_bytes(b"".join((k + 1).to_bytes(4, "big") + (7 * k + 3).to_bytes(4, "big") for k in range(1, 40)))
    r = invoke(logdir, "--quiet", "--max-findings", "3")
    assert r.exit_code == 3 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert len(lines) == 4 and lines[-1].endswith("error[index-entry]: 36 more index-entry errors in this file are "
                                                  "not shown (39 in all)")


def test_segment_and_partition_paths(logdir):
    damage(logdir)
    r = invoke(logdir / f"{SEG0}.log")
    assert r.exit_code == 3 and r.stdout.count("\n") == 1 and "error[crc]" in r.stdout
    r = invoke(logdir / "orders-1")
    assert r.exit_code == 0 and r.stdout == ""


def test_bad_paths_are_one_line_errors_exit_1(capsys, tmp_path):
    code, out, err = run_main(capsys, tmp_path / "missing")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("plog: error: No such file or directory: ") and "missing" in err
    (tmp_path / "empty").mkdir()
    code, out, err = run_main(capsys, tmp_path / "empty")
    assert code == 1 and err.count("\n") == 1 and "not a segment, partition folder, log directory" in err
    (tmp_path / "notes.txt").write_text("hello")
    code, out, err = run_main(capsys, tmp_path / "notes.txt")
    assert code == 1 and err.count("\n") == 1 and "not a Kafka segment file" in err
    assert "Traceback" not in err


def test_exit_codes_through_main(capsys, logdir):
    assert run_main(capsys, logdir)[0] == 0
    damage(logdir)
    code, out, err = run_main(capsys, logdir, "-q")
    assert code == 3 and out.count("\n") == 2 and err == ""


def test_usage_error_is_exit_2(capsys, logdir):
    assert run_main(capsys, logdir, "--format", "xml")[0] == 2
    assert run_main(capsys, logdir, "--jobs", "0")[0] == 2


def test_non_utf8_path_in_jsonl_is_binary_safe(pristine, tmp_path):
    root = os.fsencode(tmp_path) + b"/caf\xe9"
    shutil.copytree(pristine, os.fsdecode(root))
    os.remove(os.fsdecode(root + b"/.kafka_cleanshutdown"))
    r = invoke(os.fsdecode(root), "-f", "jsonl")
    obj = json.loads(r.stdout_bytes.splitlines()[0])
    assert r.exit_code == 0 and obj["check"] == "clean-shutdown-missing"
    from plog.formats.binary_json import decode_bytes

    assert decode_bytes(obj["path"]) == root + b"/.kafka_cleanshutdown"
    r = invoke(os.fsdecode(root))
    assert r.stdout_bytes.startswith(root + b"/.kafka_cleanshutdown: warning[clean-shutdown-missing]: ")


def test_help_documents_the_formats_and_exit_codes():
    r = runner.invoke(app, ["verify", "--help"])
    text = " ".join(r.stdout.split())
    assert r.exit_code == 0 and "Example: plog verify" in text
    assert "3 problems found" in text and "--strict" in text and "--jobs" in text and "jsonl" in text


def corpus_log_dirs() -> list[Path]:
    from plog.engine.storage.discovery import log_dirs

    if not CORPUS.is_dir():
        return []
    return [Path(ld.path) for top in sorted(CORPUS.iterdir()) if top.is_dir() and top.name != "vectors"
            for ld in log_dirs(str(top))]


@pytest.mark.parametrize("log_dir", corpus_log_dirs(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_corpus_log_dir_exits_0(corpus, log_dir):
    r = invoke(log_dir, "--jobs", "1")
    assert r.exit_code == 0, r.stdout
    assert " error[" not in r.stdout and SUMMARY.match(r.stderr)["errors"] == "0"


def test_real_process_on_a_corpus_log_dir(corpus):
    r = subprocess.run([sys.executable, "-m", "plog.cli", "verify", "--jobs", "2",
                        str(CORPUS / "dipendrasaini__kafka-learnning-series/tmp")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = SUMMARY.match(r.stderr)
    assert m and m["errors"] == "0" and "in 7 partitions" in r.stderr


# -- issue 21 --------------------------------------------------------------------------------------


def test_without_a_path_the_data_directory_is_verified(capsys, monkeypatch, logdir, tmp_path):
    damage(logdir)
    monkeypatch.setenv("PLOG_DATA_DIR", str(logdir))
    code, out, err = run_main(capsys, "-j", "1")
    assert code == 3 and "error[crc]" in out and SUMMARY.match(err)
    code, out, err = run_main(capsys, "-j", "1", "--data-dir", str(logdir / "orders-1"))
    assert code == 0 and "in 1 partition:" in err
    monkeypatch.delenv("PLOG_DATA_DIR")
    monkeypatch.chdir(tmp_path)  # no ./plog-data here
    code, out, err = run_main(capsys)
    assert (code, out) == (1, "") and err.startswith("plog: error: no PATH given and no data directory at plog-data")


def test_a_bad_path_is_reported_and_the_others_are_verified(capsys, logdir, tmp_path):
    damage(logdir)
    code, out, err = run_main(capsys, tmp_path / "missing", logdir, "-j", "1")
    assert code == 1  # the command could not verify everything: an error, whatever else it found
    assert [m["check"] for m in map(TEXT_LINE.match, out.splitlines())] == ["crc", "index-missing"]
    first, summary = err.splitlines(keepends=True)
    assert first == f"plog: error: No such file or directory: {tmp_path / 'missing'}\n"
    m = SUMMARY.match(summary)
    assert m and m["errors"] == "1" and m["failed"] == "; 1 path could not be verified"


def test_the_summary_counts_what_was_checked(capsys, logdir):
    code, _, err = run_main(capsys, logdir / f"{SEG0}.log")
    assert code == 0 and re.fullmatch(r"plog verify: checked 3 files \(\d+ bytes, \d+ batches\) of 1 segment: "
                                      r"0 errors, 0 warnings\n", err), err
    snapshot = next((logdir / "orders-0").glob("*.snapshot"))
    code, _, err = run_main(capsys, snapshot)
    assert code == 0 and re.fullmatch(r"plog verify: checked 1 file \(\d+ bytes, 0 batches\): 0 errors, 0 warnings\n",
                                      err), err


def test_random_bytes_are_not_a_kafka_segment(capsys, tmp_path):
    junk = tmp_path / "00000000000000000000.log"
    junk.write_bytes(os.urandom(4096))
    code, out, _ = run_main(capsys, junk)
    assert code == 3 and "error[not-a-segment]" in out and "torn" not in out

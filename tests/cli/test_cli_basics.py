"""plog --version/--help, dump on a corpus file, and one-line errors (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys

from conftest import CORPUS

PLOG = [sys.executable, "-m", "plog.cli"]
SEGMENT = CORPUS / "BiggerBrain__kafka/data/lsx1-0/00000000000000000000.log"


def run(*args, **kw):
    return subprocess.run([*PLOG, *args], capture_output=True, text=True, timeout=60, **kw)


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("plog ")
    r = run("--help")
    assert r.returncode == 0 and "dump" in r.stdout and "Example:" in r.stdout


def test_help_does_not_import_pyspark():
    code = "import sys; from plog.cli.main import main\ntry:\n main(['--help'])\nexcept SystemExit: pass\nprint('pyspark' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip().endswith("False")


def test_dump_corpus_segment(corpus):
    r = run("dump", "--print-data-log", str(SEGMENT))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Dumping {SEGMENT}" and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 ")
    assert lines[2].endswith("position: 0 CreateTime: 1721034021890 size: 97 magic: 2 compresscodec: none crc: 3896944751 isvalid: true")
    assert sum(1 for line in lines if line.startswith("baseOffset:")) == 14
    assert sum(1 for line in lines if line.startswith("| offset:")) == 14


def test_errors_are_one_line(tmp_path):
    r = run("dump", str(tmp_path / "missing.log"))
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "missing.log" in r.stderr
    bad = tmp_path / "00000000000000000000.log"
    bad.write_bytes(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 20)
    r = run("dump", str(bad))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "Found record size 5 smaller than minimum record overhead (14)" in r.stderr
    r = run("dump", "--no-such-option")
    assert r.returncode == 2


def test_global_quiet_verbose_and_no_color(tmp_path, capsys, monkeypatch):
    """`plog --quiet` silences every status line (here topics create's), `--verbose` adds
    one cost line at the end, and neither outlives the run in an embedding process."""
    import os

    from cli_run import plog

    for k in ("PLOG_QUIET", "PLOG_VERBOSE", "NO_COLOR"):
        monkeypatch.delenv(k, raising=False)
    dd = str(tmp_path / "dd")
    code, _out, err = plog(capsys, "--quiet", "topics", "create", "a", "-d", dd)
    assert code == 0 and err == ""
    code, _out, err = plog(capsys, "topics", "create", "b", "-d", dd)
    assert code == 0 and "Created topic b" in err  # the earlier --quiet did not stick
    code, out, err = plog(capsys, "--verbose", "--no-color", "topics", "list", "-d", dd, "-f", "text")
    assert code == 0 and out.split() == ["a", "1", "1", "-", "b", "1", "1", "-"]
    assert err.startswith("plog topics list: ") and " s wall, " in err and "peak RSS" in err
    assert not any(os.environ.get(k) for k in ("PLOG_QUIET", "PLOG_VERBOSE", "NO_COLOR"))

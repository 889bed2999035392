"""``plog verify`` on log directories a real broker wrote (issue 5, item 3).

* A cleanly stopped broker's directory passes ``plog verify --strict``: no error and no
  warning, on every partition, internal topics and KRaft metadata included.
* The SIGKILLed directory (``kafka_crashed(...).killed``) gets exactly the findings a
  crash and the damage done to it leave: two errors, the torn tail and the producer
  snapshot cut short, and warnings (preallocated active indexes, missing indexes, no
  clean-shutdown marker, high watermarks above the lost tail) naming states a broker
  repairs by itself.
* Both recovered copies of it - the broker's own recovery and plog's - pass ``--strict``
  (plog's but for the KRaft log ``__cluster_metadata-0``, which plog's engine does not
  load, so its active segment's indexes stay as the kill left them).

The CLI runs as a user runs it (``plog verify ... --format jsonl``), in process.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from kafka_scenarios import TORN_TOPIC

from plog.cli.main import main

pytestmark = pytest.mark.interop


def plog_verify(*args) -> tuple[int, list[dict], str]:
    """Run ``plog verify --format jsonl --quiet --jobs 1 ARGS``; (exit code, findings, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["verify", "--format", "jsonl", "--quiet", "--jobs", "1", "--max-findings", "0", *map(str, args)])
        except SystemExit as e:
            code = e.code
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line.strip()], err.getvalue()


def _show(findings) -> str:
    return "\n".join(f"{f['severity']}[{f['check']}] {f['path']}: {f['message']}" for f in findings[:20])


@pytest.fixture(scope="session")
def written_dir(kafka_written_logdir, kafka_version):
    return kafka_written_logdir(kafka_version)


@pytest.fixture(scope="session")
def crashed(kafka_crashed, kafka_version):
    return kafka_crashed(kafka_version)


def test_cleanly_stopped_directory_passes_strict(written_dir):
    code, findings, err = plog_verify("--strict", written_dir)
    assert code == 0 and not findings, _show(findings) or err


def test_each_partition_folder_passes_strict(written_dir):
    """Given partition folders rather than the log directory (no log-dir checkpoints
    to cross-check), every one still passes."""
    folders = sorted(p for p in written_dir.iterdir() if p.is_dir())
    assert len(folders) > 10
    code, findings, err = plog_verify("--strict", *folders)
    assert code == 0 and not findings, _show(findings) or err


def test_killed_directory_findings(crashed):
    code, findings, _ = plog_verify(crashed.killed)
    errors = [f for f in findings if f["severity"] == "error"]
    assert code == 3
    assert sorted((f["check"], f["path"].split("/")[-2]) for f in errors) == [
        ("snapshot-format", "crash-badsnapshot-0"), ("torn-tail", f"{TORN_TOPIC}-0")], _show(errors)
    checks = {f["check"] for f in findings if f["severity"] == "warning"}
    # what a crash (and the damage done to the copy) leaves, each a state the broker heals
    assert {"index-preallocated", "clean-shutdown-missing"} <= checks, checks


@pytest.mark.parametrize("which", ["kafka_dir", "plog_dir"])
def test_recovered_directories_pass_strict(crashed, which):
    """The directory the broker recovered (started on the killed copy, stopped cleanly)
    and the one plog's engine recovered are both clean."""
    _, findings, err = plog_verify("--strict", getattr(crashed, which))
    if which == "plog_dir":
        findings = [f for f in findings if not (f["check"] == "index-preallocated"
                                                and f["path"].split("/")[-2] == "__cluster_metadata-0")]
    assert not findings, _show(findings) or err

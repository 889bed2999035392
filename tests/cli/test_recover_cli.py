"""plog recover through the CLI entry point: the plan (exit 3 with work to do), the recovery,
the JSON report, salvage, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil

from cli_run import plog, tree_digest
from conftest import CORPUS
from plog.engine.lock import LogDirLock

KAFKA_DIR = CORPUS / "ArthurArutunyan04__Backend_labs" / "kafka-data"


def crashed_copy(tmp_path):
    """A copy of a real broker's log dir after a crash: no marker, a torn tail."""
    target = tmp_path / "kafka-data"
    shutil.copytree(KAFKA_DIR, target)
    (target / ".kafka_cleanshutdown").unlink(missing_ok=True)
    seg = target / "oms_order_created-0" / "00000000000000000000.log"
    os.truncate(seg, seg.stat().st_size - 100)
    return target


def test_plan_then_recover_then_nothing_to_do(tmp_path, capsys):
    d = crashed_copy(tmp_path)
    before = tree_digest(d)
    code, out, err = plog(capsys, "recover", str(d), "--dry-run")
    assert code == 3, err
    assert tree_digest(d) == before
    assert "truncate 00000000000000000000.log at position 3035403: 1645 bytes (torn tail" in out
    assert "__cluster_metadata-0: skipped" in out
    code, out, err = plog(capsys, "recover", str(d), "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    (p0,) = [p for p in report["log_dirs"][0]["partitions"] if p["path"].endswith("oms_order_created-0")]
    assert p0["log_end_offset"] == 12420 and p0["truncations"][0]["bytes"] == 1645
    assert report["log_dirs"][0]["clean_shutdown_written"] is True
    assert (d / ".kafka_cleanshutdown").exists()
    code, out, err = plog(capsys, "recover", str(d), "--dry-run")
    assert code == 0 and "nothing to do" in err
    code, out, _ = plog(capsys, "verify", str(d))
    assert code == 0, out


def test_salvage_keeps_what_follows_a_corrupt_batch(tmp_path, capsys):
    d = crashed_copy(tmp_path)
    seg = d / "oms_order_created-1" / "00000000000000081908.log"
    data = bytearray(seg.read_bytes())
    data[200_000] ^= 0xFF  # inside a batch in the middle: its CRC fails
    seg.write_bytes(bytes(data))
    code, out, _ = plog(capsys, "recover", str(d / "oms_order_created-1"), "--dry-run", "--salvage")
    assert code == 3 and "quarantine 00000000000000081908.log bytes [" in out
    code, out, err = plog(capsys, "recover", str(d / "oms_order_created-1"), "--salvage", "--format", "json")
    assert code == 0, err
    (p,) = json.loads(out)["log_dirs"][0]["partitions"]
    (q,) = p["quarantined"]
    assert q["position"] <= 200_000 < q["position"] + q["length"]
    assert (d / "oms_order_created-1" / q["quarantine_file"]).read_bytes() == \
        bytes(data[q["position"]:q["position"] + q["length"]])
    assert p["log_end_offset"] == 94646  # everything after the damage is kept
    code, out, _ = plog(capsys, "verify", str(d / "oms_order_created-1"))
    assert code == 0, out


def test_errors(tmp_path, capsys):
    d = crashed_copy(tmp_path)
    lock = LogDirLock(d)
    try:
        before = tree_digest(d)
        code, _, err = plog(capsys, "recover", str(d))
        assert code == 1 and err.startswith("plog: error:") and err.count("\n") == 1
        assert tree_digest(d) == before
    finally:
        lock.release()
    code, _, err = plog(capsys, "recover", str(tmp_path / "nope"))
    assert code == 1 and err.count("\n") == 1
    code, _, err = plog(capsys, "recover", str(d), "--jobs", "0")
    assert code == 2

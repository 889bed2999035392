"""plog recover through the CLI entry point: the plan (exit 3 with work to do), the recovery,
the JSON report, salvage, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil

from cli_run import plog, tree_digest
from conftest import CORPUS
from plog.engine.storage.lock import LogDirLock

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


# -- issue 21 --------------------------------------------------------------------------------------

ZK_DIR = CORPUS / "dipendrasaini__kafka-learnning-series" / "tmp" / "kafka-logs-2"


def _copy(src, target):
    shutil.copytree(src, target, copy_function=shutil.copyfile)
    return target


def test_brokers_stop_and_start_leave_nothing_to_recover(tmp_path):
    """A follower stopped and started again keeps its snapshot at the offset it stopped at
    besides the newer one; a broker's next start deletes it as superseded (stray), which is
    housekeeping, not recovery work."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cli_fixtures import run

    d = tmp_path / "D"
    assert run(["init", "-d", d, "--brokers", "3"])[0] == 0
    assert run(["topics", "create", "t", "-d", d, "--partitions", "3", "--replication-factor", "3"])[0] == 0
    records = "".join(f"{i}\n" for i in range(1000))
    assert run(["produce", "t", "-p", "0", "-d", d, "--acks", "all"], stdin=records)[0] == 0
    assert run(["brokers", "stop", "2", "-d", d])[0] == 0
    assert run(["produce", "t", "-p", "0", "-d", d], stdin=records[:290])[0] == 0  # offsets 1000..1099
    assert run(["brokers", "start", "2", "-d", d])[0] == 0
    code, out, err = run(["recover", "--dry-run", d])
    assert code == 0, out
    assert err.decode().endswith("nothing to do\n")
    assert b"producer snapshot 00000000000000001000.snapshot: stray: no segment starts at offset 1000, and the " \
           b"later snapshot 00000000000000001100.snapshot supersedes it (routine" in out


def test_a_clean_real_broker_dir_has_nothing_to_do_and_its_log_start_is_kafkas(tmp_path, capsys):
    d = _copy(KAFKA_DIR, tmp_path / "kafka-data")
    code, out, err = plog(capsys, "recover", "--dry-run", str(d / "oms_order_created-1"))
    assert code == 0, out
    assert "oms_order_created-1: nothing to do (recovery point 94646, log start 81908, log end 94646)" in out
    assert ("delete producer snapshot 00000000000000094005.snapshot: stray: no segment starts at offset 94005, and "
            "the later snapshot 00000000000000094646.snapshot supersedes it (routine") in out
    (d / ".kafka_cleanshutdown").unlink()
    code, out, _ = plog(capsys, "recover", "--dry-run", "--all", str(d / "oms_order_created-1"))
    assert "oms_order_created-1: recovery point 94646, log start 81908; revalidate from offset 0;" in out


def _damaged_zk_copy(tmp_path):
    """A real ZooKeeper-era broker dir (no clean-shutdown marker, recovery points at the active
    segments) with damage in segments below the recovery points: a .log cut mid-batch, bytes
    flipped in the middle of another, a deleted .index."""
    d = _copy(ZK_DIR, tmp_path / "zk")
    os.truncate(d / "invoice-0/00000000000000030626.log", 500_037)
    seg = d / "invoice-1/00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    for i in range(400_000, 400_010):
        data[i] ^= 0xFF
    seg.write_bytes(bytes(data))
    os.remove(d / "invoice-2/00000000000000000000.index")
    return d


def test_recover_names_the_damage_it_leaves_and_verify_says_a_broker_leaves_it_too(tmp_path, capsys):
    d = _damaged_zk_copy(tmp_path)
    code, out, _ = plog(capsys, "verify", str(d))
    damage = [line for line in out.splitlines() if " error[" in line]
    assert [line.split(": error[")[1].split("]")[0] for line in damage] == ["torn-tail", "index-entry", "crc"]
    assert all("a broker would not" in line and "below the recovery point" in line for line in damage)
    code, plan_out, err = plog(capsys, "recover", "--dry-run", str(d))
    assert code == 3
    untouched = [line.strip() for line in plan_out.splitlines() if line.strip().startswith("untouched ")]
    assert [line.split(":")[0] for line in untouched] == ["untouched 00000000000000030626.log at position 498410",
                                                         "untouched 00000000000000000000.log at position 397585"]
    assert all("it lies below the recovery point" in line and "plog recover --all --salvage" in line
               for line in untouched)
    # The segment without its .index is revalidated (Kafka's rule): not damage left behind.
    assert "revalidate 00000000000000000000.log (998418 bytes): no offset index" in plan_out
    code, out, err = plog(capsys, "recover", str(d))
    assert code == 3  # done, with damage left as it is: named, with its remedy
    assert [line.strip() for line in out.splitlines() if line.strip().startswith("untouched ")] == untouched
    assert "0 bytes truncated, 2 damaged segments left untouched (see above)" in err
    code, out, _ = plog(capsys, "recover", "--all", "--salvage", str(d))
    assert code == 0, out
    code, out, _ = plog(capsys, "verify", str(d))
    assert code == 0, out


def test_the_plan_says_what_a_truncation_costs_and_the_run_agrees(tmp_path, capsys):
    d = crashed_copy(tmp_path)
    seg = d / "oms_order_created-1" / "00000000000000081908.log"
    data = bytearray(seg.read_bytes())
    data[200_000] ^= 0xFF
    seg.write_bytes(bytes(data))
    part = str(d / "oms_order_created-1")
    code, out, _ = plog(capsys, "recover", "--dry-run", "--all", part, "--format", "json")
    (p,) = json.loads(out)["log_dirs"][0]["partitions"]
    loss = p["truncation"]["loss"]
    assert loss["records"] > 0 and loss["last_offset"] == 94645 and loss["salvage_keeps"] == loss["records"]
    code, out, _ = plog(capsys, "recover", "--dry-run", "--all", part)
    assert code == 3
    assert (f"loses {loss['records']} records at offsets {loss['first_offset']}..94645 in whole batches and "
            f"{loss['damaged_bytes']} damaged bytes") in out
    assert f"--salvage would keep {loss['records']} of the records these lose" in out
    rebuilt = len([a for a in p["index_rebuilds"] if a["action"] == "rebuild"])
    code, out, err = plog(capsys, "recover", "--all", part)
    assert code == 0, err
    assert f"loses {loss['records']} records" in out and f"; {rebuilt} index(es) rebuilt" in out


def test_checkpoint_entries_that_do_not_exist_are_said_in_words(tmp_path, capsys):
    d = crashed_copy(tmp_path)
    shutil.copytree(d / "oms_order_created-4", d / "junk-0")  # no checkpoint entry
    code, out, _ = plog(capsys, "recover", "--dry-run", str(d))
    assert code == 3
    assert "recovery-point-offset-checkpoint: junk-0 (no entry) -> 12456" in out
    assert "None" not in out

"""LogManager: lock, meta.properties, partition folders, checkpoints, clean shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from plog.engine.errors import InvalidTopicError, LogDirLockedError
from plog.engine.storage.log_manager import LogManager
from plog.engine.storage.file_names import TopicPartition
from plog.formats.checkpoints import parse_meta_properties, parse_offset_checkpoint, parse_partition_metadata
from plog.formats.record_batch import encode_batch

TS = 1700000000000


def batch(n=3, value=b"v"):
    return encode_batch([(i, TS + i, b"k%d" % i, value) for i in range(n)])


def test_create_append_close_reopen(tmp_path):
    d = tmp_path / "broker-1"
    with LogManager([d]) as lm:
        log = lm.get_or_create_log(("orders", 0), config={"segment.bytes": "4096"})
        for _ in range(50):
            log.append_as_leader(batch())
        lm.get_or_create_log(("orders", 1)).append_as_leader(batch())
        log.delete_records_before(30)
        assert lm.topic_config("orders").segment_bytes == 4096
    names = set(os.listdir(d))
    assert {".lock", "meta.properties", ".kafka_cleanshutdown", "recovery-point-offset-checkpoint",
            "log-start-offset-checkpoint", "replication-offset-checkpoint", "orders-0", "orders-1",
            ".plog-topics.json"} <= names
    meta = parse_meta_properties((d / "meta.properties").read_text())
    assert meta.version == 1 and meta.node_id == 1 and meta.directory_id
    rp = parse_offset_checkpoint((d / "recovery-point-offset-checkpoint").read_text())
    assert rp[("orders", 0)] == 150 and rp[("orders", 1)] == 3
    assert parse_offset_checkpoint((d / "log-start-offset-checkpoint").read_text()) == {("orders", 0): 30}
    pm = parse_partition_metadata((d / "orders-0" / "partition.metadata").read_text())
    assert pm.topic_id is not None
    assert not any(n.endswith(".tmp") for n in names)

    with LogManager([d]) as lm:
        assert lm.report.clean_shutdown[str(d.resolve())] is True
        log = lm.get_log(TopicPartition("orders", 0))
        assert (log.log_start_offset, log.log_end_offset) == (30, 150)
        assert not any(r.recovered_segments for r in lm.report.logs)
        assert lm.topic_config("orders").segment_bytes == 4096
        assert not (d / ".kafka_cleanshutdown").exists()  # deleted on open, as Kafka does


def test_unclean_shutdown_recovers_from_the_recovery_point(tmp_path):
    d = tmp_path / "b"
    lm = LogManager([d])
    log = lm.get_or_create_log(("t", 0), config={"segment.bytes": "2048"})
    for _ in range(40):
        log.append_as_leader(batch())
    lm.checkpoint()
    # simulate a crash: no close, no clean-shutdown marker; garbage at the tail
    with open(log.active_segment.log_path, "ab") as f:
        f.write(b"\x00" * 30 + b"garbage")
    lm._release_locks()
    with LogManager([d]) as again:
        assert again.report.clean_shutdown[str(d.resolve())] is False
        rec = again.get_log(("t", 0))
        assert rec.log_end_offset == 120
        report = again.report.logs[0]
        assert report.truncated_bytes == 37


def test_second_writer_is_refused(tmp_path):
    d = tmp_path / "b"
    with LogManager([d]):
        with pytest.raises(LogDirLockedError, match="Failed to acquire lock on file .lock in"):
            LogManager([d])
        code = textwrap.dedent(f"""
            from plog.engine.storage.log_manager import LogManager
            try:
                LogManager([{str(d)!r}])
            except Exception as e:
                print(type(e).__name__, e)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
        assert out.startswith("LogDirLockedError Failed to acquire lock") and out.count("\n") == 1


def test_topic_names_and_deletion(tmp_path):
    with LogManager([tmp_path / "b"]) as lm:
        for bad in ["", ".", "..", "a/b", "../etc", "x" * 250, "sp ace"]:
            with pytest.raises(InvalidTopicError):
                lm.get_or_create_log((bad, 0))
        lm.get_or_create_log(("gone", 0)).append_as_leader(batch())
        lm.delete_log(("gone", 0))
        assert not any(n.startswith("gone") for n in os.listdir(tmp_path / "b"))
        assert "gone" not in lm.topics()


def test_several_log_dirs_spread_partitions(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    with LogManager(dirs) as lm:
        for p in range(4):
            lm.get_or_create_log(("spread", p))
        placed = {lm.log_dir_of(("spread", p)).name for p in range(4)}
        assert placed == {"d1", "d2"}
    with LogManager(dirs) as lm:
        assert len(lm.logs) == 4


def test_a_checkpoint_that_already_holds_the_offsets_is_not_rewritten(tmp_path):
    """Each rewrite is a tmp file, two fsyncs and a rename: a manager that knows what the file
    holds (read at start-up or written since) skips the ones that would change nothing."""
    d = tmp_path / "broker-1"
    with LogManager([d]) as lm:
        lm.get_or_create_log(("t", 0)).append_as_leader(batch())
    files = [d / n for n in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                             "replication-offset-checkpoint")]
    inodes = {f: os.stat(f).st_ino for f in files}
    with LogManager([d]) as lm:
        lm.checkpoint()  # nothing moved: no file is replaced
        lm.checkpoint_high_watermarks()
        assert {f: os.stat(f).st_ino for f in files} == inodes
        lm.get_log(("t", 0)).append_as_leader(batch())
        lm.checkpoint_high_watermarks()  # the high watermark moved: rewritten
        hw = d / "replication-offset-checkpoint"
        assert os.stat(hw).st_ino != inodes[hw]
        assert parse_offset_checkpoint(hw.read_text()) == {("t", 0): 6}
        inodes[hw] = os.stat(hw).st_ino
        lm.checkpoint_high_watermarks()
        assert os.stat(hw).st_ino == inodes[hw]
    # Closed: the recovery point moved (the close flushed), the rest did not.
    assert parse_offset_checkpoint((d / "recovery-point-offset-checkpoint").read_text()) == {("t", 0): 6}
    assert os.stat(d / "log-start-offset-checkpoint").st_ino == inodes[d / "log-start-offset-checkpoint"]
    assert os.stat(d / "replication-offset-checkpoint").st_ino == inodes[d / "replication-offset-checkpoint"]

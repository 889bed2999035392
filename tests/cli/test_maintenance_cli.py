"""plog retention / compact / maintain through the CLI entry point (``cli.main.main``, so errors
and exit codes go through the one error boundary), on copies of real Kafka log directories
and on plog data directories; and the engine running due maintenance by itself."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from cli_run import plog, tree_digest
from conftest import CORPUS
from plog.engine.storage.checkpoints import OffsetCheckpointFile
from plog.engine.cluster.data_dir import DataDir
from plog.engine.storage.lock import LogDirLock
from plog.engine.storage.file_names import TopicPartition
from plog.formats.record_batch import encode_batch

KAFKA_DIR = CORPUS / "ArthurArutunyan04__Backend_labs" / "kafka-data"
DAY = 86_400_000


@pytest.fixture
def kafka_dir(tmp_path):
    target = tmp_path / "kafka-data"
    shutil.copytree(KAFKA_DIR, target)
    return target


def test_retention_dry_run_changes_nothing_and_explains(kafka_dir, capsys):
    before = tree_digest(kafka_dir)
    code, out, err = plog(capsys, "retention", str(kafka_dir), "--dry-run", "--explain", "-t", "oms_order_created")
    assert code == 0, err
    assert tree_digest(kafka_dir) == before
    # retention.ms=86400000 comes from the topic's ConfigRecord in __cluster_metadata-0.
    assert "config retention.ms=86400000 (topic config (metadata log))" in out
    assert out.count("[DELETE by retention.ms]") == 5
    assert "oms_order_created-0 [retention]: would delete 1 segment(s)" in out
    assert "5 partition operations, 5 would change" in err


def test_retention_deletes_and_updates_checkpoints(kafka_dir, capsys):
    code, out, err = plog(capsys, "retention", str(kafka_dir), "-t", "oms_order_created", "--delete-delay-ms", "0",
                          "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["dry_run"] is False and report["has_work"] is True
    p0 = next(p for p in report["partitions"] if p["partition"] == "oms_order_created-0")
    assert p0["result"]["new_log_start_offset"] == 12427
    assert sorted(os.listdir(kafka_dir / "oms_order_created-0")) == [
        "00000000000000012427.index", "00000000000000012427.log", "00000000000000012427.snapshot",
        "00000000000000012427.timeindex", "leader-epoch-checkpoint", "partition.metadata"]
    # Kafka checkpoints a log start offset only above the first segment's base; here the
    # first remaining segment starts at the new log start offset.
    starts = OffsetCheckpointFile(kafka_dir / "log-start-offset-checkpoint").read()
    assert TopicPartition("oms_order_created", 0) not in starts
    points = OffsetCheckpointFile(kafka_dir / "recovery-point-offset-checkpoint").read()
    assert points[TopicPartition("oms_order_created", 0)] == 12427
    assert (kafka_dir / ".kafka_cleanshutdown").exists()
    code, out, _ = plog(capsys, "verify", str(kafka_dir))
    assert code == 0
    # A second run has nothing left to do.
    code, out, err = plog(capsys, "retention", str(kafka_dir), "-t", "oms_order_created")
    assert code == 0 and "0 changed" in err


def test_retention_flags_override_and_delete_delay(kafka_dir, capsys):
    # retention.ms -1 (infinite) from the command line wins over the topic's 1 day.
    code, out, _ = plog(capsys, "retention", str(kafka_dir), "-t", "oms_order_created", "--retention-ms", "-1",
                        "--dry-run")
    assert code == 0 and "would delete" not in out
    code, out, _ = plog(capsys, "retention", str(kafka_dir / "oms_order_created-1"))
    assert code == 0 and "1 *.deleted file(s) removed" not in out
    part = kafka_dir / "oms_order_created-1"
    pending = sorted(n for n in os.listdir(part) if n.endswith(".deleted"))
    assert pending == ["00000000000000081908.index.deleted", "00000000000000081908.log.deleted",
                       "00000000000000081908.timeindex.deleted"]
    # The next run opens the log for writing and, as a broker's start-up does, removes them.
    code, out, _ = plog(capsys, "retention", str(part))
    assert code == 0
    assert not [n for n in os.listdir(part) if n.endswith(".deleted")]


def test_errors_are_one_line(kafka_dir, tmp_path, capsys):
    code, _, err = plog(capsys, "retention", str(tmp_path / "missing"))
    assert code == 1 and err.startswith("plog: error:") and err.count("\n") == 1
    code, _, err = plog(capsys, "retention", str(kafka_dir), "--now", "yesterday-ish")
    assert code == 2 and "--now" in err
    code, _, err = plog(capsys, "compact", str(kafka_dir), "--buffer-size", "lots")
    assert code == 2 and "--buffer-size" in err
    code, _, err = plog(capsys, "retention", str(kafka_dir), "-t", "no-such-topic")
    assert code == 1 and "no partition of topic no-such-topic" in err
    lock = LogDirLock(kafka_dir)
    try:
        before = tree_digest(kafka_dir)
        code, _, err = plog(capsys, "retention", str(kafka_dir))
        assert code == 1 and err.count("\n") == 1 and "stop the broker" in err
        assert tree_digest(kafka_dir) == before
    finally:
        lock.release()
    props = tmp_path / "server.properties"
    props.write_text("log.retention.hours=forever\n")
    code, _, err = plog(capsys, "retention", str(kafka_dir), "--server-properties", str(props), "--dry-run")
    assert code == 1 and "log.retention.hours" in err and err.count("\n") == 1


def test_server_properties_are_the_defaults(kafka_dir, tmp_path, capsys):
    props = tmp_path / "server.properties"
    props.write_text("log.retention.bytes=1000\n")
    code, out, _ = plog(capsys, "retention", str(kafka_dir), "-t", "oms_order_status_changed",
                        "--server-properties", str(props), "--dry-run", "--explain", "--retention-ms", "-1")
    assert code == 0
    assert "config retention.bytes=1000 (server.properties)" in out
    # Kafka deletes a segment by size only when the partition stays at or over the limit
    # without it: the one segment of 290 KiB stays.
    assert "so deleting it would go below the limit; retention by size stops here" in out


def _old_batches(n, *, start_ts, step=1000, size=200):
    return [encode_batch([(0, start_ts + i * step, b"k%d" % i, b"v" * size)]) for i in range(n)]


def test_the_engine_runs_retention_when_a_writer_lets_go(tmp_path):
    d = DataDir.init(tmp_path / "data", brokers=2)
    d.create_topic("old", 1, 2, configs={"retention.ms": str(DAY), "segment.bytes": "1024",
                                         "file.delete.delay.ms": "0"})
    tp = TopicPartition("old", 0)
    now = int(time.time() * 1000)
    # Creating the topic ran a check (a fresh directory is due at once); the next is due
    # log.retention.check.interval.ms (5 minutes) later: this writer changes nothing.
    with d.writer() as w:
        for batch in _old_batches(20, start_ts=now - 10 * DAY):
            w.append(tp, batch)
        for batch in _old_batches(3, start_ts=now):
            w.append(tp, batch)
    log = d.open_reader(tp, 1)
    try:
        assert (log.log_start_offset, log.log_end_offset) == (0, 23)
    finally:
        log.close()
    with d.update() as metadata:
        metadata.broker_configs["log.retention.check.interval.ms"] = "0"
    d.reload()
    with d.writer() as w:
        w.append(tp, _old_batches(1, start_ts=now)[0])
    # Both replicas: every segment older than a day is gone. (The first recent record,
    # 10 days after the segment's first timestamp, rolled a new segment at offset 20:
    # segment.ms is 7 days.)
    for broker in (1, 2):
        log = d.open_reader(tp, broker)
        try:
            assert log.log_start_offset == 20
            assert [r.offset for r in log.read_records()] == [20, 21, 22, 23]
        finally:
            log.close()
        state = json.loads((d.broker_log_dir(broker) / ".plog-maintenance.json").read_text())
        assert state["last_retention_ms"] >= now
        assert not [n for n in os.listdir(d.partition_path(tp, broker)) if n.endswith(".deleted")]


def test_maintain_on_a_data_dir(tmp_path, capsys):
    d = DataDir.init(tmp_path / "data", brokers=1)
    d.create_topic("old", 1, 1, configs={"retention.ms": str(DAY), "segment.bytes": "1024"})
    now = int(time.time() * 1000)
    with d.writer() as w:
        w.maintenance = False
        for batch in _old_batches(10, start_ts=now - 10 * DAY):
            w.append(TopicPartition("old", 0), batch)
    code, out, err = plog(capsys, "maintain", "-d", str(tmp_path / "data"), "--dry-run")
    assert code == 0 and "old-0 [retention]: would delete" in out
    code, out, err = plog(capsys, "maintain", "-d", str(tmp_path / "data"))
    assert code == 0 and "old-0 [retention]: deleted" in out
    code, out, _ = plog(capsys, "verify", str(tmp_path / "data"))
    assert code == 0, out


def _keyed(d, topic, n_keys, rounds, *, tombstone_every=0):
    with d.writer() as w:
        w.maintenance = False
        for r in range(rounds):
            for k in range(n_keys):
                value = None if tombstone_every and r == rounds - 1 and k % tombstone_every == 0 else b"v%d-%d" % (r, k)
                w.append(TopicPartition(topic, 0), encode_batch([(0, 1_700_000_000_000, b"key%d" % k, value)]))


def test_compact_plan_then_clean(tmp_path, capsys):
    d = DataDir.init(tmp_path / "data", brokers=1)
    d.create_topic("users", 1, 1, configs={"cleanup.policy": "compact", "segment.bytes": "2048"})
    _keyed(d, "users", 10, 8, tombstone_every=5)
    path = str(tmp_path / "data")
    before = tree_digest(path)
    code, out, err = plog(capsys, "compact", path, "--dry-run", "--explain")
    assert code == 0, err
    assert tree_digest(path) == before
    assert "users-0 [compaction]: would clean offsets 0.." in out
    assert "config cleanup.policy=compact (topic config (plog))" in out
    assert "tombstones would get a delete horizon" in out
    code, out, err = plog(capsys, "compact", path, "--format", "json")
    assert code == 0, err
    (p,) = json.loads(out)["partitions"]
    assert p["has_work"] and p["result"]["cleaned"]
    checkpoint = OffsetCheckpointFile(tmp_path / "data" / "broker-1" / "cleaner-offset-checkpoint").read()
    assert checkpoint[TopicPartition("users", 0)] == p["result"]["checkpoint_offset"] > 0
    # Below the cleaner checkpoint only the last record of each key is left.
    log = d.open_reader(TopicPartition("users", 0))
    try:
        cleaned = [r for r in log.read_records() if r.offset < p["result"]["checkpoint_offset"]]
    finally:
        log.close()
    keys = [r.key for r in cleaned]
    assert len(keys) == len(set(keys))
    code, out, _ = plog(capsys, "verify", path)
    assert code == 0, out
    # Nothing dirty is left: the next run does not qualify.
    code, out, _ = plog(capsys, "compact", path)
    assert code == 0 and "not cleaned: " in out


def test_retention_and_compaction_of_a_compact_delete_topic(tmp_path, capsys):
    d = DataDir.init(tmp_path / "data", brokers=1)
    d.create_topic("both", 1, 1, configs={"cleanup.policy": "compact,delete", "segment.bytes": "2048",
                                          "retention.ms": str(DAY)})
    _keyed(d, "both", 10, 6)
    code, out, err = plog(capsys, "maintain", "-d", str(tmp_path / "data"), "--quiet")
    assert code == 0, err
    lines = out.splitlines()
    # The cleaner runs first, then retention (Kafka's cleaner thread handles compact,delete logs).
    assert lines[0].startswith("both-0 [compaction]: cleaned in 1 round(s)")
    # The records are from 2023, but the first segment was cleaned to nothing: an empty
    # segment's "largest timestamp" is its file's mtime, so time-based retention stops there,
    # exactly as a broker's would.
    assert lines[1].startswith("both-0 [retention]: nothing to delete (00000000000000000000.log: kept:")
    assert "(mtime)" in lines[1] or "no record timestamps" in lines[1]


def test_init_broker_configs(tmp_path, capsys):
    d = str(tmp_path / "data")
    code, _, err = plog(capsys, "init", "-d", d, "--broker-config", "log.retention.check.interval.ms=0",
                        "--broker-config", "log.cleaner.enable=false")
    assert code == 0, err
    assert DataDir.open(d).metadata.broker_configs == {"log.retention.check.interval.ms": "0",
                                                       "log.cleaner.enable": "false"}
    code, _, err = plog(capsys, "init", "-d", str(tmp_path / "d2"), "--broker-config", "log.cleaner.threads=2")
    assert code == 1 and "unknown broker config 'log.cleaner.threads'" in err and err.count("\n") == 1
    code, _, err = plog(capsys, "init", "-d", str(tmp_path / "d3"), "--broker-config", "log.cleaner.enable=maybe")
    assert code == 1 and "log.cleaner.enable must be true or false" in err
    assert not (tmp_path / "d2" / "cluster.json").exists() and not (tmp_path / "d3" / "cluster.json").exists()


@pytest.mark.parametrize("command", ["retention", "compact", "maintain"])
def test_damage_is_not_cut_as_a_side_effect_of_maintenance(tmp_path, capsys, command):
    """A log directory that was not shut down cleanly is recovered first, as a broker starts;
    when that recovery would cut data (here a segment of random bytes), the command refuses in
    one line pointing at plog recover, and nothing is written: no truncation, no .lock, no
    checkpoints, no meta.properties."""
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(os.urandom(5000))
    before = tree_digest(tmp_path / "logs")
    code, out, err = plog(capsys, command, str(part))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("plog: error: ")
    assert "was not shut down cleanly" in lines[0] and "t-0: truncate 00000000000000000000.log at byte 0" in lines[0]
    assert "plog recover --dry-run" in lines[0]
    assert tree_digest(tmp_path / "logs") == before


def test_a_crashed_writer_is_recovered_without_loss_and_maintained(tmp_path, capsys):
    """What a killed writer leaves (no clean-shutdown marker, untrimmed indexes, whole batches)
    recovers without cutting anything, so maintenance goes on; a log directory with no
    meta.properties is not given one (a broker would refuse a cluster.id not its own)."""
    log_dir = tmp_path / "logs"
    part = log_dir / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(
        encode_batch([(i, int(time.time() * 1000), b"k", b"v%d" % i) for i in range(10)]))
    code, out, err = plog(capsys, "retention", str(log_dir))
    assert code == 0, err
    assert "not shut down cleanly; recovered 1 partition(s) first" in out + err
    assert (part / "00000000000000000000.log").stat().st_size > 0
    assert not (log_dir / "meta.properties").exists()
    assert (log_dir / ".kafka_cleanshutdown").exists()

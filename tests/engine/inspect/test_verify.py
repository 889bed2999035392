"""``plog.engine.inspect.verify``: the corpus verifies clean; each kind of damage is named with its file
and position; warnings are what a broker handles by itself; the walk resynchronises.

Damaged copies are made from a small log directory written by plog's own ``LogManager``
(two partitions of an idempotent producer's batches in three segments each, with offset and
time indexes, producer snapshots, leader-epoch checkpoints, partition.metadata and the
log-directory checkpoints, shut down cleanly), copied into ``tmp_path`` for every test.
"""

from __future__ import annotations

import os
import shutil
import struct
import tracemalloc
import uuid
from pathlib import Path

import pytest
from conftest import CORPUS

from plog.engine.storage import discovery
from plog.engine.inspect import verify as V
from plog.engine.inspect.verify import ERROR, WARNING, VerifyOptions, VerifyStats, verify_paths
from plog.formats.checkpoints import format_offset_checkpoint
from plog.formats.indexes import encode_aborted_txn
from plog.formats.producer_snapshot import ProducerSnapshotEntry, encode_snapshot
from plog.formats.record_batch import encode_batch

BATCH = 705  # bytes of each batch the fixture writes (4 records of a 150-byte value)
SEG0 = "orders-0/00000000000000000000"  # 28 batches, offsets 0..111
ACTIVE0 = "orders-0/00000000000000000224"  # the active segment: 4 batches, offsets 224..239


def corpus_log_dirs() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    found = []
    for top in sorted(CORPUS.iterdir()):
        if top.name == "vectors" or not top.is_dir():
            continue
        found += [Path(ld.path) for ld in discovery.log_dirs(str(top))]
    return found


def build_log_dir(root: Path) -> Path:
    from plog.engine.storage.log_manager import LogManager

    config = {"segment.bytes": "20000", "index.interval.bytes": "1000", "plog.fsync.on.produce": "false"}
    with LogManager([root], cluster_id="verify-test") as lm:
        for partition in range(2):
            log = lm.get_or_create_log(("orders", partition), config=config, topic_id=uuid.UUID(int=7))
            ts = 1_700_000_000_000
            for i in range(60):
                records = [(j, ts + j, b"k%d" % j, b"v" * 150) for j in range(4)]
                log.append_as_leader(encode_batch(records, producer_id=1000 + partition, producer_epoch=0,
                                                  base_sequence=i * 4))
                ts += 10
    os.remove(root / ".lock")
    return root


@pytest.fixture(scope="session")
def pristine(tmp_path_factory) -> Path:
    return build_log_dir(tmp_path_factory.mktemp("verify") / "logdir")


@pytest.fixture
def logdir(pristine, tmp_path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "logdir"))


def run(*paths, **kw) -> tuple[list[V.Finding], VerifyStats]:
    stats = VerifyStats()
    findings = list(verify_paths([str(p) for p in paths], kw.pop("options", None), stats=stats, **kw))
    return findings, stats


def errors(findings) -> list[V.Finding]:
    return [f for f in findings if f.severity == ERROR]


def patch(path: Path, offset: int, data: bytes) -> None:
    buf = bytearray(path.read_bytes())
    buf[offset:offset + len(data)] = data
    path.write_bytes(bytes(buf))


def flip(path: Path, offset: int, mask: int = 0x10) -> None:
    buf = bytearray(path.read_bytes())
    buf[offset] ^= mask
    path.write_bytes(bytes(buf))


# -- clean input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("log_dir", corpus_log_dirs(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_corpus_log_dir_verifies_without_errors(corpus, log_dir):
    findings, stats = run(log_dir)
    assert errors(findings) == [] and stats.errors == 0
    assert stats.log_dirs == 1 and stats.partitions >= 1 and stats.files > 0


def test_corpus_counts_match_the_readme_walk(corpus):
    """Batches counted by the walk equal the corpus README's independent header walk."""
    seg = CORPUS / "William0423__kafka/kafka-logs/__consumer_offsets-28/00000000000000000000.log"
    findings, stats = run(seg)
    assert errors(findings) == [] and stats.batches == 8202 and stats.segments == 1


def test_built_log_dir_is_clean(logdir):
    findings, stats = run(logdir)
    assert findings == []
    assert (stats.log_dirs, stats.partitions, stats.segments, stats.batches) == (1, 2, 6, 120)


def test_small_chunks_and_index_chunks_give_the_same_result(logdir, monkeypatch):
    # Every batch boundary straddles a 64 KiB buffer somewhere, and index entries come in
    # chunks of 2: the chunked paths agree with the one-read path, on clean and damaged data.
    flip(logdir / f"{SEG0}.log", 5000)
    patch(logdir / f"{SEG0}.index", 36, struct.pack(">i", 7057))
    expected, _ = run(logdir)
    monkeypatch.setattr(V, "INDEX_CHUNK_BYTES", 24)
    assert run(logdir, options=VerifyOptions(chunk_size=1))[0] == expected
    assert [f.check for f in expected] == ["crc", "index-entry"]


# -- the .log ------------------------------------------------------------------------------------


def test_bit_flip_in_a_batch_is_one_crc_error_and_the_walk_goes_on(logdir):
    flip(logdir / f"{SEG0}.log", 7 * BATCH + 300)
    findings, stats = run(logdir)
    assert [(f.check, f.path, f.position, f.offset) for f in findings] == [
        ("crc", str(logdir / f"{SEG0}.log"), 7 * BATCH, 28)]
    assert "offsets 28..31" in findings[0].message and "CRC-32C mismatch" in findings[0].message
    assert stats.batches == 119  # every other batch was walked


def test_damaged_length_field_resynchronises_on_the_next_valid_batch(logdir):
    flip(logdir / f"{SEG0}.log", 3 * BATCH + 10, 0x40)  # batchLength of batch 3
    findings, stats = run(logdir)
    assert [(f.check, f.position) for f in findings] == [("framing", 3 * BATCH)]
    assert f"positions {3 * BATCH}..{4 * BATCH - 1}" in findings[0].message
    assert f"resynchronised on the valid batch at position {4 * BATCH}" in findings[0].message
    assert stats.batches == 119


def test_garbage_in_the_middle_is_one_finding_for_the_whole_range(logdir):
    patch(logdir / f"{SEG0}.log", 5 * BATCH, os.urandom(3 * BATCH - 7) + b"\xff" * 7)
    findings, stats = run(logdir)
    assert [(f.check, f.position) for f in findings] == [("framing", 5 * BATCH)]
    assert f"{3 * BATCH} bytes" in findings[0].message
    # index entries inside the damaged range are not reported on top of it
    assert stats.batches == 117


def test_truncated_tail_is_a_torn_tail_not_mid_file_corruption(logdir):
    os.truncate(logdir / f"{ACTIVE0}.log", 2 * BATCH + 100)
    findings, _ = run(logdir)
    torn = [f for f in findings if f.check == "torn-tail"]
    assert [(f.severity, f.path, f.position) for f in torn] == [(ERROR, str(logdir / f"{ACTIVE0}.log"), 2 * BATCH)]
    assert "runs past the end of the file (100 bytes left)" in torn[0].message
    assert not [f for f in findings if f.check in ("crc", "framing")]
    # the lost batches take the log end offset below the recovery point
    assert [f.check for f in errors(findings)] == ["torn-tail", "checkpoint-recovery-point"]


def test_garbage_appended_after_the_last_batch_is_a_torn_tail(logdir):
    with open(logdir / f"{SEG0}.log", "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x70\x00\x00\x00\x50garbage-garbage-garbage")
    findings, _ = run(logdir)
    assert [(f.check, f.position) for f in findings] == [("torn-tail", 28 * BATCH)]


def test_bad_crc_of_the_last_batch_is_a_torn_tail(logdir):
    flip(logdir / f"{ACTIVE0}.log", 3 * BATCH + 500)
    findings, _ = run(logdir)
    assert [(f.check, f.position, f.offset) for f in findings][0] == ("torn-tail", 3 * BATCH, 236)
    # the log now ends at 236: what was checkpointed at 240 is past it
    assert [f.check for f in findings[1:]] == ["snapshot-offset", "checkpoint-recovery-point",
                                               "checkpoint-high-watermark"]


def test_zero_filled_tail_of_the_active_segment_is_a_warning(logdir):
    with open(logdir / f"{ACTIVE0}.log", "ab") as f:
        f.write(bytes(50000))
    findings, stats = run(logdir)
    assert [(f.severity, f.check, f.position) for f in findings] == [(WARNING, "torn-tail", 4 * BATCH)]
    assert stats.errors == 0
    # ... but an error in a segment that is not the active one
    with open(logdir / f"{SEG0}.log", "ab") as f:
        f.write(bytes(1000))
    findings, _ = run(logdir)
    assert [(f.severity, f.check) for f in errors(findings)] == [(ERROR, "torn-tail")]


def test_base_offset_outside_the_crc_is_an_offsets_error_without_a_cascade(logdir):
    patch(logdir / f"{SEG0}.log", 3 * BATCH, struct.pack(">q", 1 << 40))
    findings, _ = run(logdir)
    assert [(f.check, f.position, f.offset) for f in findings] == [("offsets", 3 * BATCH, 1 << 40)]
    assert "reaches the next segment's base offset 112" in findings[0].message


def test_offsets_going_backwards_are_reported_once(logdir):
    patch(logdir / f"{SEG0}.log", 10 * BATCH, struct.pack(">q", 20))  # batch 10 holds 40..43
    findings, _ = run(logdir)
    offsets = [f for f in findings if f.check == "offsets"]
    assert [(f.position, f.offset) for f in offsets] == [(10 * BATCH, 20)]
    assert "not above the last offset 39 of the previous batch" in offsets[0].message


def test_hostile_length_field_does_not_allocate(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    header = struct.pack(">qiib", 0, 0x7FFFFFF0, 0, 2) + bytes(44)
    (part / "00000000000000000000.log").write_bytes(header + os.urandom(4000))
    tracemalloc.start()
    findings, _ = run(part)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [f.check for f in errors(findings)] == ["torn-tail"]
    assert peak < 4 << 20


def test_batch_larger_than_the_read_buffer_is_crc_checked_in_pieces(tmp_path):
    part = tmp_path / "big-0"
    part.mkdir()
    big = encode_batch([(i, 1000 + i, None, os.urandom(1000)) for i in range(200)])  # ~200 KB
    small = encode_batch([(200, 5000, None, b"x")], base_offset=200)
    log = part / "00000000000000000000.log"
    log.write_bytes(big + small)
    options = VerifyOptions(chunk_size=V.MIN_CHUNK_SIZE)
    findings, stats = run(part, options=options)
    assert errors(findings) == [] and stats.batches == 2
    flip(log, len(big) // 2)
    findings, _ = run(part, options=options)
    assert [(f.check, f.position) for f in errors(findings)] == [("crc", 0)]


# -- indexes -------------------------------------------------------------------------------------


def test_index_entry_not_at_a_batch_boundary(logdir):
    patch(logdir / f"{SEG0}.index", 4 * 8 + 4, struct.pack(">i", 7057))
    findings, _ = run(logdir)
    assert [(f.check, f.path, f.position, f.offset) for f in findings] == [
        ("index-entry", str(logdir / f"{SEG0}.index"), 32, 43)]
    assert "position 7057" in findings[0].message and "does not point at the start of a batch" in findings[0].message


def test_index_entry_with_a_wrong_offset(logdir):
    patch(logdir / f"{SEG0}.index", 4 * 8, struct.pack(">i", 73))  # entry 4: offset 43 -> 73
    findings, _ = run(logdir)
    assert [(f.check, f.position, f.offset) for f in findings][0] == ("index-entry", 32, 73)
    assert all(f.check == "index-entry" for f in findings)


def test_index_entry_past_the_end_of_the_log(logdir):
    with open(logdir / f"{SEG0}.index", "ab") as f:
        f.write(struct.pack(">ii", 200, 90000))
    findings, _ = run(logdir)
    assert [(f.check, f.position, f.offset) for f in findings] == [("index-entry", 13 * 8, 200)]
    assert "points past the end of the log (19740 bytes)" in findings[0].message


def test_index_length_not_a_multiple_of_the_entry_size(logdir):
    with open(logdir / f"{SEG0}.index", "ab") as f:
        f.write(b"\x01\x02\x03")
    findings, _ = run(logdir)
    assert [(f.check, f.position) for f in findings] == [("index-sanity", 13 * 8)]
    assert "neither positive nor a multiple of 8" in findings[0].message


def test_follower_style_index_entries_are_accepted(logdir):
    """A follower indexes a fetched chunk: (last offset of the chunk, chunk start)."""
    log = (logdir / f"{SEG0}.log").read_bytes()
    entries = b"".join(struct.pack(">ii", 4 * k + 11, k * BATCH) for k in range(2, 26, 3))  # 3 batches per chunk
    (logdir / f"{SEG0}.index").write_bytes(entries)
    assert len(log) == 28 * BATCH
    assert run(logdir)[0] == []


def test_time_index_entry_out_of_order(logdir):
    path = logdir / f"{SEG0}.timeindex"
    buf = bytearray(path.read_bytes())
    buf[24:36], buf[36:48] = buf[36:48], buf[24:36]
    path.write_bytes(bytes(buf))
    findings, _ = run(logdir)
    assert [(f.check, f.path, f.position) for f in findings] == [("timeindex-order", str(path), 36)]


def test_time_index_timestamp_not_the_batch_max(logdir):
    path = logdir / f"{SEG0}.timeindex"
    patch(path, 36, struct.pack(">q", 1_700_000_000_090))  # still increasing, but not batch 8's max
    findings, _ = run(logdir)
    assert [(f.check, f.position, f.offset) for f in findings] == [("timeindex-timestamp", 36, 35)]
    assert "has max timestamp 1700000000083" in findings[0].message


def test_time_index_offset_past_the_segment(logdir):
    with open(logdir / f"{SEG0}.timeindex", "ab") as f:
        f.write(struct.pack(">qi", 1_800_000_000_000, 150))
    findings, _ = run(logdir)
    assert [(f.check, f.offset) for f in findings] == [("timeindex-entry", 150)]


def test_time_index_entry_inside_a_batch_is_accepted(logdir):
    """Kafka <= 3.6 indexed the exact record offset of an uncompressed batch's max timestamp."""
    path = logdir / f"{SEG0}.timeindex"
    patch(path, 12 + 8, struct.pack(">i", 18))  # entry 1: offset 19 -> 18, same batch 16..19
    assert run(logdir)[0] == []


def test_preallocated_index_tails_are_warnings(logdir):
    with open(logdir / f"{ACTIVE0}.timeindex", "ab") as f:
        f.write(bytes(12 * 1000))
    with open(logdir / f"{ACTIVE0}.index", "ab") as f:
        f.write(bytes(8 * 1000))
    findings, stats = run(logdir)
    assert sorted((f.severity, f.check, f.path) for f in findings) == [
        (WARNING, "index-preallocated", str(logdir / f"{ACTIVE0}.index")),
        (WARNING, "index-preallocated", str(logdir / f"{ACTIVE0}.timeindex")),
    ]
    assert stats.errors == 0
    timeindex = next(f for f in findings if f.path.endswith(".timeindex"))
    assert timeindex.position == 24 and "1000 of 1002 entries" in timeindex.message
    assert "sanity-check fails" in timeindex.message


def test_missing_indexes_are_warnings(logdir):
    os.remove(logdir / f"{SEG0}.index")
    os.remove(logdir / f"{SEG0}.timeindex")
    findings, stats = run(logdir)
    assert sorted(f.check for f in findings) == ["index-missing", "timeindex-missing"]
    assert stats.errors == 0 and stats.warnings == 2


def test_txn_index_entries(logdir):
    path = logdir / f"{SEG0}.txnindex"
    path.write_bytes(encode_aborted_txn(5, 10, 20, 21) + encode_aborted_txn(5, 30, 500, 501) + b"\x00" * 5)
    findings, _ = run(logdir)
    assert [(f.severity, f.check, f.position) for f in findings] == [
        (WARNING, "txnindex-partial", 68), (ERROR, "txnindex-entry", 34)]
    assert "past the segment's last offset 111" in findings[1].message


# -- snapshots, checkpoints, partition files -----------------------------------------------------


def test_corrupt_snapshot(logdir):
    path = logdir / "orders-0/00000000000000000112.snapshot"
    flip(path, 20, 1)
    findings, _ = run(logdir)
    assert [(f.check, f.path, f.position, f.offset) for f in findings] == [("snapshot-crc", str(path), 2, 112)]
    assert findings[0].message.startswith("Snapshot is corrupt (CRC is no longer valid)")


def test_snapshot_entry_at_or_after_the_snapshot_offset(logdir):
    path = logdir / "orders-0/00000000000000000112.snapshot"
    path.write_bytes(encode_snapshot([ProducerSnapshotEntry(1000, 0, 500, 150, 3, 1, -1, -1)]))
    findings, _ = run(logdir)
    assert [(f.check, f.position, f.offset) for f in findings] == [("snapshot-entry", 10, 150)]


def test_recovery_point_above_the_log_end(logdir):
    cp = logdir / "recovery-point-offset-checkpoint"
    cp.write_text(format_offset_checkpoint({("orders", 0): 999, ("orders", 1): 240}))
    findings, _ = run(logdir)
    assert [(f.check, f.path, f.offset) for f in findings] == [("checkpoint-recovery-point", str(cp), 999)]
    assert findings[0].position == cp.read_text().index("orders 0")
    # verifying the partition folder alone still reads its log directory's checkpoints
    assert [f.check for f in run(logdir / "orders-0")[0]] == ["checkpoint-recovery-point"]


def test_log_start_offset_outside_the_log(logdir):
    cp = logdir / "log-start-offset-checkpoint"
    cp.write_text(format_offset_checkpoint({("orders", 0): 241}))
    assert [(f.severity, f.check) for f in run(logdir)[0]] == [(ERROR, "checkpoint-log-start-offset")]
    cp.write_text(format_offset_checkpoint({("orders", 0): 240, ("orders", 1): 100}))  # = LEO, inside: normal
    assert run(logdir)[0] == []


def test_checkpoint_listing_a_partition_without_a_folder_is_a_warning(logdir):
    cp = logdir / "recovery-point-offset-checkpoint"
    cp.write_text(format_offset_checkpoint({("orders", 0): 240, ("orders", 1): 240, ("gone", 3): 5}))
    findings, stats = run(logdir)
    assert [(f.severity, f.check, f.path) for f in findings] == [(WARNING, "checkpoint-partition-missing", str(cp))]
    assert "gone-3" in findings[0].message and stats.errors == 0


def test_malformed_checkpoint(logdir):
    (logdir / "replication-offset-checkpoint").write_text("0\n2\norders 0 240\n")
    findings, _ = run(logdir)
    assert [f.check for f in findings] == ["checkpoint-format"]
    assert "Expected [2] entries" in findings[0].message


def test_missing_partition_metadata(logdir):
    os.remove(logdir / "orders-1/partition.metadata")
    findings, _ = run(logdir)
    assert [(f.severity, f.check, f.path) for f in findings] == [
        (ERROR, "partition-metadata-missing", str(logdir / "orders-1/partition.metadata"))]


def test_leader_epoch_checkpoint_above_the_log_end(logdir):
    path = logdir / "orders-0/leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n3 300\n")
    findings, _ = run(logdir)
    assert [(f.severity, f.check, f.position, f.offset) for f in findings] == [
        (ERROR, "leader-epoch-checkpoint", 8, 300)]
    os.remove(logdir / ".kafka_cleanshutdown")  # after a crash the broker truncates such entries
    findings, _ = run(logdir)
    assert sorted((f.severity, f.check) for f in findings) == [
        (WARNING, "clean-shutdown-missing"), (WARNING, "leader-epoch-checkpoint")]


def test_warnings_only(logdir):
    os.remove(logdir / ".kafka_cleanshutdown")
    os.remove(logdir / f"{ACTIVE0}.index")
    (logdir / "orders-1/00000000000000000000.log.deleted").write_bytes(b"")
    os.remove(logdir / "orders-1/00000000000000000112.log")  # its indexes are now orphans
    findings, stats = run(logdir)
    assert stats.errors == 0
    assert sorted({f.check for f in findings}) == ["clean-shutdown-missing", "in-flight-file", "index-missing",
                                                   "orphan-index"]


# -- paths and the API ---------------------------------------------------------------------------


def test_segment_paths(logdir):
    flip(logdir / f"{SEG0}.log", 5000)
    for suffix in (".log", ".index", ".timeindex"):
        findings, stats = run(logdir / f"{SEG0}{suffix}")
        assert [f.check for f in findings] == ["crc"] and stats.segments == 1
    findings, stats = run(logdir / "orders-0/00000000000000000112.snapshot")
    assert findings == [] and stats.files == 1
    with pytest.raises(discovery.NotAKafkaPathError):
        run(logdir / "orders-0/partition.metadata")
    with pytest.raises(FileNotFoundError):
        run(logdir / "nowhere")


def test_verify_partition_and_segment_api(logdir):
    info = discovery.scan_partition(str(logdir / "orders-0"))
    stats = VerifyStats()
    assert list(V.verify_partition(info, stats=stats)) == [] and stats.segments == 3
    seg = info.segments[0]
    flip(Path(seg.log), 5000)
    findings = list(V.verify_segment(seg, is_last=False, next_base_offset=info.segments[1].base_offset))
    assert [f.check for f in findings] == ["crc"]
    finding = findings[0]
    assert finding.format_text() == f"{seg.log}:4935: error[crc]: {finding.message}"
    assert finding.to_dict() == {"severity": "error", "check": "crc", "path": seg.log, "position": 4935,
                                 "offset": 28, "message": finding.message}


def test_parallel_jobs_give_the_same_findings_in_the_same_order(logdir):
    flip(logdir / f"{SEG0}.log", 5000)
    flip(logdir / "orders-1/00000000000000000112.log", 9000)
    one, s1 = run(logdir)
    two, s2 = run(logdir, jobs=2)
    assert one == two and len(one) == 2 and s1 == s2


def test_progress_counts_every_byte(logdir):
    seen = []
    tasks = V.plan([str(logdir)])
    list(verify_paths([str(logdir)], progress=seen.append, tasks=tasks))
    logs = sum(p.stat().st_size for p in logdir.rglob("*.log"))
    assert sum(seen) == logs == V.planned_bytes(tasks)
    seen.clear()
    list(verify_paths([str(logdir)], progress=seen.append, jobs=2))
    assert sum(seen) == logs


def test_findings_per_check_and_file_are_capped_but_counted(logdir):
    path = logdir / f"{SEG0}.index"
    path.write_bytes(b"".join(struct.pack(">ii", k + 1, 10 * k + 3) for k in range(1, 300)))
    findings, stats = run(logdir, options=VerifyOptions(max_findings_per_check=5))
    index = [f for f in findings if f.check == "index-entry"]
    assert len(index) == 6 and stats.errors == 299
    assert index[-1].position is None and "294 more index-entry errors" in index[-1].message


# -- issue 21 --------------------------------------------------------------------------------------


def test_txn_index_entries_are_read_by_the_formats_layer_as_kafka_reads_them(logdir):
    """Kafka's ``AbortedTxn.version()`` is byte 0 alone (signed): an entry whose 16-bit version
    field holds 1 reads as version 0 and passes; one whose first byte is 1 is rejected with
    Kafka's message naming the file's absolute path. The layout is the formats layer's."""
    from plog.formats import indexes

    assert V.iter_txn_entries is indexes.iter_txn_entries
    path = logdir / f"{SEG0}.txnindex"
    low = bytearray(encode_aborted_txn(5, 10, 20, 21))
    low[0:2] = b"\x00\x01"
    high = bytearray(encode_aborted_txn(5, 30, 40, 41))
    high[0:2] = b"\x01\x00"
    path.write_bytes(bytes(low) + bytes(high) + encode_aborted_txn(5, 50, 60, 61))
    findings, _ = run(logdir)
    assert [(f.severity, f.check, f.position) for f in findings] == [(ERROR, "txnindex-entry", 34)]
    # (Kafka's iterator throws there and the load fails: nothing is said about a repair.)
    assert findings[0].message == (f"Unexpected aborted transaction version 1 in transaction index "
                                   f"{os.path.abspath(path)}, current version is 0")


def test_missing_partition_metadata_is_a_warning_in_a_zookeeper_log_dir(corpus, tmp_path):
    """A ZooKeeper-mode broker (meta.properties version 0) writes partition.metadata when it
    next leads or follows the partition; a KRaft one takes the log for a stray one."""
    src = corpus / "dipendrasaini__kafka-learnning-series/tmp/kafka-logs-2"
    d = Path(shutil.copytree(src, tmp_path / "zk", copy_function=shutil.copyfile))
    os.remove(d / "invoice-3/partition.metadata")
    findings, stats = run(d)
    [f] = [f for f in findings if f.check == "partition-metadata-missing"]
    assert f.severity == WARNING and "writes it when it next leads or follows" in f.message
    assert stats.errors == 0


def test_missing_partition_metadata_in_a_kraft_log_dir_says_the_broker_removes_the_log(logdir):
    os.remove(logdir / "orders-1/partition.metadata")
    [f] = run(logdir)[0]
    assert f.severity == ERROR and "takes a log without a topic id for a stray log" in f.message


def test_index_entries_past_a_short_log_are_one_finding(logdir):
    log, index = logdir / f"{SEG0}.log", logdir / f"{SEG0}.index"
    os.truncate(log, 10 * BATCH + 100)  # inside batch 10
    entries = [struct.unpack_from(">ii", index.read_bytes(), k) for k in range(0, index.stat().st_size, 8)]
    past = [(slot, rel, pos) for slot, (rel, pos) in enumerate(entries) if pos >= 10 * BATCH + 100]
    assert len(past) > 5
    findings, stats = run(logdir / "orders-0")
    assert [(f.check, f.path) for f in findings] == [("torn-tail", str(log)), ("index-entry", str(index))]
    (first, rel0, pos0), (last, rel1, pos1) = past[0], past[-1]
    assert findings[1].position == first * 8 and findings[1].offset == rel0
    assert findings[1].message.startswith(
        f"{len(past)} entries, {first} (offset {rel0}, position {pos0}) to {last} (offset {rel1}, position {pos1}), "
        f"point past the end of the log ({10 * BATCH + 100} bytes)")
    assert stats.errors == 2


def test_random_bytes_are_not_a_segment_but_a_torn_first_batch_is_a_torn_tail(logdir, tmp_path):
    import random

    junk = tmp_path / "junk" / "00000000000000000000.log"
    junk.parent.mkdir()
    junk.write_bytes(random.Random(1).randbytes(50_000))
    [f] = errors(run(junk)[0])
    assert (f.check, f.position) == ("not-a-segment", 0)
    assert "this is not a Kafka segment" in f.message
    torn = tmp_path / "torn" / "00000000000000000000.log"
    torn.parent.mkdir()
    torn.write_bytes((logdir / f"{SEG0}.log").read_bytes()[:300])
    [f] = errors(run(torn)[0])
    assert (f.check, f.position) == ("torn-tail", 0)


def test_a_bad_path_is_collected_and_the_others_are_planned(logdir, tmp_path):
    bad: list = []
    tasks = V.plan([str(tmp_path / "nowhere"), str(logdir), str(logdir / "orders-0/partition.metadata")],
                   errors=bad)
    assert [(p, type(e).__name__) for p, e in bad] == [
        (str(tmp_path / "nowhere"), "FileNotFoundError"),
        (str(logdir / "orders-0/partition.metadata"), "NotAKafkaPathError")]
    assert sum(1 for t in tasks if t.kind == "partition") == 2


def test_damage_says_what_a_broker_start_does_about_it(logdir):
    """The loader's rule (``loader.startup_recovery``): after a clean shutdown a broker
    revalidates nothing, so damage anywhere stays; after an unclean one, from the recovery
    point on it truncates."""
    flip(logdir / f"{SEG0}.log", 5000)
    [f] = run(logdir)[0]
    assert f.message.endswith("; a broker would not repair it at start-up (the log directory was shut down "
                              "cleanly): plog recover --all --salvage quarantines the damaged bytes and keeps the "
                              "rest (--all alone truncates the log here)")
    os.remove(logdir / ".kafka_cleanshutdown")
    (logdir / "recovery-point-offset-checkpoint").write_text(
        format_offset_checkpoint({("orders", 0): 0, ("orders", 1): 240}))
    [f] = [f for f in run(logdir)[0] if f.severity == ERROR]
    assert f.message.endswith("; a broker's start-up recovery truncates the segment here and deletes the 2 later "
                              "segments; plog recover --salvage keeps the valid batches after it")
    # The segment file alone is judged by its log directory too.
    [f] = [f for f in run(logdir / f"{SEG0}.log")[0] if f.severity == ERROR]
    assert "a broker's start-up recovery truncates the segment here" in f.message


def test_a_partition_cluster_json_assigns_without_a_folder_is_an_error(tmp_path):
    from plog.engine.cluster.data_dir import DataDir

    dd = DataDir.init(tmp_path / "dd", brokers=2)
    dd.create_topic("t", 3, 2)
    shutil.rmtree(tmp_path / "dd/broker-2/t-1")
    findings, stats = run(tmp_path / "dd")
    [f] = [f for f in findings if f.severity == ERROR]
    assert (f.check, f.path) == ("partition-missing", str(tmp_path / "dd/broker-2"))
    assert f.message.startswith("cluster.json assigns 1 partition of topic t (1) to broker 2")
    # The broker's log directory alone is checked against its own assignments.
    assert [f.check for f in run(tmp_path / "dd/broker-2")[0] if f.severity == ERROR] == ["partition-missing"]
    assert [f.check for f in run(tmp_path / "dd/broker-1")[0] if f.severity == ERROR] == []

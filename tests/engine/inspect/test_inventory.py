"""``inventory`` (``plog ls``) against a plain scan of the same files, and the corpus's
documented facts (``../shared/corpus/README.md``)."""

from __future__ import annotations

import fcntl
import os
import struct

import pytest

from conftest import CORPUS
from plog.engine.storage.discovery import log_dirs
from plog.engine.storage.file_records import FileBatches
from plog.engine.inspect.inventory import HeaderWalk, inventory
from plog.engine.storage.lock import lock_holder
from plog.formats.legacy import encode_legacy_batch
from plog.formats.record_batch import encode_batch


def corpus_roots() -> list[str]:
    if not CORPUS.is_dir():
        return []
    return [str(p) for p in sorted(CORPUS.iterdir()) if p.is_dir() and p.name != "vectors"]


def scan_partition(path: str) -> dict:
    """The facts ``ls`` reports, by reading every batch with the ordinary reader."""
    logs = sorted(f for f in os.listdir(path) if f.endswith(".log"))
    facts = {"segments": len(logs), "size": 0, "batches": 0, "records": 0, "codecs": set(), "ts": [],
             "first": None, "next": None}
    for name in logs:
        p = os.path.join(path, name)
        facts["size"] += os.path.getsize(p)
        facts["first"] = int(name[:20]) if facts["first"] is None else facts["first"]
        facts["next"] = int(name[:20])
        for b in FileBatches(p):
            facts["batches"] += 1
            facts["records"] += b.records_count if b.records_count is not None else len(b.records())
            facts["codecs"].add(b.compression_name)
            if b.max_timestamp >= 0:
                facts["ts"].append(b.max_timestamp)
            facts["next"] = b.next_offset
    return facts


@pytest.mark.parametrize("root", corpus_roots(), ids=os.path.basename)
def test_every_corpus_log_dir_agrees_with_a_scan(corpus, root):
    dirs = inventory(root)
    assert [d.path for d in dirs] == [d.path for d in log_dirs(root)]
    for d in dirs:
        assert len(d.partitions) == len(log_dirs(d.path)[0].partitions)
        for p in d.partitions:
            facts = scan_partition(p.path)
            assert p.segment_count == facts["segments"]
            assert p.size_bytes == facts["size"]
            assert p.first_offset == facts["first"]
            assert p.log_end_offset == facts["next"]
            assert p.batches == facts["batches"] and p.records == facts["records"]
            assert set(p.codecs) == facts["codecs"] and not p.codecs_sampled
            assert sum(p.codecs.values()) == p.batches
            if facts["ts"]:
                assert (p.min_timestamp, p.max_timestamp) == (min(facts["ts"]), max(facts["ts"]))
            assert sum(s.size_bytes for s in p.segments) == p.size_bytes
            if p.segment_count:
                assert p.log_start_offset >= p.first_offset
            else:  # __cluster_metadata-0 holding only KRaft snapshots
                assert p.log_start_offset is p.log_end_offset is None and p.batches == 0

            quick = inventory(p.path, quick=True)[0].partitions[0]
            assert quick.log_end_offset == p.log_end_offset
            assert quick.first_offset == p.first_offset
            assert quick.max_timestamp == p.max_timestamp
            assert quick.batches is None and quick.records is None and quick.codecs_sampled
            assert set(quick.codecs) <= set(p.codecs)


def test_documented_corpus_facts(corpus):
    arthur = inventory(CORPUS / "ArthurArutunyan04__Backend_labs")[0]
    assert arthur.meta == {"version": 1, "cluster_id": "universe-labs-cluster", "node_id": 1,
                           "directory_id": "MQHhtGhc9j1ncLM2pvl16w"}
    assert arthur.clean_shutdown and arthur.clean_shutdown_broker_epoch == 7118 and arthur.shutdown == "clean"
    assert arthur.bootstrap_checkpoint and len(arthur.checkpoint_files) == 4
    assert set(arthur.topics) == {"__cluster_metadata", "__consumer_offsets", "oms_order_created",
                                  "oms_order_status_changed"}
    parts = {p.name: p for p in arthur.partitions}
    meta = parts["__cluster_metadata-0"]
    assert (meta.segment_count, meta.batches, meta.records, meta.log_end_offset) == (2, 4690 + 1746, 7320, 7320)
    assert meta.control_batches == 8 and meta.topic_id == "AAAAAAAAAAAAAAAAAAAAAQ"
    created = parts["oms_order_created-1"]
    assert (created.first_offset, created.log_end_offset, created.records) == (81908, 94646, 12738)
    assert created.codecs == {"snappy": 1253} and created.magics == {2: 1253}
    offsets = parts["__consumer_offsets-19"]
    assert offsets.segments[0].first_offset == 186795 and offsets.log_end_offset == 258527
    assert len(offsets.orphan_index_files) == 2 and offsets.leader_epoch == 12
    assert offsets.high_watermark == 330479 and any("above the log end offset" in x for x in offsets.problems)

    bigger = inventory(CORPUS / "BiggerBrain__kafka")[0]
    assert not bigger.clean_shutdown and bigger.shutdown == "unclean" and bigger.meta["version"] == 0
    (lsx,) = bigger.partitions
    assert lsx.codecs == {"gzip": 2, "none": 12} and lsx.batches == 14 and lsx.records == 14

    txn = inventory(CORPUS / "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions")[0]
    ksql = next(p for p in txn.partitions if p.name == "_confluent-ksql-default__command_topic-0")
    assert (ksql.transactional_batches, ksql.control_batches) == (2, 1)


def test_data_dir_partition_and_segment_paths(corpus):
    root = CORPUS / "dipendrasaini__kafka-learnning-series"
    dirs = inventory(root)
    assert [os.path.basename(d.path) for d in dirs] == ["kafka-logs", "kafka-logs-1", "kafka-logs-2"]
    assert [len(d.partitions) for d in dirs] == [1, 1, 5]
    assert [d.partitions[0].high_watermark for d in dirs] == [100294] * 3
    # the three replicas of invoice-0 hold identical .log bytes
    assert len({(d.partitions[0].log_end_offset, d.partitions[0].size_bytes) for d in dirs}) == 1

    part = root / "tmp/kafka-logs-2/invoice-3"
    (one,) = inventory(part)
    assert one.partial and [p.name for p in one.partitions] == ["invoice-3"]
    assert one.path == str(root / "tmp/kafka-logs-2") and one.meta["node_id"] == 2
    (seg,) = inventory(part / "00000000000000030636.log")
    assert [p.name for p in seg.partitions] == ["invoice-3"]
    only = inventory(root / "tmp/kafka-logs-2", topic="nope")[0]
    assert only.partial and only.partitions == []


def test_header_walk_equals_the_batch_reader(corpus):
    logs = [os.path.join(r, f) for root in corpus_roots() for r, _d, fs in os.walk(root) for f in fs
            if f.endswith(".log")]
    assert len(logs) > 40
    for path in logs:
        walk = HeaderWalk(path)
        got = [(h.position, h.size, h.last_offset, h.max_timestamp, h.records_count, h.codec) for h in walk]
        want = [(b.position, b.size_in_bytes, b.last_offset, b.max_timestamp, b.records_count, b.compression)
                for b in FileBatches(path)]
        assert got == want, path
        assert walk.error is None and walk.trailing == 0 and walk.valid_end == os.path.getsize(path)


def _write_log(part, data: bytes, base: int = 0) -> str:
    os.makedirs(part, exist_ok=True)
    path = os.path.join(part, f"{base:020d}.log")
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_legacy_entries_trailing_bytes_and_corrupt_headers(tmp_path):
    ts = 1_600_000_000_000
    legacy = (encode_legacy_batch([(0, ts, b"k", b"a")], magic=1)
              + encode_legacy_batch([(1, ts + 5, b"k", b"b"), (2, ts + 9, b"k", b"c")], magic=1, compression_codec=1)
              + encode_legacy_batch([(3, -1, b"k", b"d")], magic=0))
    v2 = encode_batch([(4, ts + 20, b"k", b"e"), (5, ts + 1, b"k", b"f")], base_offset=4, compression_codec=3)
    part = tmp_path / "logs" / "t-0"
    _write_log(part, legacy + v2 + v2[:30])  # a partial batch at the end
    (d,) = inventory(tmp_path / "logs")
    (p,) = d.partitions
    assert p.magics == {1: 2, 0: 1, 2: 1} and p.codecs == {"none": 2, "gzip": 1, "lz4": 1}
    assert p.records is None  # a compressed legacy wrapper is not counted without decoding it
    assert p.segments[0].first_offset == 0 and p.log_end_offset == 6
    assert (p.min_timestamp, p.max_timestamp) == (ts, ts + 20)
    assert p.segments[0].trailing_bytes == 30 and any("30 trailing byte(s)" in x for x in p.problems)
    assert d.meta is None and not d.clean_shutdown and d.checkpoint_files == []

    wrapper_first = tmp_path / "logs2" / "t-0"
    _write_log(wrapper_first, encode_legacy_batch([(7, ts, b"k", b"x"), (8, ts, b"k", b"y")], magic=1,
                                                  compression_codec=1), base=7)
    (q,) = inventory(tmp_path / "logs2")[0].partitions
    assert q.segments[0].first_offset == 7 and q.log_end_offset == 9

    bad = tmp_path / "logs3" / "t-0"
    _write_log(bad, v2 + struct.pack(">qi", 6, 5) + bytes(20))
    (r,) = inventory(tmp_path / "logs3")[0].partitions
    assert r.batches == 1 and r.log_end_offset == 6
    assert any("Found record size 5 smaller than minimum record overhead (14)" in x for x in r.problems)


def test_checkpoints_and_clean_shutdown(tmp_path):
    ts = 1_600_000_000_000
    logs = tmp_path / "logs"
    _write_log(logs / "t-0", encode_batch([(10, ts, b"k", b"v"), (11, ts, b"k", b"w")], base_offset=10), base=10)
    (logs / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 11\n")
    (logs / "log-start-offset-checkpoint").write_text("0\n1\nt 0 11\n")
    (logs / "replication-offset-checkpoint").write_text("0\n1\nt 0 12\n")
    (logs / "cleaner-offset-checkpoint").write_text("garbage\n")
    (logs / ".kafka_cleanshutdown").write_text("")
    (logs / "meta.properties").write_text("version=0\nbroker.id=3\n")
    (d,) = inventory(logs)
    (p,) = d.partitions
    assert (p.recovery_point, p.log_start_checkpoint, p.high_watermark, p.cleaner_offset) == (11, 11, 12, None)
    assert (p.first_offset, p.log_start_offset, p.log_end_offset) == (10, 11, 12)
    assert d.clean_shutdown and d.clean_shutdown_broker_epoch is None and d.meta["node_id"] == 3
    assert any("cleaner-offset-checkpoint" in x for x in d.problems)


def test_a_held_lock_is_reported_without_taking_it(tmp_path):
    logs = tmp_path / "logs"
    _write_log(logs / "t-0", b"")
    lock = logs / ".lock"
    lock.write_bytes(b"")
    checked, pid = lock_holder(str(lock))
    # plog supports Linux, where /proc/locks is always there; not reading it is a failure.
    assert checked, "/proc/locks could not be read"
    assert pid is None
    (d,) = inventory(logs)
    assert d.lock_file and d.lock_holder_pid is None and d.shutdown == "unclean"
    with open(lock, "r+b") as f:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what Java's FileChannel.tryLock takes
        try:
            (d,) = inventory(logs)
            assert d.lock_holder_pid == os.getpid() and d.shutdown == "running"
        finally:
            fcntl.lockf(f, fcntl.LOCK_UN)
    (p,) = d.partitions
    assert p.log_end_offset == 0 and p.batches == 0  # an empty active segment


def test_quick_mode_survives_a_damaged_last_index_entry(tmp_path):
    ts = 1_600_000_000_000
    part = tmp_path / "logs" / "t-0"
    data = b"".join(encode_batch([(o, ts + o, b"k", b"v" * 300)], base_offset=o) for o in range(40))
    _write_log(part, data)
    second = len(encode_batch([(0, ts, b"k", b"v" * 300)], base_offset=0))
    # an index whose last entry points 7 bytes into the batch it names
    (part / "00000000000000000000.index").write_bytes((20).to_bytes(4, "big") + (20 * second + 7).to_bytes(4, "big"))
    full = inventory(tmp_path / "logs")[0].partitions[0]
    quick = inventory(tmp_path / "logs", quick=True)[0].partitions[0]
    assert full.log_end_offset == quick.log_end_offset == 40
    assert quick.max_timestamp == full.max_timestamp == ts + 39
    assert quick.problems == []


# -- partition facts: the one reading of a partition's state files -------------------------


def _checkpoint_text(path) -> dict:
    """An offset or leader-epoch checkpoint parsed here, as text: version, count, entries."""
    lines = path.read_text().splitlines()
    return {tuple(line.split(" ")[:-1]): int(line.split(" ")[-1]) for line in lines[2:2 + int(lines[1])]}


def _corpus_partition_folders() -> list:
    if not CORPUS.is_dir():
        return []
    found = []
    for root, dirs, files in os.walk(CORPUS):
        if "meta.properties" in files:
            found += [os.path.join(root, d) for d in sorted(dirs) if not d.startswith("__cluster_metadata")]
    return found


@pytest.mark.parametrize("folder", _corpus_partition_folders(), ids=lambda p: os.path.relpath(p, CORPUS))
def test_partition_facts_are_what_the_files_hold(corpus, folder):
    from plog.engine.storage.discovery import partition_facts

    from pathlib import Path

    folder = Path(folder)
    log_dir = folder.parent
    topic, partition = folder.name.rsplit("-", 1)
    key = (topic, partition)
    facts = partition_facts(str(folder))
    meta = folder / "partition.metadata"
    assert facts.topic_id == (dict(line.split(": ") for line in meta.read_text().splitlines())["topic_id"]
                              if meta.is_file() else None)
    epochs = [(int(e), s) for (e,), s in _checkpoint_text(folder / "leader-epoch-checkpoint").items()] \
        if (folder / "leader-epoch-checkpoint").is_file() else []
    assert [tuple(e) for e in facts.leader_epochs] == epochs
    assert facts.leader_epoch == (epochs[-1][0] if epochs else None)
    bases = sorted(int(n[:20]) for n in os.listdir(folder) if n.endswith(".log"))
    starts = _checkpoint_text(log_dir / "log-start-offset-checkpoint")
    hws = _checkpoint_text(log_dir / "replication-offset-checkpoint")
    recovery = _checkpoint_text(log_dir / "recovery-point-offset-checkpoint")
    assert facts.first_segment_offset == (bases[0] if bases else None)
    assert facts.log_start_checkpoint == starts.get(key)
    assert facts.log_start_offset == (max(bases[0], starts.get(key, bases[0])) if bases else None)
    assert (facts.high_watermark, facts.recovery_point) == (hws.get(key), recovery.get(key))
    assert facts.problems == ()


def test_the_facts_of_the_issue(corpus):
    """Leader epoch 14, log start 81908 (retention deleted the segments below, the checkpoint has
    no entry), and Kafka's text form of the topic id; a Streams repartition topic whose
    DeleteRecords moved the log start above its one segment's base offset."""
    from plog.engine.storage.discovery import LOG_START_FROM_CHECKPOINT, LOG_START_FROM_SEGMENT, partition_facts

    f = partition_facts(str(CORPUS / "ArthurArutunyan04__Backend_labs/kafka-data/oms_order_created-1"))
    assert (f.topic_id, f.leader_epoch, f.leader_epoch_start_offset, f.log_start_offset, f.log_start_source,
            f.high_watermark, f.recovery_point) == \
        ("0CM0rYlfQiqSTCH-x54Zhw", 14, 94005, 81908, LOG_START_FROM_SEGMENT, 94646, 94646)
    f = partition_facts(str(CORPUS / "rjmfernandes__flink-on-prem/data/_confluent-controlcenter-7-6-0-1-"
                                     "aggregatedTopicPartitionTableWindows-ONE_MINUTE-repartition-0"))
    assert (f.first_segment_offset, f.log_start_checkpoint, f.log_start_offset, f.log_start_source) == \
        (0, 1734, 1734, LOG_START_FROM_CHECKPOINT)


def test_log_start_is_the_larger_of_checkpoint_and_first_segment(tmp_path):
    """Kafka's LogLoader: max(log-start-offset-checkpoint entry, first segment base offset)."""
    from plog.engine.storage.discovery import partition_facts, read_checkpoints

    logs = tmp_path / "logs"
    for name, bases in (("a-0", (100, 200)), ("b-0", (100,)), ("c-0", (100,)), ("d-0", ())):
        (logs / name).mkdir(parents=True)
        for base in bases:
            (logs / name / f"{base:020d}.log").write_bytes(b"")
    (logs / "c-0" / "00000000000000000050.index").write_bytes(b"")  # an orphan index: not a segment
    (logs / "log-start-offset-checkpoint").write_text("0\n3\na 0 150\nb 0 40\nd 0 7\n")
    ck = read_checkpoints(logs)
    got = {name: (f.log_start_offset, f.log_start_source)
           for name in ("a-0", "b-0", "c-0", "d-0") for f in [partition_facts(str(logs / name), ck)]}
    assert got == {"a-0": (150, "log-start-offset-checkpoint"), "b-0": (100, "base offset of the first segment"),
                   "c-0": (100, "base offset of the first segment"), "d-0": (None, None)}


def test_unreadable_state_files_read_as_nothing_with_the_reason(tmp_path):
    """As a broker at start-up: a checkpoint it cannot parse is empty (and said so), a bad
    partition.metadata or leader-epoch-checkpoint leaves its fact unknown; nothing raises."""
    from plog.engine.storage.discovery import partition_facts, read_checkpoints

    logs = tmp_path / "logs"
    (logs / "t-0").mkdir(parents=True)
    (logs / "t-0" / "00000000000000000005.log").write_bytes(b"")
    (logs / "t-0" / "partition.metadata").write_text("version: 0\ntopic_id: nope\n")
    (logs / "t-0" / "leader-epoch-checkpoint").write_text("0\n1\nx y\n")
    (logs / "log-start-offset-checkpoint").write_text("0\n1\nt 0 junk\n")
    (logs / "replication-offset-checkpoint").write_text("0\n1\nt 0 9\n")
    ck = read_checkpoints(logs)
    assert ck.log_starts == {} and ck.high_watermarks == {("t", 0): 9}
    assert list(ck.problems) == ["log-start-offset-checkpoint"]
    assert ck.problems["log-start-offset-checkpoint"].startswith(f"{logs / 'log-start-offset-checkpoint'}: ")
    assert ck.problems["log-start-offset-checkpoint"].endswith("(Kafka treats it as empty)")
    f = partition_facts(str(logs / "t-0"), ck)
    assert (f.topic_id, f.leader_epochs, f.log_start_offset, f.high_watermark) == (None, (), 5, 9)
    assert [p.split(":")[0] for p in f.problems] == ["partition.metadata", "leader-epoch-checkpoint"]
    (d,) = inventory(logs)
    assert d.problems == [ck.problems["log-start-offset-checkpoint"]]
    assert d.partitions[0].problems[:2] == list(f.problems)

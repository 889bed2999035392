"""Kafka writes, plog reads (issue 5, item 3).

A real broker (both versions of ``kafka_versions.VERSIONS``) is fed by kafka-python
(``kafka_scenarios``); then:

* **Clean stop.** plog's engine opens every partition of the stopped broker's log
  directory read-only and returns exactly the records the producer sent (offsets, keys,
  values, headers, timestamps; for ``LogAppendTime`` the broker's), the same records a
  kafka-python consumer read back before the stop, the read_committed view a consumer
  has (built from plog's reading of Kafka's ``.txnindex`` files and markers), the group's
  committed offsets in ``__consumer_offsets``, and index lookups that agree with a scan.
  Opened writable by plog's ``LogManager`` and closed, the directory is unchanged.
* **SIGKILL.** The killed directory (a few partitions then damaged: torn tail, deleted
  indexes, an unreadable producer snapshot) is copied; plog's ``LogManager`` recovers
  copy A (from the recovery points), the real broker recovers copy B (started, then
  stopped cleanly). Per partition, the files must be equal byte for byte; see
  :func:`test_crash_recovery_files_equal` for exactly what is compared and why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka_files import first_difference, folder_differences, partition_files, read_epochs, read_offset_checkpoint
from kafka_scenarios import (
    COMPACTED_TOPIC,
    DAMAGED,
    GROUP_ID,
    LOG_APPEND_TIME_TOPIC,
    TORN_TOPIC,
    TXN_TOPIC,
)

from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log import Log
from plog.formats import offsets_topic
from plog.formats.control import ControlRecordType, parse_control_key

pytestmark = pytest.mark.interop

LOG_DIR_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                       "replication-offset-checkpoint")


# -- reading with plog ------------------------------------------------------------------------


def _checkpoint(log_dir: Path, name: str) -> dict:
    return read_offset_checkpoint(Path(log_dir) / name)


def open_partition(log_dir: Path, tp: tuple[str, int]) -> Log:
    """Open a partition of a stopped broker's log dir read-only, as plog's inspection
    commands do (clean shutdown: no recovery, nothing written)."""
    starts = _checkpoint(log_dir, "log-start-offset-checkpoint")
    points = _checkpoint(log_dir, "recovery-point-offset-checkpoint")
    return Log.open(Path(log_dir) / f"{tp[0]}-{tp[1]}", LogConfig(), log_start_offset=starts.get(tp, 0),
                    recovery_point=points.get(tp, 0), had_clean_shutdown=True, writable=False)


class PartitionView:
    """Everything plog's engine reads from one partition, batch by batch."""

    def __init__(self, log: Log):
        self.log_start_offset = log.log_start_offset
        self.log_end_offset = log.log_end_offset
        self.data = []  # (offset, key, value, headers, timestamp, producer_id, is_transactional)
        self.markers = []  # (offset, producer_id, "COMMIT"/"ABORT")
        # (base_offset, last_offset, producer_id, epoch, base_sequence, is_txn, is_control, codec,
        #  segment base offset, file position)
        self.batches = []
        self.aborted = []  # AbortedTxn entries of every .txnindex, in segment order
        self.all_timestamps = []  # (offset, timestamp) of every record, control records included
        for segment in log.segments:
            self.aborted.extend(segment.txn_index.all_aborted_txns())
            for batch in segment.batches(0):
                self.batches.append((batch.base_offset, batch.last_offset, batch.producer_id, batch.producer_epoch,
                                     batch.base_sequence, batch.is_transactional, batch.is_control,
                                     batch.compression_name, segment.base_offset, batch.position))
                for r in batch.records():
                    self.all_timestamps.append((r.offset, r.timestamp))
                    if batch.is_control:
                        _version, ctype = parse_control_key(r.key)
                        self.markers.append((r.offset, batch.producer_id, ctype.name))
                    else:
                        self.data.append((r.offset, r.key, r.value, tuple(r.headers), r.timestamp,
                                          batch.producer_id, batch.is_transactional))

    def records(self):
        return [d[:5] for d in self.data]

    def read_committed(self):
        """The records a read_committed consumer gets, from the aborted transactions of the
        ``.txnindex`` files and the markers (Kafka's consumer algorithm: a transactional batch
        of a producer with an aborted transaction starting at or before it is skipped until
        that producer's ABORT marker)."""
        pending = sorted(self.aborted, key=lambda t: t.first_offset)
        aborting: set[int] = set()
        markers = {off: (pid, kind) for off, pid, kind in self.markers}
        out = []
        events = sorted([(d[0], "data", d) for d in self.data] + [(m, "marker", None) for m in markers])
        for offset, kind, d in events:
            if kind == "marker":
                pid, what = markers[offset]
                if what == ControlRecordType.ABORT.name:
                    aborting.discard(pid)
                continue
            _off, key, value, headers, ts, pid, is_txn = d
            while pending and pending[0].first_offset <= offset:
                aborting.add(pending.pop(0).producer_id)
            if is_txn and pid in aborting:
                continue
            out.append((offset, key, value, headers, ts))
        return out


def plog_view(log_dir: Path, tp) -> PartitionView:
    log = open_partition(log_dir, tp)
    try:
        return PartitionView(log)
    finally:
        log.close()


def _sent_records(sent):
    return [(s.offset, s.key, s.value, tuple(s.headers), s.timestamp) for s in sent]


def _consumed_records(consumed):
    return [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp) for c in consumed]


def _first_difference(got, want) -> str:
    return first_difference(got, want)


def _partition_dirs(log_dir: Path):
    """Every partition of a log dir that plog's engine loads (not ``__cluster_metadata``)."""
    out = []
    for entry in sorted(os.listdir(log_dir)):
        if (Path(log_dir) / entry).is_dir() and "-" in entry and not entry.startswith("__cluster_metadata"):
            topic, _, part = entry.rpartition("-")
            if part.isdigit():
                out.append((topic, int(part)))
    return out


# -- clean stop: plog reads what Kafka wrote --------------------------------------------------


@pytest.fixture(scope="session")
def written(kafka_written, kafka_version):
    return kafka_written(kafka_version)


def test_every_partition_opens_read_only(written):
    """Every partition (internal topics included) loads with plog's engine, read-only,
    with the offsets the broker served."""
    for tp in _partition_dirs(written.log_dir):
        view = plog_view(written.log_dir, tp)
        if tp in written.result.end_offsets:
            assert view.log_end_offset == written.result.end_offsets[tp], tp


def test_read_records_api(written):
    """``Log.read_records()`` (the engine's public read) yields every record of the
    partition, transaction markers included, in offset order."""
    for tp in written.result.partitions():
        log = open_partition(written.log_dir, tp)
        try:
            view = PartitionView(log)
            got = [(r.offset, r.timestamp) for r in log.read_records()]
        finally:
            log.close()
        assert got == sorted(view.all_timestamps), tp


def test_dump_log_segments_helper(written, dump_log_segments):
    """The DumpLogSegments helper (for test_dump_vs_kafka.py): Kafka's tool of this
    version runs on a segment of the written directory with nothing but its own output."""
    segment = sorted((written.log_dir / "codec-zstd-0").glob("*.log"))[0]
    out, err, code = dump_log_segments(written.version, [segment], "--deep-iteration", "--print-data-log")
    assert code == 0, err
    assert "log4j" not in err.lower() and "ERROR" not in err, err
    lines = out.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert all("zstd" in line.lower() for line in lines if line.startswith("baseOffset:"))
    records = [line for line in lines if line.startswith("| offset:")]
    log = open_partition(written.log_dir, ("codec-zstd", 0))
    try:
        in_segment = sum(1 for r in log.read_records(0, log.segments.higher(0).base_offset
                                                     if log.segments.higher(0) else None))
    finally:
        log.close()
    assert len(records) == in_segment


def test_records_exactly_as_sent(written):
    """Offsets, keys, values, headers and timestamps of every record the producers sent
    (aborted transactions included: they are in the log), for every non-compacted
    partition."""
    result = written.result
    for tp in result.partitions():
        if tp[0] == COMPACTED_TOPIC:
            continue
        got = plog_view(written.log_dir, tp).records()
        want = _sent_records(result.sent_to(tp))
        assert got == want, f"{tp}: {_first_difference(got, want)}"


def test_records_equal_kafka_python_consumer(written):
    """What plog reads equals what a kafka-python read_uncommitted consumer fetched from
    the broker, for every partition of the scenario (the compacted one included)."""
    result = written.result
    for tp, consumed in result.consumed["read_uncommitted"].items():
        got = plog_view(written.log_dir, tp).records()
        want = _consumed_records(consumed)
        assert got == want, f"{tp}: {_first_difference(got, want)}"


def test_log_append_time_is_the_brokers(written):
    """LogAppendTime: plog reports the broker's timestamp (the batch's max timestamp) for
    every record, not the producer's."""
    result = written.result
    tp = (LOG_APPEND_TIME_TOPIC, 0)
    sent = result.sent_to(tp)
    got = {r[0]: r[4] for r in plog_view(written.log_dir, tp).records()}
    assert {s.offset: s.timestamp for s in sent} == got
    # the producer's timestamps were an hour in the past; the broker's are not
    assert min(got.values()) > max(s.timestamp for s in sent) - 600_000
    assert all(c.timestamp_type == 1 for c in result.consumed["read_uncommitted"][tp])


def test_read_committed_view(written):
    """plog's reading of the markers and ``.txnindex`` gives the read_committed consumer's
    records, which are the sent records minus the aborted transactions."""
    result = written.result
    for tp, consumed in result.consumed["read_committed"].items():
        view = plog_view(written.log_dir, tp)
        got = view.read_committed()
        assert got == _consumed_records(consumed), f"{tp}: {_first_difference(got, _consumed_records(consumed))}"
        assert len(got) < len(view.records()), "the aborted transactions should hide records"
        want = _sent_records(s for s in result.sent_to(tp) if s.txn != "aborted")
        assert got == want, f"{tp}: {_first_difference(got, want)}"


def test_transaction_markers_and_index(written):
    """Each transaction left one marker per partition it touched (COMMIT or ABORT as it
    ended); every aborted record lies in a ``.txnindex`` range of its producer."""
    result = written.result
    for p in (0, 1):
        tp = (TXN_TOPIC, p)
        view = plog_view(written.log_dir, tp)
        sent = result.sent_to(tp)
        kinds = [kind for _, _, kind in sorted(view.markers)]
        assert kinds == ["COMMIT", "ABORT", "COMMIT", "ABORT", "COMMIT"], (tp, kinds)
        txn_pids = {d[5] for d in view.data if d[6]}
        assert len(txn_pids) == 1, txn_pids
        for s in sent:
            inside = [t for t in view.aborted if t.first_offset <= s.offset <= t.last_offset]
            if s.txn == "aborted":
                assert any(t.producer_id in txn_pids for t in inside), (tp, s.offset)
        assert len(view.aborted) == 2, view.aborted


def test_idempotent_batches(written):
    """The idempotent producer's batches carry one producer id and consecutive sequences."""
    view = plog_view(written.log_dir, ("idempotent", 0))
    pids = {b[2] for b in view.batches}
    assert len(pids) == 1 and min(pids) >= 0, pids
    next_seq = 0
    for base, last, _pid, epoch, base_seq, *_ in view.batches:
        assert base_seq == next_seq, (base, base_seq, next_seq)
        next_seq = base_seq + (last - base) + 1
    assert next_seq == len(view.data)


def test_every_codec_present(written):
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        view = plog_view(written.log_dir, (f"codec-{codec}", 0))
        assert {b[7] for b in view.batches} == {codec}, codec


def test_many_segments(written):
    log = open_partition(written.log_dir, ("many-segments", 0))
    try:
        assert len(log.segments) >= 20
        assert log.log_end_offset == len(written.result.sent_to(("many-segments", 0)))
    finally:
        log.close()


def test_compacted_topic(written):
    """The broker's cleaner ran: fewer records than sent; what is left is the sent record
    at that offset; each key's last value survives (a tombstone may be gone)."""
    result = written.result
    tp = (COMPACTED_TOPIC, 0)
    sent = result.sent_to(tp)
    by_offset = {s.offset: s for s in sent}
    got = plog_view(written.log_dir, tp).records()
    assert len(got) < len(sent) // 2, (len(got), len(sent))
    for r in got:
        assert r == _sent_records([by_offset[r[0]]])[0], r
    last = {}
    for s in sent:
        last[s.key] = s
    present = {r[0] for r in got}
    for key, s in last.items():
        if s.value is not None:
            assert s.offset in present, (key, s.offset)
    cleaner = _checkpoint(written.log_dir, "cleaner-offset-checkpoint")
    assert cleaner.get(tp, 0) > 0


def test_consumer_group_offsets(written):
    """The group's commits are in ``__consumer_offsets``, decoded by plog: the last commit
    of each partition is what kafka-python's ``committed()`` returned."""
    result = written.result
    last = {}
    for tp in _partition_dirs(written.log_dir):
        if tp[0] != "__consumer_offsets":
            continue
        for offset, key, value, _h, _ts in plog_view(written.log_dir, tp).records():
            k = offsets_topic.decode_key(key)
            if k.kind == "offset_commit" and k.fields["group"] == GROUP_ID:
                v = offsets_topic.decode_value(k, value)
                last[(k.fields["topic"], k.fields["partition"])] = None if v is None else v.fields["offset"]
    assert last == result.committed


def test_index_lookups_agree_with_a_scan(written):
    """Kafka's ``.index``/``.timeindex`` files, read by plog: the first and last offset of
    every batch translate to that batch (segment, file position, last offset), and a
    timestamp lookup finds the first record whose timestamp is at or after it."""
    for tp in [("many-segments", 0), ("codec-gzip", 0), ("codec-none", 0), (LOG_APPEND_TIME_TOPIC, 0),
               (TXN_TOPIC, 0), (COMPACTED_TOPIC, 0)]:
        log = open_partition(written.log_dir, tp)
        try:
            view = PartitionView(log)
            for base, last, *_rest, seg_base, position in view.batches:
                for off in (base, last):
                    found = log.translate_offset(off)
                    assert found is not None, (tp, off)
                    segment, pos = found
                    assert (segment.base_offset, pos.position, pos.offset) == (seg_base, position, last), (tp, off)
            stamps = view.all_timestamps  # markers are records too: a lookup can land on one
            targets = sorted({ts for _, ts in stamps})
            for ts in targets[:: max(1, len(targets) // 40)] + [targets[-1], targets[0] - 1]:
                got = log.fetch_offset_by_timestamp(ts)
                first = min((r for r in stamps if r[1] >= ts), key=lambda r: r[0])
                assert got is not None and (got.offset, got.timestamp) == first, (tp, ts, got, first)
            assert log.fetch_offset_by_timestamp(targets[-1] + 1) is None
        finally:
            log.close()


def test_plog_open_and_close_changes_nothing(written, tmp_path):
    """A cleanly stopped Kafka log dir opened writable by plog's ``LogManager`` (no
    recovery: the clean-shutdown marker is there) and closed again: every partition file
    is byte for byte what Kafka left (segments, indexes, snapshots), and the log dir
    checkpoints hold the same offsets. Only the clean-shutdown marker's broker epoch
    (plog writes -1) and plog's ``.lock`` differ, and:

    ``leader-epoch-checkpoint`` loses the entries that start at or after the log end
    offset (an empty partition's ``0 0``). Kafka's ``LogLoader`` does the same
    (``leaderEpochCache.truncateFromEndAsyncFlush(nextOffset)`` removes entries with
    ``startOffset >= endOffset`` and schedules writing the file); a running broker then
    adds the entry back when it elects the partition's leader, which plog has no notion
    of. Compared as parsed entries; bytes must be equal whenever nothing was removed."""
    from kafka_broker import copy_log_dir

    from plog.engine.storage.log_manager import LogManager

    copy = copy_log_dir(written.log_dir, tmp_path / "logs")
    with LogManager([copy]) as manager:
        assert manager.report.clean_shutdown == {str(copy.resolve()): True}
        ends = {tuple(tp): log.log_end_offset for tp, log in manager.logs.items()}
    problems = []
    for tp in _partition_dirs(written.log_dir):
        name = f"{tp[0]}-{tp[1]}"
        a, b = partition_files(copy / name), partition_files(written.log_dir / name)
        ea = read_epochs(copy / name / "leader-epoch-checkpoint")
        eb = [e for e in read_epochs(written.log_dir / name / "leader-epoch-checkpoint") if e[1] < ends[tp]]
        if ea != eb:
            problems.append(f"{name}/leader-epoch-checkpoint: plog {ea}, Kafka's below the LEO {ends[tp]}: {eb}")
        if len(eb) != len(read_epochs(written.log_dir / name / "leader-epoch-checkpoint")):
            a.pop("leader-epoch-checkpoint", None)
            b.pop("leader-epoch-checkpoint", None)
        problems += folder_differences(name, a, b, "after plog", "in Kafka's")
    for cp in LOG_DIR_CHECKPOINTS:
        if _checkpoint(copy, cp) != _checkpoint(written.log_dir, cp):
            problems.append(f"{cp}: plog {_checkpoint(copy, cp)} / Kafka {_checkpoint(written.log_dir, cp)}")
    assert not problems, "plog's open/close changed Kafka's files:\n" + "\n".join(problems)


# -- SIGKILL: plog's recovery equals Kafka's ------------------------------------------------


@pytest.fixture(scope="session")
def crashed(kafka_crashed, kafka_version):
    return kafka_crashed(kafka_version)


def test_crash_recovery_files_equal(crashed):
    """After the SIGKILL, every partition folder plog recovered (copy A) equals the one the
    real broker recovered (copy B), file for file and byte for byte:

    * ``.log`` segments (the torn tail of ``crash-torn`` truncated by both);
    * ``.index``, ``.timeindex``: whole files. Both sides closed cleanly, and a clean
      close trims an index to its valid entries (Kafka's ``trimToValidSize``), so the
      file *is* the entry list - no 10 MiB preallocated tail is left to ignore;
    * ``.txnindex`` and producer-state ``.snapshot`` files: whole files;
    * the set of file names (no file only one side has).

    Left out, with the reason: ``leader-epoch-checkpoint`` (compared in
    :func:`test_crash_recovery_leader_epochs`), ``partition.metadata`` (written by the
    controller's metadata, not by recovery; plog never writes it for Kafka's partitions),
    and ``__cluster_metadata-0`` (the KRaft log, which plog does not load and the restarted
    broker appends to).
    """
    partitions = [tp for tp in _partition_dirs(crashed.kafka_dir) if tp not in DAMAGED]
    problems = _recovery_differences(crashed, partitions)
    assert not problems, "plog's recovery differs from Kafka's:\n" + "\n".join(problems)


def test_crash_recovery_of_damaged_partitions_files_equal(crashed):
    """The same comparison for the partitions damaged after the kill
    (``kafka_scenarios.damage_killed_dir``): a deleted ``.index`` and a deleted
    ``.timeindex`` of a segment below the recovery point, and a producer snapshot cut
    short. plog must repair them exactly as Kafka does."""
    problems = _recovery_differences(crashed, DAMAGED)
    assert not problems, (f"damage: {crashed.damage}\nplog's recovery differs from Kafka's:\n"
                          + "\n".join(problems))


def _recovery_differences(crashed, partitions) -> list[str]:
    problems = []
    for tp in partitions:
        name = f"{tp[0]}-{tp[1]}"
        a = partition_files(crashed.plog_dir / name)
        b = partition_files(crashed.kafka_dir / name)
        for skip in ("leader-epoch-checkpoint", "partition.metadata"):
            a.pop(skip, None)
            b.pop(skip, None)
        problems += folder_differences(name, a, b, "plog has", "Kafka has")
    return problems


def test_crash_recovery_checkpoints_equal(crashed):
    """The log dir checkpoints plog wrote on close equal the broker's after its clean stop
    (compared as maps: Kafka writes entries in hash order, plog sorted)."""
    problems = []
    for name in LOG_DIR_CHECKPOINTS:
        a, b = _checkpoint(crashed.plog_dir, name), _checkpoint(crashed.kafka_dir, name)
        if a != b:
            diff = {tp: (a.get(tp), b.get(tp)) for tp in sorted(set(a) | set(b)) if a.get(tp) != b.get(tp)}
            problems.append(f"{name}: (plog, Kafka) differ at {diff}")
    assert not problems, "\n".join(problems)


def test_crash_recovery_leaderread_epochs(crashed):
    """``leader-epoch-checkpoint``: plog's equals Kafka's without the entries Kafka adds
    when the restarted broker becomes leader again (a new epoch starting at the log end
    offset, ``Partition.makeLeader``), which is an election, not recovery."""
    problems = []
    for tp in _partition_dirs(crashed.kafka_dir):
        name = f"{tp[0]}-{tp[1]}"
        a = read_epochs(crashed.plog_dir / name / "leader-epoch-checkpoint")
        b = read_epochs(crashed.kafka_dir / name / "leader-epoch-checkpoint")
        log_end = crashed.kafka_end_offsets[tp]
        before = [e for e in b if e[1] < log_end]
        if a != b and a != before:
            problems.append(f"{name}: plog {a}, Kafka {b} (LEO {log_end})")
    assert not problems, "\n".join(problems)


def test_crash_recovered_records(crashed):
    """plog's recovered copy holds every acknowledged record but the torn batch's, and its
    log end offsets are the high watermarks the restarted broker served."""
    result = crashed.result
    for tp in result.partitions():
        view = plog_view(crashed.plog_dir, tp)
        want = _sent_records(result.sent_to(tp))
        got = view.records()
        if tp[0] == TORN_TOPIC:
            assert got == want[: len(got)] and len(got) < len(want), (len(got), len(want))
        else:
            assert got == want, f"{tp}: {_first_difference(got, want)}"
        assert view.log_end_offset == crashed.kafka_end_offsets[tp], tp


def test_crash_scenario_exercises_recovery(crashed):
    """The killed directory is what recovery is about: no clean-shutdown marker, the
    active segments' indexes still preallocated, and ``crash-segments`` has a recovery
    point strictly inside the log (recovery starts from the segment holding it)."""
    killed = crashed.killed
    assert not (killed / ".kafka_cleanshutdown").exists()
    points = _checkpoint(killed, "recovery-point-offset-checkpoint")
    leo = crashed.kafka_end_offsets[("crash-segments", 0)]
    assert 0 < points.get(("crash-segments", 0), 0) < leo, (points, leo)
    active = sorted((killed / "crash-segments-0").glob("*.index"))[-1]
    assert active.stat().st_size == 10 * 1024 * 1024, active


def test_crash_recovery_report(crashed):
    """plog saw an unclean shutdown and recovered (the torn segment truncated)."""
    report = crashed.plog_report
    assert report.clean_shutdown == {str(crashed.plog_dir.resolve()): False}
    torn = [r for r in report.logs if Path(r.directory).name == f"{TORN_TOPIC}-0"]
    assert torn and torn[0].truncated_bytes > 0, torn

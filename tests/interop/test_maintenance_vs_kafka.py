"""Real Kafka judges ``plog compact``, ``plog retention`` and ``plog recover``.

**Compaction and retention** (one scenario per Kafka version, ``kafka_maintenance_scenarios``):
a broker with its cleaner off and its retention task not yet due is fed a compacted topic
(overwritten keys, tombstones, headers, four codecs, committed and aborted transactions, a
refused key-less record) and three retention topics (``retention.ms`` with expired and
current segments, ``retention.bytes``, and ``retention.ms`` with every segment expired),
then stopped cleanly. Its directory is copied:

* **A**: a judging broker starts on it with the cleaner on (``log.cleaner.min.cleanable.ratio``
  0.01) and retention every 500 ms, cleans the compacted partition up to its active segment,
  deletes the expired segments, and is stopped cleanly.
* **B**: ``plog compact --min-cleanable-dirty-ratio 0.01`` then ``plog retention`` (no config
  flags: the topic configs come from the KRaft metadata log). ``compact`` runs with
  ``--now`` set to the instant Kafka's cleaner used, read back from the delete horizon it
  wrote into A's tombstone batches (horizon - ``delete.retention.ms``), so plog writes the
  same horizon and the cleaned files can be compared byte for byte. The compacted partition
  is compared as ``compact`` left it (a copy), since ``retention`` opens the directory anew
  and that load removes ``*.deleted`` files, as a broker restart does.
* a copy of B is then served by a real broker and read with kafka-python;
* a pristine copy takes ``plog retention --dry-run --explain``.

Compared: the surviving records and markers (and an oracle from what was sent), every batch
header, the segment files byte for byte with the ``*.deleted`` ones, the log-dir
checkpoints, the remaining segments and log start offsets of the retention topics (with
ListOffsets EARLIEST of both brokers), and what the served broker returns and logs.

**Recovery**: the SIGKILLed directory of ``kafka_crashed`` (damaged: torn tail, missing
indexes, a cut producer snapshot) is recovered by ``plog recover`` on a copy and compared
file by file with the copy the real broker recovered; ``--dry-run`` on another copy must
exit 3 and name the damage, and on the recovered copy find nothing to do.

The CLI runs in process as a user runs it (``plog compact ...``), exit codes included.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka_broker import copy_log_dir
from kafka_files import first_difference, folder_differences, partition_files, read_epochs, read_offset_checkpoint
from kafka_maintenance_scenarios import (
    COMPACTED,
    JUDGE_BROKER_SETTINGS,
    JUDGE_MIN_CLEANABLE_RATIO,
    PRODUCING_BROKER_SETTINGS,
    RETAIN_ALL,
    RETAIN_BYTES,
    RETAIN_TIME,
    RETENTION_TOPICS,
    MaintenanceScenario,
    batch_headers,
    delete_horizons,
    earliest_offsets,
    run_maintenance_scenario,
    segment_bases,
    wait_for_retention,
)
from kafka_scenarios import DAMAGED, TORN_TOPIC, consume_all

from plog.cli.main import main as plog_main
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log import Log
from plog.formats.control import parse_control_key

pytestmark = pytest.mark.interop

DELETE_RETENTION_MS = 86_400_000  # Kafka's default delete.retention.ms: the scenario sets none
LOG_DIR_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                       "replication-offset-checkpoint")
TEMP_SUFFIXES = (".cleaned", ".swap")
#: The judging broker's log.cleaner.dedupe.buffer.size (TEST_BROKER_SETTINGS), for plog.
CLEANER_BUFFER = "8MiB"


# -- running plog ------------------------------------------------------------------------------


@dataclass
class CliRun:
    args: list[str]
    code: int
    out: str
    err: str

    def ok(self) -> "CliRun":
        assert self.code == 0, f"plog {' '.join(self.args)} exited {self.code}\nstdout: {self.out[-3000:]}\n" \
                               f"stderr: {self.err[-3000:]}"
        return self


def plog(*args) -> CliRun:
    """``plog ARGS`` in process: (exit code, stdout, stderr)."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            plog_main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return CliRun(argv, code, out.getvalue(), err.getvalue())


# -- reading partitions ---------------------------------------------------------------------------


def log_start(log_dir: Path, tp) -> int:
    """A partition's log start offset as a broker loads it: max(checkpoint, first segment)."""
    cp = read_offset_checkpoint(Path(log_dir) / "log-start-offset-checkpoint").get(tp, 0)
    return max(cp, segment_bases(Path(log_dir) / f"{tp[0]}-{tp[1]}")[0])


def log_end(log_dir: Path, tp) -> int:
    """A partition's log end offset from its files: after the last batch of the last
    segment that has one, else the newest segment's base offset (an empty log)."""
    pdir = Path(log_dir) / f"{tp[0]}-{tp[1]}"
    bases = segment_bases(pdir)
    for base in reversed(bases):
        headers = batch_headers(pdir / f"{base:020d}.log")
        if headers:
            return headers[-1].last_offset + 1
    return bases[-1]


@dataclass
class Contents:
    """A partition as plog's reader sees it: data records and transaction markers."""

    data: list = field(default_factory=list)  # (offset, key, value, headers, timestamp)
    markers: list = field(default_factory=list)  # (offset, producer id, "COMMIT"/"ABORT")


def read_partition(log_dir: Path, tp) -> Contents:
    log = Log.open(Path(log_dir) / f"{tp[0]}-{tp[1]}", LogConfig(), log_start_offset=log_start(log_dir, tp),
                   had_clean_shutdown=True, writable=False)
    out = Contents()
    try:
        for segment in log.segments:
            for batch in segment.batches(0):
                for r in batch.records():
                    if batch.is_control:
                        out.markers.append((r.offset, batch.producer_id, parse_control_key(r.key)[1].name))
                    else:
                        out.data.append((r.offset, r.key, r.value, tuple(r.headers), r.timestamp))
    finally:
        log.close()
    return out


def live_files(pdir: Path) -> dict[str, bytes]:
    """The files of a partition folder that recovery/maintenance own (not the leader epoch
    checkpoint, compared on its own, nor ``partition.metadata``, the controller's)."""
    files = partition_files(pdir)
    for name in ("leader-epoch-checkpoint", "partition.metadata"):
        files.pop(name, None)
    return files


def epochs_agree(ours: list, kafka: list, log_end: int) -> bool:
    """plog's ``leader-epoch-checkpoint`` against a broker's that was restarted and became
    leader again: the restart assigned a new epoch at the log end offset, and assigning
    removes every entry starting at or after it (``LeaderEpochFileCache.assign``). So the
    entries below the log end must be equal; plog may have one more at the log end (the
    previous epoch, which Kafka had too before the election), with an older epoch."""
    if ours == kafka:
        return True
    below = [e for e in ours if e[1] < log_end]
    at_end = [e for e in ours if e[1] >= log_end]
    kafka_at_end = [e for e in kafka if e[1] >= log_end]
    return (below == [e for e in kafka if e[1] < log_end] and len(at_end) <= 1
            and all(e[1] == log_end and kafka_at_end and e[0] < kafka_at_end[0][0] for e in at_end))


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative name -> sha256), to prove a dry run wrote nothing."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def server_log_problems(server_log: Path, partitions, log_dir: Path) -> list[str]:
    """WARN and ERROR lines of a broker's server.log about plog's files: naming one of
    ``partitions`` (as a whole word: ``t-1`` is not ``t-10``) or ``log_dir``.

    Not every ERROR line: a broker starved of CPU logs some about itself, e.g. its
    controller's "processExpiredBrokerHeartbeat: controller event queue overloaded" when a
    heartbeat waited more than half of ``broker.heartbeat.interval.ms`` (1 s) in the queue
    (QuorumController), which says nothing of the files it serves (the records are compared
    one by one anyway)."""
    names = [re.escape(f"{t}-{p}") for t, p in partitions] + [re.escape(str(log_dir))]
    about = re.compile(rf"(?<![\w.-])(?:{'|'.join(names)})(?![\w-])")
    return [line for line in server_log.read_text(errors="replace").splitlines()
            if re.match(r"\[[^]]*\] (?:WARN|ERROR) ", line) and about.search(line)]


# -- the maintenance scenario run -------------------------------------------------------------------


@dataclass
class MaintenanceRun:
    version: str
    scenario: MaintenanceScenario
    pristine: Path  # the producing broker's directory after its clean stop (read-only)
    kafka_dir: Path  # A: cleaned and trimmed by the judging broker
    plog_dir: Path  # B: cleaned and trimmed by plog (as plog left it)
    plog_compacted_dir: Path  # B between `plog compact` and `plog retention`
    served_dir: Path  # a copy of B a real broker then served
    uncleanable: int  # the compacted partition's active segment base in the pristine copy
    kafka_clean_ms: int  # the "now" of Kafka's cleaning round (from its delete horizon)
    judge_earliest: dict  # ListOffsets EARLIEST of the retention topics on the judging broker
    judge_log: Path
    compact: CliRun
    retention: CliRun
    served_consumed: dict  # tp -> [Consumed] from the broker serving B's copy
    served_earliest: dict
    served_log: Path


class ScenarioError(RuntimeError):
    pass


@contextlib.contextmanager
def stage(what: str):
    """Name the step of the run in its failure (the cause stays chained)."""
    try:
        yield
    except (pytest.skip.Exception, pytest.fail.Exception, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001
        raise ScenarioError(f"{what}: {type(e).__name__}: {e}") from e


def wait_for_cleaner_checkpoint(log_dir: Path, tp, up_to: int, broker, timeout: float = 60) -> None:
    """Until the broker's ``cleaner-offset-checkpoint`` for ``tp`` reaches ``up_to`` with
    no ``.cleaned``/``.swap`` file left (Kafka writes the checkpoint after the last swap).
    Its ``.deleted`` files stay: the delete delay is an hour."""
    from kafka_broker import _NotYet

    pdir = Path(log_dir) / f"{tp[0]}-{tp[1]}"

    def cleaned():
        try:
            cp = read_offset_checkpoint(Path(log_dir) / "cleaner-offset-checkpoint").get(tp, -1)
        except (IndexError, ValueError, AssertionError) as e:
            # Kafka's CheckpointFile creates the file empty before its first write.
            raise _NotYet(f"cleaner-offset-checkpoint not written yet ({type(e).__name__})") from None
        temp = [n for n in os.listdir(pdir) if n.endswith(TEMP_SUFFIXES)]
        if cp >= up_to and not temp:
            return cp
        raise _NotYet(f"cleaner checkpoint {cp}, temporary files {temp}")

    broker._poll(cleaned, time.monotonic() + timeout, f"the cleaner did not clean {pdir.name} up to {up_to}")


_RUNS: dict[str, object] = {}


@pytest.fixture(scope="session")
def maintenance_run(kafka_broker, tmp_path_factory):
    """The scenario of the module docstring, once per Kafka version (a failure is kept)."""

    def get(version: str) -> MaintenanceRun:
        if version not in _RUNS:
            try:
                _RUNS[version] = _build(version, kafka_broker, tmp_path_factory)
            except (pytest.skip.Exception, pytest.fail.Exception):
                raise
            except Exception as e:  # noqa: BLE001
                _RUNS[version] = e
                raise
        got = _RUNS[version]
        if isinstance(got, Exception):
            pytest.fail(f"the Kafka {version} maintenance scenario failed earlier: {type(got).__name__}: "
                        f"{str(got).splitlines()[0] if str(got) else ''}", pytrace=False)
        return got

    return get


def _build(version: str, kafka_broker, tmp_path_factory) -> MaintenanceRun:
    base = tmp_path_factory.mktemp(f"kafka-{version}-maintenance")
    with stage(f"Kafka {version}: starting the producing broker"):
        producing = kafka_broker(version, settings=PRODUCING_BROKER_SETTINGS)
    try:
        with stage(f"Kafka {version}: producing the maintenance scenario"):
            scenario = run_maintenance_scenario(producing.bootstrap, version)
        with stage(f"Kafka {version}: stopping the producing broker cleanly"):
            producing.stop()
    except BaseException:
        producing.kill()
        raise
    pristine = copy_log_dir(producing.log_dir, base / "pristine")
    kafka_dir = copy_log_dir(pristine, base / "kafka")
    plog_dir = copy_log_dir(pristine, base / "plog")
    uncleanable = segment_bases(pristine / f"{COMPACTED}-0")[-1]

    # A: the judging broker cleans and trims.
    with stage(f"Kafka {version}: starting the judging broker on {kafka_dir}"):
        judge = kafka_broker(version, log_dir=kafka_dir, settings=JUDGE_BROKER_SETTINGS)
    try:
        with stage(f"Kafka {version}: waiting for the judging broker's retention"):
            earliest = wait_for_retention(judge, [(t, 0) for t in RETENTION_TOPICS])
        with stage(f"Kafka {version}: waiting for the judging broker's cleaner"):
            wait_for_cleaner_checkpoint(kafka_dir, (COMPACTED, 0), uncleanable, judge)
        with stage(f"Kafka {version}: stopping the judging broker cleanly"):
            judge.stop()
    except BaseException:
        judge.kill()
        raise
    horizons = delete_horizons(kafka_dir / f"{COMPACTED}-0")
    assert len(horizons) == 1, f"Kafka {version}'s cleaner wrote delete horizons {horizons} (one round expected)"
    kafka_clean_ms = horizons.pop() - DELETE_RETENTION_MS

    # B: plog does the same offline.
    compact = plog("compact", plog_dir, "--min-cleanable-dirty-ratio", JUDGE_MIN_CLEANABLE_RATIO,
                   "--buffer-size", CLEANER_BUFFER, "--now", str(kafka_clean_ms), "--quiet")
    # The judging broker cleaned and trimmed in one run; plog's second command opens the
    # directory anew, and a load deletes every *.deleted file (as a broker restart does).
    # So the cleaner's files are compared as `plog compact` left them.
    plog_compacted_dir = copy_log_dir(plog_dir, base / "plog-compacted")
    retention = plog("retention", plog_dir, "--quiet")

    # A real broker serves (a copy of) plog's result.
    served_dir = copy_log_dir(plog_dir, base / "served")
    with stage(f"Kafka {version}: starting a broker on plog's maintained copy {served_dir}"):
        served = kafka_broker(version, log_dir=served_dir)
    try:
        with stage(f"Kafka {version}: reading plog's maintained copy through the broker"):
            # Until the broker answers ListOffsets with the log end offset of each partition's
            # files, then until the consumer has read up to there: what plog's files hold,
            # not whatever end the broker reports at one moment.
            ends = {tp: log_end(served_dir, tp) for tp in [(COMPACTED, 0), *[(t, 0) for t in RETENTION_TOPICS]]}
            served.wait_partitions_ready(list(ends), end_offsets=ends)
            consumed, _ends = consume_all(served.bootstrap, list(ends), ends=ends)
            served_earliest = earliest_offsets(served.bootstrap, [(t, 0) for t in RETENTION_TOPICS])
        with stage(f"Kafka {version}: stopping the broker on plog's copy cleanly"):
            served.stop()
    except BaseException:
        served.kill()
        raise
    return MaintenanceRun(version, scenario, pristine, kafka_dir, plog_dir, plog_compacted_dir, served_dir,
                          uncleanable, kafka_clean_ms, earliest, judge.server_log, compact, retention, consumed,
                          served_earliest, served.server_log)


@pytest.fixture(scope="session")
def run(maintenance_run, kafka_version) -> MaintenanceRun:
    return maintenance_run(kafka_version)


# -- compaction ------------------------------------------------------------------------------------


def test_keyless_record_refused(run):
    """A compacted topic does not take a record without a key: the broker refuses the
    batch with INVALID_RECORD (so no compaction ever sees one)."""
    assert run.scenario.keyless_error is not None, "the broker accepted a key-less record on a compacted topic"
    assert "InvalidRecord" in run.scenario.keyless_error, run.scenario.keyless_error
    assert "without key" in run.scenario.keyless_error, run.scenario.keyless_error


def compaction_oracle(run: MaintenanceRun) -> list:
    """The records a first cleaning leaves, from what was sent: below the active segment
    base, the newest non-aborted record of each key (tombstones included: their delete
    horizon is a day away); from it on, everything."""
    sent = run.scenario.sent_to((COMPACTED, 0))
    cleanable = [s for s in sent if s.offset < run.uncleanable and s.txn != "aborted"]
    newest = {s.key: s.offset for s in cleanable}
    keep = [s for s in sent if (s.offset >= run.uncleanable or (s.txn != "aborted" and newest[s.key] == s.offset))]
    return [(s.offset, s.key, s.value, tuple(s.headers), s.timestamp) for s in keep]


def test_compaction_scenario_shape(run):
    """The scenario exercises what it claims: several cleanable segments, and below the
    active segment superseded values, superseded and final tombstones, an aborted
    transaction and markers."""
    sent = run.scenario.sent_to((COMPACTED, 0))
    below = [s for s in sent if s.offset < run.uncleanable]
    assert len(segment_bases(run.pristine / f"{COMPACTED}-0")) >= 6
    overwritten = [k for k, n in Counter(s.key for s in below).items() if n >= 5]
    assert len(overwritten) >= 20, Counter(s.key for s in below)
    tombstones = [s for s in below if s.value is None]
    newest = {s.key: s for s in below if s.txn != "aborted"}
    assert any(newest[s.key] is not s for s in tombstones), "no superseded tombstone"
    assert any(newest[s.key] is s for s in tombstones), "no tombstone that is the key's last word"
    aborted = [s for s in below if s.txn == "aborted"]
    assert aborted and set(run.scenario.aborted_keys) == {s.key for s in aborted}
    markers = [b for seg in segment_bases(run.pristine / f"{COMPACTED}-0")
               for b in batch_headers(run.pristine / f"{COMPACTED}-0" / f"{seg:020d}.log") if b.is_control]
    assert len(markers) == 3 and all(b.base_offset < run.uncleanable for b in markers), markers


def test_maintenance_cli_reports(run):
    """Both commands exit 0 and their reports say what they did: ``compact`` changed the
    compacted partition and skipped the delete-policy ones; ``retention`` deleted segments
    of every retention topic."""
    run.compact.ok()
    run.retention.ok()
    lines = run.compact.out.splitlines()
    head = _partition_block(lines, f"{COMPACTED}-0", "compaction")[0]
    assert "nothing to do" not in head and "skipped" not in head, head
    for topic in RETENTION_TOPICS:
        assert "skipped" in _partition_block(lines, f"{topic}-0", "compaction")[0]
        head = _partition_block(run.retention.out.splitlines(), f"{topic}-0", "retention")[0]
        assert "deleted" in head and "nothing to delete" not in head, head


def test_compacted_records_equal_kafkas(run):
    """The records plog's cleaner kept (offset, key, value, headers, timestamp), and the
    transaction markers, are exactly the ones Kafka's cleaner kept; both are the oracle's."""
    run.compact.ok()
    tp = (COMPACTED, 0)
    kafka, ours = read_partition(run.kafka_dir, tp), read_partition(run.plog_compacted_dir, tp)
    assert ours.data == kafka.data, first_difference(ours.data, kafka.data, "plog", "Kafka")
    assert ours.markers == kafka.markers, (ours.markers, kafka.markers)
    want = compaction_oracle(run)
    assert kafka.data == want, "Kafka's cleaner vs the oracle: " + first_difference(kafka.data, want, "Kafka", "oracle")
    assert len(kafka.markers) == 3  # the first cleaning keeps every marker (no horizon yet)


def _batches(log_dir: Path, tp) -> list[tuple]:
    pdir = Path(log_dir) / f"{tp[0]}-{tp[1]}"
    return [(b.base_offset, b.last_offset, b.attributes, b.base_timestamp, b.max_timestamp, b.producer_id,
             b.record_count) for seg in segment_bases(pdir) for b in batch_headers(pdir / f"{seg:020d}.log")]


def test_compacted_batches_equal_kafkas(run):
    """Batch by batch (read by hand): base and last offset, attributes (codec, transactional,
    control, delete horizon), base and max timestamp, producer id, record count. So the
    empty batches Kafka keeps for producers' last batches, and the delete horizons, match."""
    run.compact.ok()
    tp = (COMPACTED, 0)
    ours, kafka = _batches(run.plog_compacted_dir, tp), _batches(run.kafka_dir, tp)
    fields = "(base, last, attributes, base ts, max ts, producer id, count)"
    assert ours == kafka, f"batches {fields}: " + first_difference(ours, kafka, "plog", "Kafka")


def test_compacted_segments_equal_kafkas(run):
    """The cleaned segments are Kafka's: the same segment base offsets (Kafka groups the
    segments it rewrites by the topic's segment size), every ``.log``/``.index``/
    ``.timeindex``/``.txnindex`` and producer snapshot byte for byte, and the same
    ``*.deleted`` files (the replaced segments, kept for ``file.delete.delay.ms``)."""
    run.compact.ok()
    name = f"{COMPACTED}-0"
    ours, kafka = segment_bases(run.plog_compacted_dir / name), segment_bases(run.kafka_dir / name)
    assert ours == kafka, f"segment base offsets: plog {ours}, Kafka {kafka}"
    problems = folder_differences(name, live_files(run.plog_compacted_dir / name), live_files(run.kafka_dir / name))
    assert not problems, "\n".join(problems)


def test_cleaner_checkpoint_equal_kafkas(run):
    """``cleaner-offset-checkpoint``: the compacted partition is clean up to its active
    segment in both, and there is no other entry (Kafka writes one only for a log it
    cleaned - or whose stored entry it had to reset - not for the compacted internal
    partitions it looked at and left alone)."""
    run.compact.ok()
    ours = read_offset_checkpoint(run.plog_compacted_dir / "cleaner-offset-checkpoint")
    kafka = read_offset_checkpoint(run.kafka_dir / "cleaner-offset-checkpoint")
    assert kafka.get((COMPACTED, 0)) == run.uncleanable
    diff = {tp: (ours.get(tp), kafka.get(tp)) for tp in sorted(set(ours) | set(kafka)) if ours.get(tp) != kafka.get(tp)}
    assert not diff, f"cleaner-offset-checkpoint entries (plog, Kafka) differ at {diff}"


def test_compacted_log_served_by_kafka(run):
    """A real broker started on plog's compacted directory loads it without complaint and
    serves exactly the records plog kept."""
    run.compact.ok()
    tp = (COMPACTED, 0)
    got = [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp) for c in run.served_consumed[tp]]
    want = read_partition(run.plog_dir, tp).data
    assert got == want, first_difference(got, want, "kafka-python via the broker", "plog's files")
    assert got == compaction_oracle(run), first_difference(got, compaction_oracle(run), "served", "oracle")
    problems = server_log_problems(run.served_log, [tp, *[(t, 0) for t in RETENTION_TOPICS]], run.served_dir)
    assert not problems, "\n".join(problems[:20])


def test_server_log_problems_are_the_lines_about_plogs_files(tmp_path):
    """What a starved broker says about itself is not a verdict on plog's files; a WARN or
    ERROR naming a partition (whole) or the served directory is."""
    served = tmp_path / "served"
    lines = [
        "[2026-01-01 00:00:01,000] ERROR [QuorumController id=1] processExpiredBrokerHeartbeat: controller event "
        "queue overloaded. Timed out heartbeat from broker 1. (org.apache.kafka.controller.ReplicationControlManager)",
        "[2026-01-01 00:00:02,000] WARN [NodeToControllerChannelManager id=1 name=registration] Attempting to close "
        "NetworkClient that has already been closed. (org.apache.kafka.clients.NetworkClient)",
        "[2026-01-01 00:00:03,000] WARN [UnifiedLog partition=mt-compacted-01, dir=/elsewhere] not ours",
        "[2026-01-01 00:00:04,000] INFO [Partition mt-compacted-0 broker=1] Log loaded",
        "[2026-01-01 00:00:05,000] WARN [LogLoader partition=mt-compacted-0, dir=x] Found a corrupted index file",
        f"[2026-01-01 00:00:06,000] ERROR Error while loading log dir {served} (kafka.log.LogManager)",
        "[2026-01-01 00:00:07,000] ERROR [ReplicaManager broker=1] Error processing append operation on partition "
        "wQ75ircORMig7XYSaCxn5w:mt-retain-all-0 (kafka.server.ReplicaManager)",
    ]
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    assert server_log_problems(log, [(COMPACTED, 0), (RETAIN_ALL, 0)], served) == lines[4:]


# -- retention ---------------------------------------------------------------------------------------


def test_retention_segments_equal_kafkas(run):
    """After ``plog retention`` (configs from the metadata log, no flags) the remaining
    segments and the log start offset of every retention topic are the judging broker's,
    which deleted something in each (and in ``mt-retain-all`` everything: a new empty
    segment at the log end is all that is left)."""
    run.retention.ok()
    problems = []
    for topic in RETENTION_TOPICS:
        tp = (topic, 0)
        name = f"{topic}-0"
        ours, kafka = segment_bases(run.plog_dir / name), segment_bases(run.kafka_dir / name)
        if ours != kafka:
            problems.append(f"{name}: segments left plog {ours}, Kafka {kafka}")
        lso_ours, lso_kafka = log_start(run.plog_dir, tp), log_start(run.kafka_dir, tp)
        if lso_ours != lso_kafka or lso_kafka != run.judge_earliest[tp]:
            problems.append(f"{name}: log start offset plog {lso_ours}, Kafka's files {lso_kafka}, Kafka's "
                            f"ListOffsets {run.judge_earliest[tp]}")
    assert not problems, "\n".join(problems)
    pristine = {t: segment_bases(run.pristine / f"{t}-0") for t in RETENTION_TOPICS}
    kept = {t: segment_bases(run.kafka_dir / f"{t}-0") for t in RETENTION_TOPICS}
    leo = len(run.scenario.sent_to((RETAIN_ALL, 0)))
    assert kept[RETAIN_ALL] == [leo], kept[RETAIN_ALL]
    for t in (RETAIN_TIME, RETAIN_BYTES):
        assert 0 < len(kept[t]) < len(pristine[t]) and kept[t] == pristine[t][-len(kept[t]):], (t, kept[t])


def test_retention_files_equal_kafkas(run):
    """File for file: the remaining segments and producer snapshots byte for byte, the
    ``*.deleted`` files (deleted segments are renamed, not removed, for
    ``file.delete.delay.ms``) by name and content; and the leader epochs but for the entry
    the judging broker added when it became leader again at the log end offset."""
    run.retention.ok()
    problems = []
    for topic in RETENTION_TOPICS:
        name = f"{topic}-0"
        problems += folder_differences(name, live_files(run.plog_dir / name), live_files(run.kafka_dir / name))
        ours = read_epochs(run.plog_dir / name / "leader-epoch-checkpoint")
        kafka = read_epochs(run.kafka_dir / name / "leader-epoch-checkpoint")
        leo = len(run.scenario.sent_to((topic, 0)))
        if not epochs_agree(ours, kafka, leo):
            problems.append(f"{name}/leader-epoch-checkpoint: plog {ours}, Kafka {kafka} (LEO {leo})")
    assert not problems, "\n".join(problems)


def test_log_dir_checkpoints_equal_kafkas(run):
    """The recovery-point, log-start-offset and replication-offset checkpoints plog wrote
    equal the judging broker's (as maps; the KRaft metadata log is the Raft layer's)."""
    run.compact.ok()
    run.retention.ok()
    problems = []
    for name in LOG_DIR_CHECKPOINTS:
        a, b = read_offset_checkpoint(run.plog_dir / name), read_offset_checkpoint(run.kafka_dir / name)
        diff = {tp: (a.get(tp), b.get(tp)) for tp in sorted(set(a) | set(b)) if a.get(tp) != b.get(tp)}
        if diff:
            problems.append(f"{name}: (plog, Kafka) differ at {diff}")
    assert not problems, "\n".join(problems)


def test_retained_log_served_by_kafka(run):
    """The broker serving plog's copy answers ListOffsets EARLIEST with plog's log start
    offsets, and serves every remaining record."""
    run.retention.ok()
    for topic in RETENTION_TOPICS:
        tp = (topic, 0)
        assert run.served_earliest[tp] == log_start(run.plog_dir, tp), (tp, run.served_earliest)
        got = [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp) for c in run.served_consumed[tp]]
        want = [(s.offset, s.key, s.value, tuple(s.headers), s.timestamp)
                for s in run.scenario.sent_to(tp) if s.offset >= run.served_earliest[tp]]
        assert got == want, f"{tp}: " + first_difference(got, want, "served", "sent")


def test_retention_dry_run_explains_kafkas_decisions(run, tmp_path):
    """``plog retention --dry-run --explain`` on the untouched directory names every
    segment the judging broker deleted as deletable by its rule, and the first segment it
    kept as kept with that rule's reason; and writes nothing."""
    copy = copy_log_dir(run.pristine, tmp_path / "logs")
    before = tree_digest(copy)
    got = plog("retention", "--dry-run", "--explain", copy)
    assert got.code == 0, got
    assert tree_digest(copy) == before, "a dry run changed the directory"
    lines = got.out.splitlines()
    rules = {RETAIN_TIME: "retention.ms", RETAIN_BYTES: "retention.bytes", RETAIN_ALL: "retention.ms"}
    problems = []
    for topic, rule in rules.items():
        block = _partition_block(lines, f"{topic}-0", "retention")
        kept_by_kafka = segment_bases(run.kafka_dir / f"{topic}-0")
        deleted = sorted(set(segment_bases(run.pristine / f"{topic}-0")) - set(kept_by_kafka))
        assert deleted, topic
        for base in deleted:
            line = _segment_line(block, base)
            if line is None or "DELETE" not in line or rule not in line:
                problems.append(f"{topic}: segment {base} (deleted by Kafka) not shown as DELETE by {rule}: {line!r}")
        if topic == RETAIN_ALL:
            new_segment = f"{len(run.scenario.sent_to((topic, 0))):020d}.log"
            if not any("roll" in line and new_segment in line for line in block):
                problems.append(f"{topic}: no roll of a new segment at the log end in {block}")
            continue
        first_kept = kept_by_kafka[0]
        line = _segment_line(block, first_kept)
        if line is None or "DELETE" in line or "keep" not in line.lower() or rule not in line.split("keep", 1)[-1]:
            problems.append(f"{topic}: first kept segment {first_kept} not shown as kept for {rule}: {line!r}")
    assert not problems, "\n".join(problems) + "\n--- output ---\n" + got.out[-6000:]


def _partition_block(lines: list[str], partition: str, operation: str) -> list[str]:
    """The headline of ``partition [operation]`` and its indented explanation lines."""
    for i, line in enumerate(lines):
        if line.startswith(f"{partition} [{operation}]"):
            block = [line]
            for follow in lines[i + 1:]:
                if not follow.startswith(" "):
                    break
                block.append(follow)
            return block
    raise AssertionError(f"no {partition} [{operation}] block in the output")


def _segment_line(block: list[str], base: int) -> str | None:
    name = f"{base:020d}.log"
    return next((line for line in block if line.strip().startswith(name)), None)


# -- recovery ---------------------------------------------------------------------------------------


@dataclass
class RecoverRun:
    crashed: object  # conftest.CrashRun
    copy: Path
    recover: CliRun


_RECOVERED: dict[str, RecoverRun] = {}


@pytest.fixture(scope="session")
def recovered(kafka_crashed, kafka_version, tmp_path_factory) -> RecoverRun:
    """``plog recover`` on a copy of the killed (and damaged) directory, once per version."""
    if kafka_version not in _RECOVERED:
        crashed = kafka_crashed(kafka_version)
        copy = copy_log_dir(crashed.killed, tmp_path_factory.mktemp(f"kafka-{kafka_version}-plog-recover") / "logs")
        _RECOVERED[kafka_version] = RecoverRun(crashed, copy, plog("recover", copy, "--jobs", "1", "--quiet"))
    return _RECOVERED[kafka_version]


def _partitions(log_dir: Path) -> list[tuple[str, int]]:
    out = []
    for entry in sorted(os.listdir(log_dir)):
        if (Path(log_dir) / entry).is_dir() and not entry.startswith("__cluster_metadata"):
            topic, _, part = entry.rpartition("-")
            if topic and part.isdigit():
                out.append((topic, int(part)))
    return out


def test_recover_equals_kafkas_recovery(recovered):
    """Every partition folder ``plog recover`` left equals the one the real broker recovered
    (segments, indexes, ``.txnindex``, producer snapshots: byte for byte; the same file
    names), the damaged partitions included; leader epochs equal but for the entry a
    restarted broker adds when it becomes leader again at the log end offset."""
    rec = recovered
    rec.recover.ok()
    crashed = rec.crashed
    problems = []
    for tp in _partitions(crashed.kafka_dir):
        name = f"{tp[0]}-{tp[1]}"
        problems += folder_differences(name, live_files(rec.copy / name), live_files(crashed.kafka_dir / name))
        ours = read_epochs(rec.copy / name / "leader-epoch-checkpoint")
        kafka = read_epochs(crashed.kafka_dir / name / "leader-epoch-checkpoint")
        leo = crashed.kafka_end_offsets[tp]
        if not epochs_agree(ours, kafka, leo):
            problems.append(f"{name}/leader-epoch-checkpoint: plog {ours}, Kafka {kafka} (LEO {leo})")
    assert not problems, f"damage: {crashed.damage}\n" + "\n".join(problems)


def test_recover_checkpoints_equal_kafkas(recovered):
    """The recovery points and log start offsets ``plog recover`` wrote equal the restarted
    broker's after its clean stop, and the directory has a clean-shutdown marker."""
    rec = recovered
    rec.recover.ok()
    problems = []
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        a, b = read_offset_checkpoint(rec.copy / name), read_offset_checkpoint(rec.crashed.kafka_dir / name)
        diff = {tp: (a.get(tp), b.get(tp)) for tp in sorted(set(a) | set(b)) if a.get(tp) != b.get(tp)}
        if diff:
            problems.append(f"{name}: (plog, Kafka) differ at {diff}")
    assert not problems, "\n".join(problems)
    assert (rec.copy / ".kafka_cleanshutdown").exists()


@dataclass
class RecoverPlan:
    crashed: object  # conftest.CrashRun
    run: CliRun
    changed: bool  # whether the dry run changed any file


_PLANS: dict[str, RecoverPlan] = {}


@pytest.fixture(scope="session")
def recover_plan(kafka_crashed, kafka_version, tmp_path_factory) -> RecoverPlan:
    """``plog recover --dry-run`` on another copy of the killed directory, once per version."""
    if kafka_version not in _PLANS:
        crashed = kafka_crashed(kafka_version)
        copy = copy_log_dir(crashed.killed, tmp_path_factory.mktemp(f"kafka-{kafka_version}-plog-plan") / "logs")
        before = tree_digest(copy)
        got = plog("recover", "--dry-run", copy, "--jobs", "1", "--quiet")
        _PLANS[kafka_version] = RecoverPlan(crashed, got, tree_digest(copy) != before)
    return _PLANS[kafka_version]


def _damaged_files(crashed) -> dict[str, set[str]]:
    """partition folder -> names of the files ``damage_killed_dir`` cut or deleted."""
    out: dict[str, set[str]] = {}
    for what in crashed.damage:
        m = re.search(r"([\w.-]+-\d+)/([\w.]+)", what)
        assert m, what
        out.setdefault(m.group(1), set()).add(m.group(2))
    return out


def _plan_block(out: str, partition: str) -> list[str]:
    """A partition's lines of the text plan: ``  <partition>: ...`` and the deeper lines under it."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"  {partition}:"):
            block = [line]
            for follow in lines[i + 1:]:
                if not follow.startswith("    "):
                    break
                block.append(follow)
            return block
    return []


def test_recover_dry_run_names_damaged_partitions(recover_plan):
    """``plog recover --dry-run`` on the killed directory exits 3 (work to do), names every
    partition the damage touched, and changes nothing."""
    got = recover_plan.run
    assert got.code == 3, got
    assert not recover_plan.changed, "a dry run changed the directory"
    damaged = _damaged_files(recover_plan.crashed)
    assert set(damaged) == {f"{TORN_TOPIC}-0", *(f"{t}-{p}" for t, p in DAMAGED)}, recover_plan.crashed.damage
    missing = [p for p in sorted(damaged) if not _plan_block(got.out, p)]
    assert not missing, f"not named: {missing}\n--- output ---\n{got.out[-6000:]}"


def test_recover_dry_run_names_damaged_files(recover_plan):
    """An unclean shutdown puts every partition in the plan, so more than the partition is
    asked: each file the damage cut or deleted is named in its partition's plan (the torn
    segment truncated, the missing indexes rebuilt, the unreadable producer snapshot
    deleted) - each is something the real run does to it."""
    got = recover_plan.run
    assert got.code == 3, got
    problems = []
    for partition, files in sorted(_damaged_files(recover_plan.crashed).items()):
        block = _plan_block(got.out, partition)
        for name in sorted(files):
            if not any(name in line for line in block):
                problems.append(f"{partition}: the plan does not name {name}: " + " | ".join(b.strip() for b in block))
    assert not problems, f"damage: {recover_plan.crashed.damage}\n" + "\n".join(problems)


def test_recover_twice_plans_nothing(recovered):
    """After ``plog recover`` a dry run finds nothing to do (exit 0), in text and JSON."""
    rec = recovered
    rec.recover.ok()
    got = plog("recover", "--dry-run", rec.copy, "--jobs", "1", "--quiet")
    assert got.code == 0, got
    got = plog("recover", "--dry-run", rec.copy, "--jobs", "1", "--quiet", "--format", "json")
    assert got.code == 0, got
    json.loads(got.out)


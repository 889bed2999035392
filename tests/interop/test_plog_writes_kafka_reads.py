"""plog writes, Kafka reads (issue 5, item 4).

plog's engine writes a data directory (``plog_scenarios.write_plog_scenario``: every
codec, keyed/keyless records, headers, tombstones, transactions committed and aborted
with ``.txnindex`` files, idempotent producers, dozens of rolled segments with their
indexes, producer snapshots, ``leader-epoch-checkpoint`` and the log dir checkpoints),
then real Apache Kafka (both versions of ``kafka_versions.VERSIONS``) reads it:

* **DumpLogSegments** reads every segment, index, snapshot and transaction index plog
  wrote without an error; ``--verify-index-only`` and ``--index-sanity-check`` find
  nothing; ``plog dump`` prints exactly what Kafka's tool prints for the same files.
* **A broker serves them.** A broker creates the topics (same partition counts and
  topic configs) and is stopped cleanly; each partition folder's contents are replaced
  by plog's (the broker's ``partition.metadata``, which holds the topic id, is kept) and
  plog's entries go into the log dir checkpoints. Two copies are started: one with
  plog's clean-shutdown marker (Kafka loads plog's files as they are), one without it and
  with every recovery point at 0 (Kafka recovers every segment plog wrote). A
  kafka-python consumer reads every record back with plog's offsets, timestamps and
  timestamp types, keys, values and headers; read_committed hides exactly the aborted
  transactions; the end offsets are plog's log end offsets.
* **Kafka's rebuild equals plog's files.** Both brokers are stopped cleanly and every
  partition folder is compared with what plog wrote, byte for byte: see
  :func:`test_kafka_recovery_rebuilds_plogs_files`.
"""

from __future__ import annotations

import io
import os
import re
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka_broker import CLEAN_SHUTDOWN_FILE, copy_log_dir
from kafka_files import (
    first_difference,
    folder_differences,
    index_entries,
    partition_files,
    read_epochs,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kafka_scenarios import _create_topics, consume_all
from kafka_versions import major, once_per_version, small_segment_config
from plog_scenarios import TXN_TOPIC, write_plog_scenario

from plog.cli.main import main as plog_main

pytestmark = pytest.mark.interop

#: The files of a partition folder Kafka's DumpLogSegments reads.
DUMPABLE = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
#: The files compared byte for byte after Kafka has loaded (and maybe recovered) them.
COMPARED = DUMPABLE
#: The log dir checkpoints that carry per-partition offsets.
RECOVERY_POINTS = "recovery-point-offset-checkpoint"
LOG_STARTS = "log-start-offset-checkpoint"
HIGH_WATERMARKS = "replication-offset-checkpoint"


# -- plog's side --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def plog_written(tmp_path_factory):
    """plog's data directory (closed cleanly), written once per session; read-only."""
    return write_plog_scenario(tmp_path_factory.mktemp("plog-written") / "data")


def _partition_dirs(scenario) -> list[Path]:
    return [scenario.data_dir / f"{t}-{p}" for t, p in scenario.partitions()]


def _dumpable_files(scenario) -> list[Path]:
    out = []
    for pdir in _partition_dirs(scenario):
        out += [pdir / n for n in sorted(os.listdir(pdir)) if n.endswith(DUMPABLE)]
    return out


# -- checkpoints, parsed and written by hand (Kafka's text format, version 0) ------------------


# -- DumpLogSegments -----------------------------------------------------------------------------

#: Lines a Kafka tool may print on stderr that say nothing about the files (logging set-up).
_NOISE = re.compile(r"^(SLF4J: .*|log4j:WARN .*|WARNING: .*|\s*)$")
#: Words in a DumpLogSegments output that mean it disagrees with a file.
_TROUBLE = ("Exception", "exception", "Error", "error", "Ignoring", "Mismatches", "mismatch", "non-consecutive",
            "is corrupt", "corrupt", "Found log offset", "Found timestamp", "is smaller than", "not match",
            "Unknown", "invalid", "Invalid", "Skipping")


_NON_CONSECUTIVE = re.compile(r"^Non-consecutive offsets in (.*)$")
_PAIR = re.compile(r"^  (-?\d+) is followed by (-?\d+)$")


def _stderr_problems(err: str, version: str) -> list[str]:
    """The lines of a DumpLogSegments stderr that are not logging noise, except one quirk
    of Kafka 4.x's tool: with ``--deep-iteration`` it starts its offset check from -1 in
    every ``.log`` file, so each segment whose first offset is not 0 gets a report
    ``Non-consecutive offsets in <file>`` / ``  -1 is followed by <base offset>``, whoever
    wrote the segment (3.x's Scala tool starts at the second record). Such a report is
    accepted only from 4.x and only when it is that one pair and the offset is the file's
    base offset."""
    problems = []
    lines = err.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _NON_CONSECUTIVE.match(line)
        if m:
            pairs = []
            while i + 1 < len(lines) and _PAIR.match(lines[i + 1]):
                i += 1
                pairs.append(tuple(int(x) for x in _PAIR.match(lines[i]).groups()))
            base = int(Path(m.group(1)).name.split(".")[0])
            if major(version) < 4 or pairs != [(-1, base)] or base == 0:
                problems.append(f"{line} {pairs}")
        elif not _NOISE.match(line):
            problems.append(line)
        i += 1
    return problems


def plog_dump(version: str, files, *options) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            plog_main(["dump", "--kafka-version", str(major(version)), "--files", ",".join(map(str, files)),
                       *options])
        except SystemExit as e:
            code = e.code or 0
    return code, out.getvalue(), err.getvalue()


def _first_line_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}:\n  plog : {x!r}\n  Kafka: {y!r}"
    return f"plog {len(la)} lines, Kafka {len(lb)} lines; first extra: {(la[len(lb):] or lb[len(la):])[:1]!r}"


@pytest.fixture(scope="session")
def kafka_dumps(dump_log_segments):
    """Kafka's DumpLogSegments output for every dumpable file, per (version, options)."""
    done = {}

    def get(scenario, version: str, *options: str):
        key = (version, options)
        if key not in done:
            done[key] = dump_log_segments(version, _dumpable_files(scenario), *options)
        return done[key]

    return get


def test_dump_log_segments_reads_every_file(plog_written, kafka_version, kafka_dumps):
    """Kafka's tool dumps every segment, index, time index, transaction index and producer
    snapshot plog wrote, with ``--deep-iteration --print-data-log`` (every record decoded,
    every codec), without an error or a complaint."""
    files = _dumpable_files(plog_written)
    assert {f.suffix for f in files} == set(DUMPABLE), "the scenario must produce every kind of file"
    out, err, code = kafka_dumps(plog_written, kafka_version, "--deep-iteration", "--print-data-log")
    assert code == 0, err[-3000:]
    assert not _stderr_problems(err, kafka_version), err[-3000:]
    trouble = [line for line in out.splitlines() if any(w in line for w in _TROUBLE)]
    assert not trouble, "\n".join(trouble[:20])
    dumped = [line.removeprefix("Dumping ") for line in out.splitlines() if line.startswith("Dumping ")]
    assert dumped == [str(f) for f in files]
    # Every record plog wrote (and every marker) was decoded by Kafka's tool.
    records = [line for line in out.splitlines() if line.startswith("| offset: ")]
    markers = sum(len(m) for m in plog_written.markers.values())
    assert len(records) == len(plog_written.records) + markers
    assert sum(1 for line in records if "endTxnMarker: COMMIT" in line or "endTxnMarker: ABORT" in line) == markers


@pytest.mark.parametrize("check", ["--verify-index-only", "--index-sanity-check"])
def test_index_checks_find_nothing(plog_written, kafka_version, dump_log_segments, check):
    """``--verify-index-only`` (each ``.index`` entry against the batch at its position,
    each ``.timeindex`` entry against the log) and ``--index-sanity-check`` (the broker's
    start-up check) on every offset and time index plog wrote: nothing but the
    ``Dumping <file>`` lines, Kafka's ``<file> passed sanity check.`` lines and, for an
    index that is really empty (0 bytes), ``<file> is empty.``."""
    files = [f for f in _dumpable_files(plog_written) if f.suffix in (".index", ".timeindex")]
    empty = {str(f) for f in files if f.stat().st_size == 0}
    out, err, code = dump_log_segments(kafka_version, files, check)
    assert code == 0, err[-3000:]
    assert not _stderr_problems(err, kafka_version), err[-3000:]
    dumped = [line.removeprefix("Dumping ") for line in out.splitlines() if line.startswith("Dumping ")]
    assert dumped == [str(f) for f in files]
    extra = [line for line in out.splitlines()
             if not line.startswith("Dumping ")
             and not (check == "--index-sanity-check" and line.endswith(" passed sanity check."))
             and not (line.endswith(" is empty.") and line.removesuffix(" is empty.") in empty)]
    assert not extra, "\n".join(extra[:30])
    if check == "--index-sanity-check":
        passed = [line for line in out.splitlines() if line.endswith(" passed sanity check.")]
        assert len(passed) == len(files) - sum(1 for f in empty if f.endswith(".index"))


@pytest.mark.parametrize("options", [(), ("--print-data-log",)], ids=["plain", "print-data-log"])
def test_plog_dump_equals_kafka(plog_written, kafka_version, kafka_dumps, options):
    """``plog dump --kafka-version <major>`` prints exactly Kafka's output for the files
    plog wrote (both read the same bytes the same way): stdout, and stderr without the
    JVM's logging noise (with ``--print-data-log`` Kafka 4.x reports every segment not
    starting at offset 0 as non-consecutive; plog reproduces that too)."""
    out, err, code = kafka_dumps(plog_written, kafka_version, *options)
    assert code == 0 and not _stderr_problems(err, kafka_version), err[-3000:]
    assert not [line for line in out.splitlines() if any(w in line for w in _TROUBLE)]
    pcode, pout, perr = plog_dump(kafka_version, _dumpable_files(plog_written), *options)
    assert pcode == 0, perr[-3000:]
    assert pout == out, _first_line_difference(pout, out)
    kafka_err = "".join(f"{line}\n" for line in err.splitlines() if not _NOISE.match(line))
    assert perr == kafka_err, _first_line_difference(perr, kafka_err)


# -- a broker serves plog's files -------------------------------------------------------------------


@dataclass
class Served:
    """One broker run over plog's files."""

    mode: str  # "clean" (plog's clean-shutdown marker) or "recovered" (no marker, recovery points 0)
    log_dir: Path  # the broker's log dir, after it was stopped cleanly
    ready_ends: dict  # ListOffsets end offsets once every partition was served
    consumed: dict = field(default_factory=dict)  # isolation -> {tp: [Consumed]}
    end_offsets: dict = field(default_factory=dict)  # isolation -> {tp: end offset}
    server_log: Path | None = None


@dataclass
class ServedRun:
    version: str
    template: Path  # the freshly created topics' log dir, cleanly stopped, before plog's files
    runs: dict  # mode -> Served


def install_plog_files(scenario, log_dir: Path, *, clean: bool) -> None:
    """Replace the contents of every partition folder of ``log_dir`` (a stopped broker's)
    with plog's files, keeping the broker's ``partition.metadata``; put plog's offsets in
    the log dir checkpoints. ``clean``: plog's clean-shutdown marker replaces the broker's
    and the recovery points are plog's; otherwise there is no marker and the recovery
    points of plog's partitions are 0, so Kafka recovers every segment."""
    for t, p in scenario.partitions():
        dest, src = log_dir / f"{t}-{p}", scenario.data_dir / f"{t}-{p}"
        assert (dest / "partition.metadata").exists(), f"the broker did not create {dest}"
        for name in os.listdir(dest):
            if name != "partition.metadata":
                (dest / name).unlink()
        for name in os.listdir(src):
            if name != "partition.metadata":
                (dest / name).write_bytes((src / name).read_bytes())
    ours = set(scenario.partitions())
    for name in (RECOVERY_POINTS, LOG_STARTS, HIGH_WATERMARKS):
        theirs = {tp: o for tp, o in read_offset_checkpoint(log_dir / name).items() if tp not in ours}
        plog = read_offset_checkpoint(scenario.data_dir / name)
        if name == RECOVERY_POINTS and not clean:
            plog = {tp: 0 for tp in plog}
        write_offset_checkpoint(log_dir / name, {**theirs, **plog})
    marker = log_dir / CLEAN_SHUTDOWN_FILE
    if clean:
        marker.write_bytes((scenario.data_dir / CLEAN_SHUTDOWN_FILE).read_bytes())
    else:
        marker.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def kafka_served(plog_written, kafka_broker, tmp_path_factory):

    def build(version: str) -> ServedRun:
        scenario = plog_written
        base = tmp_path_factory.mktemp(f"kafka-{version}-plog-served")
        broker = kafka_broker(version)
        try:
            configs = scenario.kafka_topic_configs(small_segment_config(version))
            _create_topics(broker.bootstrap, {name: {"partitions": d["partitions"], "configs": configs[name]}
                                              for name, d in scenario.topics.items()})
            broker.wait_partitions_ready(scenario.partitions())
            broker.stop()
        except BaseException:
            broker.kill()
            raise
        template = copy_log_dir(broker.log_dir, base / "template")
        runs = {}
        for mode in ("clean", "recovered"):
            log_dir = copy_log_dir(template, base / mode)
            install_plog_files(scenario, log_dir, clean=mode == "clean")
            served = kafka_broker(version, log_dir=log_dir)
            try:
                ends = served.wait_partitions_ready(scenario.partitions())
                run = Served(mode, log_dir, ends, server_log=served.server_log)
                for isolation in ("read_uncommitted", "read_committed"):
                    run.consumed[isolation], run.end_offsets[isolation] = consume_all(
                        served.bootstrap, scenario.partitions(), isolation)
                served.stop()
            except BaseException:
                served.kill()
                raise
            runs[mode] = run
        return ServedRun(version, template, runs)

    return once_per_version(build, "serving plog's files")


MODES = ["clean", "recovered"]


@pytest.fixture(scope="session")
def served_run(kafka_served, kafka_version):
    return kafka_served(kafka_version)


def _want(records, *, committed: bool = False):
    return [(w.offset, w.key, w.value, w.headers, w.timestamp, w.timestamp_type)
            for w in records if not (committed and w.txn == "aborted")]


def _got(consumed):
    return [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp, c.timestamp_type) for c in consumed]


def _first_difference(got, want) -> str:
    return first_difference(got, want, "Kafka", "plog")


@pytest.mark.parametrize("mode", MODES)
def test_broker_serves_every_record(plog_written, served_run, mode):
    """read_uncommitted: every record plog wrote, aborted transactions included, with its
    offset, timestamp, timestamp type, key, value and headers (no control record)."""
    run = served_run.runs[mode]
    problems = []
    for tp in plog_written.partitions():
        got, want = _got(run.consumed["read_uncommitted"][tp]), _want(plog_written.written_to(tp))
        if got != want:
            problems.append(f"{tp}: {_first_difference(got, want)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("mode", MODES)
def test_broker_read_committed(plog_written, served_run, mode):
    """read_committed: the records of plog's committed transactions and of the
    non-transactional producers, never an aborted one, from plog's markers and
    ``.txnindex`` files (which Kafka's fetch path reads for the aborted transactions)."""
    run = served_run.runs[mode]
    problems = []
    for tp in plog_written.partitions():
        got = _got(run.consumed["read_committed"][tp])
        want = _want(plog_written.written_to(tp), committed=True)
        if got != want:
            problems.append(f"{tp}: {_first_difference(got, want)}")
    assert not problems, "\n".join(problems)
    hidden = [w for w in plog_written.written_to((TXN_TOPIC, 0)) + plog_written.written_to((TXN_TOPIC, 1))
              if w.txn == "aborted"]
    assert len(hidden) > 50, "the scenario must abort transactions"


@pytest.mark.parametrize("mode", MODES)
def test_broker_end_offsets_are_plogs(plog_written, served_run, mode):
    """The high watermark (and, every transaction being complete, the last stable
    offset) of every partition is plog's log end offset."""
    run = served_run.runs[mode]
    want = plog_written.end_offsets
    assert run.ready_ends == want
    assert run.end_offsets["read_uncommitted"] == want
    assert run.end_offsets["read_committed"] == want


_RECOVERING = re.compile(r"\[LogLoader partition=(\S+), dir=[^\]]*\] Recovering unflushed segment (\d+)\.")


def _segment_bases(pdir: Path) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in os.listdir(pdir) if n.endswith(".log"))


@pytest.mark.parametrize("mode", MODES)
def test_broker_loaded_plogs_files_quietly(plog_written, served_run, mode):
    """What the broker logged while loading plog's partitions (its ``server.log``): in the
    "recovered" run ``LogLoader`` recovered exactly every segment plog wrote (``Recovering
    unflushed segment <base>``; so the other checks of that run are about Kafka's own
    rebuild), in the "clean" run none. In both, no WARN or ERROR line names one of plog's
    partitions: a corrupt index deleted and rebuilt, a producer snapshot that failed to
    load, a truncated segment or a leader-epoch fix-up would show up here."""
    run = served_run.runs[mode]
    text = run.server_log.read_text(errors="replace")
    names = {f"{t}-{p}" for t, p in plog_written.partitions()}
    recovered = sorted((m.group(1), int(m.group(2))) for m in _RECOVERING.finditer(text) if m.group(1) in names)
    if mode == "recovered":
        want = sorted((name, base) for name in names for base in _segment_bases(plog_written.data_dir / name))
        assert recovered == want
    else:
        assert recovered == []
    noisy = [line for line in text.splitlines()
             if (" WARN " in line or " ERROR " in line) and any(re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", line)
                                                           for n in names)]
    assert not noisy, "\n".join(noisy[:20])


def test_scenario_covers_what_it_claims(plog_written):
    """The scenario (``plog_scenarios``) writes what the tests above are about: many
    segments, several per codec topic, two leader epochs, aborted transactions indexed in more than one
    segment (one of them with a last stable offset below its first offset: another
    producer's transaction was open), snapshots holding open transactions, every codec."""
    from plog.engine.storage.producer_state import read_snapshot

    counts = plog_written.segment_counts
    assert counts[("segments", 0)] >= 15
    assert [e for e, _ in read_epochs(plog_written.data_dir / "segments-0" / "leader-epoch-checkpoint")] == [0, 1]
    assert all(counts[(f"codec-{c}", 0)] >= 2 for c in ("none", "gzip", "snappy", "lz4", "zstd"))
    for p in (0, 1):
        pdir = plog_written.data_dir / f"{TXN_TOPIC}-{p}"
        txn_files = [f for f in pdir.glob("*.txnindex") if f.stat().st_size > 0]
        assert len(txn_files) >= 2, txn_files
    entries = [index_entries(f.name, f.read_bytes()) for f in plog_written.data_dir.glob(f"{TXN_TOPIC}-*/*.txnindex")]
    assert any(lso < first for es in entries for _v, _pid, first, _last, lso in es), entries
    open_txns = [e for f in plog_written.data_dir.glob("*/*.snapshot") for e in read_snapshot(f)
                 if e.current_txn_first_offset is not None]
    assert len({e.producer_id for e in open_txns}) >= 2
    assert {w.txn for w in plog_written.records} == {None, "committed", "aborted"}
    assert {w.timestamp_type for w in plog_written.records} == {0, 1}
    assert any(w.key is None for w in plog_written.records) and any(w.value is None for w in plog_written.records)
    assert any(h[1] is None for w in plog_written.records for h in w.headers)


# -- what Kafka leaves after loading plog's files ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_kafka_recovery_rebuilds_plogs_files(plog_written, served_run, mode):
    """After the broker loaded plog's files and was stopped cleanly, every partition
    folder holds exactly plog's files, byte for byte:

    * ``.log`` segments: Kafka neither truncated nor rewrote anything;
    * ``.index``, ``.timeindex``, ``.txnindex``: in the "recovered" run Kafka rebuilt
      all of them from the ``.log`` (recovery point 0, no clean-shutdown marker:
      ``LogLoader.recoverLog`` recovers every segment, ``LogSegment.recover`` resets and
      rebuilds the three indexes), so plog's must be what Kafka's own append path would
      have written. Whole files: both sides closed cleanly and a clean close trims an
      index to its valid entries (``trimToValidSize``), so the file is the entry list;
    * producer ``.snapshot`` files: Kafka's recovery deletes the snapshots above each
      segment it recovers and writes one at the end of every recovered segment (at each
      segment base after the first, which is where plog snapshots on roll) and at the log
      end offset (where plog snapshots on close); the set of files and their bytes
      (entry order: the broker's ``HashMap``) must be plog's;
    * the set of file names: nothing only one side has.

    Allowed differences: ``partition.metadata`` is the broker's (the topic id; plog's
    files were installed next to it), and ``leader-epoch-checkpoint`` may end with one
    new entry starting at the log end offset (the restarted broker became leader again
    with a new epoch, ``Partition.makeLeader``); the entries before it must be plog's.
    In the "clean" run Kafka loads plog's files without recovery, so nothing is rebuilt
    and the same comparison shows that a clean load and close changes none of them.
    """
    run = served_run.runs[mode]
    problems = []
    for t, p in plog_written.partitions():
        name = f"{t}-{p}"
        a = partition_files(plog_written.data_dir / name)
        b = partition_files(run.log_dir / name)
        epochs_plog = read_epochs(plog_written.data_dir / name / "leader-epoch-checkpoint")
        epochs_kafka = read_epochs(run.log_dir / name / "leader-epoch-checkpoint")
        leo = plog_written.end_offsets[(t, p)]
        if epochs_kafka != epochs_plog and not (epochs_kafka[:-1] == epochs_plog and epochs_kafka
                                                and epochs_kafka[-1][1] == leo
                                                and epochs_kafka[-1][0] > max((e for e, _ in epochs_plog), default=-1)):
            problems.append(f"{name}/leader-epoch-checkpoint: plog {epochs_plog}, Kafka {epochs_kafka} (LEO {leo})")
        for skip in ("leader-epoch-checkpoint", "partition.metadata"):
            a.pop(skip, None)
            b.pop(skip, None)
        assert all(f.endswith(COMPARED) for f in a), sorted(a)
        problems += folder_differences(name, a, b)
    assert not problems, f"Kafka {served_run.version} ({mode}) changed plog's files:\n" + "\n".join(problems)


@pytest.mark.parametrize("mode", MODES)
def test_kafka_checkpoints_after_serving(plog_written, served_run, mode):
    """The log dir checkpoints the broker wrote at its clean stop hold plog's offsets for
    plog's partitions: recovery points and high watermarks at plog's log end offsets, no
    log start offset above a first segment (plog wrote none)."""
    run = served_run.runs[mode]
    ours = set(plog_written.partitions())
    for name in (RECOVERY_POINTS, HIGH_WATERMARKS):
        got = {tp: o for tp, o in read_offset_checkpoint(run.log_dir / name).items() if tp in ours}
        assert got == plog_written.end_offsets, name
    assert {tp: o for tp, o in read_offset_checkpoint(run.log_dir / LOG_STARTS).items() if tp in ours} == {}
    assert read_offset_checkpoint(plog_written.data_dir / LOG_STARTS) == {}

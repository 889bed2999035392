"""Crash torture: compaction, retention and recovery killed with SIGKILL at any moment.

Each test builds its source log directory ONCE (a module fixture, in a template
directory), then every trial copies it (``shutil.copytree``), has a child process
(``maintainer.py``, forked by a zygote that imported plog once) run the operation on the
copy, and kills the child:

* **at a file-system step**: the child numbers every mutation it makes (rename, unlink,
  truncate, fsync, utime, file creation, write; see ``maintainer.py``) and SIGKILLs itself
  right before or right after step k, with k drawn from the steps of an uninterrupted run
  of the same operation on the same input (measured once per variant) -- mostly among the
  structural steps (everything but writes), sometimes among all of them;
* **at a reported step**: the child prints each structural step; the test kills it when it
  reads the k-th line (so the kill lands somewhere after that step, as a real crash would);
* **at a random time**: uniformly in ``[0, 1.2 x the uninterrupted duration]``.

After the kill the directory is brought back as after a crash and checked:

1. **compact** (``run_compaction`` with ``force``, a pinned ``now``, a 1 MiB or a tiny
   offset map that takes several rounds, ``file.delete.delay.ms`` 0 or the topic's; on the
   native path when plog's native module is active, and the uninterrupted results equal
   the pure-Python reference's byte for byte): two
   compacted topics with overwritten keys, tombstones, plain, idempotent and transactional
   batches (committed, aborted, one transaction left open), all codecs, and a
   ``min.compaction.lag.ms`` on one topic. After ``recover``: ``verify`` finds no error;
   every record the uninterrupted run keeps is present with the same offset, timestamp,
   key, value, headers and batch flags; no record is present that the source did not
   have. Then the compaction runs again (same ``now``) and the records, the batches that
   hold records (boundaries, header fields and records; see :class:`PartitionView` for the
   delete horizon) and the cleaner checkpoint must EQUAL the uninterrupted run's.
2. **retention** (``run_retention``, pinned ``now``, ``file.delete.delay.ms`` 0 or the
   topic's): a time-limited topic, a size-limited topic, a partition whose log start
   offset was raised by delete-records, and a ``now`` that deletes everything (the roll).
   After ``recover``: ``verify`` clean; the ``.log`` files left are a suffix of the
   source's, byte for byte (plus at most the empty segment a roll creates); the exposed
   records are a suffix of the source's and include every record the uninterrupted run
   keeps. Running retention again gives exactly the uninterrupted result (same files,
   same bytes, same log start offset).
3. **recover** (``recovery.recover``, sometimes ``salvage``/``all_segments``): a log
   directory after an unclean shutdown with a torn tail, garbage after the last batch, a
   corrupt batch in a middle segment, deleted indexes, leftover ``.swap``/``.cleaned``/
   ``.deleted`` files and a stale recovery point. After the kill, a second ``recover`` in
   the test must give exactly the files of an uninterrupted ``recover`` of the same damaged
   input (``.log`` names and bytes, quarantine files, log start and end offsets, the
   records), ``verify`` must find no error, and every batch before the damage is kept.

``test_cold_cli_compact_killed`` kills the real CLI (``python -m plog.cli compact``) a few
times at random moments and checks the same as 1.
``test_recovery_killed_between_truncation_and_deleting_later_segments`` takes one kill
point of 3 on purpose (recovery dies after truncating a corrupt middle segment, while it
renames the segments after it away).

After every recover: no ``.cleaned``/``.swap``/``.deleted`` file is left, and every
partition is reported recovered with the clean-shutdown marker written.

Seeds: a base seed per run (or ``PLOG_TORTURE_SEED``); a trial's seed is
``"<base>-<test>-<trial>"`` and every assertion message carries it, with the kill point.
Templates depend on the seed too. Step kills reproduce exactly; time kills reproduce the
policy, not the instant. ``PLOG_TORTURE_TRIALS`` sets the trials per operation (100).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from plog.engine.storage.checkpoints import OffsetCheckpointFile
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.log_manager import LogManager
from plog.engine.maintenance.runner import MaintenanceOptions, run_compaction, run_retention
from plog.engine.storage.file_names import TopicPartition
from plog.engine.inspect.verify import verify_path
from plog.formats.errors import FormatError
from plog.formats.record_batch import encode_batch

HERE = Path(__file__).resolve().parent
MAINTAINER = HERE / "maintainer.py"
_spec = importlib.util.spec_from_file_location("plog_torture_zygote", HERE / "zygote.py")
zygote_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zygote_mod)

BASE_SEED = os.environ.get("PLOG_TORTURE_SEED") or str(random.SystemRandom().randrange(1 << 32))
TRIALS = int(os.environ.get("PLOG_TORTURE_TRIALS", "100"))
COLD_TRIALS = 3
CHILD_TIMEOUT_S = 60.0

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
#: Record timestamps start a few hours before the real clock: producer state drops
#: producers idle for more than producer.id.expiration.ms (a day of wall-clock time) when
#: it loads, and the cleaner's "last batch of an active producer" rule needs them alive.
TS0 = (int(time.time() * 1000) // SECOND) * SECOND - 6 * HOUR
CODECS = (0, 0, 0, 0, 1, 2, 3, 4)  # none (most), gzip, snappy, lz4, zstd


def trial_seed(test: str, trial: int) -> str:
    return f"{BASE_SEED}-{test}-{trial}"


def repro(seed: str) -> str:
    return f"trial seed {seed!r} (rerun with PLOG_TORTURE_SEED={BASE_SEED})"


# ============================================================================ the source logs


def compact_value(key: bytes, offset: int) -> bytes:
    """A record's value is a function of its key and offset: a record that moved to
    another offset or took another record's value cannot compare equal."""
    n = (offset * 2654435761 >> 7) % 90
    return key + b"@%d:" % offset + bytes((offset + i) % 251 for i in range(n))


IDEMPOTENT_PID = 4000
TXN_PIDS = (5000, 5001)


def fill_compacted(log, rnd: random.Random, clock: list, *, records: int, keys: int, leave_open: bool) -> None:
    """Append ``records`` records over ``keys`` keys (a few hot ones): plain, idempotent and
    transactional batches of 1-6 records, ~10% tombstones, markers at random moments.
    ``clock[0]`` is the time the log's appends see (markers take it as their timestamp)."""
    seq: dict[int, int] = {}
    open_txn: dict[int, bool] = {}

    def end_txn(pid: int, commit: bool) -> None:
        clock[0] = TS0 + log.log_end_offset * SECOND
        log.append_end_txn_marker(pid, 0, commit=commit)
        open_txn[pid] = False

    while log.log_end_offset < records:
        base = log.log_end_offset
        count = rnd.randint(1, 6)
        recs = []
        for j in range(count):
            offset = base + j
            key = b"key-%03d" % int(keys * rnd.random() ** 2)
            value = None if rnd.random() < 0.1 else compact_value(key, offset)
            headers = (("n", b"%d" % offset),) if offset % 5 == 0 else ()
            recs.append((j, TS0 + offset * SECOND, key, value, headers))
        codec = rnd.choice(CODECS)
        r = rnd.random()
        pid = -1 if r < 0.5 else IDEMPOTENT_PID if r < 0.65 else rnd.choice(TXN_PIDS)
        clock[0] = TS0 + (base + count) * SECOND
        if pid < 0:
            batch = encode_batch(recs, compression_codec=codec)
        else:
            s = seq.get(pid, 0)
            seq[pid] = s + count
            batch = encode_batch(recs, compression_codec=codec, producer_id=pid, producer_epoch=0, base_sequence=s,
                                 is_transactional=pid in TXN_PIDS)
            if pid in TXN_PIDS:
                open_txn[pid] = True
        log.append_as_leader(batch)
        for txn_pid in TXN_PIDS:
            if open_txn.get(txn_pid) and rnd.random() < 0.3:
                end_txn(txn_pid, rnd.random() < 0.6)
    for i, txn_pid in enumerate(TXN_PIDS):
        if open_txn.get(txn_pid) and not (leave_open and i == 0):
            end_txn(txn_pid, True)
    if leave_open and not open_txn.get(TXN_PIDS[0]):
        # A transaction still open at the end: the last stable offset bounds the cleaner.
        offset = log.log_end_offset
        s = seq.get(TXN_PIDS[0], 0)
        log.append_as_leader(encode_batch([(0, TS0 + offset * SECOND, b"key-open", b"pending")],
                                          producer_id=TXN_PIDS[0], producer_epoch=0, base_sequence=s,
                                          is_transactional=True))
    # A few plain batches after it, so the active segment is not empty.
    for _ in range(3):
        offset = log.log_end_offset
        log.append_as_leader(encode_batch([(0, TS0 + offset * SECOND, b"key-tail", compact_value(b"key-tail", offset))]))


COMPACT_RECORDS = 900
COMPACT_KEYS = 120
COMPACT_NOW = TS0 + (COMPACT_RECORDS + 60) * SECOND


def build_compaction_template(root: Path, seed: str) -> None:
    """Two compacted topics in one log directory, closed cleanly (checkpoints, marker)."""
    rnd = random.Random(seed)
    clock = [TS0]
    common = {"cleanup.policy": "compact", "segment.bytes": "6144", "index.interval.bytes": "700"}
    lag = {"min.compaction.lag.ms": str(COMPACT_RECORDS * SECOND // 3)}
    with LogManager([root], time_source=lambda: clock[0]) as lm:
        for topic, extra, leave_open in (("kv", {}, False), ("lagged", lag, True)):
            log = lm.get_or_create_log((topic, 0), config={**common, **extra})
            fill_compacted(log, rnd, clock, records=COMPACT_RECORDS, keys=COMPACT_KEYS, leave_open=leave_open)


RETENTION_RECORDS = 700


def retention_value(offset: int) -> bytes:
    n = 40 + (offset * 2654435761 >> 9) % 120
    return (b"<%d>" % offset * (n // 4 + 1))[:n]


def build_retention_template(root: Path, seed: str) -> None:
    """Partitions whose timestamps are spread over ~10 days: ``events`` (retention.ms 3 days),
    ``sized`` (retention.bytes), and ``events-1`` whose log start offset was raised."""
    rnd = random.Random(seed)
    clock = [TS0]
    base = {"segment.bytes": "4096", "index.interval.bytes": "1024", "segment.ms": str(1000 * DAY)}
    configs = {"events": {**base, "retention.ms": str(3 * DAY)},
               "sized": {**base, "retention.ms": "-1", "retention.bytes": "30000"}}
    with LogManager([root], time_source=lambda: clock[0]) as lm:
        for tp in (("events", 0), ("events", 1), ("sized", 0)):
            log = lm.get_or_create_log(tp, config=configs[tp[0]])
            while log.log_end_offset < RETENTION_RECORDS:
                offset = log.log_end_offset
                count = rnd.randint(1, 5)
                recs = [(j, retention_ts(offset + j), b"k%d" % (offset + j), retention_value(offset + j))
                        for j in range(count)]
                clock[0] = retention_ts(offset + count)
                log.append_as_leader(encode_batch(recs, compression_codec=rnd.choice(CODECS)))
            if tp == ("events", 1):
                log.delete_records_before(RETENTION_RECORDS // 4 + 3)


def retention_ts(offset: int) -> int:
    # ~10 days over the log, unevenly: segments end at different times.
    return TS0 - 10 * DAY + offset * (10 * DAY // RETENTION_RECORDS) + (offset * 7919) % HOUR


#: ``now`` of the retention variants: in the middle (time and size both delete some) and
#: far ahead (everything is older than retention.ms: Kafka rolls an empty segment first).
RETENTION_NOWS = {"mid": TS0, "all": TS0 + 30 * DAY}


# ============================================================================ what a directory holds


@dataclass
class PartitionView:
    """One partition folder as the checks see it (test data is small: read whole).

    ``shapes`` describe the batches that hold records: every header field the cleaner
    must carry over, and the records, but not the delete horizon (a second cleaning pass
    gives a marker of a transaction whose data are gone its horizon, as Kafka's does) nor
    the CRC that covers it."""

    logs: dict[str, bytes]  # .log file name -> bytes
    records: dict[int, tuple]  # offset -> (timestamp, key, value, headers, producer id, transactional, control)
    batches: list[tuple[int, int]]  # (base, last) of every batch, in file order
    raw: dict[int, bytes]  # base offset -> the batch's bytes
    shapes: list[tuple]  # see above
    other: dict[str, bytes]  # quarantine files (salvage)
    log_start_offset: int
    log_end_offset: int


def partition_view(pdir: Path, log_start_checkpoint: int = 0, *, damaged: bool = False) -> PartitionView:
    """``damaged``: the source of the recovery test, read up to its damage (batches that
    fail their CRC are left out); otherwise every batch must be whole and valid."""
    logs, records, batches, raw, shapes, other = {}, {}, [], {}, [], {}
    for path in sorted(pdir.iterdir()):
        if path.name.startswith("quarantine-"):
            other[path.name] = path.read_bytes()
        if not path.name.endswith(".log"):
            continue
        logs[path.name] = path.read_bytes()
        for batch in _batches(path, damaged):
            batches.append((batch.base_offset, batch.last_offset))
            raw[batch.base_offset] = bytes(batch.buffer)
            recs = batch.records()
            if recs:
                shapes.append((batch.base_offset, batch.last_offset, batch.producer_id, batch.producer_epoch,
                               batch.base_sequence, batch.is_transactional, batch.is_control, batch.compression,
                               batch.timestamp_type, batch.partition_leader_epoch, tuple(recs)))
            for r in recs:
                records[r.offset] = (r.timestamp, r.key, r.value, tuple(r.headers), batch.producer_id,
                                     batch.is_transactional, batch.is_control)
    first_base = int(min(logs)[:20]) if logs else 0
    leo = batches[-1][1] + 1 if batches else first_base
    if logs:
        leo = max(leo, int(max(logs)[:20]))  # an empty last segment (a roll) holds the log end offset
    return PartitionView(logs, records, batches, raw, shapes, other, max(log_start_checkpoint, first_base), leo)


def _batches(path: Path, damaged: bool):
    walk = FileBatches(path)
    try:
        for batch in walk:
            if damaged and not batch.is_valid():
                continue
            batch.ensure_valid()
            yield batch
    except FormatError:
        if not damaged:
            raise
        return
    if not damaged:
        assert walk.trailing is None, f"{path}: {walk.trailing} after the last whole batch"


def partition_dirs(log_dir: Path) -> list[Path]:
    return sorted(p for p in log_dir.iterdir() if p.is_dir() and "-" in p.name)


def log_dir_views(log_dir: Path, *, damaged: bool = False) -> dict[str, PartitionView]:
    starts = read_checkpoint(log_dir, "log-start-offset-checkpoint")
    views = {}
    for pdir in partition_dirs(log_dir):
        topic, _, part = pdir.name.rpartition("-")
        views[pdir.name] = partition_view(pdir, starts.get(TopicPartition(topic, int(part)), 0), damaged=damaged)
    return views


def read_checkpoint(log_dir: Path, name: str) -> dict:
    path = log_dir / name
    return OffsetCheckpointFile(path).read() if path.exists() else {}


def verify_errors(log_dir: Path) -> list[str]:
    return [f.format_text() for f in verify_path(str(log_dir)) if f.severity == "error"]


def in_flight_files(log_dir: Path) -> list[str]:
    """Files of an unfinished clean, swap or deletion anywhere under ``log_dir`` (a load
    completes or removes every one of them)."""
    return sorted(str(p.relative_to(log_dir)) for p in log_dir.rglob("*")
                  if p.name.endswith((".cleaned", ".swap", ".deleted")))


def recover_log_dir(log_dir: Path, **kwargs):
    from plog.engine.maintenance.recovery import recover

    return recover(str(log_dir), jobs=1, **kwargs)


# ============================================================================ children and kills


@pytest.fixture(scope="module")
def zygote():
    z = zygote_mod.Zygote(MAINTAINER)
    yield z
    z.close()


@dataclass
class Measured:
    """An uninterrupted run of one variant: its steps, duration and result directory."""

    steps: list[tuple[str, str]]  # (kind, detail) of steps 1..n
    duration_s: float
    result_dir: Path

    @property
    def structural(self) -> list[int]:
        return [i + 1 for i, (kind, _) in enumerate(self.steps) if kind != "write"]


@dataclass
class KillPlan:
    mode: str  # "step", "line" or "time"
    step: int | None = None
    when: str = "before"
    line: int | None = None
    spin_s: float = 0.0
    delay_s: float = 0.0

    def describe(self, measured: Measured) -> str:
        if self.mode == "step":
            kind, detail = measured.steps[self.step - 1] if self.step <= len(measured.steps) else ("?", "?")
            return f"self-kill {self.when} step {self.step}/{len(measured.steps)} ({kind} {detail})"
        if self.mode == "line":
            return f"killed on reading structural step line #{self.line} (+{self.spin_s * 1e6:.0f} us)"
        return f"killed after {self.delay_s * 1000:.2f} ms (uninterrupted: {measured.duration_s * 1000:.1f} ms)"


def draw_kill(rnd: random.Random, measured: Measured) -> KillPlan:
    r = rnd.random()
    structural = measured.structural
    if r < 0.5 and measured.steps:
        step = rnd.choice(structural) if structural and rnd.random() < 0.7 else rnd.randint(1, len(measured.steps))
        return KillPlan("step", step=step, when=rnd.choice(("before", "after")))
    if r < 0.7 and structural:
        return KillPlan("line", line=rnd.randint(1, len(structural)),
                        spin_s=rnd.choice((0.0, 0.0, rnd.uniform(0, 0.002))))
    return KillPlan("time", delay_s=rnd.uniform(0, 1.2 * measured.duration_s))


@dataclass
class ChildRun:
    lines: list[str]
    completed: bool
    kill_line: str | None  # the child's K line (a step kill)
    last_step: str | None  # the last F line seen
    elapsed_s: float

    def describe(self) -> str:
        state = "completed before the kill" if self.completed else "killed"
        return f"{state}; {self.kill_line or self.last_step or 'no step reported'}"


def run_child(zyg, params: dict, plan: KillPlan | None, ctx: str) -> ChildRun:
    """Start a child on ``params``; kill it as ``plan`` says (None: let it finish)."""
    params = dict(params)
    if plan is None:
        params["trace"] = "all"
    elif plan.mode == "step":
        params.update(trace="none", kill_step=plan.step, kill_when=plan.when)
    else:
        params["trace"] = "structural"
    started = time.perf_counter()
    zyg.send("run " + json.dumps(params))
    first = zyg.get(CHILD_TIMEOUT_S)
    if not first.startswith("P "):
        pytest.fail(f"the child did not start: {first!r}; {ctx}")
    pidfd = os.pidfd_open(int(first[2:]))
    lines = [first]
    try:
        if plan is not None and plan.mode == "time":
            time.sleep(plan.delay_s)
            zygote_mod.sigkill(pidfd)
        elif plan is not None and plan.mode == "line":
            got = 0
            deadline = time.perf_counter() + CHILD_TIMEOUT_S
            while got < plan.line:
                line = zyg.get(deadline - time.perf_counter())
                lines.append(line)
                if line.startswith("F "):
                    got += 1
                elif line[:1] in ("D", "E"):
                    break
            end = time.perf_counter() + plan.spin_s
            while time.perf_counter() < end:
                pass
            zygote_mod.sigkill(pidfd)
        if not zygote_mod.wait_dead(pidfd, CHILD_TIMEOUT_S):
            pytest.fail(f"the child neither finished nor died within {CHILD_TIMEOUT_S} s; {ctx}")
    finally:
        zygote_mod.sigkill(pidfd)  # never leave a child running, whatever happened above
        os.close(pidfd)
    elapsed = time.perf_counter() - started
    lines += zyg.sync()
    errors = [line for line in lines if line.startswith("E ")]
    if errors:
        pytest.fail(f"the operation raised in the child; {ctx}:\n{errors[0][2:].replace(' | ', chr(10))}")
    done = [line for line in lines if line.startswith("D ")]
    kills = [line for line in lines if line.startswith("K ")]
    steps = [line for line in lines if line.startswith("F ")]
    return ChildRun(lines, bool(done), kills[0] if kills else None, steps[-1] if steps else None, elapsed)


def measure(zyg, template: Path, work: Path, params: dict, what: str) -> Measured:
    """Run ``params`` uninterrupted on a copy of ``template`` at ``work``."""
    shutil.copytree(template, work)
    run = run_child(zyg, {**params, "dir": str(work)}, None, f"uninterrupted {what}")
    assert run.completed, f"the uninterrupted {what} did not finish: {run.lines[-3:]}"
    steps = []
    for line in run.lines:
        if line.startswith("F "):
            _, n, kind, *detail = line.split(" ", 3)
            assert int(n) == len(steps) + 1, f"step lines out of order in the uninterrupted {what}"
            steps.append((kind, " ".join(detail)))
        elif line.startswith("D "):
            _, ms, count = line.split()
            duration = float(ms) / 1000
            assert int(count) == len(steps), f"{what}: {count} steps counted, {len(steps)} reported"
    return Measured(steps, duration, work)


def recovered(log_dir: Path, ctx: str, **kwargs) -> None:
    """``recover`` the directory; every partition must come back."""
    report = recover_log_dir(log_dir, **kwargs)
    bad = [f"{p.partition}: {p.status} {p.reason}" for d in report.log_dirs for p in d.partitions
           if p.status != "recovered"]
    assert not bad, f"recover failed: {bad}; {ctx}"
    assert (log_dir / ".kafka_cleanshutdown").exists(), f"recover wrote no clean-shutdown marker; {ctx}"


# ============================================================================ 1. compaction

COMPACT_VARIANTS = {
    "map-1MiB": {"buffer_size": 1 << 20, "delay": 0},
    "map-1MiB-delayed": {"buffer_size": 1 << 20, "delay": None},
    "map-110-keys": {"buffer_size": 24 * 110, "delay": 0},  # several rounds
    "map-110-keys-delayed": {"buffer_size": 24 * 110, "delay": None},
}


def compact_params(variant: str) -> dict:
    return {"op": "compact", "now_ms": COMPACT_NOW, **COMPACT_VARIANTS[variant]}


def compact_options(variant: str) -> MaintenanceOptions:
    v = COMPACT_VARIANTS[variant]
    return MaintenanceOptions(now_ms=COMPACT_NOW, buffer_size=v["buffer_size"], force=True,
                              file_delete_delay_ms=v["delay"])


@dataclass
class Setup:
    """A test's template, the source as read from it, and per variant the uninterrupted run."""

    template: Path
    source: dict[str, PartitionView]  # partition folder name -> view of the template
    measured: dict[str, Measured]  # variant -> its uninterrupted run
    results: dict[str, dict[str, PartitionView]]  # variant -> partition -> view after that run
    checkpoints: dict[str, dict]  # variant -> the checkpoint file the test compares after that run


@pytest.fixture(scope="module")
def compaction_setup(zygote, tmp_path_factory) -> Setup:
    root = tmp_path_factory.mktemp("compaction")
    template = root / "template"
    build_compaction_template(template, f"{BASE_SEED}-compact-template")
    source = log_dir_views(template)
    measured, results, checkpoints = {}, {}, {}
    for name in COMPACT_VARIANTS:
        m = measure(zygote, template, root / name, compact_params(name), f"compaction ({name})")
        errors = verify_errors(m.result_dir)
        assert not errors, f"the uninterrupted compaction ({name}) left errors: {errors}"
        measured[name] = m
        results[name] = log_dir_views(m.result_dir)
        checkpoints[name] = read_checkpoint(m.result_dir, "cleaner-offset-checkpoint")
        for part, view in results[name].items():
            assert len(view.records) < len(source[part].records), f"{name}: nothing was compacted in {part}"
    return Setup(template, source, measured, results, checkpoints)


def check_compaction_partial(now: PartitionView, ref: PartitionView, src: PartitionView, part: str, ctx: str) -> None:
    """After a crash: everything the uninterrupted run keeps is there, nothing foreign is."""
    missing = sorted(o for o, r in ref.records.items() if now.records.get(o) != r)
    assert not missing, (f"{part}: {len(missing)} records of the uninterrupted result are missing or changed, "
                         f"first offsets {missing[:8]}; {ctx}")
    foreign = sorted(o for o, r in now.records.items() if src.records.get(o) != r)
    assert not foreign, f"{part}: records not in the source at offsets {foreign[:8]}; {ctx}"
    assert now.log_end_offset == src.log_end_offset, f"{part}: log end {now.log_end_offset}, source {src.log_end_offset}; {ctx}"
    offsets = [o for b in now.batches for o in b]
    assert offsets == sorted(offsets), f"{part}: batches out of offset order; {ctx}"


def check_compaction_final(now: PartitionView, ref: PartitionView, part: str, ctx: str) -> None:
    """After compacting again: the uninterrupted run's result, record for record and byte for byte."""
    if now.records != ref.records:
        extra = sorted(set(now.records) - set(ref.records))
        missing = sorted(set(ref.records) - set(now.records))
        changed = sorted(o for o in set(now.records) & set(ref.records) if now.records[o] != ref.records[o])
        pytest.fail(f"{part}: records differ from the uninterrupted compaction: extra {extra[:8]}, missing "
                    f"{missing[:8]}, changed {changed[:8]}; {ctx}")
    if now.shapes != ref.shapes:
        diff = next(i for i, (a, b) in enumerate(zip(now.shapes + [None], ref.shapes + [()])) if a != b)
        pytest.fail(f"{part}: the batches differ from the uninterrupted compaction's from #{diff}: "
                    f"{(now.shapes + [None])[diff]!r:.300} where {(ref.shapes + [None])[diff]!r:.300} was; {ctx}")


def check_killed_compaction(setup: Setup, variant: str, work: Path, ctx: str) -> None:
    """Everything a compaction killed at any moment must satisfy (module docstring, 1)."""
    recovered(work, ctx)
    errors = verify_errors(work)
    assert not errors, f"verify after recover: {errors[:5]}; {ctx}"
    assert not in_flight_files(work), f"in-flight files after recover: {in_flight_files(work)}; {ctx}"
    now = log_dir_views(work)
    assert sorted(now) == sorted(setup.source), ctx
    for part, ref in setup.results[variant].items():
        check_compaction_partial(now[part], ref, setup.source[part], part, ctx)

    run_compaction(work, compact_options(variant))
    errors = verify_errors(work)
    assert not errors, f"verify after compacting again: {errors[:5]}; {ctx}"
    after = log_dir_views(work)
    for part, ref in setup.results[variant].items():
        check_compaction_final(after[part], ref, part, ctx)
    checkpoint = read_checkpoint(work, "cleaner-offset-checkpoint")
    assert checkpoint == setup.checkpoints[variant], \
        f"cleaner-offset-checkpoint {checkpoint}, uninterrupted {setup.checkpoints[variant]}; {ctx}"


@pytest.mark.parametrize("trial", range(TRIALS))
def test_killed_compaction(zygote, compaction_setup, tmp_path, trial):
    setup = compaction_setup
    seed = trial_seed("compact", trial)
    rnd = random.Random(seed)
    variant = rnd.choice(sorted(COMPACT_VARIANTS))
    measured = setup.measured[variant]
    plan = draw_kill(rnd, measured)
    work = tmp_path / "logs"
    shutil.copytree(setup.template, work)
    ctx = f"compaction {variant}, {plan.describe(measured)}; {repro(seed)}"
    run = run_child(zygote, {**compact_params(variant), "dir": str(work)}, plan, ctx)
    check_killed_compaction(setup, variant, work, f"{ctx}; child {run.describe()}; dir {work}")
    shutil.rmtree(work)


def test_killed_compactions_run_the_native_path_whose_result_is_the_reference(compaction_setup, tmp_path,
                                                                             monkeypatch):
    """The children compact on the native path whenever plog's native module is active
    (the zygote's children share this process's environment and build), so the kills above
    interrupt the native offset map, filter and rebuild. The uninterrupted results every
    killed run is judged against are the pure-Python reference's, byte for byte: every file
    (segments, indexes, snapshots, the cleaner checkpoint) of a reference run on the same
    template equals the child's."""
    from plog.engine.maintenance import cleaner as cleaner_mod
    from plog.engine.maintenance.offset_map import NativeOffsetMap, SkimpyOffsetMap, new_offset_map
    from plog.formats import native

    assert isinstance(new_offset_map(4096), NativeOffsetMap) == native.active()
    setup = compaction_setup
    for variant in COMPACT_VARIANTS:
        work = tmp_path / variant
        shutil.copytree(setup.template, work)
        with monkeypatch.context() as mp:
            mp.setattr(cleaner_mod, "new_offset_map", SkimpyOffsetMap)
            run_compaction(work, compact_options(variant))
        child = setup.measured[variant].result_dir
        ours = {str(p.relative_to(work)): p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file()}
        theirs = {str(p.relative_to(child)): p.read_bytes() for p in sorted(child.rglob("*")) if p.is_file()}
        assert sorted(ours) == sorted(theirs), variant
        differ = [name for name in ours if ours[name] != theirs[name]]
        assert not differ, f"{variant}: the child's files differ from the reference run's: {differ}"


# ============================================================================ 2. retention

RETENTION_VARIANTS = {
    "mid": {"now_ms": RETENTION_NOWS["mid"], "delay": 0},
    "mid-delayed": {"now_ms": RETENTION_NOWS["mid"], "delay": None},
    "all": {"now_ms": RETENTION_NOWS["all"], "delay": 0},
    "all-delayed": {"now_ms": RETENTION_NOWS["all"], "delay": None},
}


def retention_params(variant: str) -> dict:
    return {"op": "retention", **RETENTION_VARIANTS[variant]}


def retention_options(variant: str) -> MaintenanceOptions:
    v = RETENTION_VARIANTS[variant]
    return MaintenanceOptions(now_ms=v["now_ms"], file_delete_delay_ms=v["delay"])


@pytest.fixture(scope="module")
def retention_setup(zygote, tmp_path_factory) -> Setup:
    root = tmp_path_factory.mktemp("retention")
    template = root / "template"
    build_retention_template(template, f"{BASE_SEED}-retention-template")
    source = log_dir_views(template)
    measured, results, checkpoints = {}, {}, {}
    for name in RETENTION_VARIANTS:
        m = measure(zygote, template, root / name, retention_params(name), f"retention ({name})")
        errors = verify_errors(m.result_dir)
        assert not errors, f"the uninterrupted retention ({name}) left errors: {errors}"
        measured[name] = m
        results[name] = log_dir_views(m.result_dir)
        checkpoints[name] = read_checkpoint(m.result_dir, "log-start-offset-checkpoint")
        for part, view in results[name].items():
            src = source[part]
            assert src.log_start_offset < view.log_start_offset < src.log_end_offset or name.startswith("all"), \
                f"{name}: retention should delete part of {part}: log start {view.log_start_offset}"
            assert view.log_end_offset == src.log_end_offset, f"{name}: {part} lost its log end offset"
    assert not results["all"]["events-0"].records, "the 'all' variant should delete every record of events-0"
    return Setup(template, source, measured, results, checkpoints)


def check_retention_partial(now: PartitionView, ref: PartitionView, src: PartitionView, part: str, ctx: str) -> None:
    """After a crash: a suffix of the source's segments, byte for byte, holding everything
    the uninterrupted run keeps."""
    names = sorted(now.logs)
    kept = [n for n in names if now.logs[n]]
    empty = [n for n in names if not now.logs[n]]
    src_names = sorted(src.logs)
    assert kept == src_names[len(src_names) - len(kept):], \
        f"{part}: the segments left {names} are not a suffix of the source's {src_names}; {ctx}"
    changed = [n for n in kept if now.logs[n] != src.logs[n]]
    assert not changed, f"{part}: retention changed the bytes of {changed}; {ctx}"
    # An empty segment is only the one a roll creates at the log end offset (or the source's own).
    assert all(int(n[:20]) == src.log_end_offset or src.logs.get(n) == b"" for n in empty), \
        f"{part}: unexpected empty segments {empty}; {ctx}"
    assert empty == names[len(names) - len(empty):], f"{part}: an empty segment before data: {names}; {ctx}"
    assert now.log_end_offset == src.log_end_offset, \
        f"{part}: log end offset {now.log_end_offset}, source {src.log_end_offset}; {ctx}"
    assert src.log_start_offset <= now.log_start_offset <= ref.log_start_offset, \
        f"{part}: log start offset {now.log_start_offset}, source {src.log_start_offset}, uninterrupted " \
        f"{ref.log_start_offset}; {ctx}"
    exposed = {o: r for o, r in now.records.items() if o >= now.log_start_offset}
    want = {o: r for o, r in src.records.items() if o >= now.log_start_offset}
    assert exposed == want, f"{part}: the records from the log start offset {now.log_start_offset} are not " \
                            f"the source's suffix; {ctx}"


@pytest.mark.parametrize("trial", range(TRIALS))
def test_killed_retention(zygote, retention_setup, tmp_path, trial):
    setup = retention_setup
    seed = trial_seed("retention", trial)
    rnd = random.Random(seed)
    variant = rnd.choice(sorted(RETENTION_VARIANTS))
    measured = setup.measured[variant]
    plan = draw_kill(rnd, measured)
    work = tmp_path / "logs"
    shutil.copytree(setup.template, work)
    ctx = f"retention {variant}, {plan.describe(measured)}; {repro(seed)}"
    run = run_child(zygote, {**retention_params(variant), "dir": str(work)}, plan, ctx)
    ctx = f"{ctx}; child {run.describe()}; dir {work}"

    recovered(work, ctx)
    errors = verify_errors(work)
    assert not errors, f"verify after recover: {errors[:5]}; {ctx}"
    assert not in_flight_files(work), f"in-flight files after recover: {in_flight_files(work)}; {ctx}"
    now = log_dir_views(work)
    assert sorted(now) == sorted(setup.source), ctx
    for part, ref in setup.results[variant].items():
        check_retention_partial(now[part], ref, setup.source[part], part, ctx)

    run_retention(work, retention_options(variant))
    errors = verify_errors(work)
    assert not errors, f"verify after retention again: {errors[:5]}; {ctx}"
    after = log_dir_views(work)
    for part, ref in setup.results[variant].items():
        got = after[part]
        assert sorted(got.logs) == sorted(ref.logs), \
            f"{part}: segments {sorted(got.logs)}, uninterrupted {sorted(ref.logs)}; {ctx}"
        assert got.logs == ref.logs, f"{part}: segment bytes differ from the uninterrupted run's; {ctx}"
        assert (got.log_start_offset, got.log_end_offset) == (ref.log_start_offset, ref.log_end_offset), \
            f"{part}: log start/end {got.log_start_offset}/{got.log_end_offset}, uninterrupted " \
            f"{ref.log_start_offset}/{ref.log_end_offset}; {ctx}"
    checkpoint = read_checkpoint(work, "log-start-offset-checkpoint")
    assert checkpoint == setup.checkpoints[variant], \
        f"log-start-offset-checkpoint {checkpoint}, uninterrupted {setup.checkpoints[variant]}; {ctx}"
    shutil.rmtree(work)


# ============================================================================ 3. recovery

DAMAGES = ("torn-tail", "garbage-tail", "corrupt-middle", "no-indexes", "leftovers", "stale-recovery-point")
DAMAGE_RECORDS = 260


def damage_record(offset: int) -> tuple:
    n = (offset * 2654435761 >> 5) % 160
    return TS0 + offset * SECOND, b"k%d" % offset, (b"<%d>" % offset * (n // 3 + 1))[:n]


@dataclass
class Damage:
    """What was done to one partition, and the first offset it endangers (batches wholly
    below it must survive any recovery; None: no record may be lost)."""

    kind: str
    first_damaged_offset: int | None
    damaged_batch: int | None = None  # base offset of a corrupt batch in the middle (salvage keeps the rest)
    note: str = ""


def build_damaged_template(root: Path, seed: str) -> dict[str, Damage]:
    """A log directory after an unclean shutdown: one partition per kind of damage, no
    clean-shutdown marker, recovery points 0 (stale for one partition)."""
    rnd = random.Random(seed)
    clock = [TS0]
    with LogManager([root], time_source=lambda: clock[0]) as lm:
        for i, _kind in enumerate(DAMAGES):
            log = lm.get_or_create_log(("dmg", i), config={"segment.bytes": "4096", "index.interval.bytes": "512"})
            while log.log_end_offset < DAMAGE_RECORDS:
                offset = log.log_end_offset
                count = rnd.randint(1, 5)
                recs = [(j, *damage_record(offset + j)) for j in range(count)]
                clock[0] = TS0 + (offset + count) * SECOND
                log.append_as_leader(encode_batch(recs, compression_codec=rnd.choice(CODECS)))
    os.remove(root / ".kafka_cleanshutdown")
    damages, recovery_points = {}, {}
    for i, kind in enumerate(DAMAGES):
        part = root / f"dmg-{i}"
        segs = sorted(part.glob("*.log"))
        walks = {p: [(b.position, b.size_in_bytes, b.base_offset) for b in FileBatches(p)] for p in segs}
        recovery_points[TopicPartition("dmg", i)] = 0
        if kind in ("torn-tail", "stale-recovery-point"):
            last = [p for p in segs if walks[p]][-1]
            pos, size, base = walks[last][-1] if rnd.random() < 0.7 else rnd.choice(walks[last])
            cut = pos + rnd.randint(1, size - 1)
            os.truncate(last, cut)
            damages[part.name] = Damage(kind, base, note=f"{last.name} cut at {cut} inside the batch at {pos}")
            if kind == "stale-recovery-point":
                recovery_points[TopicPartition("dmg", i)] = int(segs[-3].name[:20])
        elif kind == "garbage-tail":
            last = segs[-1]
            leo = walks[last][-1][2] + 1 if walks[last] else int(last.name[:20])
            junk = rnd.choice([rnd.randbytes(rnd.randint(1, 3000)), bytes(rnd.randint(1, 5000)),
                               struct.pack(">qiiB", leo, 0x7FFFFFF0, 0, 2) + rnd.randbytes(200)])
            with open(last, "ab") as f:
                f.write(junk)
            damages[part.name] = Damage(kind, None, note=f"{len(junk)} bytes after {last.name}")
        elif kind == "corrupt-middle":
            seg = segs[len(segs) // 2]
            k = rnd.randint(1, len(walks[seg]) - 2)
            pos, size, base = walks[seg][k]
            where = pos + rnd.randint(21, size - 1)  # from the attributes on: covered by the CRC
            with open(seg, "r+b") as f:
                f.seek(where)
                byte = f.read(1)[0]
                f.seek(where)
                f.write(bytes([byte ^ (1 << rnd.randrange(8))]))
            damages[part.name] = Damage(kind, base, damaged_batch=base,
                                        note=f"{seg.name}: a bit flipped at {where}, batch #{k} at {pos}")
        elif kind == "no-indexes":
            (part / f"{segs[1].name[:20]}.index").unlink()
            (part / f"{segs[2].name[:20]}.timeindex").unlink()
            (part / f"{segs[-1].name[:20]}.index").unlink()
            damages[part.name] = Damage(kind, None, note="offset/time indexes deleted")
        elif kind == "leftovers":
            # An interrupted swap (the same bytes as the segment it replaces), a .cleaned
            # file above it and a .deleted file: the loader completes or removes each.
            shutil.copyfile(segs[2], part / (segs[2].name + ".swap"))
            shutil.copyfile(segs[4], part / (segs[4].name + ".cleaned"))
            shutil.copyfile(segs[3], part / (segs[3].name[:20] + ".index.cleaned"))
            (part / "00000000000000099999.log.deleted").write_bytes(rnd.randbytes(700))
            damages[part.name] = Damage(kind, None, note=".swap, .cleaned and .deleted files")
    OffsetCheckpointFile(root / "recovery-point-offset-checkpoint").write(recovery_points)
    return damages


RECOVER_VARIANTS = {
    "kafka": {"salvage": False, "all_segments": False},
    "salvage": {"salvage": True, "all_segments": False},
    "all": {"salvage": False, "all_segments": True},
    "salvage-all": {"salvage": True, "all_segments": True},
}


def recover_params(variant: str) -> dict:
    return {"op": "recover", **RECOVER_VARIANTS[variant]}


@dataclass
class RecoverSetup(Setup):
    damages: dict[str, Damage] = field(default_factory=dict)
    recovery_points: dict[str, dict] = field(default_factory=dict)


@pytest.fixture(scope="module")
def recover_setup(zygote, tmp_path_factory) -> RecoverSetup:
    root = tmp_path_factory.mktemp("recover")
    template = root / "template"
    damages = build_damaged_template(template, f"{BASE_SEED}-recover-template")
    source = log_dir_views(template, damaged=True)
    measured, results, starts, points = {}, {}, {}, {}
    for name in RECOVER_VARIANTS:
        m = measure(zygote, template, root / name, recover_params(name), f"recover ({name})")
        errors = verify_errors(m.result_dir)
        assert not errors, f"the uninterrupted recover ({name}) left errors: {errors}"
        measured[name] = m
        results[name] = log_dir_views(m.result_dir)
        starts[name] = read_checkpoint(m.result_dir, "log-start-offset-checkpoint")
        points[name] = read_checkpoint(m.result_dir, "recovery-point-offset-checkpoint")
        for part, damage in damages.items():
            check_damage_survivors(results[name][part], source[part], damage, RECOVER_VARIANTS[name]["salvage"],
                                   part, f"the uninterrupted recover ({name})")
    return RecoverSetup(template, source, measured, results, starts, damages=damages, recovery_points=points)


def check_damage_survivors(now: PartitionView, src: PartitionView, damage: Damage, salvage: bool, part: str,
                           ctx: str) -> None:
    """Every batch before the damage is kept byte for byte (with salvage, every batch but
    the damaged one); nothing is invented."""
    limit = damage.first_damaged_offset
    for (base, last) in src.batches:
        must = limit is None or last < limit or (salvage and damage.damaged_batch is not None
                                                 and base != damage.damaged_batch)
        if must:
            assert now.raw.get(base) == src.raw[base], \
                f"{part} ({damage.kind}: {damage.note}): the batch at offset {base} was lost or changed; {ctx}"
    foreign = sorted(b for b, raw in now.raw.items() if src.raw.get(b) != raw)
    assert not foreign, f"{part}: batches not in the source at offsets {foreign[:8]}; {ctx}"


@pytest.mark.parametrize("trial", range(TRIALS))
def test_killed_recovery(zygote, recover_setup, tmp_path, trial):
    setup = recover_setup
    seed = trial_seed("recover", trial)
    rnd = random.Random(seed)
    variant = rnd.choice(sorted(RECOVER_VARIANTS))
    options = RECOVER_VARIANTS[variant]
    measured = setup.measured[variant]
    plan = draw_kill(rnd, measured)
    work = tmp_path / "logs"
    shutil.copytree(setup.template, work)
    ctx = f"recover {variant}, {plan.describe(measured)}; {repro(seed)}"
    run = run_child(zygote, {**recover_params(variant), "dir": str(work)}, plan, ctx)
    ctx = f"{ctx}; child {run.describe()}; dir {work}"

    recovered(work, ctx, **options)
    errors = verify_errors(work)
    assert not errors, f"verify after the second recover: {errors[:5]}; {ctx}"
    assert not in_flight_files(work), f"in-flight files after recover: {in_flight_files(work)}; {ctx}"
    now = log_dir_views(work)
    assert sorted(now) == sorted(setup.source), ctx
    for part, ref in setup.results[variant].items():
        got = now[part]
        damage = setup.damages[part]
        pctx = f"{part} ({damage.kind}: {damage.note}); {ctx}"
        check_damage_survivors(got, setup.source[part], damage, options["salvage"], part, ctx)
        assert sorted(got.logs) == sorted(ref.logs), \
            f"segments {sorted(got.logs)}, uninterrupted recover {sorted(ref.logs)}; {pctx}"
        differ = [n for n in ref.logs if got.logs[n] != ref.logs[n]]
        assert not differ, f"segment bytes differ from the uninterrupted recover's: {differ}; {pctx}"
        assert got.other == ref.other, \
            f"quarantine files {sorted(got.other)}, uninterrupted {sorted(ref.other)} (or their bytes); {pctx}"
        assert got.records == ref.records, f"records differ from the uninterrupted recover's; {pctx}"
        assert (got.log_start_offset, got.log_end_offset) == (ref.log_start_offset, ref.log_end_offset), \
            f"log start/end {got.log_start_offset}/{got.log_end_offset}, uninterrupted " \
            f"{ref.log_start_offset}/{ref.log_end_offset}; {pctx}"
    for name, want in (("log-start-offset-checkpoint", setup.checkpoints[variant]),
                       ("recovery-point-offset-checkpoint", setup.recovery_points[variant])):
        got = read_checkpoint(work, name)
        assert got == want, f"{name} {got}, uninterrupted {want}; {ctx}"
    shutil.rmtree(work)


def test_recovery_killed_between_truncation_and_deleting_later_segments(zygote, recover_setup, tmp_path):
    """The window the random trials hit now and then, taken on purpose: recovery truncated
    the corrupt middle segment of ``dmg-2`` and is renaming the segments after it to
    ``.deleted`` when it dies. The next recovery must still end with exactly the files of an
    uninterrupted one (no segment after the truncation point comes back)."""
    setup = recover_setup
    part = next(p for p, d in setup.damages.items() if d.kind == "corrupt-middle")
    for variant in ("kafka", "all"):
        measured = setup.measured[variant]
        ref = setup.results[variant][part]
        kept = set(ref.logs)
        # The first step that renames a segment of this partition after the truncation
        # point away: die right after it, with the later ones still in place.
        dropped = sorted(n for n in setup.source[part].logs if n not in kept)
        assert dropped, f"the uninterrupted recover ({variant}) dropped no segment of {part}"
        step = next(i + 1 for i, (kind, detail) in enumerate(measured.steps)
                    if kind == "rename" and detail.startswith(f"{dropped[0]}>"))
        plan = KillPlan("step", step=step, when="after")
        work = tmp_path / variant
        shutil.copytree(setup.template, work)
        ctx = f"recover {variant}, {plan.describe(measured)} (base seed {BASE_SEED})"
        run = run_child(zygote, {**recover_params(variant), "dir": str(work)}, plan, ctx)
        assert not run.completed, ctx
        recovered(work, ctx, **RECOVER_VARIANTS[variant])
        got = partition_view(work / part)
        assert sorted(got.logs) == sorted(ref.logs), \
            f"{part}: segments {sorted(got.logs)} after the second recover, uninterrupted {sorted(ref.logs)}; {ctx}"
        assert got.records == ref.records, f"{part}: records differ from the uninterrupted recover's; {ctx}"


# ============================================================================ the real CLI, cold


def cli_args(work: Path, variant: str) -> list[str]:
    v = COMPACT_VARIANTS[variant]
    args = [sys.executable, "-m", "plog.cli", "compact", str(work), "--force", "--now", str(COMPACT_NOW),
            "--buffer-size", str(v["buffer_size"]), "--quiet"]
    if v["delay"] is not None:
        args += ["--delete-delay-ms", str(v["delay"])]
    return args


def test_cold_cli_compact_killed(compaction_setup, tmp_path):
    """``python -m plog.cli compact`` started from scratch (interpreter, imports and all)
    and SIGKILLed at a random moment, mostly while it compacts; then the checks of
    ``test_killed_compaction``. One uninterrupted run first gives the CLI's duration (and
    must itself give the uninterrupted result)."""
    setup = compaction_setup
    durations: dict[str, float] = {}
    for trial in range(COLD_TRIALS):
        seed = trial_seed("cold", trial)
        rnd = random.Random(seed)
        variant = ("map-1MiB", "map-110-keys-delayed")[trial % 2]
        if variant not in durations:  # the CLI's own duration for this variant, start-up included
            work = tmp_path / f"uninterrupted-{variant}"
            shutil.copytree(setup.template, work)
            started = time.perf_counter()
            done = subprocess.run(cli_args(work, variant), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=CHILD_TIMEOUT_S * 2)
            durations[variant] = time.perf_counter() - started
            assert done.returncode == 0, f"plog compact failed: {done.stderr.decode()[-2000:]}"
            check_killed_compaction(setup, variant, work, f"the uninterrupted CLI run ({variant})")
        total = durations[variant]
        op = setup.measured[variant].duration_s
        # The interpreter and imports come first: aim at the compaction itself.
        delay = rnd.uniform(max(0.0, total - 1.2 * op), total * 1.05)
        work = tmp_path / f"cold-{trial}"
        shutil.copytree(setup.template, work)
        proc = subprocess.Popen(cli_args(work, variant), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        how = "killed" if proc.returncode == -signal.SIGKILL else f"exited {proc.returncode}"
        assert proc.returncode in (0, -signal.SIGKILL), f"plog compact failed: {err.decode()[-2000:]}; {repro(seed)}"
        ctx = (f"cold CLI compaction {variant}, SIGKILL after {delay * 1000:.0f} ms (uninterrupted {total * 1000:.0f} "
               f"ms), {how}; {repro(seed)}; dir {work}")
        check_killed_compaction(setup, variant, work, ctx)
        shutil.rmtree(work)

"""``plog recover`` and ``plog compact``: recovery GB/s and compaction MB/s with peak RSS.

Figures (issue 7), each the median of ``--reps`` runs of the installed ``plog`` script as a
child process (start-up included; peak RSS read through a small intermediate process):

* ``recovery``: a log directory of ``--recovery-gib`` GiB (8 partitions, 128 MiB segments,
  16 KiB uncompressed v2 batches) as a crashed broker leaves it: no clean-shutdown marker,
  no recovery-point checkpoint, no indexes, so every segment is revalidated (CRC, framing,
  offsets) and its indexes and producer snapshot rebuilt. ``plog recover DIR --jobs 1``,
  ``--jobs 2`` and ``--all`` (a process per core), under ``jobs_1``, ``jobs_2`` and ``all``,
  each on the native path and on the pure-Python one (``PLOG_NATIVE=0``: the same keys with
  ``_python``), each with its median wall and CPU seconds (``cpu_seconds``: user + system,
  the workers' included); between runs the directory is put back in its crashed state.
  Target: >= 2 GB/s per process. The in-run reference is a bare CRC32C pass over the same
  bytes in this process (the ``crc32c`` package reading the files in 8 MiB chunks): the
  read + CRC-32C ceiling (``ratio_vs_crc_pass``, and ``ratio_vs_crc_pass_python``).
* ``compaction``: one compacted partition of ``--compact-mib`` MiB (256) whose keys repeat
  ten times (10% of the records are live: the last write of each key), 16 KiB batches of
  ~100-byte records; ``plog compact DIR --force --buffer-size B --delete-delay-ms 0``, the
  median of ``--reps`` runs on fresh copies, on the native path (under ``native``, and the
  top-level ``seconds``, ``mb_per_s``, ``records_per_s``, ``peak_rss_mb``,
  ``rss_over_buffer_mb`` as before) and on the pure-Python one (under ``python``); each
  with ``seconds``, ``cpu_seconds``, ``mb_per_s`` (10^6 bytes/s, CLI start-up included),
  ``records_per_s``, ``peak_rss_mb``, ``rss_over_buffer_mb``. Targets (issue 24): >= 200
  MB/s, peak RSS <= buffer size + 50 MB. One reference is kafka-python decoding every
  record of the same partition (``peer_kafka_python_decode``, ``ratio_vs_peer``,
  ``ratio_vs_peer_python``). With ``--kafka VERSION``, ``peer_kafka_cleaner``: a real
  broker's log cleaner on an identical copy (dedupe buffer = ``--buffer-size``), its own
  statistics line parsed (``mib_processed``, ``seconds``, ``mib_per_s`` as it logs them in
  MiB, ``mb_per_s`` in 10^6 bytes/s); ``ratio_vs_kafka_cleaner`` (native) and
  ``ratio_vs_kafka_cleaner_python``, plog's ``mb_per_s`` over the cleaner's, target 1.5
  (``met_vs_kafka_cleaner``).
* ``broker_recovery`` (with ``--kafka VERSION`` and the interop suite's jars): the same
  crashed directory handed to a real broker; its own "Loaded N logs in X ms" line is the
  broker's recovery time, compared with ``plog recover --jobs 1`` (``plog_seconds``,
  ``plog_speedup``) and ``plog recover --all`` (``plog_all_seconds``, ``plog_all_speedup``:
  the goal, plog at least 3x faster) on an identical copy, each also on the pure-Python
  path (``plog_python_*``, ``plog_all_python_*``).

Prints one JSON object (see workloads.emit).
Usage: python benchmarks/bench_maintenance.py [--quick] [--reps N] [--kafka 4.3.1] [--no-compaction]
[--no-recovery] [--compact-mib N] [--buffer-mib N] [--output FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import crc32c

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit  # noqa: E402

from plog.formats.record_batch import encode_batch  # noqa: E402

PLOG = str(Path(sys.executable).with_name("plog"))
SEGMENT_BYTES = 128 << 20
BATCH_RECORDS = 140  # ~16 KiB batches of ~115-byte records
TARGETS = {"recovery_gb_per_s_per_process": 2.0, "compaction_mb_per_s": 200.0, "compaction_vs_kafka_cleaner": 1.5}
CRC_START = 21  # a v2 batch's CRC covers attributes..end

_MEASURE = """
import resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    t0 = time.perf_counter()
    code = subprocess.call(sys.argv[2:], stdout=out)
    elapsed = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print("MEASURED", code, elapsed, u.ru_utime + u.ru_stime, u.ru_maxrss, file=sys.stderr)
"""


def run_plog(*args: str, python: bool = False) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of ``plog ARGS`` (with ``python``, on the
    pure-Python reference path: ``PLOG_NATIVE=0`` in the child's environment)."""
    env = {**os.environ, "PLOG_NATIVE": "0"} if python else None
    r = subprocess.run([sys.executable, "-c", _MEASURE, os.devnull, PLOG, *args], capture_output=True, text=True,
                       env=env)
    last = r.stderr.rstrip("\n").split("\n")[-1]
    _, code, elapsed, cpu, maxrss = last.split()
    if int(code) != 0:
        raise SystemExit(f"plog {' '.join(args)} exited {code}: {r.stderr[-2000:]}")
    return float(elapsed), float(cpu), int(maxrss) / 1024


# -- workloads ---------------------------------------------------------------------------------------


def _template(keys: bool) -> tuple[bytearray, list[int], int]:
    """One ~16 KiB batch and the byte positions of its records' keys (12 bytes each)."""
    value = b"x" * 96
    records = [(i, 1_700_000_000_000 + i, b"k%011d" % i if keys else None, value) for i in range(BATCH_RECORDS)]
    batch = bytearray(encode_batch(records, base_offset=0))
    positions = [bytes(batch).index(b"k%011d" % i) for i in range(BATCH_RECORDS)] if keys else []
    return batch, positions, BATCH_RECORDS


def write_partition(part: Path, total_bytes: int, *, distinct_keys: int | None = None) -> tuple[int, int]:
    """Segments of valid batches totalling about ``total_bytes``; with ``distinct_keys``
    record n has key n % distinct_keys. Returns (records, bytes)."""
    part.mkdir(parents=True, exist_ok=True)
    batch, key_positions, per_batch = _template(distinct_keys is not None)
    size = len(batch)
    n_batches = max(1, total_bytes // size)
    offset = written = 0
    out = None
    seg_size = 0
    for _ in range(n_batches):
        if out is None or seg_size + size > SEGMENT_BYTES:
            if out is not None:
                out.close()
            out = open(part / f"{offset:020d}.log", "wb")
            seg_size = 0
        if distinct_keys is not None:
            for j, pos in enumerate(key_positions):
                batch[pos:pos + 12] = b"k%011d" % ((offset + j) % distinct_keys)
            batch[17:21] = crc32c.crc32c(memoryview(batch)[CRC_START:]).to_bytes(4, "big")
        batch[0:8] = offset.to_bytes(8, "big")
        out.write(batch)
        seg_size += size
        written += size
        offset += per_batch
    out.close()
    os.sync()  # what a crashed broker leaves is on disk: no dirty pages for recovery's fsyncs to pay for
    return offset, written


def crash_state(log_dir: Path) -> None:
    """Leave only the .log files and meta.properties: what recovery has to rebuild everything from."""
    for name in (".kafka_cleanshutdown", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint", ".plog-maintenance.json"):
        (log_dir / name).unlink(missing_ok=True)
    for part in log_dir.iterdir():
        if part.is_dir() and not part.name.startswith("__"):
            for f in part.iterdir():
                if not f.name.endswith(".log") and f.name != "partition.metadata":
                    f.unlink()


def meta_properties(log_dir: Path) -> None:
    (log_dir / "meta.properties").write_text(
        "#\n#Sat Nov 21 00:00:00 UTC 2026\nnode.id=1\ndirectory.id=7lOHZuq5TmuXR6pIs0y9gw\nversion=1\n"
        "cluster.id=plog-bench-cluster-0\n")


def crc_pass(paths: list[Path]) -> float:
    """Seconds for a bare CRC32C pass over the files."""
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while chunk := f.read(8 << 20):
                crc32c.crc32c(chunk)
    return time.perf_counter() - t0


def peer_decode(paths: list[Path]) -> tuple[float, int]:
    """kafka-python decoding every record of the files: (seconds, records)."""
    from kafka.record.default_records import DefaultRecordBatch

    t0 = time.perf_counter()
    n = 0
    for p in paths:
        data = p.read_bytes()
        pos = 0
        while pos < len(data):
            end = pos + 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            for _r in DefaultRecordBatch(data[pos:end]):
                n += 1
            pos = end
    return time.perf_counter() - t0, n


# -- figures -----------------------------------------------------------------------------------------


def _time_recovery(log_dir: Path, args: list[str], reps: int, python: bool) -> tuple[float, float, float]:
    """Median wall seconds, median CPU seconds (user + system, the workers' included) and
    peak RSS (MB) of ``plog recover LOG_DIR ARGS -q`` from the crashed state (put back
    before each run)."""
    walls, cpus, rss = [], [], []
    for _ in range(reps):
        crash_state(log_dir)
        wall, cpu, mb = run_plog("recover", str(log_dir), *args, "-q", python=python)
        walls.append(wall)
        cpus.append(cpu)
        rss.append(mb)
    return statistics.median(walls), statistics.median(cpus), max(rss)


#: The recovery runs: key, ``plog recover`` arguments. Each is run on both paths: the native
#: one under the key, the pure-Python reference under the key + "_python".
RECOVERY_RUNS = (("jobs_1", ["--jobs", "1"]), ("jobs_2", ["--jobs", "2"]), ("all", ["--all"]))


def bench_recovery(tmp: Path, gib: float, reps: int) -> dict:
    log_dir = tmp / "recovery"
    log_dir.mkdir()
    meta_properties(log_dir)
    per_part = int(gib * (1 << 30)) // 8
    total = 0
    for p in range(8):
        total += write_partition(log_dir / f"bench-{p}", per_part)[1]
    logs = sorted(log_dir.glob("*/*.log"))
    result = {"bytes": total, "partitions": 8, "all_jobs": os.cpu_count()}
    for key, args in RECOVERY_RUNS:
        for suffix, python in (("", False), ("_python", True)):
            wall, cpu, rss = _time_recovery(log_dir, args, reps, python)
            # CPU seconds too: on a shared machine the wall time also measures the others' load.
            result[key + suffix] = {"seconds": round(wall, 3), "gb_per_s": round(total / wall / 1e9, 3),
                                    "cpu_seconds": round(cpu, 3), "peak_rss_mb": round(rss, 1)}
    crc = statistics.median(crc_pass(logs) for _ in range(reps))
    result["peer_crc32c_pass"] = {"seconds": round(crc, 3), "gb_per_s": round(total / crc / 1e9, 3)}
    result["ratio_vs_crc_pass"] = round(crc / result["jobs_1"]["seconds"], 3)
    result["ratio_vs_crc_pass_python"] = round(crc / result["jobs_1_python"]["seconds"], 3)
    result["target_gb_per_s_per_process"] = TARGETS["recovery_gb_per_s_per_process"]
    result["met"] = result["jobs_1"]["gb_per_s"] >= TARGETS["recovery_gb_per_s_per_process"]
    return result


def _time_compaction(src: Path, work: Path, reps: int, buffer_mib: int, python: bool) -> tuple[float, float, float]:
    """Median wall and CPU seconds and peak RSS (MB) of ``plog compact`` on fresh copies of ``src``."""
    walls, cpus, rss = [], [], []
    for _ in range(reps):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        os.sync()  # the copy's dirty pages are not the compaction's to write
        wall, cpu, mb = run_plog("compact", str(work), "--force", "--buffer-size", f"{buffer_mib}MiB",
                                 "--delete-delay-ms", "0", "-q", python=python)
        walls.append(wall)
        cpus.append(cpu)
        rss.append(mb)
    return statistics.median(walls), statistics.median(cpus), max(rss)


def bench_compaction(tmp: Path, mib: int, reps: int, buffer_mib: int, kafka: str | None = None) -> dict:
    src = tmp / "compact-src"
    src.mkdir()
    meta_properties(src)
    (src / ".plog-topics.json").write_text(
        '{"version": 1, "topics": {"keyed": {"topic_id": null, "configs": {"cleanup.policy": "compact"}}}}\n')
    approx_records = (mib << 20) // 117
    records, total = write_partition(src / "keyed-0", mib << 20, distinct_keys=max(1, approx_records // 10))
    # An empty active segment after the data, as a broker always has one: the cleaner never
    # touches the active segment, so without it the last data segment would stay dirty.
    (src / "keyed-0" / f"{records:020d}.log").touch()
    run_plog("recover", str(src), "-q")  # indexes and snapshots, as a broker would have left them
    logs = sorted((src / "keyed-0").glob("*.log"))
    work = tmp / "compact-run"
    paths = {}
    for key, python in (("native", False), ("python", True)):
        wall, cpu, rss = _time_compaction(src, work, reps, buffer_mib, python)
        paths[key] = {"seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "mb_per_s": round(total / wall / 1e6, 1),
                      "records_per_s": round(records / wall), "peak_rss_mb": round(rss, 1),
                      "rss_over_buffer_mb": round(rss - buffer_mib * 1.048576, 1)}
    after = sum(f.stat().st_size for f in (work / "keyed-0").glob("*.log"))
    shutil.rmtree(work, ignore_errors=True)
    wall = paths["native"]["seconds"]
    peer_s, peer_n = peer_decode(logs)
    out = {"bytes": total, "records": records, "bytes_after": after, "buffer_size_mb": buffer_mib,
           # The native path's figures at the top level (the keys this figure always had).
           "seconds": wall, "mb_per_s": paths["native"]["mb_per_s"], "records_per_s": paths["native"]["records_per_s"],
           "peak_rss_mb": paths["native"]["peak_rss_mb"], "rss_over_buffer_mb": paths["native"]["rss_over_buffer_mb"],
           "native": paths["native"], "python": paths["python"],
           "peer_kafka_python_decode": {"seconds": round(peer_s, 3), "records": peer_n,
                                        "mb_per_s": round(total / peer_s / 1e6, 1)},
           "ratio_vs_peer": round(peer_s / wall, 3),
           "ratio_vs_peer_python": round(peer_s / paths["python"]["seconds"], 3),
           "target_mb_per_s": TARGETS["compaction_mb_per_s"],
           "met": total / wall / 1e6 >= TARGETS["compaction_mb_per_s"]}
    if kafka:
        peer = bench_kafka_cleaner(tmp, kafka, src / "keyed-0", buffer_mib)
        out["peer_kafka_cleaner"] = peer
        if "mb_per_s" in peer:
            for key in ("native", "python"):
                suffix = "" if key == "native" else "_python"
                out[f"ratio_vs_kafka_cleaner{suffix}"] = round(paths[key]["mb_per_s"] / peer["mb_per_s"], 3)
            out["target_ratio_vs_kafka_cleaner"] = TARGETS["compaction_vs_kafka_cleaner"]
            out["met_vs_kafka_cleaner"] = out["ratio_vs_kafka_cleaner"] >= TARGETS["compaction_vs_kafka_cleaner"]
    return out


#: The log cleaner's statistics (LogCleaner.recordStats, Kafka 3.x and 4.x): MB are MiB there.
_CLEANER_STATS = re.compile(
    r"Log cleaner thread \d+ cleaned log (?P<log>\S+) \(dirty section = \[(?P<lo>\d+), (?P<hi>\d+)\]\)\s*"
    r"(?P<mib>[\d,.]+) MB of log processed in (?P<secs>[\d,.]+) seconds \((?P<rate>[\d,.]+) MB/sec\)")


def bench_kafka_cleaner(tmp: Path, version: str, part: Path, buffer_mib: int, timeout: float = 900) -> dict:
    """A real broker's log cleaner on an identical copy of the partition ``part``: the rate
    it reports itself (its "N MB of log processed in S seconds (R MB/sec)" statistics).

    The topic is created on a broker (cleanup.policy=compact, min.cleanable.dirty.ratio
    0.01), the broker stopped, the partition's files replaced by a copy of ``part`` (its
    segments, indexes and producer snapshots), and the broker started again with the
    cleaner's dedupe buffer equal to plog's ``--buffer-size``, one cleaner thread, a short
    backoff, and Kafka's default JVM (1 GiB heap, G1, full JIT; a fresh JVM, as a broker
    after a restart)."""
    sys.path.insert(0, str(ROOT / "tests" / "interop"))
    import kafka_broker
    from kafka_broker import KafkaBroker, write_log_configs
    from kafka_fetch import fetch
    from kafka.admin import KafkaAdminClient, NewTopic

    jars = fetch(version)
    work = tmp / "cleaner-broker"
    settings = {"log.cleaner.enable": "true", "log.cleaner.threads": "1", "log.cleaner.backoff.ms": "100",
                "log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.dedupe.buffer.size": str(buffer_mib << 20),
                "log.segment.bytes": str(SEGMENT_BYTES)}
    saved_opts = kafka_broker.BROKER_JVM_OPTS
    kafka_broker.BROKER_JVM_OPTS = ["-Xms1g", "-Xmx1g", "-Djava.awt.headless=true"]
    broker = KafkaBroker(version, jars, work, write_log_configs(work / "log4j"), settings=settings)
    try:
        broker.start()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="plog-bench")
        try:
            admin.create_topics([NewTopic("keyed", 1, 1, topic_configs={
                "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                "segment.bytes": str(SEGMENT_BYTES)})])
        finally:
            admin.close()
        broker.wait_partitions_ready([("keyed", 0)])
        broker.stop()
        dest = broker.log_dir / "keyed-0"
        for f in dest.iterdir():
            if f.name != "partition.metadata":
                f.unlink()
        for f in part.iterdir():
            if f.is_file() and f.name != "partition.metadata":
                shutil.copy2(f, dest / f.name)
        os.sync()
        broker.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in _CLEANER_STATS.finditer(_broker_logs(work)):
                if m.group("log").startswith("keyed-0"):
                    mib = float(m.group("mib").replace(",", ""))
                    rate = float(m.group("rate").replace(",", ""))
                    return {"kafka_version": version, "log": m.group("log"),
                            "dirty_section": [int(m.group("lo")), int(m.group("hi"))],
                            "mib_processed": mib, "seconds": float(m.group("secs").replace(",", "")),
                            "mib_per_s": rate, "mb_per_s": round(rate * 1.048576, 1),
                            "dedupe_buffer_mb": buffer_mib, "jvm": " ".join(kafka_broker.BROKER_JVM_OPTS)}
            if not broker.running:
                return {"error": "the broker exited before its cleaner reported", "log_tail": broker.log_tail(20)}
            time.sleep(0.5)
        return {"error": f"no cleaner statistics for keyed-0 within {timeout:.0f} s"}
    finally:
        broker.kill()
        kafka_broker.BROKER_JVM_OPTS = saved_opts


def _broker_logs(work: Path) -> str:
    """The broker's log files (log4j 1 and log4j2 configurations write different ones)."""
    return "".join(p.read_text(errors="replace") for p in sorted(work.glob("*.log")) if p.is_file())


def bench_broker_recovery(tmp: Path, version: str, gib: float, reps: int) -> dict:
    """A real broker's recovery of the same crashed layout, from its own log line."""
    sys.path.insert(0, str(ROOT / "tests" / "interop"))
    from kafka_broker import KafkaBroker, write_log_configs
    from kafka_fetch import fetch

    jars = fetch(version)
    work = tmp / "broker"
    broker = KafkaBroker(version, jars, work, write_log_configs(work / "log4j"))
    broker.format()
    log_dir = broker.log_dir
    per_part = int(gib * (1 << 30)) // 8
    total = 0
    for p in range(8):
        total += write_partition(log_dir / f"bench-{p}", per_part)[1]
    copy = tmp / "broker-copy"
    shutil.copytree(log_dir, copy)
    os.sync()  # the copy is on disk too, as the broker's files are: no dirty pages for plog's fsyncs to write
    crash_state(log_dir)
    broker.start()
    try:
        text = broker.server_log.read_text(errors="replace")
    finally:
        broker.kill()
    m = re.search(r"Loaded (\d+) logs in (\d+)ms", text)
    if not m:
        return {"error": "no 'Loaded N logs in X ms' line in the broker's log"}
    broker_s = int(m.group(2)) / 1000
    (copy / "meta.properties").write_text((log_dir / "meta.properties").read_text())
    out = {"kafka_version": version, "bytes": total, "broker_logs_loaded": int(m.group(1)), "broker_seconds": broker_s}
    # plog on the identical copy: --jobs 1 (one process, as the figure always was) and --all
    # (every segment, a process per core: the figure), each on both paths.
    for key, args in (("plog", ["--jobs", "1"]), ("plog_all", ["--all"])):
        for suffix, python in (("", False), ("_python", True)):
            wall, _cpu, _mb = _time_recovery(copy, args, reps, python)
            out[f"{key}{suffix}_seconds"] = round(wall, 3)
            out[f"{key}{suffix}_speedup"] = round(broker_s / wall, 3)
    out["goal_speedup"] = 3.0
    out["met"] = out["plog_all_speedup"] >= 3.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="256 MiB recovery, 64 MiB compaction, one rep")
    ap.add_argument("--recovery-gib", type=float, default=4.0)
    ap.add_argument("--compact-mib", type=int, default=256)
    ap.add_argument("--buffer-mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kafka", metavar="VERSION", help="also time a real broker's recovery (interop jars)")
    ap.add_argument("--no-compaction", action="store_true", help="only the recovery figures")
    ap.add_argument("--no-recovery", action="store_true", help="only the compaction figures")
    ap.add_argument("--output", "--json", dest="output", help="also write the result to this file")
    args = ap.parse_args()
    if args.quick:
        args.recovery_gib, args.compact_mib, args.reps = 0.25, 64, 1
    load = os.getloadavg()
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="plog-bench-maint-"))
    try:
        result = {"benchmark": "maintenance", "load_average_at_start": [round(x, 2) for x in load],
                  "cpus": os.cpu_count()}
        if not args.no_recovery:
            result["recovery"] = bench_recovery(tmp, args.recovery_gib, args.reps)
        if not args.no_compaction:
            result["compaction"] = bench_compaction(tmp, args.compact_mib, args.reps, args.buffer_mib, args.kafka)
        if args.kafka and not args.no_recovery:
            result["broker_recovery"] = bench_broker_recovery(tmp, args.kafka, args.recovery_gib, args.reps)
        result["elapsed_s"] = round(time.perf_counter() - started, 1)
        emit(result, args.output)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

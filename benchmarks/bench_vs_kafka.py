"""plog side by side with Apache Kafka's own tools and broker, on the same files.

Four comparisons, each the median of several runs taken alternately (plog, Kafka, plog,
...). Every ratio ``plog_..._over_kafka_...`` is plog's time divided by Kafka's, computed
within one repetition (the median of those is reported): below 1, plog is faster.
Tools run as child processes with stdout to /dev/null; wall time is measured around the
child alone, CPU seconds (user + system) and peak RSS are the child's and its
descendants' (read through a small intermediate Python process, as in bench_verify.py:
Linux carries the forking process's RSS high-water mark into a child's ``ru_maxrss``).
plog is the installed CLI next to the interpreter (``.venv/bin/plog``); Kafka is run from
the released jars in ``<repo>/.kafka-cache/<version>`` (``tests/interop/kafka_fetch.py``)
with the JVM options its scripts use: ``kafka-run-class.sh``'s defaults for the tools
(``-Xmx256M`` and G1), ``kafka-server-start.sh``'s (``-Xmx1G -Xms1G`` and G1) for the
broker; logging goes to stderr at WARN (tools) or to ``server.log`` at INFO (broker).
All files are read once before timing, so they are in the page cache.

1. ``dump_small`` (JVM start-up included): wall time of ``plog dump --print-data-log FILE``
   vs ``DumpLogSegments --print-data-log --files FILE`` on a small real segment (default: a
   ~1 MB uncompressed segment a 3-broker Kafka cluster wrote, from ../shared/corpus),
   median of ``--small-reps`` runs.
   An untimed first run of each checks that both print the same number of records.
2. ``dump_large``: records/s of the same two commands on one segment of ``--size-mb``
   MiB (default 1024) written with plog's engine (bench_dump.build_segment: 500-record
   uncompressed batches of the perf-anchors workload), median of ``--reps`` runs.
3. ``verify``: ``plog verify --quiet DIR`` (``--jobs 1``, and ``--jobs`` = the number of
   cores) vs ``DumpLogSegments --verify-index-only --files <every .log, .index and
   .timeindex of DIR>`` on a log directory of ``--verify-mb`` MiB (default 256) in
   ``--partitions`` partitions of ``--verify-segment-mb`` MiB segments (default 16) built by
   bench_verify.build (16 KiB batches, one index and time-index entry per batch, as a
   broker's append path writes them), median of ``--reps`` runs. The two do not check the
   same things: Kafka's ``--verify-index-only`` checks each ``.index``/``.timeindex`` entry
   against the batch it points to and, for the ``.log`` files in the list, prints every
   batch header (its ``isvalid`` computes the batch CRC) -- no offset continuity,
   index-coverage, producer snapshot, checkpoint or ``partition.metadata`` checks; ``plog
   verify`` checks every batch's CRC and framing, offsets, all three index kinds against
   the log, producer snapshots and the checkpoints. ``kafka_index_files_only`` (the same
   Kafka mode given only the ``.index``/``.timeindex`` files) is the pure index check.
   GB/s is bytes of ``.log`` per wall second (GB = 10^9 bytes) for every row, whatever
   each reads. Why small segments: in Kafka 4.x, DumpLogSegments.dumpTimeIndex collects
   every batch from an entry's position to the end of the segment for each time-index
   entry, so its time grows with the square of the segment size (a single 64 MiB segment
   already takes about twice as long as four 16 MiB ones); with the default 1 GiB segments
   one run would take far longer than the rest of this benchmark.
4. ``recovery``: a real Kafka broker writes ``--recovery-mb`` MiB (Kafka's own
   ProducerPerformance, idempotent, acks=all, 100-byte perf-anchors values) into one
   topic of ``--partitions`` partitions with ``segment.bytes`` = ``--segment-mb`` MiB and
   is SIGKILLed: no ``.kafka_cleanshutdown``, the active segments' indexes left
   preallocated, producer snapshots at segment bases. The recovery-point checkpoint is then
   set to 0 for every partition so that both sides recover every segment (the broker would
   otherwise recover only from its last checkpointed flush). That directory is built once
   and cached; each repetition recovers two fresh copies of it:

   * plog (``plog``): ``plog.engine.storage.log_manager.LogManager(copy)`` (writable; loads and
     recovers every partition, rebuilding indexes and producer state, one partition after
     another), then ``close()`` (checkpoints, clean-shutdown marker), in a child process.
     ``open_seconds`` is the open alone, timed inside the child; ``process_seconds`` the
     whole child (interpreter start, imports, open, close).
   * Kafka (``kafka_broker``): the broker of ``--kafka-version`` started on the copy
     (single KRaft node, ``num.recovery.threads.per.data.dir`` = ``--recovery-threads``,
     default 1 like plog). ``loaded_logs_ms`` is Kafka's own measurement, LogManager's
     "Loaded N logs in X ms" line of server.log (its load and recovery of the partition
     logs; the KRaft ``__cluster_metadata`` log is recovered earlier, by the raft layer, and
     is not in it); ``completed_load_ms_sum`` adds up its per-log "Completed load of Log
     ... in X ms" lines. ``process_to_loading_logs_seconds``,
     ``process_to_logs_loaded_seconds`` and ``process_to_server_started_seconds`` go from
     the JVM's launch to the time stamps (ms resolution) of the "Loading logs", "Loaded N
     logs" and "Kafka Server started" lines; ``process_to_ready_seconds`` from the launch
     to the broker being registered, unfenced and answering metadata (polled every 0.5 s),
     which includes the controller's start, the metadata log's recovery and the wait for
     the killed incarnation's session to expire (``broker.session.timeout.ms`` set to 3 s).
   Ratios: ``plog_open_over_kafka_loaded_logs`` (the two log managers' own load times),
   ``plog_process_over_kafka_process_to_logs_loaded`` and ``..._to_ready``. Each side's
   count of recovered segments and bytes is reported (plog: its load report; Kafka: its
   "Recovering unflushed segment" lines, sized from the directory's files), and
   ``same_segments_recovered`` says whether both recovered every segment of the directory.

The machine is shared and has few cores: the 1-minute load average is reported at the
start of each figure and at the end, and CPU seconds next to every wall time. Nothing here
asserts on a time. Prints one JSON object (workloads.emit).

    .venv/bin/python benchmarks/bench_vs_kafka.py [--quick] [--size-mb 1024] [--verify-mb 256]
        [--recovery-mb 256] [--reps 3] [--small-reps 9] [--kafka-version 4.3.1] [--dir DIR]
        [--only dump_small,dump_large,verify,recovery] [--json FILE]

``--quick`` (small sizes, one repetition; a smoke test of a minute or two) sets
``--size-mb 64 --verify-mb 32 --recovery-mb 24 --reps 1 --small-reps 3``. Disk: about
``size-mb + verify-mb + 3 * recovery-mb`` MiB under ``--dir`` (default
``$TMPDIR/plog-bench-vs-kafka``; the built inputs are kept there and reused).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
INTEROP = ROOT / "tests" / "interop"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(INTEROP))

from kafka_broker import java_env  # noqa: E402  (stdlib only: usable without kafka-python)
from workloads import emit, json_events  # noqa: E402

DEFAULT_SMALL_FILE = "dipendrasaini__kafka-learnning-series/tmp/kafka-logs-2/invoice-0/00000000000000000000.log"
CORPUS_DIRS = [ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")]

#: kafka-run-class.sh's defaults (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS) for the tools.
KAFKA_TOOL_JVM_OPTS = ["-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                       "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                       "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
#: kafka-server-start.sh's heap with the same performance options, for the broker.
KAFKA_BROKER_JVM_OPTS = ["-Xmx1G", "-Xms1G", *KAFKA_TOOL_JVM_OPTS[1:]]

RECOVERY_TOPIC = "recovery"
RECOVERY_LAYOUT = 1


# -- measuring a child process -----------------------------------------------------------------

# Runs the command with stdout to argv[1] and reports its exit code, wall time, CPU time and
# peak RSS (of it and its descendants) on the last stderr line.
_MEASURE = """
import resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    t0 = time.perf_counter()
    code = subprocess.call(sys.argv[2:], stdout=out)
    elapsed = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print("MEASURED", code, elapsed, u.ru_utime + u.ru_stime, u.ru_maxrss, file=sys.stderr)
"""


class Run:
    def __init__(self, seconds: float, cpu: float, rss_mib: float, stderr: str):
        self.seconds, self.cpu, self.rss_mib, self.stderr = seconds, cpu, rss_mib, stderr


def measure(cmd: list[str], stdout: str = os.devnull, env: dict | None = None) -> Run:
    """Run ``cmd`` (stdout to ``stdout``); raise if it fails."""
    r = subprocess.run([sys.executable, "-c", _MEASURE, stdout, *cmd], capture_output=True, text=True, env=env)
    lines = r.stderr.rstrip().splitlines()
    if not lines or not lines[-1].startswith("MEASURED"):
        raise RuntimeError(f"measuring {cmd[:4]} failed: {r.stderr[-2000:]}")
    _, code, elapsed, cpu, maxrss = lines[-1].split()
    stderr = "\n".join(lines[:-1])
    if int(code) != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {code}: {stderr[-2000:]}")
    return Run(float(elapsed), float(cpu), int(maxrss) / 1024, stderr)


def fig(values, digits: int = 3) -> dict:
    return {"median": round(statistics.median(values), digits),
            "spread": [round(min(values), digits), round(max(values), digits)]}


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def warm(paths) -> None:
    buf = bytearray(8 << 20)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


# -- the two sides ------------------------------------------------------------------------------


def plog_command() -> list[str]:
    cli = Path(sys.executable).with_name("plog")
    return [str(cli)] if cli.exists() else [sys.executable, "-m", "plog.cli"]


class Kafka:
    """Java, the jars of one version and logging configs; ``reason`` says why it is unusable."""

    def __init__(self, version: str, workdir: Path):
        self.version = version
        self.jars: Path | None = None
        self.reason: str | None = None
        self.java: str | None = None
        self.log_configs = None
        try:
            import kafka_broker
            import kafka_fetch
            from kafka_versions import dump_log_segments_class

            major = kafka_broker.java_major()
            kafka_broker.check_java_for(version, major)
            if not kafka_fetch.is_complete(version):
                raise kafka_broker.KafkaUnavailable(
                    f"the Kafka {version} jars are not in {kafka_fetch.cache_dir(version)} "
                    f"(fetch them with tests/interop/fetch_kafka.sh {version})")
            self.jars = kafka_fetch.cache_dir(version)
            self.dump_class = dump_log_segments_class(version)
            self.log_configs = kafka_broker.write_log_configs(workdir / "kafka-logging")
            proc = subprocess.run(["java", "-version"], capture_output=True, text=True)
            self.java = (proc.stderr or proc.stdout).splitlines()[0].strip()
        except Exception as e:  # KafkaUnavailable, ImportError, OSError: say why and skip
            self.reason = f"{type(e).__name__}: {e}"

    def tool(self, main_class: str, args) -> list[str]:
        return ["java", *KAFKA_TOOL_JVM_OPTS, f"-Dlog4j.configuration=file:{self.log_configs['tools-log4j']}",
                f"-Dlog4j2.configurationFile={self.log_configs['tools-log4j2']}", "-cp", f"{self.jars}/*",
                main_class, *[str(a) for a in args]]

    def dump(self, *args) -> list[str]:
        return self.tool(self.dump_class, args)


# -- 1 and 2: dump --------------------------------------------------------------------------------


def count_record_lines(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(b"| offset:"):
                n += 1
    return n


def small_file(arg: str | None) -> Path | None:
    if arg:
        return Path(arg)
    for corpus in CORPUS_DIRS:
        if (corpus / DEFAULT_SMALL_FILE).is_file():
            return corpus / DEFAULT_SMALL_FILE
    return None


def dump_small(seg: Path, kafka: Kafka, reps: int, scratch: Path) -> dict:
    out: dict = {"file": str(seg), "bytes": seg.stat().st_size, "load_average_1m_at_start": load1()}
    warm([seg])
    plog = [*plog_command(), "dump", "--print-data-log", str(seg)]
    kafka_cmd = kafka.dump("--print-data-log", "--files", seg)
    first = scratch / "dump-small.out"
    measure(plog, str(first))
    out["records_printed"] = {"plog": count_record_lines(str(first))}
    measure(kafka_cmd, str(first), env=java_env())
    out["records_printed"]["kafka"] = count_record_lines(str(first))
    first.unlink()
    p_runs, k_runs, ratios = [], [], []
    for _ in range(reps):
        p = measure(plog)
        k = measure(kafka_cmd, env=java_env())
        p_runs.append(p), k_runs.append(k), ratios.append(p.seconds / k.seconds)
    out["plog"] = {"seconds": fig([r.seconds for r in p_runs]), "cpu_seconds": fig([r.cpu for r in p_runs]),
                   "peak_rss_mib": round(max(r.rss_mib for r in p_runs), 1)}
    out["kafka_dump_log_segments"] = {"seconds": fig([r.seconds for r in k_runs]),
                                      "cpu_seconds": fig([r.cpu for r in k_runs]),
                                      "peak_rss_mib": round(max(r.rss_mib for r in k_runs), 1)}
    out["plog_over_kafka_seconds"] = round(statistics.median(ratios), 3)
    out["reps"] = reps
    return out


def dump_large(size_mb: int, cache: Path, kafka: Kafka, reps: int) -> dict:
    from bench_dump import build_segment

    seg, records = build_segment(size_mb, cache)
    out: dict = {"file": str(seg), "bytes": seg.stat().st_size, "records": records,
                 "load_average_1m_at_start": load1()}
    warm([seg])
    plog = [*plog_command(), "dump", "--print-data-log", str(seg)]
    kafka_cmd = kafka.dump("--print-data-log", "--files", seg)
    p_runs, k_runs, ratios = [], [], []
    for _ in range(reps):
        p = measure(plog)
        print(f"dump_large: plog {p.seconds:.1f} s", file=sys.stderr)
        k = measure(kafka_cmd, env=java_env())
        print(f"dump_large: kafka {k.seconds:.1f} s", file=sys.stderr)
        p_runs.append(p), k_runs.append(k), ratios.append(p.seconds / k.seconds)

    def side(runs):
        return {"seconds": fig([r.seconds for r in runs], 2),
                "records_per_s": fig([records / r.seconds for r in runs], 0),
                "records_per_cpu_s": fig([records / r.cpu for r in runs], 0),
                "peak_rss_mib": round(max(r.rss_mib for r in runs), 1)}

    out["plog"] = side(p_runs)
    out["kafka_dump_log_segments"] = side(k_runs)
    out["plog_over_kafka_seconds"] = round(statistics.median(ratios), 3)
    out["plog_speed_vs_kafka"] = round(statistics.median([1 / r for r in ratios]), 3)  # bench_dump's figure
    out["reps"] = reps
    return out


# -- 3: verify ----------------------------------------------------------------------------------------


def verify(size_mb: int, segment_mb: int, partitions: int, cache: Path, kafka: Kafka, reps: int,
           scratch: Path) -> dict:
    from bench_verify import build

    segment_bytes = segment_mb << 20
    logdir = build(cache / "verify", size_mb << 20, partitions, segment_bytes)
    files = sorted(p for p in logdir.rglob("*") if p.suffix in (".log", ".index", ".timeindex"))
    index_files = [p for p in files if p.suffix != ".log"]
    log_bytes = sum(p.stat().st_size for p in files if p.suffix == ".log")
    all_bytes = sum(p.stat().st_size for p in logdir.rglob("*") if p.is_file())
    warm(p for p in logdir.rglob("*") if p.is_file())
    jobs = os.cpu_count() or 1
    cmds = {
        "plog_jobs_1": [*plog_command(), "verify", "--quiet", "--jobs", "1", str(logdir)],
        f"plog_jobs_{jobs}": [*plog_command(), "verify", "--quiet", "--jobs", str(jobs), str(logdir)],
        "kafka_verify_index_only": kafka.dump("--verify-index-only", "--files", ",".join(map(str, files))),
        "kafka_index_files_only": kafka.dump("--verify-index-only", "--files", ",".join(map(str, index_files))),
    }
    out: dict = {"dir": str(logdir), "partitions": partitions, "segment_bytes": segment_bytes,
                 "log_bytes": log_bytes, "all_bytes": all_bytes, "files_given_to_kafka": len(files),
                 "load_average_1m_at_start": load1()}
    # An untimed run of each: the Kafka tool must report no mismatch on these files.
    check = scratch / "verify.out"
    problems = {}
    for name, cmd in cmds.items():
        measure(cmd, str(check), env=java_env() if name.startswith("kafka") else None)
        if name.startswith("kafka"):
            text = check.read_text(errors="replace")
            bad = [ln for ln in text.splitlines() if re.search(r"[Mm]ismatch|not found|isvalid: false|corrupt", ln)]
            problems[name] = len(bad)
    check.unlink()
    out["kafka_problem_lines"] = problems
    runs: dict[str, list[Run]] = {name: [] for name in cmds}
    ratios: dict[str, list[float]] = {"kafka_verify_index_only": [], "kafka_index_files_only": []}
    for _ in range(reps):
        for name, cmd in cmds.items():
            runs[name].append(measure(cmd, env=java_env() if name.startswith("kafka") else None))
        for k in ratios:
            ratios[k].append(runs["plog_jobs_1"][-1].seconds / runs[k][-1].seconds)
        print("verify: " + ", ".join(f"{n} {r[-1].seconds:.2f} s" for n, r in runs.items()), file=sys.stderr)
    for name, rs in runs.items():
        out[name] = {"seconds": fig([r.seconds for r in rs]), "cpu_seconds": fig([r.cpu for r in rs]),
                     "log_gb_per_s": fig([log_bytes / r.seconds / 1e9 for r in rs]),
                     "peak_rss_mib": round(max(r.rss_mib for r in rs), 1)}
    for k, values in ratios.items():
        out[f"plog_jobs_1_over_{k}_seconds"] = round(statistics.median(values), 3)
    out["reps"] = reps
    return out


# -- 4: recovery -------------------------------------------------------------------------------------


def recovery_settings(threads: int) -> dict[str, str]:
    return {
        "num.recovery.threads.per.data.dir": str(threads),
        # A SIGKILLed single node restarts with its old incarnation still registered; the
        # new one is admitted when that session expires. Keep that wait short.
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "1000",
    }


def _partition_dirs(logdir: Path) -> list[Path]:
    return sorted(p for p in logdir.iterdir() if p.is_dir() and p.name.startswith(RECOVERY_TOPIC + "-"))


def build_unclean(root: Path, kafka: Kafka, mb: int, partitions: int, segment_mb: int,
                  threads: int) -> tuple[Path, dict]:
    """A directory a real broker wrote and was SIGKILLed on, recovery points reset to 0."""
    from kafka_broker import CLEAN_SHUTDOWN_FILE, KafkaBroker

    params = {"version": kafka.version, "mb": mb, "partitions": partitions, "segment_mb": segment_mb,
              "layout": RECOVERY_LAYOUT}
    pristine, stamp = root / "pristine", root / "params.json"
    if stamp.exists() and json.loads(stamp.read_text()) == params and pristine.is_dir():
        return pristine, json.loads((root / "built.json").read_text())
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"building the unclean directory: Kafka {kafka.version} writes {mb} MiB ...", file=sys.stderr)
    broker = KafkaBroker(kafka.version, kafka.jars, root / "writer", kafka.log_configs,
                         settings=recovery_settings(threads))
    try:
        broker.start()
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics([NewTopic(RECOVERY_TOPIC, partitions, 1,
                                          topic_configs={"segment.bytes": str(segment_mb << 20)})], timeout_ms=30000)
        finally:
            admin.close()
        payloads = root / "payloads.txt"
        payloads.write_bytes(b"\n".join(v for _, _, _, v in json_events(5000)))
        records = (mb << 20) // 110  # ~110 bytes a record in a 16 KiB batch of 100-byte values
        t0 = time.perf_counter()
        proc = subprocess.run(kafka.tool("org.apache.kafka.tools.ProducerPerformance", [
            "--topic", RECOVERY_TOPIC, "--num-records", records, "--throughput", "-1", "--payload-file", payloads,
            "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=all", "enable.idempotence=true",
            "linger.ms=5", "batch.size=16384"]), capture_output=True, text=True, env=java_env())
        if proc.returncode != 0:
            raise RuntimeError(f"ProducerPerformance failed: {(proc.stderr or proc.stdout)[-2000:]}")
        produce_s = time.perf_counter() - t0
        time.sleep(2)  # let a checkpoint pass, as on a live broker
    finally:
        broker.kill()
    os.rename(broker.log_dir, pristine)
    shutil.rmtree(root / "writer", ignore_errors=True)
    if (pristine / CLEAN_SHUTDOWN_FILE).exists():
        raise RuntimeError("the killed broker left a clean-shutdown marker")
    checkpoint = pristine / "recovery-point-offset-checkpoint"
    before = checkpoint.read_text() if checkpoint.exists() else ""
    parts = _partition_dirs(pristine)
    checkpoint.write_text("0\n%d\n%s" % (len(parts), "".join(
        f"{RECOVERY_TOPIC} {p.name.rsplit('-', 1)[1]} 0\n" for p in parts)))
    segments = sorted(p for part in parts for p in part.glob("*.log"))
    built = {
        "written_by": f"Kafka {kafka.version} broker + ProducerPerformance, then SIGKILL",
        "produce_seconds": round(produce_s, 1),
        "partitions": len(parts),
        "segment_bytes_config": segment_mb << 20,
        "segments": len(segments),
        "log_bytes": sum(p.stat().st_size for p in segments),
        "index_files": sum(1 for part in parts for _ in part.glob("*.index")),
        "recovery_points_written_by_broker": " ".join(before.split()[2:]),
        "recovery_points_used": "0 for every partition",
    }
    (root / "built.json").write_text(json.dumps(built))
    stamp.write_text(json.dumps(params))
    return pristine, built


_PLOG_RECOVER = r"""
import json, sys, time
t0 = time.perf_counter()
from plog.engine.storage.log_manager import LogManager
t1 = time.perf_counter()
lm = LogManager(sys.argv[1])
t2 = time.perf_counter()
report = lm.report
lm.close()
t3 = time.perf_counter()
segs = [(r.directory, s.base_offset, s.valid_bytes, s.truncated_bytes) for r in report.logs
        for s in r.recovered_segments]
json.dump({"import_s": t1 - t0, "open_s": t2 - t1, "close_s": t3 - t2, "logs": len(report.logs),
           "clean": list(report.clean_shutdown.values()), "recovered": segs}, open(sys.argv[2], "w"))
"""

_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def _stamp(line: str) -> float | None:
    m = _TS.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def parse_server_log(text: str, logdir: Path, launched: float) -> dict:
    """Kafka's own account of the load: the "Loaded N logs in X ms" line, the segments it
    recovered ("Recovering unflushed segment B" of a partition log) and the times, from
    the JVM's launch, of "Loading logs", "Loaded N logs" and "Kafka Server started"."""
    out: dict = {}
    recovered = []
    for line in text.splitlines():
        m = re.search(r"partition=(\S+?), dir=.*Recovering unflushed segment (\d+)", line)
        if m and not m.group(1).startswith("__cluster_metadata"):
            recovered.append((m.group(1), int(m.group(2))))
        m = re.search(r"Loaded (\d+) logs in (\d+)ms", line)
        if m:
            out["loaded_logs"], out["loaded_logs_ms"] = int(m.group(1)), int(m.group(2))
            out["process_to_logs_loaded_s"] = _stamp(line) - launched
        if "Loading logs from log dirs" in line:
            out["process_to_loading_logs_s"] = _stamp(line) - launched
        if "Kafka Server started" in line:
            out["process_to_server_started_s"] = _stamp(line) - launched
        m = re.search(r"Completed load of Log.* in (\d+)ms", line)
        if m:
            out["completed_load_ms_sum"] = out.get("completed_load_ms_sum", 0) + int(m.group(1))
    out["recovered_segments"] = len(recovered)
    out["recovered_bytes"] = sum((logdir / p / f"{b:020d}.log").stat().st_size for p, b in set(recovered)
                                 if (logdir / p / f"{b:020d}.log").exists())
    return out


def recovery(root: Path, kafka: Kafka, mb: int, partitions: int, segment_mb: int, threads: int, reps: int) -> dict:
    import kafka_broker
    from kafka_broker import KafkaBroker, copy_log_dir

    kafka_broker.BROKER_JVM_OPTS = KAFKA_BROKER_JVM_OPTS  # the broker as kafka-server-start.sh runs it
    pristine, built = build_unclean(root, kafka, mb, partitions, segment_mb, threads)
    out: dict = {"input": built, "load_average_1m_at_start": load1(),
                 "broker_settings": recovery_settings(threads), "broker_jvm_opts": " ".join(KAFKA_BROKER_JVM_OPTS)}
    plog_runs, kafka_runs = [], []
    for rep in range(reps):
        work = root / f"rep-{rep}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        p_dir = copy_log_dir(pristine, work / "plog-logs")
        k_dir = copy_log_dir(pristine, work / "kafka-logs")
        os.sync()  # no write-back of the copies during the timed runs; both stay in the page cache
        result_file = work / "plog.json"
        r = measure([sys.executable, "-c", _PLOG_RECOVER, str(p_dir), str(result_file)])
        res = json.loads(result_file.read_text())
        plog_runs.append({"open_s": res["open_s"], "close_s": res["close_s"], "process_s": r.seconds,
                          "cpu_s": r.cpu, "rss": r.rss_mib, "segments": len(res["recovered"]),
                          "bytes": sum(s[2] + s[3] for s in res["recovered"]), "clean": res["clean"]})
        # Kafka
        broker = KafkaBroker(kafka.version, kafka.jars, work / "kafka-work", kafka.log_configs, log_dir=k_dir,
                             settings=recovery_settings(threads))
        launched = time.time()
        t0 = time.perf_counter()
        try:
            broker.start(timeout=300)
            ready = time.perf_counter() - t0
        finally:
            broker.kill()
        parsed = parse_server_log(broker.server_log.read_text(errors="replace"), pristine, launched)
        parsed["ready_s"] = ready
        kafka_runs.append(parsed)
        print(f"recovery: plog open {plog_runs[-1]['open_s']:.2f} s ({plog_runs[-1]['segments']} segments), "
              f"Kafka loaded logs {parsed.get('loaded_logs_ms')} ms ({parsed['recovered_segments']} segments), "
              f"broker ready {ready:.1f} s", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    out["plog"] = {
        "open_seconds": fig([r["open_s"] for r in plog_runs]),
        "close_seconds": fig([r["close_s"] for r in plog_runs]),
        "process_seconds": fig([r["process_s"] for r in plog_runs]),
        "process_cpu_seconds": fig([r["cpu_s"] for r in plog_runs]),
        "open_gb_per_s": fig([r["bytes"] / r["open_s"] / 1e9 for r in plog_runs]),
        "peak_rss_mib": round(max(r["rss"] for r in plog_runs), 1),
        "recovered_segments": plog_runs[-1]["segments"],
        "recovered_bytes": plog_runs[-1]["bytes"],
        "saw_clean_shutdown": plog_runs[-1]["clean"],
    }
    k_ok = [r for r in kafka_runs if "loaded_logs_ms" in r]
    out["kafka_broker"] = {
        "loaded_logs_ms": fig([r["loaded_logs_ms"] for r in k_ok], 0) if k_ok else None,
        "loaded_logs": k_ok[-1]["loaded_logs"] if k_ok else None,
        "completed_load_ms_sum": fig([r.get("completed_load_ms_sum", 0) for r in k_ok], 0) if k_ok else None,
        "loaded_logs_gb_per_s": fig([r["recovered_bytes"] / (r["loaded_logs_ms"] / 1000) / 1e9 for r in k_ok
                                     if r["loaded_logs_ms"]]) if k_ok else None,
        "process_to_loading_logs_seconds": fig([r["process_to_loading_logs_s"] for r in k_ok], 2) if k_ok else None,
        "process_to_logs_loaded_seconds": fig([r["process_to_logs_loaded_s"] for r in k_ok], 2) if k_ok else None,
        "process_to_server_started_seconds": fig(started, 2) if (started := [
            r["process_to_server_started_s"] for r in kafka_runs if "process_to_server_started_s" in r]) else None,
        "process_to_ready_seconds": fig([r["ready_s"] for r in kafka_runs], 2),
        "recovered_segments": kafka_runs[-1]["recovered_segments"],
        "recovered_bytes": kafka_runs[-1]["recovered_bytes"],
    }
    out["same_segments_recovered"] = (out["plog"]["recovered_segments"] == out["kafka_broker"]["recovered_segments"]
                                      == built["segments"])
    if k_ok and len(k_ok) == len(plog_runs):
        out["plog_open_over_kafka_loaded_logs"] = round(statistics.median(
            [p["open_s"] / (k["loaded_logs_ms"] / 1000) for p, k in zip(plog_runs, k_ok) if k["loaded_logs_ms"]]), 3)
    out["plog_process_over_kafka_process_to_logs_loaded"] = round(statistics.median(
        [p["process_s"] / k["process_to_logs_loaded_s"] for p, k in zip(plog_runs, kafka_runs)
         if "process_to_logs_loaded_s" in k]), 3) if k_ok else None
    out["plog_process_over_kafka_process_to_ready"] = round(statistics.median(
        [p["process_s"] / k["ready_s"] for p, k in zip(plog_runs, kafka_runs)]), 3)
    out["reps"] = reps
    return out


# -- main ----------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition (smoke test)")
    ap.add_argument("--size-mb", type=int, help="the large dump segment, MiB (default 1024)")
    ap.add_argument("--verify-mb", type=int, help="the verify directory, MiB (default 256)")
    ap.add_argument("--verify-segment-mb", type=int, default=16, help="its segment size, MiB")
    ap.add_argument("--recovery-mb", type=int, help="what the broker writes for the recovery figure (default 256)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the verify directory and the "
                    "recovery topic")
    ap.add_argument("--segment-mb", type=int, default=4, help="segment.bytes of the recovery topic, MiB (>= 1)")
    ap.add_argument("--recovery-threads", type=int, default=1, help="the broker's num.recovery.threads.per.data.dir")
    ap.add_argument("--reps", type=int, help="repetitions of figures 2-4 (default 3)")
    ap.add_argument("--small-reps", type=int, help="repetitions of figure 1 (default 9)")
    ap.add_argument("--small-file", help="segment for figure 1 (default: a ~1 MB corpus segment)")
    ap.add_argument("--kafka-version", default="4.3.1")
    ap.add_argument("--only", help="comma-separated subset of dump_small,dump_large,verify,recovery")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "plog-bench-vs-kafka"),
                    help="cache folder for the built inputs (outside git)")
    ap.add_argument("--json", help="also write the result to this file")
    args = ap.parse_args()
    q = args.quick
    size_mb = args.size_mb or (64 if q else 1024)
    recovery_mb = args.recovery_mb or (24 if q else 256)
    verify_mb = args.verify_mb or (32 if q else 256)
    reps = args.reps or (1 if q else 3)
    small_reps = args.small_reps or (3 if q else 9)
    only = set(args.only.split(",")) if args.only else {"dump_small", "dump_large", "verify", "recovery"}
    cache = Path(args.dir)
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=cache))
    started = time.perf_counter()
    kafka = Kafka(args.kafka_version, cache)
    result: dict = {
        "benchmark": "plog vs Apache Kafka tools",
        "kafka_version": args.kafka_version,
        "java": kafka.java,
        "kafka_tool_jvm_opts": " ".join(KAFKA_TOOL_JVM_OPTS),
        "python": platform.python_version(),
        "plog_cli": " ".join(plog_command()),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "quick": q,
        "figures": {},
    }
    figures = result["figures"]

    def run(name, fn, *a):
        if name not in only:
            return
        if kafka.reason:
            figures[name] = {"skipped": f"Kafka {args.kafka_version} unavailable: {kafka.reason}"}
            return
        print(f"--- {name}", file=sys.stderr)
        try:
            figures[name] = fn(*a)
        except Exception as e:  # report and go on with the other figures
            figures[name] = {"failed": f"{type(e).__name__}: {e}"[:3000]}

    try:
        seg = small_file(args.small_file)
        if "dump_small" in only and seg is None:
            figures["dump_small"] = {"skipped": "no --small-file given and the corpus is not at ../shared/corpus"}
        else:
            run("dump_small", dump_small, seg, kafka, small_reps, scratch)
        run("dump_large", dump_large, size_mb, cache, kafka, reps)
        run("verify", verify, verify_mb, args.verify_segment_mb, args.partitions, cache, kafka, reps, scratch)
        run("recovery", recovery, cache / f"recovery-{args.kafka_version}", kafka, recovery_mb, args.partitions,
            args.segment_mb, args.recovery_threads, reps)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["seconds"] = round(time.perf_counter() - started, 1)
    emit(result, args.json)


if __name__ == "__main__":
    main()

"""``plog dump --print-data-log > /dev/null`` and ``plog dump --deep-iteration``: records/s
and peak RSS on a large segment, on both of plog's paths (the native core, and the pure-Python
reference with ``PLOG_NATIVE=0``), side by side with Kafka's own DumpLogSegments on the same
file when its jars are present.

The segment is written once with plog's engine (the perf-anchors workload: 10-byte keys,
100-byte values, uncompressed batches of 500 records) into a cache folder outside git and
reused. Each tool runs as a child process with stdout to /dev/null, start-up included; peak
RSS is the child's ``ru_maxrss``. Targets: issue 4 (>= 700k records/s, RSS <= 150 MB whatever
the size) and issue 23 (>= 5x Kafka's DumpLogSegments, with and without payloads).

JSON keys: ``plog`` (native path, --print-data-log), ``plog_python``, ``deep`` (``plog``,
``plog_python``, ``kafka_dump_log_segments`` for --deep-iteration without payloads),
``kafka_dump_log_segments`` and ``plog_speed_vs_kafka`` (print-data-log), ``deep_speed_vs_kafka``.

    .venv/bin/python benchmarks/bench_dump.py --size-mb 1024 [--json out.json] [--no-python]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from workloads import emit, json_events  # noqa: E402

BATCH = 500


def build_segment(size_mb: int, cache: Path) -> tuple[Path, int]:
    from plog.engine.storage.log_config import LogConfig
    from plog.engine.storage.log import Log
    from plog.formats.record_batch import encode_batch
    from plog.formats.records import Record

    part = cache / f"dump-{size_mb}mb" / "bench-0"
    seg = part / "00000000000000000000.log"
    marker = part / ".complete"
    if marker.exists():
        return seg, int(marker.read_text())
    if part.exists():
        import shutil

        shutil.rmtree(part)
    events = json_events(BATCH * 20)
    batches = [
        encode_batch([Record(i, ts, k, v, ()) for i, (_, ts, k, v) in enumerate(events[j * BATCH : (j + 1) * BATCH])])
        for j in range(20)
    ]
    log = Log.open(part, LogConfig(segment_bytes=2**31 - 1, fsync_on_produce=False))
    records = 0
    written = 0
    target = size_mb << 20
    while written < target:
        batch = batches[(records // BATCH) % 20]
        log.append_as_leader(batch)
        records += BATCH
        written += len(batch)
    log.close()
    marker.write_text(str(records))
    return seg, records


def run_child(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of ``cmd`` with stdout to /dev/null.

    Peak RSS is read from ``wait4``'s own rusage for this child (``RUSAGE_CHILDREN`` would be
    the largest child so far, whichever it was)."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(cmd, stdout=null, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {err.strip()[-500:]}")
    return wall, usage.ru_maxrss / 1024


def plog_env(native: bool) -> dict:
    env = dict(os.environ)
    if native:
        env.pop("PLOG_NATIVE", None)
    else:
        env["PLOG_NATIVE"] = "0"
    return env


def figures(wall: float, rss: float, records: int) -> dict:
    return {"seconds": round(wall, 2), "records_per_s": round(records / wall), "peak_rss_mib": round(rss, 1)}


def kafka_command(seg: Path, mode: str) -> list[str] | None:
    jars = ROOT / ".kafka-cache" / "4.3.1"
    if not jars.is_dir():
        return None
    return ["java", "-cp", f"{jars}/*", "org.apache.kafka.tools.DumpLogSegments", mode, "--files", str(seg)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--cache", default=str(ROOT / "benchmarks" / "results" / "cache"))
    ap.add_argument("--no-kafka", action="store_true", help="skip Kafka's DumpLogSegments")
    ap.add_argument("--no-python", action="store_true", help="skip the pure-Python path (PLOG_NATIVE=0)")
    ap.add_argument("--json")
    args = ap.parse_args()
    seg, records = build_segment(args.size_mb, Path(args.cache))
    size = seg.stat().st_size
    result: dict = {
        "benchmark": "dump --print-data-log",
        "segment_bytes": size,
        "records": records,
        "targets": {"records_per_s": 700_000, "peak_rss_mib": 150, "speed_vs_kafka": 5},
        "deep": {},
    }
    for mode, into in (("--print-data-log", result), ("--deep-iteration", result["deep"])):
        plog = [sys.executable, "-m", "plog.cli", "dump", mode, str(seg)]
        into["plog"] = figures(*run_child(plog, plog_env(True)), records)
        if not args.no_python:
            into["plog_python"] = figures(*run_child(plog, plog_env(False)), records)
        kafka = None if args.no_kafka else kafka_command(seg, mode)
        if kafka:
            into["kafka_dump_log_segments"] = figures(*run_child(kafka), records)
    k = result.get("kafka_dump_log_segments")
    if k:
        result["plog_speed_vs_kafka"] = round(k["seconds"] / result["plog"]["seconds"], 2)
    k = result["deep"].get("kafka_dump_log_segments")
    if k:
        result["deep_speed_vs_kafka"] = round(k["seconds"] / result["deep"]["plog"]["seconds"], 2)
    emit(result, args.json)


if __name__ == "__main__":
    main()

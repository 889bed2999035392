"""``plog dump --print-data-log > /dev/null``: records/s and peak RSS on a large segment,
side by side with Kafka's own DumpLogSegments on the same file when its jars are present.

The segment is written once with plog's engine (the perf-anchors workload: 10-byte keys,
100-byte values, uncompressed batches of 500 records) into a cache folder outside git and
reused. Each tool runs as a child process with stdout to /dev/null; peak RSS is the
child's ``ru_maxrss``. Targets (issue 4): >= 700k records/s, RSS <= 150 MB whatever the size.

    .venv/bin/python benchmarks/bench_dump.py --size-mb 1024 [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import resource
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


def run_child(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of ``cmd`` with stdout to /dev/null."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run(cmd, stdout=null, stderr=subprocess.PIPE, check=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: run the small tool first.
    return wall, max(peak, before) / 1024


def kafka_command(seg: Path) -> list[str] | None:
    jars = ROOT / ".kafka-cache" / "4.3.1"
    if not jars.is_dir():
        return None
    return ["java", "-cp", f"{jars}/*", "org.apache.kafka.tools.DumpLogSegments", "--print-data-log", "--files", str(seg)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--cache", default=str(ROOT / "benchmarks" / "results" / "cache"))
    ap.add_argument("--no-kafka", action="store_true", help="skip Kafka's DumpLogSegments")
    ap.add_argument("--json")
    args = ap.parse_args()
    seg, records = build_segment(args.size_mb, Path(args.cache))
    size = seg.stat().st_size
    plog = [sys.executable, "-m", "plog.cli", "dump", "--print-data-log", str(seg)]
    wall, rss = run_child(plog)
    result = {
        "benchmark": "dump --print-data-log",
        "segment_bytes": size,
        "records": records,
        "plog": {"seconds": round(wall, 2), "records_per_s": round(records / wall), "peak_rss_mib": round(rss, 1)},
        "targets": {"records_per_s": 700_000, "peak_rss_mib": 150},
    }
    kafka = None if args.no_kafka else kafka_command(seg)
    if kafka:
        k_wall, k_rss = run_child(kafka)
        result["kafka_dump_log_segments"] = {"seconds": round(k_wall, 2), "records_per_s": round(records / k_wall),
                                             "peak_rss_mib": round(k_rss, 1)}
        result["plog_speed_vs_kafka"] = round(k_wall / wall, 2)
    emit(result, args.json)


if __name__ == "__main__":
    main()

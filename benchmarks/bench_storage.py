"""Storage-engine benchmark: append throughput, offset lookup latency, recovery speed.

Measures, with the engine's own API (``plog.engine.storage.log.Log``):

* **append**: ``append_as_leader`` of ready-made producer batches (~16 KiB, 135 records
  with a 10-byte key and a 100-byte JSON-ish value, as in ../shared/docs/perf-anchors.md),
  records/s, uncompressed and lz4, with ``fsync_on_produce`` true and false, default
  ``segment.bytes`` (1 GiB). Encoding the batches is the producer's work and is not timed.
* **lookup**: ``Log.translate_offset(random offset)`` on a partition of 1,000 segments of
  16 KiB batches, median and p99 in ms (after one untimed lookup per segment, which maps
  its index).
* **recovery**: ``Log.open(..., recovery_point=0, had_clean_shutdown=False)`` of a 2 GiB
  partition of 16 KiB batches in 1 GiB segments (every batch CRC-checked, every index
  rebuilt), GB/s. The files are in the page cache (written, then ``sync``), so this is
  CPU-bound, as in perf-anchors.md.

Partitions are built by writing a pool of encoded batches round-robin straight into
segment files, with the baseOffset (bytes 0-7, outside the CRC) rewritten so that
offsets are contiguous; the lookup partition then gets its indexes from one recovery.
Each figure is the median over ``--reps`` runs. GB = 10^9 bytes.

Prints one JSON object with every figure, the targets and whether they were met.
Usage: python benchmarks/bench_storage.py [--quick] [--reps N] [--json FILE] [--dir DIR]
``--quick`` uses small sizes (well under a minute); the full run takes a few minutes and
needs ~3.5 GB of free disk space under ``--dir`` (default: the system temp dir).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit, json_events  # noqa: E402

from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log import Log
from plog.formats.compression import LZ4, NONE
from plog.formats.record_batch import encode_batch, set_base_offset

TARGETS = {"append_no_fsync_records_per_s": 1_000_000, "lookup_p99_ms": 1.0, "recovery_gb_per_s": 2.0}
RECORDS_PER_BATCH = 135  # ~16.3 KB uncompressed, as kafka-python's batch_size=16384 gives


def workload(n: int, seed: int = 1) -> list[tuple]:
    """``n`` producer records (offset, ts, 10-byte key, 100-byte JSON-ish value)."""
    return json_events(n, seed)


def producer_batches(count: int, codec: int, seed: int = 1) -> list[bytes]:
    """``count`` distinct producer batches (base offset 0) of RECORDS_PER_BATCH records."""
    records = workload(count * RECORDS_PER_BATCH, seed)
    out = []
    for i in range(count):
        group = records[i * RECORDS_PER_BATCH:(i + 1) * RECORDS_PER_BATCH]
        out.append(encode_batch([(j, ts, k, v) for j, (_, ts, k, v) in enumerate(group)], compression_codec=codec))
    return out


def write_partition(directory: Path, pool: list[bytes], total_bytes: int, segment_bytes: int,
                    batches_per_segment: int | None = None) -> dict:
    """Write batches from ``pool`` round-robin, offsets contiguous, rolling as Kafka's size
    rule does (a segment never grows past ``segment_bytes``) or every
    ``batches_per_segment`` batches. Returns what was written."""
    directory.mkdir(parents=True, exist_ok=True)
    bufs = [bytearray(b) for b in pool]
    offset = written = batches = segments = 0
    i = 0
    f = None
    seg_size = 0
    pending = bytearray()
    try:
        while written < total_bytes:
            buf = bufs[i % len(bufs)]
            i += 1
            if f is None or seg_size > segment_bytes - len(buf) or (
                    batches_per_segment and batches % batches_per_segment == 0):
                if f is not None:
                    f.write(pending)
                    pending.clear()
                    f.close()
                f = open(directory / f"{offset:020d}.log", "wb", buffering=0)
                seg_size = 0
                segments += 1
            set_base_offset(buf, offset)
            pending += buf
            if len(pending) >= 8 << 20:
                f.write(pending)
                pending.clear()
            offset += RECORDS_PER_BATCH
            seg_size += len(buf)
            written += len(buf)
            batches += 1
    finally:
        if f is not None:
            f.write(pending)
            f.close()
    return {"bytes": written, "batches": batches, "records": offset, "segments": segments}


def fresh_dir(root: Path, name: str) -> Path:
    path = root / name
    shutil.rmtree(path, ignore_errors=True)
    return path


# -- append ---------------------------------------------------------------------------------------------


def bench_append(root: Path, codec: int, fsync: bool, n_batches: int, reps: int, pool: list[bytes]) -> dict:
    rates, mb = [], []
    for rep in range(reps):
        path = fresh_dir(root, f"append-{codec}-{int(fsync)}-{rep}")
        log = Log.open(path, LogConfig(fsync_on_produce=fsync), had_clean_shutdown=False)
        try:
            append = log.append_as_leader
            size = 0
            t0 = time.perf_counter()
            for k in range(n_batches):
                b = pool[k % len(pool)]
                append(b)
                size += len(b)
            elapsed = time.perf_counter() - t0
            assert log.log_end_offset == n_batches * RECORDS_PER_BATCH
        finally:
            log.close()
            shutil.rmtree(path, ignore_errors=True)
        rates.append(n_batches * RECORDS_PER_BATCH / elapsed)
        mb.append(size / elapsed / 1e6)
    return {"records_per_s": round(statistics.median(rates)), "mb_per_s": round(statistics.median(mb), 1),
            "batches": n_batches, "batch_bytes_avg": round(sum(map(len, pool)) / len(pool)),
            "spread_records_per_s": [round(min(rates)), round(max(rates))]}


# -- lookup ---------------------------------------------------------------------------------------------


def bench_lookup(root: Path, pool: list[bytes], n_segments: int, batches_per_segment: int, lookups: int,
                 reps: int) -> dict:
    path = fresh_dir(root, "lookup-0")
    avg = sum(map(len, pool)) / len(pool)
    built = write_partition(path, pool, int(avg * batches_per_segment * (n_segments - 0.5)), 1 << 30,
                            batches_per_segment)
    assert built["segments"] == n_segments, built
    t0 = time.perf_counter()
    log = Log.open(path, LogConfig(), recovery_point=0, had_clean_shutdown=False)  # builds the indexes
    rebuild_s = time.perf_counter() - t0
    log.close()
    log = Log.open(path, LogConfig(), had_clean_shutdown=True)
    try:
        assert len(log.segments) == n_segments
        leo = log.log_end_offset
        rnd = random.Random(3)
        for seg in log.segments:  # untimed: map every index once
            assert log.translate_offset(seg.base_offset) is not None
        medians, p99s, maxes = [], [], []
        clock = time.perf_counter_ns
        translate = log.translate_offset
        for _ in range(reps):
            times = []
            for _ in range(lookups):
                offset = rnd.randrange(leo)
                t = clock()
                found = translate(offset)
                times.append(clock() - t)
                assert found is not None and found[1].offset >= offset
            times.sort()
            medians.append(times[len(times) // 2] / 1e6)
            p99s.append(times[int(len(times) * 0.99)] / 1e6)
            maxes.append(times[-1] / 1e6)
    finally:
        log.close()
        shutil.rmtree(path, ignore_errors=True)
    return {"median_ms": round(statistics.median(medians), 4), "p99_ms": round(statistics.median(p99s), 4),
            "max_ms": round(statistics.median(maxes), 3), "lookups": lookups, "segments": n_segments,
            "batches_per_segment": batches_per_segment, "partition_bytes": built["bytes"],
            "records": built["records"],
            "index_rebuild_s": round(rebuild_s, 2)}


# -- recovery -------------------------------------------------------------------------------------------


def bench_recovery(root: Path, pool: list[bytes], total_bytes: int, reps: int) -> dict:
    path = fresh_dir(root, "recovery-0")
    built = write_partition(path, pool, total_bytes, LogConfig().segment_bytes)
    os.sync()  # no writeback under the timed runs
    # One untimed read of every file: the whole partition is in the page cache.
    for p in sorted(path.glob("*.log")):
        with open(p, "rb", buffering=0) as f:
            buf = bytearray(8 << 20)
            while f.readinto(buf):
                pass
    rates, secs = [], []
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            log = Log.open(path, LogConfig(), recovery_point=0, had_clean_shutdown=False)
            elapsed = time.perf_counter() - t0
            report = log.load_report
            assert log.log_end_offset == built["records"], (log, built)
            assert len(report.recovered_segments) == built["segments"] and report.truncated_bytes == 0
            log.close()
            rates.append(built["bytes"] / elapsed / 1e9)
            secs.append(elapsed)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return {"gb_per_s": round(statistics.median(rates), 2), "seconds": round(statistics.median(secs), 2),
            "spread_gb_per_s": [round(min(rates), 2), round(max(rates), 2)], "partition_bytes": built["bytes"],
            "segments": built["segments"], "batches": built["batches"], "records": built["records"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, well under a minute")
    ap.add_argument("--reps", type=int, default=None, help="runs per figure (default 3; 1 with --quick)")
    ap.add_argument("--json", help="also write the result to this file")
    ap.add_argument("--dir", help="where to build the partitions (default: a new temp dir, removed at the end)")
    args = ap.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    root = Path(tempfile.mkdtemp(prefix="plog-bench-storage-", dir=args.dir))
    started = time.perf_counter()
    try:
        plain = producer_batches(64, NONE)
        lz4 = producer_batches(64, LZ4)
        if args.quick:
            sizes = {"append_batches": 2000, "append_fsync_batches": 300, "lookup_batches_per_segment": 8,
                     "lookups": 2000, "recovery_bytes": 256 << 20}
        else:
            sizes = {"append_batches": 15000, "append_fsync_batches": 3000, "lookup_batches_per_segment": 64,
                     "lookups": 20000, "recovery_bytes": 2 << 30}
        figures = {"append": {}}
        for name, codec, pool in (("none", NONE, plain), ("lz4", LZ4, lz4)):
            for fsync in (False, True):
                n = sizes["append_fsync_batches" if fsync else "append_batches"]
                key = f"{name}_{'fsync' if fsync else 'no_fsync'}"
                figures["append"][key] = bench_append(root, codec, fsync, n, reps, pool)
                print(f"append {key}: {figures['append'][key]['records_per_s']:,} records/s", file=sys.stderr)
        figures["lookup"] = bench_lookup(root, plain, 1000, sizes["lookup_batches_per_segment"], sizes["lookups"],
                                         reps)
        print(f"lookup: {figures['lookup']}", file=sys.stderr)
        figures["recovery"] = bench_recovery(root, plain, sizes["recovery_bytes"], reps)
        print(f"recovery: {figures['recovery']}", file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "benchmark": "storage",
        "python": platform.python_version(),
        "quick": args.quick,
        "reps": reps,
        "records_per_batch": RECORDS_PER_BATCH,
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
        "targets": TARGETS,
        "targets_met": {
            "append_no_fsync": figures["append"]["none_no_fsync"]["records_per_s"]
            >= TARGETS["append_no_fsync_records_per_s"],
            "lookup": figures["lookup"]["p99_ms"] < TARGETS["lookup_p99_ms"],
            "recovery": figures["recovery"]["gb_per_s"] >= TARGETS["recovery_gb_per_s"],
        },
    }
    emit(result, args.json)


if __name__ == "__main__":
    sys.exit(main())

"""``plog verify`` benchmark: GB/s over a log directory of 16 KiB batches, and peak RSS.

The log directory (built once and cached under ``--dir``, default
``$TMPDIR/plog-bench-verify``; rebuilt when the parameters change) has ``--partitions``
partitions of 16 KiB uncompressed batches (135 records of a 10-byte key and a 100-byte
JSON-ish value, as in ../shared/docs/perf-anchors.md), ``--size`` bytes in all (default
4 GiB), in segments of ``--segment-bytes`` (default 256 MiB). Everything a broker leaves
after a clean shutdown is there: ``.index`` and ``.timeindex`` entries exactly as Kafka's
append path writes them (one per batch: each 16 KiB append is more than
``index.interval.bytes`` after the previous entry; timestamps rise from batch to batch),
producer snapshots at segment bases, ``leader-epoch-checkpoint``, ``partition.metadata``,
the offset checkpoints, ``meta.properties`` and ``.kafka_cleanshutdown``. Batches come from
a pool of 64 distinct encodings with the base offset and timestamps rewritten (and the
CRC recomputed), so offsets are contiguous and timestamps increase.

Figures (GB = 10^9 bytes; the files are in the page cache: read once before timing):

* ``ceiling_crc32c``: read every ``.log`` in chunks of the engine's size and ``crc32c`` each chunk whole,
  in this process: the cost of the bytes alone, the peer every other figure is a ratio to;
* ``naive_scan``: the anchors' naive batch scan (header unpack, CRC-32C of each batch, offset
  continuity; nothing else), chunked the same way: the floor for a batch-by-batch verifier;
* ``engine_single``: :func:`plog.engine.inspect.verify.verify_paths` in this process, one job;
* ``small_batches``: ``engine_single`` and the ceiling again on a one-partition directory of
  ``--small-size`` bytes of ~1 KiB batches (8 records each), where per-batch costs dominate;
* ``cli_single`` / ``cli_jobs``: ``plog verify DIR --quiet --jobs 1`` / ``--jobs N`` as a
  child process (interpreter start-up included), wall time, and the peak RSS of the process
  and its workers (``RUSAGE_CHILDREN`` of a small intermediate process: Linux carries the
  forking process's RSS high-water mark into a child's ``ru_maxrss``).

Each figure is the median of ``--reps`` runs, in GB per wall-clock second and, steadier on a
shared machine, GB per CPU-second (user + system, every process of the run); the ratio to
the ceiling is taken within each repetition. Prints one JSON object (see workloads.emit).
Usage: python benchmarks/bench_verify.py [--size 4G] [--partitions 8] [--jobs N] [--reps 3]
[--dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit, json_events  # noqa: E402

from crc32c import crc32c  # noqa: E402

from plog.engine.inspect.verify import DEFAULT_CHUNK_SIZE, VerifyStats, verify_paths  # noqa: E402
from plog.formats.checkpoints import (  # noqa: E402
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    format_partition_metadata,
)
from plog.formats.compression import NONE  # noqa: E402
from plog.formats.producer_snapshot import encode_snapshot  # noqa: E402
from plog.formats.record_batch import encode_batch  # noqa: E402

TARGETS = {"verify_single_gb_per_s": 4.0, "peak_rss_mb": 150}
RECORDS_PER_BATCH = 135
# ~1 KiB batches (8 records of ~118 bytes + the 61-byte header): issue 23's small-batch figure.
SMALL_RECORDS_PER_BATCH = 8
INDEX_INTERVAL_BYTES = 4096
TOPIC = "bench-verify"
LAYOUT_VERSION = 1


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("IB")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def batch_pool(count: int = 64, per_batch: int = RECORDS_PER_BATCH) -> list[bytearray]:
    records = json_events(count * per_batch)
    pool = []
    for i in range(count):
        group = records[i * per_batch:(i + 1) * per_batch]
        t0 = group[0][1]
        pool.append(bytearray(encode_batch([(j, ts - t0, k, v) for j, (_, ts, k, v) in enumerate(group)],
                                           compression_codec=NONE)))
    return pool


_Q = struct.Struct(">q")
_I = struct.Struct(">I")


def write_partition(directory: Path, pool: list[bytearray], total: int, segment_bytes: int,
                    per_batch: int = RECORDS_PER_BATCH) -> int:
    """Write one partition as a broker's leader append path would; returns its log end offset."""
    directory.mkdir(parents=True)
    offset = 0
    ts = 1_700_000_000_000
    written = 0
    i = 0
    segments = []
    while written < total:
        base = offset
        segments.append(base)
        name = directory / f"{base:020d}"
        out = open(f"{name}.log", "wb")
        pending = bytearray()
        size = 0
        index = bytearray()
        timeindex = bytearray()
        since_entry = 0
        last_ts = -1
        while size < segment_bytes - 20000 and written < total:
            buf = pool[i % len(pool)]
            i += 1
            _Q.pack_into(buf, 0, offset)
            span = _Q.unpack_from(buf, 35)[0] - _Q.unpack_from(buf, 27)[0]
            _Q.pack_into(buf, 27, ts)
            _Q.pack_into(buf, 35, ts + span)
            _I.pack_into(buf, 17, crc32c(memoryview(buf)[21:]))
            last = offset + per_batch - 1
            max_ts = ts + span
            if since_entry > INDEX_INTERVAL_BYTES:
                index += struct.pack(">ii", last - base, size)
                if max_ts > last_ts:
                    timeindex += struct.pack(">qi", max_ts, last - base)
                    last_ts = max_ts
                since_entry = 0
            since_entry += len(buf)
            pending += buf
            if len(pending) >= 8 << 20:
                out.write(pending)
                pending.clear()
            size += len(buf)
            written += len(buf)
            offset = last + 1
            ts = max_ts + 1
        out.write(pending)
        out.close()
        Path(f"{name}.index").write_bytes(index)
        Path(f"{name}.timeindex").write_bytes(timeindex)
    for base in segments[1:] + [offset]:
        (directory / f"{base:020d}.snapshot").write_bytes(encode_snapshot([]))
    (directory / "leader-epoch-checkpoint").write_text(format_leader_epoch_checkpoint([(0, 0)]))
    (directory / "partition.metadata").write_text(format_partition_metadata(uuid.uuid5(uuid.NAMESPACE_URL, TOPIC)))
    return offset


def build(root: Path, size: int, partitions: int, segment_bytes: int, per_batch: int = RECORDS_PER_BATCH) -> Path:
    params = {"size": size, "partitions": partitions, "segment_bytes": segment_bytes, "layout": LAYOUT_VERSION}
    if per_batch != RECORDS_PER_BATCH:
        params["records_per_batch"] = per_batch
    logdir = root / "logdir"
    stamp = root / "params.json"
    if stamp.exists() and json.loads(stamp.read_text()) == params:
        return logdir
    if root.exists():
        for p in sorted(root.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
    logdir.mkdir(parents=True)
    print(f"building {size / 1e9:.2f} GB in {partitions} partitions under {logdir} ...", file=sys.stderr)
    pool = batch_pool(per_batch=per_batch)
    ends = {}
    for k in range(partitions):
        ends[(TOPIC, k)] = write_partition(logdir / f"{TOPIC}-{k}", pool, size // partitions, segment_bytes,
                                           per_batch)
    (logdir / "recovery-point-offset-checkpoint").write_text(format_offset_checkpoint(ends))
    (logdir / "replication-offset-checkpoint").write_text(format_offset_checkpoint(ends))
    (logdir / "log-start-offset-checkpoint").write_text(format_offset_checkpoint({}))
    (logdir / "meta.properties").write_text("#\n#Mon Jan 01 00:00:00 UTC 2024\nbroker.id=0\nversion=0\n"
                                            "cluster.id=bench\n")
    (logdir / ".kafka_cleanshutdown").write_text("")
    os.sync()
    stamp.write_text(json.dumps(params))
    return logdir


def log_files(logdir: Path) -> list[Path]:
    return sorted(logdir.rglob("*.log"))


def warm(logdir: Path) -> int:
    """Read every file once so that timing sees the page cache; returns the .log bytes."""
    buf = bytearray(8 << 20)
    for p in sorted(logdir.rglob("*")):
        if p.is_file():
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass
    return sum(p.stat().st_size for p in log_files(logdir))


def ceiling(logdir: Path) -> tuple[float, float]:
    """Wall and CPU seconds to read every .log in chunks of the engine's size and CRC each chunk."""
    buf = bytearray(DEFAULT_CHUNK_SIZE)
    view = memoryview(buf)
    t0, c0 = time.perf_counter(), time.process_time()
    for p in log_files(logdir):
        with open(p, "rb", buffering=0) as f:
            while True:
                got = f.readinto(buf)
                if not got:
                    break
                crc32c(view[:got])
    return time.perf_counter() - t0, time.process_time() - c0


_NAIVE = struct.Struct(">qi5xI")  # baseOffset, batchLength, crc


def naive_scan(logdir: Path) -> tuple[float, float]:
    """The anchors' "naive batch scan + CRC32C of every batch" (perf-anchors.md), chunked like
    the engine: per batch one header unpack, one CRC of the batch, offset continuity. No
    indexes, no error handling: the floor for a Python verifier working batch by batch."""
    buf = bytearray(DEFAULT_CHUNK_SIZE)
    view = memoryview(buf)
    unpack = _NAIVE.unpack_from
    t0, c0 = time.perf_counter(), time.process_time()
    for path in log_files(logdir):
        with open(path, "rb", buffering=0) as f:
            pos, expected = 0, None
            while True:
                f.seek(pos)
                n = f.readinto(buf)
                if n < 61:
                    break
                p = 0
                while p + 61 <= n:
                    base, length, crc = unpack(view, p)
                    stop = p + 12 + length
                    if stop > n:
                        break
                    assert crc32c(view[p + 21:stop]) == crc and (expected is None or base == expected)
                    expected = base + RECORDS_PER_BATCH
                    p = stop
                pos += p
    return time.perf_counter() - t0, time.process_time() - c0


def engine_single(logdir: Path) -> tuple[float, float, VerifyStats]:
    """Wall and CPU seconds of the engine's verify of ``logdir`` in this process, one job."""
    stats = VerifyStats()
    t0, c0 = time.perf_counter(), time.process_time()
    findings = list(verify_paths([str(logdir)], stats=stats))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert stats.errors == 0, findings[:5]
    return elapsed, cpu, stats


# Runs the command and reports its time and the peak RSS of it and its descendants. A small
# intermediate process is needed: Linux carries the RSS high-water mark of the process that
# forks into the child's ru_maxrss, and this benchmark's own process is large.
_MEASURE = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
elapsed = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(code, elapsed, u.ru_utime + u.ru_stime, u.ru_maxrss, file=sys.stderr)
"""


def cli(logdir: Path, jobs: int) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (all processes) and peak RSS (MB) of ``plog verify`` as a
    child process (for ``--jobs``, the largest of the process and its workers)."""
    cmd = [sys.executable, "-m", "plog.cli", "verify", "--quiet", "--jobs", str(jobs), str(logdir)]
    r = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True)
    code, elapsed, cpu, maxrss = r.stderr.split()[-4:]
    if int(code) != 0:
        raise SystemExit(f"plog verify exited {code}: {r.stderr}")
    return float(elapsed), float(cpu), int(maxrss) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="4G", help="bytes of .log in all (e.g. 4G, 512M); default 4G")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--segment-bytes", default="256M")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="for the --jobs figure")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--small-size", default="1G",
                    help="bytes of .log of the ~1 KiB-batch directory (one partition; 0: not measured)")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "plog-bench-verify"),
                    help="cache directory for the built log directory")
    ap.add_argument("--json", help="also write the result to this file")
    args = ap.parse_args()
    size, segment_bytes = parse_size(args.size), parse_size(args.segment_bytes)
    started = time.perf_counter()
    small_size = parse_size(args.small_size)
    small_dir = small_bytes = None
    if small_size:
        small_dir = build(Path(args.dir + "-small-batches"), small_size, 1, segment_bytes, SMALL_RECORDS_PER_BATCH)
        small_bytes = warm(small_dir)
    logdir = build(Path(args.dir), size, args.partitions, segment_bytes)
    log_bytes = warm(logdir)
    total_bytes = sum(p.stat().st_size for p in logdir.rglob("*") if p.is_file())
    runs: dict[str, list] = {}
    rss = {"cli_single": [], "cli_jobs": []}
    ratios, cpu_ratios, naive_ratios, small_ratios = [], [], [], []
    small_stats = None
    stats = None
    load = os.getloadavg()[0]

    def add(name: str, seconds: float) -> float:
        runs.setdefault(name, []).append(log_bytes / seconds / 1e9)
        return runs[name][-1]

    for _ in range(args.reps):
        c, c_cpu = ceiling(logdir)
        nv, nv_cpu = naive_scan(logdir)
        e, e_cpu, stats = engine_single(logdir)
        s1, s1_cpu, r1 = cli(logdir, 1)
        sj, sj_cpu, rj = cli(logdir, args.jobs)
        add("ceiling", c), add("ceiling_cpu", c_cpu), add("engine", e), add("engine_cpu", e_cpu)
        add("naive", nv), add("naive_cpu", nv_cpu)
        naive_ratios.append(nv_cpu / e_cpu)
        add("cli_single", s1), add("cli_single_cpu", s1_cpu), add("cli_jobs", sj), add("cli_jobs_cpu", sj_cpu)
        rss["cli_single"].append(r1)
        rss["cli_jobs"].append(rj)
        ratios.append(c / e)
        cpu_ratios.append(c_cpu / e_cpu)
        if small_dir is not None:
            sc, _ = ceiling(small_dir)
            se, _, small_stats = engine_single(small_dir)
            runs.setdefault("small_ceiling", []).append(small_bytes / sc / 1e9)
            runs.setdefault("small_engine", []).append(small_bytes / se / 1e9)
            small_ratios.append(sc / se)
        print(f"ceiling {runs['ceiling'][-1]:.2f} GB/s ({runs['ceiling_cpu'][-1]:.2f} per CPU-s), naive "
              f"{runs['naive'][-1]:.2f} ({runs['naive_cpu'][-1]:.2f}), engine "
              f"{runs['engine'][-1]:.2f} ({runs['engine_cpu'][-1]:.2f}), cli {runs['cli_single'][-1]:.2f} "
              f"({r1:.0f} MB), cli --jobs {args.jobs} {runs['cli_jobs'][-1]:.2f} ({rj:.0f} MB)", file=sys.stderr)

    def fig(values):
        return {"median": round(statistics.median(values), 2), "spread": [round(min(values), 2), round(max(values), 2)]}

    figures = {
        "ceiling_crc32c_gb_per_s": fig(runs["ceiling"]),
        "naive_scan_gb_per_s": fig(runs["naive"]),
        "engine_single_gb_per_s": fig(runs["engine"]),
        "cli_single_gb_per_s": fig(runs["cli_single"]),
        f"cli_jobs_{args.jobs}_gb_per_s": fig(runs["cli_jobs"]),
        # GB per CPU-second: steadier than wall time on a shared machine
        "ceiling_crc32c_gb_per_cpu_s": fig(runs["ceiling_cpu"]),
        "naive_scan_gb_per_cpu_s": fig(runs["naive_cpu"]),
        "engine_single_gb_per_cpu_s": fig(runs["engine_cpu"]),
        "cli_single_gb_per_cpu_s": fig(runs["cli_single_cpu"]),
        f"cli_jobs_{args.jobs}_gb_per_cpu_s": fig(runs["cli_jobs_cpu"]),
        "engine_vs_ceiling": round(statistics.median(ratios), 2),
        "engine_vs_ceiling_cpu": round(statistics.median(cpu_ratios), 2),
        "engine_vs_naive_scan_cpu": round(statistics.median(naive_ratios), 2),
        "cli_single_peak_rss_mb": round(max(rss["cli_single"]), 1),
        "cli_jobs_peak_rss_mb": round(max(rss["cli_jobs"]), 1),
    }
    if small_dir is not None:
        figures["small_batches"] = {
            "log_bytes": small_bytes,
            "batches": small_stats.batches,
            "mean_batch_bytes": round(small_bytes / small_stats.batches),
            "engine_single_gb_per_s": fig(runs["small_engine"]),
            "ceiling_crc32c_gb_per_s": fig(runs["small_ceiling"]),
            "engine_vs_ceiling": round(statistics.median(small_ratios), 2),
        }
    result = {
        "benchmark": "verify",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_at_start": round(load, 2),
        "reps": args.reps,
        "chunk_size": DEFAULT_CHUNK_SIZE,
        "log_bytes": log_bytes,
        "all_bytes": total_bytes,
        "partitions": args.partitions,
        "segment_bytes": segment_bytes,
        "batches": stats.batches if stats else None,
        "files": stats.files if stats else None,
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
        "targets": TARGETS,
        "targets_met": {
            "verify_single": figures["engine_single_gb_per_s"]["median"] >= TARGETS["verify_single_gb_per_s"],
            "verify_single_cli": figures["cli_single_gb_per_s"]["median"] >= TARGETS["verify_single_gb_per_s"],
            "peak_rss": max(figures["cli_single_peak_rss_mb"], figures["cli_jobs_peak_rss_mb"])
            <= TARGETS["peak_rss_mb"],
        },
    }
    emit(result, args.json)


if __name__ == "__main__":
    sys.exit(main())

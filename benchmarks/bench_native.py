"""Native core benchmark: the Rust twins (``plog._native``) against the pure-Python reference
path, on the same data, in one run (issue 23's first units).

A segment of ~256 MiB is generated in memory from the workload of
../shared/docs/perf-anchors.md (10-byte keys, 100-byte values), 135 records (~16 KiB) per
batch, and measured on both paths:

* batch walk + CRC-32C through the Python API: ``BatchIterator`` over the segment and
  ``is_valid()`` on every batch, the reference walk against the native one, GB/s;
* batch walk + CRC-32C by the native unit: ``walk_entries(verify_crc=True)`` (what verify and
  recovery will call) against the same reference walk + ``is_valid()``, GB/s; also on a
  quarter-size segment of ~1 KiB batches (10 records), where per-batch costs dominate;
* v2 record decode: every batch's records region through ``decode_records``, records/s;
* v2 record heads: the same regions through ``record_heads`` (scan statistics, the cleaner's
  key scan), records/s.

With ``--verify-size`` (e.g. ``1G``), instead: ``plog verify --quiet --jobs 1`` as a child
process (start-up included) on a generated log directory of that many ``.log`` bytes
(benchmarks/bench_verify.py's layout, one partition, indexes as Kafka writes them), once
with ~16 KiB batches and once with ~1 KiB batches, ``PLOG_NATIVE=0`` against the default
(native) path, GB/s of wall time (the files read once before timing; built once under
``--verify-dir``). Both paths must report no finding.

With ``--dump-size`` (e.g. ``256M``), instead: ``plog dump --print-data-log`` as a child
process (start-up included, stdout to /dev/null) of a generated segment of that size (the
workload above, built once under ``--dump-dir``), ``PLOG_NATIVE=0`` against the default
(native) path, records/s of wall time. Before timing, both paths must print the same text
for the segment's first 32 MiB.

Each figure pairs the two paths back to back ``--reps`` times and reports the median rates and
the median of the per-rep ratios (native / reference). The timer is CPU time
(``time.process_time``: the work is single-threaded, and the machine's cores are shared, so
wall time mostly measures the neighbours); the wall-time ratio is reported next to it. Before
timing, both paths must give identical results on the whole segment.

Prints one JSON object. Usage:
    python benchmarks/bench_native.py [--size-mb 256] [--reps 3] [--quick] [--json FILE]
    python benchmarks/bench_native.py --dump-size 256M [--reps 3]
Exits 2, saying why, when the native module is not built (``pip install -e .`` with cargo).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit, json_events  # noqa: E402

from plog.formats import default_record, native  # noqa: E402
from plog.formats.batches import BatchIterator  # noqa: E402
from plog.formats.record_batch import TIMESTAMP_TYPE_MASK, encode_batch  # noqa: E402

WORKLOAD_RECORDS = 68_000


def segment(size: int, per_batch: int) -> memoryview:
    """~``size`` bytes of v2 batches of ``per_batch`` records, offsets contiguous."""
    records = json_events(WORKLOAD_RECORDS)
    batches = [encode_batch(records[i:i + per_batch], base_offset=i) for i in range(0, len(records), per_batch)]
    pool = b"".join(batches)
    return memoryview(pool * max(1, size // len(pool)))


def paired(reference, twin, units: float, reps: int) -> dict:
    """Run ``reference`` then ``twin`` back to back ``reps`` times: median rates (units per CPU
    second), the median of the per-rep CPU ratios, and the median wall-time ratio."""
    ref_rates, nat_rates, ratios, wall_ratios = [], [], [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        reference()
        w1, c1 = time.perf_counter(), time.process_time()
        twin()
        w2, c2 = time.perf_counter(), time.process_time()
        ref_rates.append(units / max(c1 - c0, 1e-9))
        nat_rates.append(units / max(c2 - c1, 1e-9))
        ratios.append(nat_rates[-1] / ref_rates[-1])
        wall_ratios.append((w1 - w0) / max(w2 - w1, 1e-9))
    return {"native": statistics.median(nat_rates), "reference": statistics.median(ref_rates),
            "ratio": round(statistics.median(ratios), 2), "wall_ratio": round(statistics.median(wall_ratios), 2)}


def walk_and_check(iterate, view) -> int:
    """The Python API's walk + CRC: how many batches are valid."""
    ok = 0
    for batch in iterate(BatchIterator(view)):
        ok += batch.is_valid()
    return ok


def unit_walk(view) -> int:
    """The native unit: walk + CRC-32C in Rust, 4096 entries a call."""
    walk, ok, pos = native.module.walk_entries, 0, 0
    while pos is not None:
        _, crc_ok, pos, _, _ = walk(view, pos, None, 0, None, True, 4096)
        ok += crc_ok.count(1)
    return ok


def decode_args(view) -> list[tuple]:
    """``(payload, count, base_offset, base_timestamp, log_append_time)`` of every batch, as
    ``RecordBatch.records`` hands them to decode_records."""
    out = []
    for b in BatchIterator._iter_reference(BatchIterator(view)):
        lat = b.max_timestamp if b.attributes & TIMESTAMP_TYPE_MASK else None
        out.append((b.records_payload(), b.records_count, b.base_offset, b.base_timestamp, lat))
    return out


def decode_all(decode, args) -> int:
    n = 0
    for a in args:
        n += len(decode(*a))
    return n


def heads_all(heads, args) -> int:
    n = 0
    for payload, count, base_offset, base_ts, _ in args:
        n += len(heads(payload, count, base_offset, base_ts))
    return n


def verify_figures(size: int, reps: int, root: Path) -> dict:
    """``plog verify`` GB/s on both paths, 16 KiB and 1 KiB batches (see the module docs)."""
    import subprocess

    import bench_verify  # noqa: PLC0415

    out = {}
    for name, per_batch in (("16kib", 135), ("1kib", 8)):
        bench_verify.RECORDS_PER_BATCH = per_batch  # read by its batch_pool and write_partition
        logdir = bench_verify.build(root / f"verify-{per_batch}", size, 1, 256 << 20)
        nbytes = bench_verify.warm(logdir)
        first = bench_verify.log_files(logdir)[0]
        batch_bytes = first.stat().st_size / max(1, sum(1 for _ in BatchIterator(first.read_bytes())))
        cmd = [sys.executable, "-m", "plog.cli", "verify", "--quiet", "--jobs", "1", str(logdir)]
        rates: dict[str, list[float]] = {"native": [], "reference": []}
        for _ in range(reps):
            for path, flag in (("reference", "0"), ("native", "1")):
                env = {**os.environ, native.ENV_VAR: flag}
                t0 = time.perf_counter()
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                elapsed = time.perf_counter() - t0
                if r.returncode != 0 or r.stdout.strip():
                    raise SystemExit(f"plog verify ({path}) exited {r.returncode}: {r.stdout[:500]}{r.stderr[:500]}")
                rates[path].append(nbytes / 1e9 / elapsed)
        nat, ref = statistics.median(rates["native"]), statistics.median(rates["reference"])
        out[f"verify_{name}_batches_gb_per_s"] = {
            "native": round(nat, 2), "reference": round(ref, 2), "ratio": round(nat / ref, 2),
            "log_bytes": nbytes, "batch_bytes_avg": round(batch_bytes)}
        out[f"verify_{name}_batches_in_process_gb_per_s"] = in_process(logdir, nbytes, reps)
        out[f"read_crc32c_ceiling_{name}_gb_per_s"] = round(nbytes / 1e9 / bench_verify.ceiling(logdir)[0], 2)
    return out


def in_process(logdir: Path, nbytes: int, reps: int) -> dict:
    """``verify_paths`` in this process (no start-up), SegmentWalk's hot loop on each path."""
    from plog.engine.inspect.verify import verify_paths  # noqa: PLC0415
    from plog.engine.storage import segment_check  # noqa: PLC0415

    walk, hot = segment_check.SegmentWalk, segment_check._verify_hot
    rates: dict[str, list[float]] = {"native": [], "reference": []}
    try:
        for _ in range(reps):
            for path in ("reference", "native"):
                walk._hot = walk._hot_native if path == "native" else walk._hot_reference
                segment_check._verify_hot = native.module.verify_hot if path == "native" else None
                t0 = time.perf_counter()
                assert not list(verify_paths([str(logdir)]))
                rates[path].append(nbytes / 1e9 / (time.perf_counter() - t0))
    finally:
        walk._hot, segment_check._verify_hot = (walk._hot_native if native.active() else walk._hot_reference), hot
    nat, ref = statistics.median(rates["native"]), statistics.median(rates["reference"])
    return {"native": round(nat, 2), "reference": round(ref, 2), "ratio": round(nat / ref, 2)}


def dump_figures(size: int, reps: int, root: Path) -> dict:
    """``plog dump --print-data-log`` records/s on both paths (see the module docs)."""
    import hashlib
    import subprocess

    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{size}.log" / "00000000000000000000.log"
    if not path.is_file() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(segment(size, 135))
    records = sum(b.records_count for b in BatchIterator(path.read_bytes()))
    cmd = [sys.executable, "-m", "plog.cli", "dump", "--print-data-log", str(path)]

    def run(flag: str, extra: list[str], stdout) -> subprocess.CompletedProcess:
        env = {**os.environ, native.ENV_VAR: flag}
        r = subprocess.run(cmd + extra, env=env, stdout=stdout, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise SystemExit(f"plog dump (PLOG_NATIVE={flag}) exited {r.returncode}: {r.stderr[:500]!r}")
        return r

    # Both paths print the same text (on the first 32 MiB: the segment repeats its batches).
    digests = {flag: hashlib.sha256(run(flag, ["--max-bytes", str(32 << 20)], subprocess.PIPE).stdout).hexdigest()
               for flag in ("0", "1")}
    if digests["0"] != digests["1"]:
        raise SystemExit("plog dump --print-data-log: the native and reference paths print different text")
    rates: dict[str, list[float]] = {"native": [], "reference": []}
    with open(os.devnull, "wb") as devnull:
        for _ in range(reps):
            for name, flag in (("reference", "0"), ("native", "1")):
                t0 = time.perf_counter()
                run(flag, [], devnull)
                rates[name].append(records / (time.perf_counter() - t0))
    nat, ref = statistics.median(rates["native"]), statistics.median(rates["reference"])
    return {"dump_print_data_log_records_per_s": {
        "native": round(nat), "reference": round(ref), "ratio": round(nat / ref, 2),
        "log_bytes": path.stat().st_size, "records": records}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a 32 MiB segment, 1 repetition")
    ap.add_argument("--json", help="also write the result to this file")
    ap.add_argument("--verify-size", help="measure plog verify instead, on log directories of this size (1G)")
    ap.add_argument("--verify-dir", default=os.path.join(tempfile.gettempdir(), "plog-bench-native-verify"))
    ap.add_argument("--dump-size", help="measure plog dump --print-data-log instead, on a segment of this size (256M)")
    ap.add_argument("--dump-dir", default=os.path.join(tempfile.gettempdir(), "plog-bench-native-dump"))
    args = ap.parse_args(argv)
    if args.dump_size:
        import bench_verify  # noqa: PLC0415

        figures = dump_figures(bench_verify.parse_size(args.dump_size), args.reps, Path(args.dump_dir))
        emit({"benchmark": "native-dump", "python": platform.python_version(), "timer": "wall",
              "reps": args.reps, "figures": figures}, args.json)
        return 0
    if args.verify_size:
        import bench_verify  # noqa: PLC0415

        figures = verify_figures(bench_verify.parse_size(args.verify_size), args.reps, Path(args.verify_dir))
        emit({"benchmark": "native-verify", "python": platform.python_version(), "timer": "wall",
              "reps": args.reps, "figures": figures}, args.json)
        return 0
    module, _why = native.module, native.describe()
    if module is None:  # PLOG_NATIVE=0 or not built: load it anyway to compare, if it is there
        try:
            import plog._native as module  # noqa: PLC0415
        except ImportError as e:
            print(f"bench_native: the native module plog._native is not built ({e}); "
                  "pip install -e . with cargo on PATH builds it", file=sys.stderr)
            return 2
        native.module, native.NativeFormatError = module, module.NativeFormatError
    size = (32 if args.quick else args.size_mb) << 20
    reps = 1 if args.quick else args.reps
    load = os.getloadavg()

    view = segment(size, 135)
    small = segment(size // 4, 10)
    ref_iter, nat_iter = BatchIterator._iter_reference, BatchIterator._iter_native
    batches = walk_and_check(ref_iter, view)
    assert walk_and_check(nat_iter, view) == unit_walk(view) == batches
    assert unit_walk(small) == walk_and_check(ref_iter, small)
    dargs = decode_args(view)
    ref_decode, nat_decode = default_record.reference_decode_records, default_record._native_decode_records
    ref_heads, nat_heads = default_record.reference_record_heads, default_record._native_record_heads
    records = decode_all(ref_decode, dargs)
    for a in dargs[:600]:  # the workload's distinct batches (the segment repeats them)
        assert nat_decode(*a) == ref_decode(*a) and nat_heads(*a[:4]) == ref_heads(*a[:4])

    walk_iter = paired(lambda: walk_and_check(ref_iter, view), lambda: walk_and_check(nat_iter, view),
                       len(view) / 1e9, reps)
    walk_unit = paired(lambda: walk_and_check(ref_iter, view), lambda: unit_walk(view), len(view) / 1e9, reps)
    walk_small = paired(lambda: walk_and_check(ref_iter, small), lambda: unit_walk(small), len(small) / 1e9, reps)
    decode = paired(lambda: decode_all(ref_decode, dargs), lambda: decode_all(nat_decode, dargs), records, reps)
    heads = paired(lambda: heads_all(ref_heads, dargs), lambda: heads_all(nat_heads, dargs), records, reps)

    def gbps(f: dict, nbytes: int) -> dict:
        return {**f, "native": round(f["native"], 2), "reference": round(f["reference"], 2), "buffer_bytes": nbytes}

    def per_s(f: dict) -> dict:
        return {**f, "native": round(f["native"]), "reference": round(f["reference"])}

    result = {
        "benchmark": "native",
        "python": platform.python_version(),
        "native": f"native (Rust, plog._native {module.__version__})",
        "timer": "process_time",
        "reps": reps,
        "segment_bytes": len(view),
        "batches": batches,
        "batch_records": 135,
        "batch_bytes_avg": round(len(view) / batches),
        "records": records,
        "small_batch_bytes_avg": round(len(small) / unit_walk(small)),
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "figures": {
            "walk_crc_iterator_gb_per_s": gbps(walk_iter, len(view)),
            "walk_crc_unit_gb_per_s": gbps(walk_unit, len(view)),
            "walk_crc_unit_1kib_batches_gb_per_s": gbps(walk_small, len(small)),
            "decode_records_per_s": per_s(decode),
            "record_heads_per_s": per_s(heads),
        },
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

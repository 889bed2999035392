"""Acceptance: a segment of 1 GiB is read with bounded executor memory (no whole-file reads).

A partition folder ``big-0`` with one 1 GiB segment (65,536 copies of one 16 KiB v2 batch
of 16 records of ~1000-byte values, base offsets patched per copy) and a sparse offset
index (one entry per batch, as Kafka's 4 KiB index interval leaves for 16 KiB appends).
In a fresh subprocess (so its peak RSS measures nothing but this), the data source's
executor-side path runs without Spark: ``PlogReader.partitions()`` plans the units and
``read(partition)`` yields Arrow record batches for each, counted; then
:func:`plog.engine.inspect.scan.unit_stats` walks every unit at record level. The peak RSS must stay
far below the file size.

Needs pyarrow and pyspark (the data source module imports pyspark's Python data source
classes), but no Java: nothing here starts a JVM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from plog.formats.record_batch import encode_batch, set_base_offset

pytestmark = pytest.mark.spark

BATCH_BYTES = 16 << 10
COPIES = 1 << 16
RECORDS_PER_BATCH = 16
SEGMENT_BYTES = BATCH_BYTES * COPIES  # 1 GiB
RSS_LIMIT_BYTES = 400 << 20
TS0 = 1_700_000_000_000


def _require_arrow() -> None:
    missing = [m for m in ("pyarrow", "pyspark") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    reason = f"{' and '.join(missing)} not installed (pip install 'plog[spark]')"
    if os.environ.get("PLOG_REQUIRE_SPARK") == "1" or os.environ.get("PLOG_REQUIRE_KAFKA") == "1":
        pytest.fail(f"the 1 GiB segment test is required here but {reason}")
    pytest.skip(reason)


def _one_batch() -> bytes:
    """A v2 batch of exactly BATCH_BYTES: 16 records, values of ~1000 bytes (the last one
    sized to make the total exact)."""
    def build(last_len: int) -> bytes:
        records = [(j, TS0 + j, b"key-%02d" % j, bytes([65 + j]) * (1000 if j < RECORDS_PER_BATCH - 1 else last_len))
                   for j in range(RECORDS_PER_BATCH)]
        return encode_batch(records)

    last = 1000 + (BATCH_BYTES - len(build(1000)))
    raw = build(last)
    assert len(raw) == BATCH_BYTES, len(raw)
    return raw


def write_big_partition(part: Path) -> Path:
    part.mkdir(parents=True)
    one = _one_batch()
    per_chunk = 1024  # 16 MiB written at a time
    chunk = bytearray(one * per_chunk)
    log = part / "00000000000000000000.log"
    with open(log, "wb") as f:
        for c in range(COPIES // per_chunk):
            view = memoryview(chunk)
            for i in range(per_chunk):
                n = c * per_chunk + i
                set_base_offset(view[i * BATCH_BYTES:(i + 1) * BATCH_BYTES], n * RECORDS_PER_BATCH)
            view.release()
            f.write(chunk)
    # Kafka's index: the append's largest offset (relative) at the append's position;
    # the first append is never indexed.
    entries = bytearray(8 * (COPIES - 1))
    for n in range(1, COPIES):
        entries[8 * (n - 1):8 * n] = ((n * RECORDS_PER_BATCH + RECORDS_PER_BATCH - 1).to_bytes(4, "big")
                                      + (n * BATCH_BYTES).to_bytes(4, "big"))
    (part / "00000000000000000000.index").write_bytes(bytes(entries))
    assert os.path.getsize(log) == SEGMENT_BYTES
    return part


READER = textwrap.dedent("""
    import json, resource, sys, time


    def hwm_kb():
        # The peak RSS of this process image (Linux): unlike ru_maxrss, reset by exec.
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None


    from plog.engine.inspect.scan import merge_stats, unit_stats
    from plog.formats import native
    from plog.spark_tasks.datasource import PlogReader

    path, level = sys.argv[1], sys.argv[2]
    reader = PlogReader({"path": path, "level": level})
    partitions = reader.partitions()
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    baseline_hwm = hwm_kb()
    t = time.monotonic()
    rows = arrow_batches = max_rows = 0
    first = last = None
    for p in partitions:
        for rb in reader.read(p):
            arrow_batches += 1
            rows += rb.num_rows
            max_rows = max(max_rows, rb.num_rows)
            col = rb.column("offset" if level == "record" else "base_offset")
            first = col[0].as_py() if first is None else first
            last = col[-1].as_py()
    read_seconds = time.monotonic() - t
    t = time.monotonic()
    (stats,) = merge_stats(unit_stats(p.unit) for p in partitions)
    stats_seconds = time.monotonic() - t
    print(json.dumps({
        "units": len(partitions),
        "slices": [[s.start, s.end] for p in partitions for s in p.unit.slices],
        "rows": rows, "arrow_batches": arrow_batches, "max_rows": max_rows, "first": first, "last": last,
        "native": native.active(),
        "stats": {k: v for k, v in stats.to_dict().items() if k != "record_size"},
        "read_seconds": read_seconds, "stats_seconds": stats_seconds,
        "baseline_maxrss_kb": baseline, "baseline_hwm_kb": baseline_hwm,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "hwm_kb": hwm_kb(),
    }))
""")


SPAWN = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def test_one_gib_segment_is_read_with_bounded_memory(tmp_path):
    _require_arrow()
    t0 = time.monotonic()
    part = write_big_partition(tmp_path / "big-0")
    generate_seconds = time.monotonic() - t0
    try:
        _read_and_check(part, generate_seconds)
    finally:
        # pytest keeps the last few tmp_path trees: do not leave a GiB behind in each.
        (part / "00000000000000000000.log").unlink()


def _read_and_check(part: Path, generate_seconds: float) -> None:
    # Record level through the data source: 1,048,576 rows. The reader runs as a grandchild:
    # Linux carries a process's ru_maxrss across fork+exec from the parent's memory at the
    # fork, and this pytest process may be large (Spark tests before this one), so a small
    # intermediate process keeps the reader's ru_maxrss its own.
    proc = subprocess.run([sys.executable, "-c", SPAWN, sys.executable, "-c", READER, str(part), "record"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    total_records = RECORDS_PER_BATCH * COPIES
    assert out["rows"] == total_records
    assert (out["first"], out["last"]) == (0, total_records - 1)
    # Arrow batches are bounded in rows (and bytes): the reference's builder at 8192 rows,
    # the native path at MAX_ROWS records (or MAX_BYTES of regions) plus one Kafka batch.
    from plog.spark_tasks.arrow_batches import MAX_BYTES, MAX_ROWS

    native_bound = min(MAX_ROWS, MAX_BYTES // 1000) + RECORDS_PER_BATCH
    assert out["max_rows"] <= (native_bound if out["native"] else 8192)
    # The plan split the segment at index entries, contiguously, and every cut is a batch start.
    slices = out["slices"]
    assert out["units"] >= 2 and slices[0][0] == 0 and slices[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:]))
    assert all(s[0] % BATCH_BYTES == 0 for s in slices)
    stats = out["stats"]
    assert (stats["records"], stats["batches"], stats["bytes"]) == (total_records, COPIES, SEGMENT_BYTES)
    assert (stats["first_offset"], stats["last_offset"]) == (0, total_records - 1)
    assert stats["distinct_keys_estimate"] == RECORDS_PER_BATCH and stats["problems"] == []
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    peak = out["maxrss_kb"] * (1 if sys.platform == "darwin" else 1024)
    hwm = None if out["hwm_kb"] is None else out["hwm_kb"] * 1024
    print(f"\n1 GiB segment: generated in {generate_seconds:.1f}s; {out['units']} units; data source read "
          f"{out['rows']} rows in {out['read_seconds']:.1f}s; unit_stats in {out['stats_seconds']:.1f}s; "
          f"peak RSS (ru_maxrss) {peak / 2**20:.0f} MiB, VmHWM {out['hwm_kb']} KiB; after imports and planning: "
          f"ru_maxrss {out['baseline_maxrss_kb']} KiB, VmHWM {out['baseline_hwm_kb']} KiB")
    assert peak < RSS_LIMIT_BYTES, f"peak RSS {peak / 2**20:.0f} MiB"
    assert hwm is None or hwm < RSS_LIMIT_BYTES, f"VmHWM {hwm / 2**20:.0f} MiB"

"""Memory stays flat: reading a ~2 GiB partition end to end grows the process by < 64 MB.

The partition is built directly on disk (fast, and independent of the append path): one
v2 batch is encoded once and written many times with its baseOffset (bytes 0-7, outside
the CRC) rewritten so that offsets run contiguously. Segment 0 holds ~64 MiB of ~16 KiB
batches of 100-byte records (many records: a per-record leak shows); segments 1-4 hold
~2 GiB of ~1 MiB batches of ten 100 KiB records (many bytes, few records: decoding stays fast).

Each way of reading runs in a fresh subprocess, which reports its peak RSS (``VmHWM``)
after imports and after the work:

* ``recover``: ``Log.open(recovery_point=0, had_clean_shutdown=False)`` validates every
  batch and rebuilds every index (it also creates the indexes the other phases use);
* ``records``: a clean ``Log.open`` then ``read_records()`` over every record;
* ``batches``: ``FileBatches`` + ``ensure_valid()`` over every segment file;
* ``fetch``: ``Log.read(offset, 1 MiB)`` from offset 0 to the log end offset.

The partition is deleted at the end (pytest would otherwise keep it with tmp_path).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time

import pytest

from plog.formats.record_batch import encode_batch, set_base_offset

TS = 1_700_000_000_000
MAX_GROWTH = 64_000_000  # bytes of peak RSS growth allowed (64 MB)

SMALL_BATCHES = 4096  # ~16.3 KB each, 135 records of 100 bytes: ~64 MiB, 552,960 records
SMALL_RECORDS = 135
BIG_SEGMENTS = 4
BIG_BATCHES_PER_SEGMENT = 496  # ~1 MiB each, ten 100 KiB values: ~1.94 GiB in total
BIG_RECORDS = 10
BIG_VALUE = 104_800

CHILD = r"""
import gc, json, os, sys, time

from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.log import Log
from plog.formats.batches import BatchIterator

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)

phase, directory, expected = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
gc.collect()
before = status("VmHWM")
t0 = time.perf_counter()
out = {}
if phase == "recover":
    log = Log.open(directory, LogConfig(), recovery_point=0, had_clean_shutdown=False)
    rep = log.load_report
    out = {"leo": log.log_end_offset, "recovered": len(rep.recovered_segments), "truncated": rep.truncated_bytes,
           "segments": len(log.segments)}
    log.close()
elif phase == "records":
    log = Log.open(directory, LogConfig(), had_clean_shutdown=True)
    n = value_bytes = 0
    for rec in log.read_records():
        if rec.offset != n:
            raise SystemExit(f"offset {rec.offset} where {n} was expected")
        n += 1
        value_bytes += len(rec.value)
    out = {"leo": log.log_end_offset, "records": n, "value_bytes": value_bytes}
    log.close()
elif phase == "batches":
    n = records = size = 0
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            for batch in FileBatches(os.path.join(directory, name)):
                batch.ensure_valid()
                n += 1
                records += batch.records_count
                size += batch.size_in_bytes
    out = {"batches": n, "records": records, "bytes": size}
elif phase == "fetch":
    log = Log.open(directory, LogConfig(), had_clean_shutdown=True)
    offset = size = reads = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        if not data:
            raise SystemExit(f"empty read at {offset}")
        for batch in BatchIterator(data):
            offset = batch.next_offset
        size += len(data)
        reads += 1
    out = {"leo": log.log_end_offset, "bytes": size, "reads": reads}
    log.close()
out.update(phase=phase, seconds=time.perf_counter() - t0, hwm_before=before, hwm_after=status("VmHWM"),
           rss_after=status("VmRSS"))
print(json.dumps(out))
"""


def _write_segment(directory, base_offset: int, template: bytes, copies: int, records_per_batch: int) -> int:
    """Write ``copies`` copies of ``template`` with contiguous offsets; returns the next offset."""
    buf = bytearray(template)
    offset = base_offset
    with open(os.path.join(directory, f"{base_offset:020d}.log"), "wb", buffering=0) as f:
        pending = bytearray()
        for _ in range(copies):
            set_base_offset(buf, offset)
            pending += buf
            offset += records_per_batch
            if len(pending) >= 8 << 20:
                f.write(pending)
                pending.clear()
        f.write(pending)
    return offset


@pytest.fixture(scope="module")
def partition(tmp_path_factory):
    directory = tmp_path_factory.mktemp("memory") / "big-0"
    directory.mkdir()
    rnd = random.Random(7)
    try:
        small = encode_batch([(i, TS + i, b"key-%06d" % i, rnd.randbytes(100)) for i in range(SMALL_RECORDS)])
        big = encode_batch([(i, TS + i, b"big-%d" % i, rnd.randbytes(BIG_VALUE)) for i in range(BIG_RECORDS)])
        offset = _write_segment(directory, 0, small, SMALL_BATCHES, SMALL_RECORDS)
        for _ in range(BIG_SEGMENTS):
            offset = _write_segment(directory, offset, big, BIG_BATCHES_PER_SEGMENT, BIG_RECORDS)
        size = sum(p.stat().st_size for p in directory.glob("*.log"))
        yield {"dir": directory, "leo": offset, "bytes": size,
               "batches": SMALL_BATCHES + BIG_SEGMENTS * BIG_BATCHES_PER_SEGMENT,
               "value_bytes": SMALL_BATCHES * SMALL_RECORDS * 100
               + BIG_SEGMENTS * BIG_BATCHES_PER_SEGMENT * BIG_RECORDS * BIG_VALUE}
    finally:
        shutil.rmtree(directory.parent, ignore_errors=True)


def run_phase(phase: str, partition) -> dict:
    expected = {k: v for k, v in partition.items() if k != "dir"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, phase, str(partition["dir"]), json.dumps(expected)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{phase}: {proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    growth = out["hwm_after"] - out["hwm_before"]
    print(f"\n{phase}: {partition['bytes'] / 2**30:.2f} GiB in {out['seconds']:.1f} s "
          f"({time.perf_counter() - t0:.1f} s with start-up); peak RSS {out['hwm_before'] / 1e6:.1f} -> "
          f"{out['hwm_after'] / 1e6:.1f} MB (+{growth / 1e6:.1f} MB)")
    assert growth < MAX_GROWTH, f"{phase}: peak RSS grew by {growth / 1e6:.1f} MB reading the partition: {out}"
    return out


def test_partition_is_about_2_gib(partition):
    assert 2.0e9 < partition["bytes"] < 2.3e9, partition["bytes"]


def test_recovery_memory_is_flat(partition):
    out = run_phase("recover", partition)
    assert out["leo"] == partition["leo"]
    assert out["recovered"] == out["segments"] == 1 + BIG_SEGMENTS
    assert out["truncated"] == 0


def test_read_records_memory_is_flat(partition):
    out = run_phase("records", partition)
    assert out["records"] == out["leo"] == partition["leo"]
    assert out["value_bytes"] == partition["value_bytes"]


def test_file_batches_memory_is_flat(partition):
    out = run_phase("batches", partition)
    assert out["batches"] == partition["batches"]
    assert out["records"] == partition["leo"]
    assert out["bytes"] == partition["bytes"]


def test_fetch_memory_is_flat(partition):
    out = run_phase("fetch", partition)
    assert out["leo"] == partition["leo"]
    assert out["bytes"] == partition["bytes"]

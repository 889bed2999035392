"""Formats-layer benchmark: plog against kafka-python on the same data, in one run.

Measures, as in ../shared/docs/perf-anchors.md (68,000 records, 10-byte keys, ~100-byte
JSON-ish values, ~16 KiB batches):

* v2 batch encode, records/s (plog ``encode_batch`` vs kafka-python ``DefaultRecordBatchBuilder``),
* v2 batch decode, records/s (iterate and read offset, timestamp, key, value),
* batch-level CRC validation, GB/s, over a ~256 MiB buffer of 16 KiB batches
  (plog ``BatchIterator`` + ``is_valid`` vs kafka-python ``validate_crc``).

Prints one JSON object: every figure, the plog/peer ratio and the issue's target.
Usage: python benchmarks/bench_formats.py [--reps N] [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit, json_events  # noqa: E402

from plog.formats.batches import iter_batches
from plog.formats.record_batch import RecordBatch, encode_batch

TARGETS = {"encode_ratio": 2.0, "decode_ratio": 3.0, "validate_gbps": 4.0}


def workload(n: int, seed: int = 1):
    return json_events(n, seed)


def chunks(records, per_batch):
    return [records[i:i + per_batch] for i in range(0, len(records), per_batch)]


def paired_rates(plog_fn, peer_fn, units, reps):
    """Time plog and the peer back to back, ``reps`` times; return the median rates and
    the median of the per-rep ratios (steadier than a ratio of medians on a noisy VM,
    as ../shared/docs/perf-anchors.md explains)."""
    mine, theirs, ratios = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        plog_fn()
        t1 = time.perf_counter()
        peer_fn()
        t2 = time.perf_counter()
        mine.append(units / (t1 - t0))
        theirs.append(units / (t2 - t1))
        ratios.append(mine[-1] / theirs[-1])
    return statistics.median(mine), statistics.median(theirs), statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="also write the result to this file")
    args = ap.parse_args()
    n = 20000 if args.quick else 68000
    records = workload(n)
    groups = chunks(records, 135)  # ~16.3 KB per batch, as kafka-python's batch_size=16384 gives

    def plog_encode():
        return [encode_batch(g, base_offset=g[0][0]) for g in groups]

    def kp_encode():
        out = []
        for g in groups:
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                          producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
            for o, t, k, v in g:
                b.append(o, t, k, v, [])
            out.append(bytes(b.build()))
        return out

    batches = plog_encode()

    def plog_decode():
        c = 0
        for raw in batches:
            for r in RecordBatch(memoryview(raw)).records():
                c += r[0] + len(r[3])
        return c

    def kp_decode():
        c = 0
        for raw in batches:
            for r in DefaultRecordBatch(bytearray(raw)):
                c += r.offset + len(r.value)
        return c

    assert plog_decode() == kp_decode()

    # CRC validation over a large buffer of ~16 KiB batches (offsets rewritten to be contiguous).
    target_bytes = (64 if args.quick else 256) << 20
    pool = b"".join(batches)
    big = bytearray()
    while len(big) < target_bytes:
        big += pool
    view = memoryview(bytes(big))

    def plog_validate():
        ok = 0
        for b in iter_batches(view):
            ok += b.is_valid()
        return ok

    kp_batches = [bytearray(view[b.position:b.position + b.size_in_bytes]) for b in iter_batches(view)]

    def kp_validate():
        ok = 0
        for raw in kp_batches:
            ok += DefaultRecordBatch(raw).validate_crc()
        return ok

    assert plog_validate() == kp_validate() == len(kp_batches)

    reps = 3 if args.quick else args.reps
    enc_p, enc_k, enc_r = paired_rates(plog_encode, kp_encode, n, reps)
    dec_p, dec_k, dec_r = paired_rates(plog_decode, kp_decode, n, reps)
    val_p, val_k, val_r = paired_rates(plog_validate, kp_validate, len(view), reps)
    val_p, val_k = val_p / 1e9, val_k / 1e9
    result = {
        "benchmark": "formats",
        "python": platform.python_version(),
        "records": n,
        "batch_records": 135,
        "batch_bytes_avg": round(len(pool) / len(batches)),
        "figures": {
            "v2_encode_records_per_s": {"plog": round(enc_p), "kafka_python": round(enc_k),
                                        "ratio": round(enc_r, 2), "target_ratio": TARGETS["encode_ratio"]},
            "v2_decode_records_per_s": {"plog": round(dec_p), "kafka_python": round(dec_k),
                                        "ratio": round(dec_r, 2), "target_ratio": TARGETS["decode_ratio"]},
            "batch_crc_validation_gb_per_s": {"plog": round(val_p, 2), "kafka_python": round(val_k, 2),
                                              "ratio": round(val_r, 2), "target_gbps": TARGETS["validate_gbps"],
                                              "buffer_bytes": len(view)},
        },
    }
    result["targets_met"] = {
        "encode": result["figures"]["v2_encode_records_per_s"]["ratio"] >= TARGETS["encode_ratio"],
        "decode": result["figures"]["v2_decode_records_per_s"]["ratio"] >= TARGETS["decode_ratio"],
        "validate": val_p >= TARGETS["validate_gbps"],
    }
    emit(result, args.json)


if __name__ == "__main__":
    sys.exit(main())

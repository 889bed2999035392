"""``plog produce`` and ``plog consume --format jsonl``: records/s end to end through the CLI.

Figures (issue 6), each the median of ``--reps`` repetitions:

* ``produce``: ``plog produce TOPIC --file F --data-dir D`` on a file of ``--records`` lines
  (one value per line: the 100-byte JSON-ish values of ../shared/docs/perf-anchors.md, no
  key), into a fresh data directory;
* ``consume``: ``plog consume TOPIC -e --format jsonl --data-dir D > /dev/null`` of what the
  produce run wrote.

plog runs as a child process (``.venv/bin/plog``), timed by wall clock around it, so
interpreter start-up and imports are included; its peak RSS is read through a small
intermediate process, as in bench_verify.py. The peer, in this process and in the same
repetition, is kafka-python's record codec on the same values (no broker is needed):

* produce: read the same file line by line, ``DefaultRecordBatchBuilder`` (v2, uncompressed,
  ``batch_size`` 16384, timestamps taken at append as KafkaProducer does), base offsets set,
  every batch written to a file, fsynced at the end;
* consume: read that file, ``DefaultRecordBatch`` per batch (CRC checked, as KafkaConsumer's
  ``check_crcs`` does), iterate the records, one dict per record with the fields of plog's
  jsonl -> ``json.dumps`` -> UTF-8 line, written to /dev/null.

``ratio`` is plog/peer records/s, taken within each repetition (the median is reported).
The same figures per CPU-second (user + system: plog's process, the peer's own) are steadier
on a shared machine. The issue's targets (>= 500k records/s each) apply to the wall-clock figures.
Prints one JSON object (see workloads.emit).
Usage: python benchmarks/bench_produce_consume.py [--records N] [--quick] [--reps N] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kafka
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit, json_events  # noqa: E402

PLOG = str(Path(sys.executable).with_name("plog"))
TOPIC = "bench"
TARGETS = {"produce_records_per_s": 500_000, "consume_records_per_s": 500_000}

# Runs argv[2:] with stdout to argv[1]; reports exit code, wall time, CPU time and peak RSS (KiB) of it
# and its descendants on the last stderr line (the child's own stderr comes before it).
_MEASURE = """
import resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    t0 = time.perf_counter()
    code = subprocess.call(sys.argv[2:], stdout=out)
    elapsed = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print("MEASURED", code, elapsed, u.ru_utime + u.ru_stime, u.ru_maxrss, file=sys.stderr)
"""


def run_plog(*args: str) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MB) and stderr of ``plog ARGS`` (stdout to /dev/null)."""
    r = subprocess.run([sys.executable, "-c", _MEASURE, os.devnull, PLOG, *args], capture_output=True, text=True)
    *rest, last = r.stderr.rstrip("\n").split("\n")
    _, code, elapsed, cpu, maxrss = last.split()
    if int(code) != 0:
        raise SystemExit(f"plog {' '.join(args)} exited {code}: {r.stderr}")
    return float(elapsed), float(cpu), int(maxrss) / 1024, "\n".join(rest)


def peer_produce(src: Path, dst: Path) -> int:
    """kafka-python: the lines of ``src`` into v2 batches of ~16 KiB, written to ``dst``."""
    def builder():
        return DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                         producer_epoch=-1, base_sequence=-1, batch_size=16384)

    def flush(b, base):
        buf = b.build()
        struct.pack_into(">q", buf, 0, base)  # baseOffset, outside the CRC
        out.write(buf)

    n = base = 0
    with open(src, "rb") as f, open(dst, "wb") as out:
        b = builder()
        for line in f:
            value = line[:-1] if line[-1:] == b"\n" else line
            if b.append(n - base, None, None, value, []) is None:
                flush(b, base)
                base, b = n, builder()
                b.append(0, None, None, value, [])
            n += 1
        flush(b, base)
        out.flush()
        os.fsync(out.fileno())
    return n


def peer_consume(path: Path) -> int:
    """kafka-python: decode every batch of ``path``, one jsonl line per record to /dev/null."""
    data = path.read_bytes()
    n = pos = 0
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # built once: the fast path
    with open(os.devnull, "wb") as out:
        write = out.write
        while pos < len(data):
            end = pos + 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            batch = DefaultRecordBatch(data[pos:end])
            if not batch.validate_crc():
                raise ValueError(f"bad CRC at byte {pos}")
            tstype = "LogAppendTime" if batch.timestamp_type else "CreateTime"
            for r in batch:
                key, value = r.key, r.value
                write((dumps({"topic": TOPIC, "partition": 0, "offset": r.offset, "timestamp": r.timestamp,
                              "timestamp_type": tstype, "key": None if key is None else key.decode(),
                              "value": None if value is None else value.decode(), "headers": []}) + "\n").encode())
                n += 1
            pos = end
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100,000 records")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--output", "--json", dest="output", help="also write the result to this file")
    args = ap.parse_args()
    n = 100_000 if args.quick else args.records
    load = os.getloadavg()
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="plog-bench-pc-"))
    try:
        src, peer_log, data = tmp / "values.txt", tmp / "peer.log", tmp / "data"
        with open(src, "wb") as f:
            f.writelines(v + b"\n" for _, _, _, v in json_events(n))
        runs: dict[str, list] = {}

        def measure(name: str, plog_args: list[str], peer, done: str) -> None:
            wall, cpu, rss, err = run_plog(*plog_args, "--data-dir", str(data))
            assert f"{done} {n} record(s)" in err, err
            t0, c0 = time.perf_counter(), time.process_time()
            assert peer() == n
            pwall, pcpu = time.perf_counter() - t0, time.process_time() - c0
            for k, v in (("", n / wall), ("_peer", n / pwall), ("_ratio", pwall / wall), ("_cpu", n / cpu),
                         ("_peer_cpu", n / pcpu), ("_ratio_cpu", pcpu / cpu), ("_rss", rss)):
                runs.setdefault(name + k, []).append(v)

        for _ in range(args.reps):
            shutil.rmtree(data, ignore_errors=True)
            measure("produce", ["produce", TOPIC, "--file", str(src)], lambda: peer_produce(src, peer_log),
                    "produced")
            measure("consume", ["consume", TOPIC, "-e", "--format", "jsonl"], lambda: peer_consume(peer_log),
                    "consumed")
            print(" ".join(f"{k} {runs[k][-1]:,.0f}" for k in ("produce", "produce_peer", "consume", "consume_peer")),
                  file=sys.stderr)
        sizes = {"input_bytes": src.stat().st_size,
                 "plog_log_bytes": sum(p.stat().st_size for p in data.rglob("*.log")),
                 "kafka_python_log_bytes": peer_log.stat().st_size}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def figure(name: str) -> dict:
        def med(k: str) -> float:
            return statistics.median(runs[name + k])

        target = TARGETS[f"{name}_records_per_s"]
        return {"plog_records_per_s": round(med("")), "kafka_python_records_per_s": round(med("_peer")),
                "ratio": round(med("_ratio"), 2), "plog_spread": [round(min(runs[name])), round(max(runs[name]))],
                "plog_records_per_cpu_s": round(med("_cpu")), "kafka_python_records_per_cpu_s": round(med("_peer_cpu")),
                "ratio_cpu": round(med("_ratio_cpu"), 2), "plog_peak_rss_mb": round(max(runs[name + "_rss"]), 1),
                "target_records_per_s": target, "met": med("") >= target}

    result = {
        "benchmark": "produce/consume through the CLI",
        "python": platform.python_version(),
        "kafka_python": kafka.__version__,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "plog_cli": PLOG,
        "reps": args.reps,
        "records": n,
        **sizes,
        "seconds": round(time.perf_counter() - started, 1),
        "figures": {"produce": figure("produce"), "consume": figure("consume")},
    }
    result["targets_met"] = {k: v["met"] for k, v in result["figures"].items()}
    emit(result, args.output)


if __name__ == "__main__":
    main()

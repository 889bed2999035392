"""Replication in the embedded cluster: produce throughput RF 3 vs RF 1, follower catch-up.

Figures (issue 9), with plog's engine API in this process (no CLI, no child plog):

* ``produce``: ``--records`` records (default 500,000) of 100-byte JSON-ish values (no key,
  ../shared/docs/perf-anchors.md) sent with :class:`plog.engine.clients.producer.Producer`
  (``acks="all"``, idempotence on, ``hold_lock=True`` as ``plog produce`` does, default
  batch.size and linger.ms; ``Producer.send_values``, the bulk path of ``plog produce``) to
  partition 0 of a fresh topic, timed from the first send to the end of ``close()`` (every
  record acknowledged):

  - ``rf1``: a 1-broker data directory, replication factor 1;
  - ``rf3``: a 3-broker data directory, replication factor 3 (replicas [1, 2, 3]: broker 1
    leads), ``min.insync.replicas`` 2. Every send round appends to the leader, then the
    followers' fetchers copy the round to brokers 2 and 3 and the high watermark moves
    before the round is acknowledged.

  records/s and MB/s (value bytes; MB = 10^6 bytes) for each, and ``ratio`` = rf3/rf1
  records/s taken within each repetition (median over ``--reps``). Target: ratio >= 0.5.
  The same figures per CPU-second (this process's user + system time) are steadier on a
  shared machine.
* ``catch_up``: on the RF 3 directory of the last repetition, broker 3 is stopped
  (``engine.brokers.stop_broker``: a controlled shutdown, it leaves the ISR), ``--catch-up-mib``
  MiB of value bytes (default 256) are produced to the leader (ISR [1, 2]; acks=all still
  satisfies min.insync.replicas 2), then ``engine.brokers.start_broker(dd, 3)`` runs in a
  child process (this script with ``--catch-up-child``) and is timed there: epoch
  truncation (nothing diverged), fetches of 4 MiB until caught up, ISR expansion, fsync and
  the checkpoints at close. ``mb_per_s`` = bytes the follower fetched / those seconds;
  ``peak_rss_mb`` is the child's peak RSS (``VmHWM``; interpreter, imports and the mmapped
  indexes included; ``baseline_rss_mb`` is its RSS just before ``start_broker``).
  ``parity``: broker 3's replica of the partition equals the leader's afterwards: the same
  ``.log`` segment files byte for byte and the same ``leader-epoch-checkpoint``, broker 3 back
  in the ISR with the leader's log end offset and high watermark. The other files of the
  folder are compared and listed too (``files_differing``): the offset and time indexes
  depend on how the bytes were appended (one batch per leader append, 4 MiB per follower
  fetch) and producer snapshots on each broker's restart history, so they may differ without
  the replica's data differing.

Prints one JSON object (see workloads.emit).
Usage: python benchmarks/bench_replication.py [--records N] [--catch-up-mib M] [--reps N]
       [--quick] [--dir DIR] [--output FILE]
``--quick``: 100,000 records, 32 MiB catch-up, one repetition. The full default run takes a
few minutes and needs ~1.2 GB of free disk space under ``--dir`` (default: the temp dir).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import cycle, islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit, json_events  # noqa: E402

TOPIC = "bench"
TARGETS = {"rf3_rf1_ratio": 0.5}
VALUE_BYTES = 100
CHUNK = 50_000  # values handed to send_values at a time while producing the catch-up data


def _values(n: int) -> list[bytes]:
    return [v for *_, v in json_events(n)]


def make_data_dir(path: Path, brokers: int, rf: int):
    from plog.engine.cluster.data_dir import DataDir

    dd = DataDir.init(path, brokers)
    configs = {"min.insync.replicas": "2"} if rf >= 2 else {}
    dd.create_topic(TOPIC, replica_assignment={0: list(range(1, rf + 1))}, configs=configs)
    return dd


def produce(dd, values) -> tuple[float, float, int]:
    """Send ``values`` (an iterable of bytes) to partition 0; (wall s, CPU s, records)."""
    from plog.engine.clients.producer import Producer

    t0, c0 = time.perf_counter(), time.process_time()
    producer = Producer(dd, acks="all", enable_idempotence=True, hold_lock=True)
    n = 0
    try:
        it = iter(values)
        while True:
            chunk = list(islice(it, CHUNK))
            if not chunk:
                break
            n += producer.send_values(TOPIC, chunk, partition=0)
    finally:
        producer.close()
    return time.perf_counter() - t0, time.process_time() - c0, n


def _status_kib(*fields: str) -> dict[str, int]:
    """``/proc/self/status`` memory lines (KiB), e.g. VmRSS, VmHWM."""
    out = dict.fromkeys(fields, 0)
    with open("/proc/self/status") as f:
        for line in f:
            name = line.split(":", 1)[0]
            if name in out:
                out[name] = int(line.split()[1])
    return out


def catch_up_child(data_dir: str) -> None:
    """``--catch-up-child DIR``: start broker 3 and report (one JSON line on stdout)."""
    from plog.engine.cluster.brokers import start_broker
    from plog.engine.cluster.data_dir import DataDir

    dd = DataDir.open(data_dir)
    baseline = _status_kib("VmRSS")["VmRSS"]
    t0, c0 = time.perf_counter(), time.process_time()
    change = start_broker(dd, 3)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    # VmHWM, not ru_maxrss: the latter starts at the RSS of the parent that forked this
    # process (Linux folds the old mm's high-water mark in at exec), here a few hundred MB.
    peak = _status_kib("VmHWM")["VmHWM"]
    rep = change.replication
    print(json.dumps({
        "seconds": wall, "cpu_seconds": cpu, "bytes": rep.bytes,
        "fetches": sum(c.fetches for c in rep.catch_ups),
        "records": sum((c.records_to - c.records_from + 1) for c in rep.catch_ups if c.records_from is not None),
        "truncations": [{"broker": c.truncation.broker, "log_end_offset": c.truncation.log_end_offset,
                         "truncated_to": c.truncation.truncated_to, "reason": c.truncation.reason}
                        for c in rep.catch_ups if c.truncation is not None],
        "events": [e.describe() for e in change.events + rep.events],
        "baseline_rss_kib": baseline, "peak_rss_kib": peak,
    }))


def compare_replicas(dd, tp, leader: int, follower: int) -> dict:
    a, b = dd.partition_path(tp, leader), dd.partition_path(tp, follower)
    names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
    differing, only = [], []
    for name in names:
        pa, pb = a / name, b / name
        if not (pa.is_file() and pb.is_file()):
            only.append(f"{name} only on broker {leader if pa.is_file() else follower}")
        elif not filecmp.cmp(pa, pb, shallow=False):
            differing.append(name)
    logs = [n for n in names if n.endswith(".log")]
    log_parity = not any(n in differing or any(o.startswith(n + " ") for o in only)
                         for n in logs + ["leader-epoch-checkpoint"])

    def index_entries(d: Path, suffix: str, size: int) -> int:
        return sum(p.stat().st_size // size for p in d.glob(f"*{suffix}"))

    return {
        "segments": len(logs),
        "log_bytes": sum((a / n).stat().st_size for n in logs),
        "log_parity": log_parity,
        "files_differing": differing,
        "files_on_one_side": only,
        "offset_index_entries": {"leader": index_entries(a, ".index", 8), "follower": index_entries(b, ".index", 8)},
        "time_index_entries": {"leader": index_entries(a, ".timeindex", 12),
                               "follower": index_entries(b, ".timeindex", 12)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--catch-up-mib", type=float, default=256.0,
                    help="MiB of value bytes produced while broker 3 is stopped")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="100,000 records, 32 MiB catch-up, one repetition")
    ap.add_argument("--dir", help="where the data directories go (default: the temp dir)")
    ap.add_argument("--output", "--json", dest="output", help="also write the result to this file")
    ap.add_argument("--catch-up-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.catch_up_child:
        catch_up_child(args.catch_up_child)
        return
    if args.quick:
        args.records, args.catch_up_mib, args.reps = 100_000, 32.0, 1
    from plog.engine.cluster.brokers import stop_broker
    from plog.engine.storage.file_names import TopicPartition

    n = args.records
    load = os.getloadavg()
    started = time.perf_counter()
    values = _values(n)
    tmp = Path(tempfile.mkdtemp(prefix="plog-bench-repl-", dir=args.dir))
    runs: dict[str, list[float]] = {}
    try:
        for rep in range(args.reps):
            walls = {}
            for name, brokers, rf in (("rf1", 1, 1), ("rf3", 3, 3)):
                path = tmp / f"{name}-{rep}"
                dd = make_data_dir(path, brokers, rf)
                wall, cpu, sent = produce(dd, values)
                assert sent == n
                walls[name] = wall
                for k, v in (("", n / wall), ("_cpu", n / cpu), ("_mb", n * VALUE_BYTES / wall / 1e6)):
                    runs.setdefault(name + k, []).append(v)
                if name == "rf1" or rep < args.reps - 1:
                    shutil.rmtree(path)
            runs.setdefault("ratio", []).append(walls["rf1"] / walls["rf3"])
            runs.setdefault("ratio_cpu", []).append(runs["rf3_cpu"][-1] / runs["rf1_cpu"][-1])
            print(f"rep {rep + 1}: rf1 {runs['rf1'][-1]:,.0f} records/s, rf3 {runs['rf3'][-1]:,.0f} records/s, "
                  f"ratio {runs['ratio'][-1]:.2f}", file=sys.stderr)

        # -- follower catch-up on the last RF 3 directory --------------------------------------
        from plog.engine.cluster.data_dir import DataDir

        path = tmp / f"rf3-{args.reps - 1}"
        dd = DataDir.open(path)
        tp = TopicPartition(TOPIC, 0)
        stop = stop_broker(dd, 3)
        dd.reload()
        isr_stopped = list(dd.partition_state(tp).isr)
        m = int(args.catch_up_mib * (1 << 20)) // VALUE_BYTES
        pool = values[: min(len(values), 100_000)]
        del values
        wall, cpu, sent = produce(dd, islice(cycle(pool), m))
        produced_while_stopped = {"records": sent, "value_bytes": sent * VALUE_BYTES, "seconds": round(wall, 2),
                                  "records_per_s": round(sent / wall),
                                  "mb_per_s": round(sent * VALUE_BYTES / wall / 1e6, 1),
                                  "isr": isr_stopped}
        print(f"produced {sent:,} records ({sent * VALUE_BYTES / 1e6:,.0f} MB of values) with broker 3 stopped "
              f"in {wall:.1f} s; starting broker 3", file=sys.stderr)
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--catch-up-child", str(path)],
                               capture_output=True, text=True)
        if child.returncode != 0:
            raise SystemExit(f"catch-up child failed (exit {child.returncode}): {child.stderr[-3000:]}")
        got = json.loads(child.stdout.strip().splitlines()[-1])
        dd.reload()
        state = dd.partition_state(tp)
        desc = {r.broker: r for r in dd.describe_partitions(TOPIC)[0].replica_states}
        files = compare_replicas(dd, tp, state.leader, 3)
        in_sync = (3 in state.isr and desc[3].log_end_offset == desc[state.leader].log_end_offset
                   and desc[3].high_watermark == desc[state.leader].high_watermark)
        catch_up = {
            "bytes_fetched": got["bytes"],
            "records_fetched": got["records"],
            "fetches": got["fetches"],
            "seconds": round(got["seconds"], 2),
            "cpu_seconds": round(got["cpu_seconds"], 2),
            "mb_per_s": round(got["bytes"] / got["seconds"] / 1e6, 1),
            "peak_rss_mb": round(got["peak_rss_kib"] / 1024, 1),
            "baseline_rss_mb": round(got["baseline_rss_kib"] / 1024, 1),
            "truncations": got["truncations"],
            "events": [e.describe() for e in stop.events] + got["events"],
            "leader": state.leader,
            "isr_after": list(state.isr),
            "log_end_offset": {"leader": desc[state.leader].log_end_offset, "broker_3": desc[3].log_end_offset},
            "high_watermark": {"leader": desc[state.leader].high_watermark, "broker_3": desc[3].high_watermark},
            **files,
            "parity": files["log_parity"] and in_sync,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(k: str) -> float:
        return statistics.median(runs[k])

    def figure(name: str) -> dict:
        return {"records_per_s": round(med(name)), "mb_per_s": round(med(name + "_mb"), 1),
                "spread_records_per_s": [round(min(runs[name])), round(max(runs[name]))],
                "records_per_cpu_s": round(med(name + "_cpu"))}

    ratio = med("ratio")
    result = {
        "benchmark": "replication: produce RF3 vs RF1, follower catch-up",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "records": n,
        "value_bytes": VALUE_BYTES,
        "reps": args.reps,
        "producer": {"acks": "all", "enable_idempotence": True, "api": "Producer.send_values",
                     "rf3": "replicas [1,2,3], min.insync.replicas 2"},
        "seconds": round(time.perf_counter() - started, 1),
        "figures": {
            "produce": {"rf1": figure("rf1"), "rf3": figure("rf3"), "ratio": round(ratio, 2),
                        "ratio_spread": [round(min(runs["ratio"]), 2), round(max(runs["ratio"]), 2)],
                        "ratio_cpu": round(med("ratio_cpu"), 2),
                        "target_ratio": TARGETS["rf3_rf1_ratio"], "met": ratio >= TARGETS["rf3_rf1_ratio"]},
            "produced_while_broker_3_stopped": produced_while_stopped,
            "catch_up": catch_up,
        },
    }
    result["targets_met"] = {"produce_ratio": result["figures"]["produce"]["met"],
                             "catch_up_parity": catch_up["parity"]}
    emit(result, args.output)


if __name__ == "__main__":
    main()

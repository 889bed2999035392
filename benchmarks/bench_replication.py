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
  truncation (nothing diverged), fetches of 2 MiB until caught up, ISR expansion, fsync and
  the checkpoints at close. ``mb_per_s`` = bytes the follower fetched / those seconds;
  ``peak_rss_mb`` is the child's peak RSS (``VmHWM``; interpreter, imports and the mmapped
  indexes included; ``baseline_rss_mb`` is its RSS just before ``start_broker``).
  ``parity``: broker 3's replica of the partition equals the leader's afterwards: the same
  ``.log`` segment files byte for byte and the same ``leader-epoch-checkpoint``, broker 3 back
  in the ISR with the leader's log end offset and high watermark. The other files of the
  folder are compared and listed too (``files_differing``): the offset and time indexes
  depend on how the bytes were appended (one batch per leader append, 2 MiB per follower
  fetch) and producer snapshots on each broker's restart history, so they may differ without
  the replica's data differing. ``breakdown_seconds``: where the catch-up's seconds went
  (``BrokerChange.seconds``): ``catch_up`` (truncation and fetches: the leader's reads, the
  CRC walk, the follower's writes, writeback started along the way; then the fsync of what
  was fetched, before the follower rejoins the ISR), ``flush`` (the high-watermark
  checkpoints and any fsync left), ``close`` (each broker's
  checkpoints, producer snapshot and clean-shutdown marker, each fsynced); the rest is the
  controller's work before the fetches (metadata update, locks, opening the logs).

* ``catch_up.cp_*``: the peer of the catch-up, measured in the same run right after it:
  ``cp -r`` of the leader's replica of the partition (every byte the follower holds, and
  more) to a fresh folder on the same file system (``cp_seconds``, ``cp_bytes``,
  ``cp_mb_per_s``), then ``sync -f`` of it (``cp_sync_seconds``: the copy made durable, as
  the catch-up is at close). ``ratio_vs_cp`` = catch-up MB/s / cp MB/s (without the sync:
  the stricter figure). Target: >= 0.5.
* ``catch_up.disk``, ``catch_up.cp_disk``, ``catch_up.cp_sync_disk``: what the block device
  under ``--dir`` did meanwhile (``/sys/dev/block/*/stat``; null where there is none): MB
  written, seconds it had requests in flight (``busy_seconds``, ``busy_share`` of the wall
  time) and MB/s while busy. The catch-up ends with the follower's bytes durable, cp without
  the sync ends in the page cache: when the disk is busy for most of the catch-up, the disk's
  write rate bounds it, not the fetches.
* ``leader_append``: ``Log.append_batches_as_leader`` alone (in this process, no producer,
  no fsync: ``plog.fsync.on.produce`` off and no flush): ~1 M records of 100-byte values in
  ~16 KiB batches (``formats.record_batch.encode_batch``, one idempotent producer, its
  sequences in order) appended in requests of 64 batches to a fresh log; ``seconds`` and
  ``batches_per_s``.

Both paths: the whole measurement runs twice, in child processes of this script, once on
the native path and once with ``PLOG_NATIVE=0`` (the pure-Python reference). ``figures``
holds the native path's figures (the keys as before); ``plog`` the same figures and
``plog_python`` those of the Python path, side by side.

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
TARGETS = {"rf3_rf1_ratio": 0.5, "catch_up_vs_cp": 0.5}
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


def disk_counters(path) -> tuple[int, int] | None:
    """(bytes written, milliseconds busy) so far by the block device holding ``path``, from
    ``/sys/dev/block/MAJ:MIN/stat`` (sectors written, field 7, are 512 bytes whatever the
    device's block size; io_ticks, field 10, counts the time it had requests in flight); None
    where there is no such file (tmpfs, overlay file systems, not Linux)."""
    st = os.stat(path)
    try:
        with open(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat") as f:
            fields = f.read().split()
        return int(fields[6]) * 512, int(fields[9])
    except (OSError, IndexError, ValueError):
        return None


def disk_activity(before, after, seconds: float) -> dict | None:
    """What the disk did between two :func:`disk_counters` readings ``seconds`` apart: MB
    written, seconds busy, the busy share of ``seconds`` and MB/s while busy. Whole-device
    counters: anything else writing meanwhile is counted too (nothing does in this run)."""
    if before is None or after is None:
        return None
    written, busy = after[0] - before[0], (after[1] - before[1]) / 1000
    return {"written_mb": round(written / 1e6, 1), "busy_seconds": round(busy, 3),
            "busy_share": round(min(busy / seconds, 1.0), 2) if seconds > 0 else None,
            "mb_per_s_busy": round(written / busy / 1e6, 1) if busy > 0 else None}


def catch_up_child(data_dir: str) -> None:
    """``--catch-up-child DIR``: start broker 3 and report (one JSON line on stdout)."""
    from plog.engine.cluster.brokers import start_broker
    from plog.engine.cluster.data_dir import DataDir

    dd = DataDir.open(data_dir)
    baseline = _status_kib("VmRSS")["VmRSS"]
    disk0 = disk_counters(data_dir)
    t0, c0 = time.perf_counter(), time.process_time()
    change = start_broker(dd, 3)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    disk = disk_activity(disk0, disk_counters(data_dir), wall)
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
        "breakdown": change.seconds, "disk": disk,
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
    ap.add_argument("--path-child", choices=("native", "python"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.catch_up_child:
        catch_up_child(args.catch_up_child)
        return
    if args.quick:
        args.records, args.catch_up_mib, args.reps = 100_000, 32.0, 1
    if args.path_child:
        print(json.dumps(measure(args)))
        return
    started = time.perf_counter()
    load = os.getloadavg()
    paths = {}
    for path in ("python", "native"):
        env = {k: v for k, v in os.environ.items() if k != "PLOG_NATIVE"}
        if path == "python":
            env["PLOG_NATIVE"] = "0"
        argv = [sys.executable, os.path.abspath(__file__), "--path-child", path, "--records", str(args.records),
                "--catch-up-mib", str(args.catch_up_mib), "--reps", str(args.reps)]
        if args.dir:
            argv += ["--dir", args.dir]
        child = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=env)
        if child.returncode != 0:
            raise SystemExit(f"the {path} path's measurement failed (exit {child.returncode})")
        paths[path] = json.loads(child.stdout.strip().splitlines()[-1])
    native, python = paths["native"], paths["python"]
    result = {
        "benchmark": "replication: produce RF3 vs RF1, follower catch-up",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "records": args.records,
        "value_bytes": VALUE_BYTES,
        "reps": args.reps,
        "producer": {"acks": "all", "enable_idempotence": True, "api": "Producer.send_values",
                     "rf3": "replicas [1,2,3], min.insync.replicas 2"},
        "seconds": round(time.perf_counter() - started, 1),
        "figures": native["figures"],
        "plog": native["figures"],
        "plog_python": python["figures"],
        "native_module": native["native_module"],
    }
    catch_up = native["figures"]["catch_up"]
    result["targets_met"] = {"produce_ratio": native["figures"]["produce"]["met"],
                             "catch_up_parity": catch_up["parity"],
                             "catch_up_vs_cp": catch_up["ratio_vs_cp"] >= TARGETS["catch_up_vs_cp"],
                             "python_produce_ratio": python["figures"]["produce"]["met"],
                             "python_catch_up_parity": python["figures"]["catch_up"]["parity"]}
    emit(result, args.output)


def leader_append(tmp: Path, records: int = 1_000_000) -> dict:
    """``Log.append_batches_as_leader`` alone: see the module docstring (``leader_append``)."""
    from plog.engine.storage.log import Log
    from plog.engine.storage.log_config import LogConfig
    from plog.formats.record_batch import encode_batch

    per = 16384 // (VALUE_BYTES + 10)
    value = b"v" * VALUE_BYTES
    batches = []
    for i in range(-(-records // per)):
        batches.append(encode_batch([(j, 1_700_000_000_000 + i, None, value) for j in range(per)],
                                    producer_id=1, producer_epoch=0, base_sequence=i * per))
    log = Log.open(tmp / "append-0", LogConfig(fsync_on_produce=False))
    t0, c0 = time.perf_counter(), time.process_time()
    for r in range(0, len(batches), 64):
        log.append_batches_as_leader(batches[r:r + 64], leader_epoch=0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = log.log_end_offset
    log.close()
    shutil.rmtree(tmp / "append-0")
    return {"records": n, "batches": len(batches), "bytes": sum(map(len, batches)), "seconds": round(wall, 3),
            "cpu_seconds": round(cpu, 3), "batches_per_s": round(len(batches) / wall),
            "records_per_s": round(n / wall)}


def cp_peer(src: Path, dst: Path) -> dict:
    """``cp -r src dst``, then ``sync -f dst``, timed (the catch-up's peer)."""
    nbytes = sum(p.stat().st_size for p in src.iterdir() if p.is_file())
    disk0 = disk_counters(dst.parent)
    t0 = time.perf_counter()
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    copied = time.perf_counter() - t0
    disk1 = disk_counters(dst.parent)
    subprocess.run(["sync", "-f", str(dst)], check=True)
    synced = time.perf_counter() - t0
    disk2 = disk_counters(dst.parent)
    shutil.rmtree(dst, ignore_errors=True)
    return {"cp_bytes": nbytes, "cp_seconds": round(copied, 3), "cp_sync_seconds": round(synced, 3),
            "cp_mb_per_s": round(nbytes / copied / 1e6, 1), "cp_sync_mb_per_s": round(nbytes / synced / 1e6, 1),
            "cp_disk": disk_activity(disk0, disk1, copied), "cp_sync_disk": disk_activity(disk0, disk2, synced)}


def measure(args) -> dict:
    """Every figure on this process's path (``PLOG_NATIVE`` as the parent set it)."""
    from plog.formats import native as native_path

    values = _values(args.records)
    tmp = Path(tempfile.mkdtemp(prefix="plog-bench-repl-", dir=args.dir))
    try:
        runs = produce_runs(tmp, values, args.reps)
        pool = values[: min(len(values), 100_000)]
        del values
        produced_while_stopped, catch_up = measure_catch_up(tmp / f"rf3-{args.reps - 1}", pool, args.catch_up_mib)
        catch_up.update(cp_peer(Path(catch_up.pop("leader_path")), tmp / "cp-peer"))
        catch_up["ratio_vs_cp"] = round(catch_up["mb_per_s"] / catch_up["cp_mb_per_s"], 2)
        catch_up["target_ratio_vs_cp"] = TARGETS["catch_up_vs_cp"]
        appended = leader_append(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(k: str) -> float:
        return statistics.median(runs[k])

    def figure(name: str) -> dict:
        return {"records_per_s": round(med(name)), "mb_per_s": round(med(name + "_mb"), 1),
                "spread_records_per_s": [round(min(runs[name])), round(max(runs[name]))],
                "records_per_cpu_s": round(med(name + "_cpu"))}

    ratio = med("ratio")
    return {
        "native_module": native_path.active(),
        "figures": {
            "produce": {"rf1": figure("rf1"), "rf3": figure("rf3"), "ratio": round(ratio, 2),
                        "ratio_spread": [round(min(runs["ratio"]), 2), round(max(runs["ratio"]), 2)],
                        "ratio_cpu": round(med("ratio_cpu"), 2),
                        "target_ratio": TARGETS["rf3_rf1_ratio"], "met": ratio >= TARGETS["rf3_rf1_ratio"]},
            "produced_while_broker_3_stopped": produced_while_stopped,
            "catch_up": catch_up,
            "leader_append": appended,
        },
    }


def produce_runs(tmp: Path, values: list, reps: int) -> dict[str, list[float]]:
    """RF 1 and RF 3 produce, ``reps`` times; the last RF 3 directory is kept (the catch-up's)."""
    n = len(values)
    runs: dict[str, list[float]] = {}
    for rep in range(reps):
        walls = {}
        for name, brokers, rf in (("rf1", 1, 1), ("rf3", 3, 3)):
            path = tmp / f"{name}-{rep}"
            dd = make_data_dir(path, brokers, rf)
            wall, cpu, sent = produce(dd, values)
            assert sent == n
            walls[name] = wall
            for k, v in (("", n / wall), ("_cpu", n / cpu), ("_mb", n * VALUE_BYTES / wall / 1e6)):
                runs.setdefault(name + k, []).append(v)
            if name == "rf1" or rep < reps - 1:
                shutil.rmtree(path)
        runs.setdefault("ratio", []).append(walls["rf1"] / walls["rf3"])
        runs.setdefault("ratio_cpu", []).append(runs["rf3_cpu"][-1] / runs["rf1_cpu"][-1])
        print(f"rep {rep + 1}: rf1 {runs['rf1'][-1]:,.0f} records/s, rf3 {runs['rf3'][-1]:,.0f} records/s, "
              f"ratio {runs['ratio'][-1]:.2f}", file=sys.stderr)
    return runs


def measure_catch_up(path: Path, pool: list, catch_up_mib: float) -> tuple[dict, dict]:
    """Stop broker 3 of the RF 3 directory ``path``, produce ``catch_up_mib`` MiB, time its
    restart in a child: (what was produced meanwhile, the catch-up's figures; the latter's
    ``leader_path`` is the leader's replica folder, for the cp peer)."""
    from plog.engine.cluster.brokers import stop_broker
    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.storage.file_names import TopicPartition

    dd = DataDir.open(path)
    tp = TopicPartition(TOPIC, 0)
    stop = stop_broker(dd, 3)
    dd.reload()
    isr_stopped = list(dd.partition_state(tp).isr)
    m = int(catch_up_mib * (1 << 20)) // VALUE_BYTES
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
    return produced_while_stopped, {
        "bytes_fetched": got["bytes"],
        "records_fetched": got["records"],
        "fetches": got["fetches"],
        "seconds": round(got["seconds"], 2),
        "cpu_seconds": round(got["cpu_seconds"], 2),
        "mb_per_s": round(got["bytes"] / got["seconds"] / 1e6, 1),
        "breakdown_seconds": {k: round(v, 3) for k, v in got.get("breakdown", {}).items()},
        "disk": got.get("disk"),
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
        "leader_path": str(dd.partition_path(tp, state.leader)),
    }


if __name__ == "__main__":
    main()

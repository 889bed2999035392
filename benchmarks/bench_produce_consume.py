"""``plog produce`` and ``plog consume``: records/s end to end through the CLI, on both
paths (the native core, and the pure-Python reference with ``PLOG_NATIVE=0``).

Figures (issues 6 and 23), each the median of ``--reps`` repetitions:

* ``produce``: ``plog produce TOPIC --file F --data-dir D`` on a file of ``--records`` lines
  (one value per line: the 100-byte JSON-ish values of ../shared/docs/perf-anchors.md, no
  key), into a fresh data directory whose one-partition topic is made beforehand, untimed, as
  kcat's topic is made on its broker before kcat is timed (the same starting state for both);
* ``consume``: ``plog consume TOPIC -e --format jsonl --data-dir D > /dev/null`` of what the
  produce run wrote;
* ``consume_jsonl`` (the same runs as ``consume``) and ``consume_template``
  (``plog consume TOPIC -e --format '%v\n' > /dev/null``): the native path, with the pure-Python
  twins ``consume_jsonl_python`` and ``consume_template_python`` (``PLOG_NATIVE=0`` in the
  child's environment). ``produce`` and ``consume`` also carry ``plog_python_records_per_s``.

plog runs as a child process (``.venv/bin/plog``), timed by wall clock around it, so
interpreter start-up and imports are included (the children may write .pyc files, as on a
user's machine, and a first untimed run writes them); its peak RSS is read through a small
intermediate process, as in bench_verify.py. The peer of ``produce``/``consume``, in this
process and in the same repetition, is kafka-python's record codec on the same values (no
broker is needed):

* produce: read the same file line by line, ``DefaultRecordBatchBuilder`` (v2, uncompressed,
  ``batch_size`` 16384, timestamps taken at append as KafkaProducer does), base offsets set,
  every batch written to a file, fsynced at the end;
* consume: read that file, ``DefaultRecordBatch`` per batch (CRC checked, as KafkaConsumer's
  ``check_crcs`` does), iterate the records, one dict per record with the fields of plog's
  jsonl -> ``json.dumps`` -> UTF-8 line, written to /dev/null.

With ``--kcat``, the peer of ``consume_jsonl``/``consume_template`` is kcat (``/usr/bin/kcat``,
Debian's package) reading the same values from a real local Kafka broker (``--kafka-version``,
default 4.3.1, started from the interop suite's jars with tests/interop/kafka_broker.py; the
values produced into a one-partition topic with ``kcat -P -l``): ``kcat -C -b 127.0.0.1:PORT
-t T -o beginning -e -q -J`` and ``-f '%s\n'`` to /dev/null, timed like plog, in each
repetition. Nothing is installed: without kcat or the jars the figures say how to get them
(``kcat_missing``) and plog is still measured. Their ratios: ``ratio_vs_kcat``, plog's
records/s over kcat's.

Issue 24 (the native write side), each on both paths (``PLOG_NATIVE=0`` for the python one):

* ``produce`` with ``--kcat`` also carries ``kcat_produce_records_per_s``: ``kcat -P -X acks=all
  -b 127.0.0.1:PORT -t T -p 0 -l values.txt`` sending the same lines to the same real broker
  (a fresh one-partition topic each repetition), timed like plog, and ``ratio_vs_kcat_produce``
  (plog's records/s over kcat's, the median of the repetitions' ratios, each in
  ``ratio_vs_kcat_produce_per_rep``; target >= 2, ``met_vs_kcat``);
* ``produce_keyed``: ``plog produce T --parse-key --file F`` of the same values with a key
  each (``key-NNNNNN<TAB>value``) into a 12-partition topic made beforehand (target >= 0.8 M/s);
* ``produce_bulk_api``: ``Producer.send_many(topic, values)`` of the same values (already in
  memory; records/s from the call to ``close()`` returning, timed in the child), target >= 1 M/s.

Every timed run (plog, kcat, the kafka-python peer) starts after an untimed ``sync``, so no
run waits for the write-back of the one before it (the broker's segments, a peer's file), as
in the other write benchmarks. ``ratio`` is plog/peer records/s, taken within each repetition
(the median is reported).
The same figures per CPU-second (user + system: plog's process, the peer's own) are steadier
on a shared machine. The targets: >= 500k records/s for produce and consume (issue 6); >= 2 M
records/s for consume_jsonl and >= 3x kcat for consume_template (issue 23), wall clock.
Prints one JSON object (see workloads.emit).
Usage: python benchmarks/bench_produce_consume.py [--records N] [--quick] [--reps N] [--kcat]
       [--kafka-version V] [--output FILE]
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
ROOT = Path(__file__).resolve().parent.parent
TOPIC = "bench"
TARGETS = {"produce_records_per_s": 500_000, "consume_records_per_s": 500_000}
#: Issue 24: produce as a multiple of kcat -P's records/s; keyed produce and the bulk API in records/s.
PRODUCE_TARGET_VS_KCAT = 2.0
KEYED_TARGET = 800_000
KEYED_PARTITIONS = 12
BULK_TARGET = 1_000_000
#: The bulk API run: a child that sends every line of argv[1] with Producer.send_many into
#: data directory argv[2] and prints its records/s (the lines read before the clock starts).
_BULK = """
import sys, time
from plog.engine.clients.producer import Producer
with open(sys.argv[1], "rb") as f:
    values = [line[:-1] for line in f]
t0 = time.perf_counter()
p = Producer(sys.argv[2])
p.send_many("bulk", values)
p.close()
print(len(values) / (time.perf_counter() - t0), p.records_sent)
"""
#: Issue 23: consume_jsonl in records/s; consume_template as a multiple of kcat's records/s.
JSONL_TARGET = 2_000_000
TEMPLATE_TARGET_VS_KCAT = 3.0
KCAT = "/usr/bin/kcat"
KCAT_HINT = "install kcat: apt-get install kcat"

# As on a user's machine, the children may write .pyc files (a wheel install compiles them at
# install time). A PYTHONDONTWRITEBYTECODE inherited from a CI or sandbox shell would make every
# run recompile each module (bench_startup.py does the same).
_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PLOG_NATIVE")}
PATHS = {"native": _ENV, "python": {**_ENV, "PLOG_NATIVE": "0"}}

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


def run_plog(*args: str, path: str = "native") -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MB) and stderr of ``plog ARGS`` (stdout to
    /dev/null) on ``path`` ("native" or "python")."""
    return run_measured([PLOG, *args], PATHS[path])


def run_measured(argv: list[str], env: dict | None = None) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MB) and stderr of ``argv`` (stdout to /dev/null),
    started with nothing left to write back (untimed ``sync``): the previous run's dirty pages
    (a broker's segments, the peer's file) are not this run's to wait for."""
    os.sync()
    r = subprocess.run([sys.executable, "-c", _MEASURE, os.devnull, *argv], capture_output=True, text=True,
                       env=_ENV if env is None else env)
    *rest, last = r.stderr.rstrip("\n").split("\n")
    _, code, elapsed, cpu, maxrss = last.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(argv)} exited {code}: {r.stderr}")
    return float(elapsed), float(cpu), int(maxrss) / 1024, "\n".join(rest)


class KcatPeer:
    """kcat reading the benchmark's values from a real local Kafka broker (see the module
    docstring); ``missing`` says why there is none (and how to get it)."""

    def __init__(self, version: str, values: Path, n: int, tmp: Path):
        self.version = version
        self.n = n
        self.broker = None
        try:
            self.missing = self._start(values, n, tmp)
        except BaseException:
            if self.broker is not None:
                self.broker.kill()  # never leave a JVM behind
            raise

    def _start(self, values: Path, n: int, tmp: Path) -> str | None:
        if not os.access(KCAT, os.X_OK):
            return f"{KCAT} not found: {KCAT_HINT}"
        sys.path.insert(0, str(ROOT / "tests" / "interop"))
        from kafka_broker import KafkaBroker, write_log_configs
        from kafka_fetch import cache_dir, is_complete

        if not is_complete(self.version):
            return (f"no Kafka {self.version} jars in {cache_dir(self.version).parent}: python "
                    f"tests/interop/kafka_fetch.py {self.version} (or set PLOG_KAFKA_CACHE)")
        work = tmp / "kafka"
        self.broker = KafkaBroker(self.version, cache_dir(self.version), work, write_log_configs(work / "log4j"))
        self.broker.start()
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.broker.bootstrap)
        try:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        finally:
            admin.close()
        subprocess.run([KCAT, "-P", "-b", self.broker.bootstrap, "-t", TOPIC, "-p", "0", "-l", str(values)],
                       check=True, capture_output=True)
        self.broker.wait_partitions_ready([(TOPIC, 0)], end_offsets={(TOPIC, 0): n})
        # One untimed read checks what kcat prints (one line per record) and warms the broker.
        check = tmp / "kcat-check.jsonl"
        with open(check, "wb") as out:
            subprocess.run(self._argv("-J"), stdout=out, check=True)
        with open(check, "rb") as f:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        check.unlink()
        if lines != n:
            raise SystemExit(f"kcat -J printed {lines} lines for {n} records")
        return None

    def produce(self, values: Path, rep: int) -> tuple[float, float]:
        """Wall and CPU seconds of ``kcat -P -X acks=all`` sending the lines of ``values`` to
        a fresh one-partition topic (checked to hold them all afterwards, untimed)."""
        from kafka.admin import KafkaAdminClient, NewTopic

        topic = f"produce-{rep}"
        admin = KafkaAdminClient(bootstrap_servers=self.broker.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])
        finally:
            admin.close()
        self.broker.wait_partitions_ready([(topic, 0)])
        wall, cpu, _, _ = run_measured([KCAT, "-P", "-X", "acks=all", "-b", self.broker.bootstrap, "-t", topic,
                                        "-p", "0", "-l", str(values)])
        self.broker.wait_partitions_ready([(topic, 0)], end_offsets={(topic, 0): self.n})
        return wall, cpu

    def _argv(self, *fmt: str) -> list[str]:
        return [KCAT, "-C", "-b", self.broker.bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q", *fmt]

    def read(self, *fmt: str) -> tuple[float, float]:
        """Wall and CPU seconds of kcat's read of every record in ``fmt`` to /dev/null (the
        broker's own CPU is not counted)."""
        wall, cpu, _, _ = run_measured(self._argv(*fmt))
        return wall, cpu

    def close(self) -> None:
        if self.broker is not None:
            self.broker.stop()


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


class Runs:
    """Every repetition's measurements, by name (``<figure><suffix>``: records/s, per CPU-s,
    peak RSS, the peer's and the ratios)."""

    def __init__(self, n: int, data: Path):
        self.n = n
        self.data = data
        self.values: dict[str, list] = {}

    def add(self, name: str, **values: float) -> None:
        for k, v in values.items():
            self.values.setdefault(name + k, []).append(v)

    def measure(self, name: str, plog_args: list[str], peer, done: str, path: str = "native",
                data_dir: Path | None = None) -> float:
        """Time ``plog ARGS --data-dir D`` on ``path`` (and ``peer()``, when given, after it);
        returns plog's wall seconds."""
        n = self.n
        wall, cpu, rss, err = run_plog(*plog_args, "--data-dir", str(data_dir or self.data), path=path)
        assert f"{done} {n} record(s)" in err, err
        self.add(name, **{"": n / wall, "_cpu": n / cpu, "_rss": rss})
        if peer is not None:
            os.sync()  # as run_measured: plog's segments are not the peer's to write back
            t0, c0 = time.perf_counter(), time.process_time()
            assert peer() == n
            pwall, pcpu = time.perf_counter() - t0, time.process_time() - c0
            self.add(name, _peer=n / pwall, _ratio=pwall / wall, _peer_cpu=n / pcpu, _ratio_cpu=pcpu / cpu)
        return wall

    def med(self, k: str) -> float:
        return statistics.median(self.values[k])

    def spread(self, k: str) -> list[int]:
        return [round(min(self.values[k])), round(max(self.values[k]))]


def repetition(runs: Runs, src: Path, peer_log: Path, data_py: Path, kcat: KcatPeer | None,
               keyed: Path, rep: int = 0) -> None:
    """One repetition of every figure (fresh data directories)."""
    shutil.rmtree(runs.data, ignore_errors=True)
    shutil.rmtree(data_py, ignore_errors=True)
    # The topic exists before the timed run, as kcat's does on its broker (KcatPeer.produce).
    for path, data in (("native", runs.data), ("python", data_py)):
        run_plog("topics", "create", TOPIC, "--partitions", "1", "--data-dir", str(data), path=path)
    wall = runs.measure("produce", ["produce", TOPIC, "--file", str(src)], lambda: peer_produce(src, peer_log),
                        "produced")
    runs.measure("produce_python", ["produce", TOPIC, "--file", str(src)], None, "produced", "python", data_py)
    if kcat is not None and kcat.missing is None:
        kwall, kcpu = kcat.produce(src, rep)
        runs.add("produce", _kcat=runs.n / kwall, _kcat_cpu=runs.n / kcpu, _vs_kcat=kwall / wall)
    produce_keyed(runs, keyed)
    produce_bulk(runs, src)
    for name, fmt in (("jsonl", "jsonl"), ("template", "%v\n")):
        peer = (lambda: peer_consume(peer_log)) if name == "jsonl" else None
        wall = runs.measure(f"consume_{name}", ["consume", TOPIC, "-e", "--format", fmt], peer, "consumed")
        runs.measure(f"consume_{name}_python", ["consume", TOPIC, "-e", "--format", fmt], None, "consumed", "python")
        if kcat is not None and kcat.missing is None:
            kwall, kcpu = kcat.read(*(("-J",) if name == "jsonl" else ("-f", "%s\n")))
            runs.add(f"consume_{name}", _kcat=runs.n / kwall, _kcat_cpu=runs.n / kcpu, _vs_kcat=kwall / wall)
    print(" ".join(f"{k} {v[-1]:,.0f}" for k, v in runs.values.items() if not k.endswith(("_rss", "_ratio", "_cpu"))),
          file=sys.stderr)


def produce_keyed(runs: Runs, keyed: Path) -> None:
    """``produce_keyed`` on both paths: keyed lines into a fresh 12-partition topic."""
    for path, suffix in (("native", ""), ("python", "_python")):
        data = runs.data.with_name(f"data-keyed{suffix}")
        shutil.rmtree(data, ignore_errors=True)
        run_plog("topics", "create", "keyed", "--partitions", str(KEYED_PARTITIONS), "--data-dir", str(data),
                 path=path)
        runs.measure(f"produce_keyed{suffix}", ["produce", "keyed", "--parse-key", "--file", str(keyed)], None,
                     "produced", path, data)
        shutil.rmtree(data, ignore_errors=True)


def produce_bulk(runs: Runs, src: Path) -> None:
    """``produce_bulk_api`` on both paths (records/s measured in the child)."""
    for path, suffix in (("native", ""), ("python", "_python")):
        data = runs.data.with_name(f"data-bulk{suffix}")
        shutil.rmtree(data, ignore_errors=True)
        os.sync()  # as run_measured
        r = subprocess.run([sys.executable, "-c", _BULK, str(src), str(data)], capture_output=True, text=True,
                           env=PATHS[path], check=True)
        rate, sent = r.stdout.split()
        assert int(sent) == runs.n, r.stdout
        runs.add(f"produce_bulk_api{suffix}", **{"": float(rate)})
        shutil.rmtree(data, ignore_errors=True)


def write_side_figures(runs: Runs, kcat: KcatPeer | None, produce: dict) -> dict:
    """Issue 24's figures (see the module docstring); adds the kcat producer to ``produce``."""
    med = runs.med
    if "produce_kcat" in runs.values:
        produce.update({"kcat_produce_records_per_s": round(med("produce_kcat")),
                        "kcat_produce_records_per_cpu_s": round(med("produce_kcat_cpu")),
                        "ratio_vs_kcat_produce": round(med("produce_vs_kcat"), 2),
                        # Each repetition's ratio, in order: the median above is of these, and
                        # on a VM their spread is the host's page state as much as plog's work.
                        "ratio_vs_kcat_produce_per_rep": [round(r, 2) for r in runs.values["produce_vs_kcat"]],
                        "target_ratio_vs_kcat_produce": PRODUCE_TARGET_VS_KCAT,
                        "met_vs_kcat": med("produce_vs_kcat") >= PRODUCE_TARGET_VS_KCAT})
    else:
        produce["kcat_produce_missing"] = kcat.missing if kcat is not None else "not measured (--kcat)"
    keyed = {"partitions": KEYED_PARTITIONS, "plog_records_per_s": round(med("produce_keyed")),
             "plog_python_records_per_s": round(med("produce_keyed_python")),
             "plog_spread": runs.spread("produce_keyed"),
             "plog_records_per_cpu_s": round(med("produce_keyed_cpu")),
             "plog_python_records_per_cpu_s": round(med("produce_keyed_python_cpu")),
             "plog_peak_rss_mb": round(max(runs.values["produce_keyed_rss"]), 1),
             "target_records_per_s": KEYED_TARGET, "met": med("produce_keyed") >= KEYED_TARGET}
    bulk = {"plog_records_per_s": round(med("produce_bulk_api")),
            "plog_python_records_per_s": round(med("produce_bulk_api_python")),
            "plog_spread": runs.spread("produce_bulk_api"),
            "target_records_per_s": BULK_TARGET, "met": med("produce_bulk_api") >= BULK_TARGET}
    return {"produce_keyed": keyed, "produce_bulk_api": bulk}


def figures(runs: Runs, kcat: KcatPeer | None) -> dict:
    """The figures of the module docstring, from the repetitions' medians."""
    med = runs.med

    def figure(name: str, runs_of: str, python_runs_of: str) -> dict:
        """An issue 6 figure (plog against kafka-python's codec), the python path beside it."""
        target = TARGETS[f"{name}_records_per_s"]
        return {"plog_records_per_s": round(med(runs_of)), "plog_python_records_per_s": round(med(python_runs_of)),
                "kafka_python_records_per_s": round(med(runs_of + "_peer")), "ratio": round(med(runs_of + "_ratio"), 2),
                "plog_spread": runs.spread(runs_of), "plog_records_per_cpu_s": round(med(runs_of + "_cpu")),
                "kafka_python_records_per_cpu_s": round(med(runs_of + "_peer_cpu")),
                "ratio_cpu": round(med(runs_of + "_ratio_cpu"), 2),
                "plog_peak_rss_mb": round(max(runs.values[runs_of + "_rss"]), 1),
                "target_records_per_s": target, "met": med(runs_of) >= target}

    def consume_figure(name: str) -> dict:
        """An issue 23 figure: one path's consume, with kcat's read beside the native one."""
        out = {"plog_records_per_s": round(med(name)), "plog_spread": runs.spread(name),
               "plog_records_per_cpu_s": round(med(name + "_cpu")),
               "plog_peak_rss_mb": round(max(runs.values[name + "_rss"]), 1)}
        if name + "_kcat" in runs.values:
            out.update({"kcat_records_per_s": round(med(name + "_kcat")),
                        "kcat_records_per_cpu_s": round(med(name + "_kcat_cpu")),
                        "ratio_vs_kcat": round(med(name + "_vs_kcat"), 2)})
        elif not name.endswith("_python"):
            out["kcat_missing"] = kcat.missing if kcat is not None else "not measured (--kcat)"
        if name == "consume_jsonl":
            out.update({"target_records_per_s": JSONL_TARGET, "met": med(name) >= JSONL_TARGET})
        elif name == "consume_template":
            out.update({"target_ratio_vs_kcat": TEMPLATE_TARGET_VS_KCAT,
                        "met": out["ratio_vs_kcat"] >= TEMPLATE_TARGET_VS_KCAT if "ratio_vs_kcat" in out else None})
        return out

    out = {"produce": figure("produce", "produce", "produce_python"),
           "consume": figure("consume", "consume_jsonl", "consume_jsonl_python")}
    for name in ("consume_jsonl", "consume_template", "consume_jsonl_python", "consume_template_python"):
        out[name] = consume_figure(name)
    out.update(write_side_figures(runs, kcat, out["produce"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100,000 records")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kcat", action="store_true",
                    help="also time kcat reading the same records from a real local Kafka broker")
    ap.add_argument("--kafka-version", default="4.3.1", help="the broker kcat reads from (default 4.3.1)")
    ap.add_argument("--output", "--json", dest="output", help="also write the result to this file")
    args = ap.parse_args()
    n = 100_000 if args.quick else args.records
    load = os.getloadavg()
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="plog-bench-pc-"))
    kcat = None
    try:
        src, peer_log, data_py = tmp / "values.txt", tmp / "peer.log", tmp / "data-python"
        keyed = tmp / "keyed.txt"
        events = json_events(n)
        with open(src, "wb") as f:
            f.writelines(v + b"\n" for _, _, _, v in events)
        with open(keyed, "wb") as f:
            f.writelines(k + b"\t" + v + b"\n" for _, _, k, v in events)
        del events
        kcat = KcatPeer(args.kafka_version, src, n, tmp) if args.kcat else None
        warm = tmp / "warm.txt"
        warm.write_bytes(b"".join(b"k%d\t%d\n" % (i, i) for i in range(1000)))
        for path in PATHS:
            # Untimed, the commands measured once each: the .pyc files of every module they
            # import written (else the first timed run would compile them), the page cache warm.
            warm_dir = tmp / f"warm-{path}"
            for command in (["produce", TOPIC, "--file", str(warm)],
                            ["produce", "keyed", "--parse-key", "--file", str(warm)],
                            ["consume", TOPIC, "-e", "--format", "jsonl"], ["consume", TOPIC, "-e", "--format", "%v\n"]):
                run_plog(*command, "--data-dir", str(warm_dir), path=path)
            shutil.rmtree(warm_dir, ignore_errors=True)
        runs = Runs(n, tmp / "data")
        for rep in range(args.reps):
            repetition(runs, src, peer_log, data_py, kcat, keyed, rep)
        sizes = {"input_bytes": src.stat().st_size,
                 "plog_log_bytes": sum(p.stat().st_size for p in runs.data.rglob("*.log")),
                 "kafka_python_log_bytes": peer_log.stat().st_size}
    finally:
        try:
            if kcat is not None:
                kcat.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
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
        "kcat": None if kcat is None else {
            "kafka_version": args.kafka_version, "missing": kcat.missing,
            "json_command": "kcat -C -b 127.0.0.1:PORT -t bench -o beginning -e -q -J",
            "template_command": "kcat -C -b 127.0.0.1:PORT -t bench -o beginning -e -q -f '%s\\n'"},
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures(runs, kcat),
    }
    result["targets_met"] = {k: v["met"] for k, v in result["figures"].items() if v.get("met") is not None}
    if result["figures"]["produce"].get("met_vs_kcat") is not None:
        result["targets_met"]["produce_vs_kcat"] = result["figures"]["produce"]["met_vs_kcat"]
    emit(result, args.output)


if __name__ == "__main__":
    main()

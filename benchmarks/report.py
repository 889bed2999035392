"""One entry point for every benchmark: run each, collect every figure into one table.

Runs every ``benchmarks/bench_*.py`` as a child process (``sys.executable bench_X.py ARGS
--json FILE``), reads the JSON it writes (see ``workloads.emit``) and turns it into rows:

    benchmark | figure | plog (value + unit) | pure Python | peer (name + value) | ratio | target | met

``plog`` is the default path (the native core, when ``plog._native`` is built); ``pure Python``
is the same figure on the reference path (``PLOG_NATIVE=0``): either the benchmark measures both
paths itself (dump, produce/consume, maintenance, scan: ``*_python`` figures in its JSON), or the
report runs it a second time with ``PLOG_NATIVE=0`` (``Bench.python_pass``) and takes each row's
figure of the same key from that run.
``ratio`` is plog / peer in the row's unit, as the benchmark measured it (most take the ratio
within each repetition and report the median): for a rate above 1 means plog is faster, for a
time below 1 means plog is faster. ``target`` is the issue's target, with the issue it comes
from; ``met`` is ``yes`` / ``no``, ``n/a`` for a figure without a target, ``not run`` when a
prerequisite is missing (Kafka's jars, Java, pyspark, kafka-python) and ``error`` when the
benchmark crashed.

Writes a JSON report (machine, date, Python, load average, per benchmark: argv, wall seconds,
raw JSON, rows) and a Markdown table, and with ``--readme FILE`` replaces the lines between
``<!-- BEGIN BENCHMARK REPORT -->`` and ``<!-- END BENCHMARK REPORT -->`` in FILE with the table.

Invariants:

* every benchmark of :data:`BENCHMARKS` (one per ``bench_*.py`` file; a test checks that) gives
  rows in every report: its figures, or rows saying ``not run: <reason>`` or ``error: <message>``;
* every target of :data:`BENCHMARKS` (the targets of issues 2-9, issue 10's start-up and issue
  23's native speed) is a row in every report, measured, not run or failed: a target is never
  dropped silently;
* one benchmark failing never stops the others; the report is still written and the exit code
  is then 1 (0 otherwise, whether or not targets are met).

The default sizes are chosen so that the whole report (every benchmark) runs in under 20
minutes on a 2-core machine; where that is smaller than an issue's size, the figure names the
size it ran. ``--quick`` uses each benchmark's smoke sizes (minutes; bench_scan's Spark start-ups dominate).

Usage:
    python benchmarks/report.py [--quick] [--only NAME,...] [--json benchmarks/results/report.json]
        [--md benchmarks/results/report.md] [--readme README.md]
    python benchmarks/report.py --from-json benchmarks/results/report.json --readme README.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
INTEROP = ROOT / "tests" / "interop"
RESULTS = HERE / "results"
KAFKA_VERSION = "4.3.1"

BEGIN_MARKER = "<!-- BEGIN BENCHMARK REPORT -->"
END_MARKER = "<!-- END BENCHMARK REPORT -->"

# The figures every row may carry in ``met``.
YES, NO, NA, NOT_RUN, ERROR = "yes", "no", "n/a", "not run", "error"


class ReportError(Exception):
    """A problem the report cannot work around (bad option, README without markers); one line."""


# -- rows -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A target as an issue states it. ``key`` names the row that measures it."""

    key: str
    figure: str  # the row's label when the benchmark gave no figure
    text: str  # e.g. "≥ 2× kafka-python"
    issue: int

    def label(self) -> str:
        return f"{self.text} (issue {self.issue})"


@dataclass
class Row:
    """One figure. ``plog``/``python``/``peer_value`` are numbers in ``unit`` (or text, e.g.
    "identical"); ``plog`` is the default path (the native core when it is built), ``python``
    the same figure on the pure-Python reference path (``PLOG_NATIVE=0``), None when not
    measured; ``met`` (one of yes / no / n/a / not run / error) judges ``plog``."""

    benchmark: str
    key: str
    figure: str
    plog: float | int | str | None
    unit: str = ""
    peer: str | None = None
    peer_value: float | int | str | None = None
    ratio: float | None = None
    target: str | None = None
    met: str = NA
    issue: int | None = None
    note: str = ""
    python: float | int | str | None = None


def row(bench: str, key: str, figure: str, plog, unit: str = "", *, peer: str | None = None, peer_value=None,
        ratio: float | None = None, target: Target | None = None, met: bool | None = None, note: str = "",
        python=None) -> Row:
    """A measured row; ``met`` is the target's verdict (None: no target)."""
    if target is not None and target.key != key:
        raise ValueError(f"target {target.key} on row {key}")
    if target is None:
        verdict = NA
    elif met is None:
        raise ValueError(f"row {key} has a target and no verdict")
    else:
        verdict = YES if met else NO
    return Row(bench, key, figure, plog, unit, peer, peer_value, ratio,
               target.label() if target else None, verdict, target.issue if target else None, note, python)


def missing_row(bench: str, key: str, figure: str, status: str, reason: str, target: Target | None = None) -> Row:
    """A row for a figure that was not measured: ``status`` is NOT_RUN or ERROR."""
    reason = " ".join(reason.split())
    if len(reason) > 300:
        reason = reason[:297] + "..."
    return Row(bench, key, figure, f"{status}: {reason}", "", None, None, None,
               target.label() if target else None, status, target.issue if target else None)


def _get(d: dict, *path, default=None):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def _gib(n: float) -> str:
    """A size as a figure names it: "4 GiB", "1 GiB" (for 1,073,736,000 bytes too), "256 MiB"."""
    if n >= 0.95 * (1 << 30):
        return f"{n / (1 << 30):.3g} GiB"
    return f"{n / (1 << 20):,.0f} MiB" if n >= 100 << 20 else f"{n / (1 << 20):.3g} MiB"


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


# -- what each benchmark gives ----------------------------------------------------------------------


@dataclass
class Context:
    """What the machine has: ``None`` when present, else why not."""

    kafka: str | None = None  # Java + Kafka's jars in .kafka-cache
    spark: str | None = None  # pyspark + Java
    kafka_python: str | None = None
    native: str | None = None  # plog._native built (the default path is then the native core)


T = Target
FORMATS_TARGETS = (
    T("formats.encode", "v2 batch encode", "≥ 2× kafka-python", 2),
    T("formats.decode", "v2 batch decode", "≥ 3× kafka-python", 2),
    T("formats.validate", "batch CRC validation, 16 KiB batches", "≥ 4 GB/s on 16 KiB batches", 2),
    T("formats.decode_x6", "v2 batch decode into Python records", "≥ 6× kafka-python", 23),
)
STORAGE_TARGETS = (
    T("storage.append", "append, uncompressed, no fsync per call", "≥ 1 M records/s (16 KiB batches, no fsync)", 3),
    T("storage.lookup", "offset lookup p99, 1,000 segments", "< 1 ms", 3),
    T("storage.recovery", "recovery of a 2 GiB partition", "≥ 2 GB/s", 3),
)
DUMP_TARGETS = (
    T("dump.rate", "dump --print-data-log", "≥ 700,000 records/s", 4),
    T("dump.vs_kafka", "dump vs Kafka DumpLogSegments, same file", "plog faster, JVM start-up included "
      "(time ratio < 1)", 4),
    T("dump.rss", "dump peak RSS", "≤ 150 MB whatever the file size", 4),
    T("dump.print_x5", "dump --print-data-log vs Kafka DumpLogSegments, 1 GiB, start-up included",
      "≥ 5× Kafka's DumpLogSegments", 23),
    T("dump.deep_x5", "dump --deep-iteration (no payload) vs Kafka DumpLogSegments, same file",
      "≥ 5× Kafka's DumpLogSegments", 23),
)
VERIFY_TARGETS = (
    T("verify.engine", "plog verify, engine, 1 process", "≥ 4 GB/s single process", 4),
    T("verify.cli_single", "plog verify --jobs 1 (CLI)", "≥ 4 GB/s single process", 4),
    T("verify.rss", "plog verify peak RSS", "≤ 150 MB whatever the size", 4),
    T("verify.vs_ceiling", "plog verify, one process, 16 KiB batches, vs the read + CRC-32C ceiling",
      "≥ 0.9× the read + CRC-32C ceiling", 23),
    T("verify.small_batches", "plog verify, one process, 1 KiB batches", "≥ 3 GB/s", 23),
)
PC_TARGETS = (
    T("produce_consume.produce", "plog produce --file, 1M lines", "≥ 500,000 records/s end to end", 6),
    T("produce_consume.consume", "plog consume -e --format jsonl", "≥ 500,000 records/s end to end", 6),
    T("produce_consume.consume_jsonl", "plog consume -e --format jsonl > /dev/null, 100-byte values",
      "≥ 2 M records/s", 23),
    T("produce_consume.consume_template", "plog consume -e --format '%v\\n' vs kcat -C -f '%s\\n' from a local broker",
      "≥ 3× kcat", 23),
    T("produce_consume.produce_vs_kcat", "plog produce --file vs kcat -P -X acks=all to a local broker, same lines",
      "≥ 2× kcat", 24),
    T("produce_consume.produce_keyed", "plog produce --parse-key, 12 partitions", "≥ 800,000 records/s", 24),
    T("produce_consume.produce_bulk_api", "Producer.send_many, 1 M records", "≥ 1 M records/s", 24),
    T("produce_consume.produce_rss_24", "plog produce peak RSS", "≤ 150 MB", 24),
)
MAINT_TARGETS = (
    T("maintenance.recovery", "plog recover --jobs 1", "≥ 2 GB/s per process", 7),
    T("maintenance.compaction", "plog compact, 10% live keys", "≥ 100 MB/s", 7),
    T("maintenance.compaction_rss", "plog compact peak RSS",
      "≤ --buffer-size + a few tens of MB (read: ≤ 50 MB over)", 7),
    T("maintenance.vs_broker", "plog recover vs the broker's recovery, same directory", "plog ≥ 3× faster", 7),
    T("maintenance.compaction_200", "plog compact, 256 MiB, 10% live keys", "≥ 200 MB/s", 24),
    T("maintenance.compaction_vs_cleaner", "plog compact vs a Kafka broker's log cleaner, identical copy",
      "≥ 1.5× the rate the cleaner reports", 24),
    T("maintenance.compaction_rss_24", "plog compact peak RSS", "≤ --buffer-size + 50 MB", 24),
)
SCAN_TARGETS = (
    T("scan.local2_vs_local1", "Spark local[2] / local[1]", "≥ 1.7×", 8),
    T("scan.overhead", "Spark overhead on 1 GiB vs local processes, same cores", "≤ 20% (time ratio ≤ 1.2)", 8),
    T("scan.rate", "scan --spark stats at local[2]", "≥ 5 M records/s", 8),
    T("scan.parity", "every result equals the engine's scan", "identical", 8),
    T("scan.local_2", "scan stats, 2 local processes, 1 GiB", "≥ 10 M records/s", 23),
)
REPLICATION_TARGETS = (
    T("replication.rf3_vs_rf1", "produce RF 3 acks=all vs RF 1", "≥ 0.5× RF 1", 9),
    T("replication.parity", "caught-up replica equals the leader", "byte-identical (.log, epochs, LEO/HW/ISR)", 9),
    T("replication.rf3_vs_rf1_native", "produce RF 3 acks=all, min.insync.replicas 2, vs RF 1", "≥ 0.5× RF 1", 24),
    T("replication.catch_up_vs_cp", "follower catch-up after a restart vs cp of the same bytes",
      "≥ 0.5× cp", 24),
)
VS_KAFKA_TARGETS = (
    T("vs_kafka.dump_small", "dump --print-data-log, small real segment, start-up included",
      "plog faster, JVM start-up included (time ratio < 1)", 4),
)

SCHEMAS_TARGETS = (
    T("schemas.avro", "consume --format jsonl of Avro-framed records vs confluent-kafka's AvroDeserializer",
      "≥ 2× AvroDeserializer", 25),
    T("schemas.protobuf", "consume --format jsonl of Protobuf-framed records vs ProtobufDeserializer",
      "≥ 2× ProtobufDeserializer", 25),
    T("schemas.scan_where", "scan search --where on Avro records, 2 processes", "≥ 1 M records/s", 25),
)

STARTUP_TARGETS = (
    T("startup.help", "plog --help", "well under half a second (read: < 0.5 s)", 10),
    T("startup.dump_small", "plog dump of a small file", "well under half a second (read: < 0.5 s)", 10),
)


def extract_formats(raw: dict, ctx: Context) -> list[Row]:
    b, f = "formats", raw["figures"]
    n = raw["records"]
    enc, dec, val = f["v2_encode_records_per_s"], f["v2_decode_records_per_s"], f["batch_crc_validation_gb_per_s"]
    t_enc, t_dec, t_val, t_dec6 = FORMATS_TARGETS
    return [
        row(b, t_enc.key, f"v2 batch encode ({n:,} records, 135 per batch)", enc["plog"], "records/s",
            peer="kafka-python", peer_value=enc["kafka_python"], ratio=enc["ratio"], target=t_enc,
            met=enc["ratio"] >= 2.0),
        row(b, t_dec.key, f"v2 batch decode ({n:,} records)", dec["plog"], "records/s", peer="kafka-python",
            peer_value=dec["kafka_python"], ratio=dec["ratio"], target=t_dec, met=dec["ratio"] >= 3.0),
        row(b, t_val.key, f"batch CRC validation, {_gib(val['buffer_bytes'])} of 16 KiB batches", val["plog"],
            "GB/s", peer="kafka-python", peer_value=val["kafka_python"], ratio=val["ratio"], target=t_val,
            met=val["plog"] >= 4.0),
        row(b, t_dec6.key, f"v2 batch decode into Python records ({n:,} records)", dec["plog"], "records/s",
            peer="kafka-python", peer_value=dec["kafka_python"], ratio=dec["ratio"], target=t_dec6,
            met=dec["ratio"] >= 6.0),
    ]


def extract_storage(raw: dict, ctx: Context) -> list[Row]:
    b, f = "storage", raw["figures"]
    a, lk, rc = f["append"], f["lookup"], f["recovery"]
    t_app, t_lk, t_rc = STORAGE_TARGETS
    rows = [row(b, t_app.key, f"append, uncompressed, no fsync per call ({a['none_no_fsync']['batches']:,} "
                f"batches)", a["none_no_fsync"]["records_per_s"], "records/s", target=t_app,
                met=a["none_no_fsync"]["records_per_s"] >= 1_000_000)]
    for k, label in (("lz4_no_fsync", "append, lz4, no fsync per call"),
                     ("none_fsync", "append, uncompressed, fsync per call (plog's default)"),
                     ("lz4_fsync", "append, lz4, fsync per call")):
        rows.append(row(b, f"storage.append_{k}", label, a[k]["records_per_s"], "records/s"))
    rows.append(row(b, t_lk.key, f"offset lookup p99, {lk['segments']:,} segments", lk["p99_ms"], "ms",
                    target=t_lk, met=lk["p99_ms"] < 1.0, note=f"median {lk['median_ms']} ms"))
    rows.append(row(b, t_rc.key, f"recovery of a {_gib(rc['partition_bytes'])} partition", rc["gb_per_s"], "GB/s",
                    target=t_rc, met=rc["gb_per_s"] >= 2.0))
    return rows


def extract_dump(raw: dict, ctx: Context) -> list[Row]:
    b = "dump"
    p, k = raw["plog"], raw.get("kafka_dump_log_segments")
    py = raw.get("plog_python") or {}
    deep = raw.get("deep") or {}
    size = f"{_gib(raw['segment_bytes'])} segment, {raw['records']:,} records"
    t_rate, t_vs, t_rss, t_x5, t_deep = DUMP_TARGETS
    kafka_why = ctx.kafka or "bench_dump found no Kafka jars"
    kafka = "Kafka DumpLogSegments"
    rows = [row(b, t_rate.key, f"dump --print-data-log > /dev/null, {size}", p["records_per_s"], "records/s",
                peer=kafka if k else None, peer_value=k["records_per_s"] if k else None,
                ratio=raw.get("plog_speed_vs_kafka"), target=t_rate, met=p["records_per_s"] >= 700_000,
                python=py.get("records_per_s"))]
    if k:
        rows.append(row(b, t_vs.key, "dump vs Kafka DumpLogSegments, same file, wall s, start-up included",
                        p["seconds"], "s", peer=kafka, peer_value=k["seconds"],
                        ratio=_ratio(p["seconds"], k["seconds"]), target=t_vs, met=p["seconds"] < k["seconds"],
                        python=py.get("seconds")))
        x5 = raw["plog_speed_vs_kafka"]
        rows.append(row(b, t_x5.key, f"dump --print-data-log speed ÷ Kafka's, {size}, start-up included",
                        p["records_per_s"], "records/s", peer=kafka, peer_value=k["records_per_s"], ratio=x5,
                        target=t_x5, met=x5 >= 5, python=py.get("records_per_s")))
    else:
        rows.append(missing_row(b, t_vs.key, t_vs.figure, NOT_RUN, kafka_why, t_vs))
        rows.append(missing_row(b, t_x5.key, t_x5.figure, NOT_RUN, kafka_why, t_x5))
    dk = deep.get("kafka_dump_log_segments")
    if "plog" in deep and dk:
        dx = raw["deep_speed_vs_kafka"]
        rows.append(row(b, t_deep.key, f"dump --deep-iteration (no payload) speed ÷ Kafka's, same file",
                        deep["plog"]["records_per_s"], "records/s", peer=kafka, peer_value=dk["records_per_s"],
                        ratio=dx, target=t_deep, met=dx >= 5, python=_get(deep, "plog_python", "records_per_s")))
    else:
        rows.append(missing_row(b, t_deep.key, t_deep.figure, NOT_RUN,
                                kafka_why if "plog" in deep else "bench_dump gave no --deep-iteration figure", t_deep))
    rss = max([p["peak_rss_mib"]] + [_get(deep, "plog", "peak_rss_mib", default=0)])
    rows.append(row(b, t_rss.key, "dump peak RSS (--print-data-log and --deep-iteration)", rss, "MiB",
                    peer=kafka if k else None, peer_value=k["peak_rss_mib"] if k else None,
                    ratio=_ratio(rss, k["peak_rss_mib"]) if k else None, target=t_rss,
                    met=rss <= 150, python=py.get("peak_rss_mib")))
    return rows


def extract_verify(raw: dict, ctx: Context) -> list[Row]:
    b, f = "verify", raw["figures"]
    t_eng, t_cli, t_rss, t_ceil, t_small = VERIFY_TARGETS
    size = f"{_gib(raw['log_bytes'])} in {raw['partitions']} partitions"
    ceiling = f["ceiling_crc32c_gb_per_s"]["median"]
    peer = "read + CRC-32C ceiling"
    jobs_key = next(k for k in f if re.fullmatch(r"cli_jobs_\d+_gb_per_s", k))
    jobs = jobs_key.split("_")[2]
    eng, cli1, clij = (f[k]["median"] for k in ("engine_single_gb_per_s", "cli_single_gb_per_s", jobs_key))
    rss = max(f["cli_single_peak_rss_mb"], f["cli_jobs_peak_rss_mb"])
    return [
        row(b, t_eng.key, f"plog verify, engine in-process, 1 process, {size}", eng, "GB/s", peer=peer,
            peer_value=ceiling, ratio=f["engine_vs_ceiling"], target=t_eng, met=eng >= 4.0),
        row(b, t_cli.key, "plog verify --jobs 1 (CLI, start-up included)", cli1, "GB/s", peer=peer,
            peer_value=ceiling, ratio=_ratio(cli1, ceiling), target=t_cli, met=cli1 >= 4.0),
        row(b, "verify.cli_jobs", f"plog verify --jobs {jobs} (CLI)", clij, "GB/s", peer=peer, peer_value=ceiling,
            ratio=_ratio(clij, ceiling)),
        row(b, "verify.engine_cpu", "plog verify, engine, GB per CPU-second",
            f["engine_single_gb_per_cpu_s"]["median"], "GB/CPU-s", peer=peer,
            peer_value=f["ceiling_crc32c_gb_per_cpu_s"]["median"], ratio=f["engine_vs_ceiling_cpu"]),
        row(b, t_rss.key, f"plog verify peak RSS (--jobs 1 and --jobs {jobs})", rss, "MB", target=t_rss,
            met=rss <= 150),
        row(b, t_ceil.key, f"plog verify, engine, 1 process, 16 KiB batches, ÷ the read + CRC-32C ceiling",
            eng, "GB/s", peer=peer, peer_value=ceiling, ratio=f["engine_vs_ceiling"], target=t_ceil,
            met=f["engine_vs_ceiling"] >= 0.9),
    ] + _verify_small_rows(b, f.get("small_batches"), t_small, peer)


def _verify_small_rows(b: str, small: dict | None, target: Target, peer: str) -> list[Row]:
    if small is None:
        return [missing_row(b, target.key, target.figure, NOT_RUN, "bench_verify ran without --small-size", target)]
    eng = small["engine_single_gb_per_s"]["median"]
    return [row(b, target.key, f"plog verify, engine, 1 process, {_gib(small['log_bytes'])} of "
                f"{small['mean_batch_bytes']:,}-byte batches", eng, "GB/s", peer=peer,
                peer_value=small["ceiling_crc32c_gb_per_s"]["median"], ratio=small["engine_vs_ceiling"],
                target=target, met=eng >= 3.0)]


def extract_produce_consume(raw: dict, ctx: Context) -> list[Row]:
    b, f = "produce_consume", raw["figures"]
    t_p, t_c, t_jl, t_tp, t_pk, t_keyed, t_bulk, t_rss = PC_TARGETS
    n = raw["records"]
    rows = []
    for t, name, label in ((t_p, "produce", f"plog produce --file, {n:,} 100-byte lines (CLI)"),
                           (t_c, "consume", f"plog consume -e --format jsonl > /dev/null, {n:,} records (CLI)")):
        x = f[name]
        rows.append(row(b, t.key, label, x["plog_records_per_s"], "records/s", peer="kafka-python codec",
                        peer_value=x["kafka_python_records_per_s"], ratio=x["ratio"], target=t,
                        met=x["plog_records_per_s"] >= 500_000, note=f"per CPU-second ratio {x['ratio_cpu']}",
                        python=x.get("plog_python_records_per_s")))
    kcat_why = _get(raw, "kcat_missing") or "bench_produce_consume ran without --kcat"
    for t, name, label in ((t_jl, "consume_jsonl", f"plog consume -e --format jsonl, {n:,} records, vs kcat -C -J"),
                           (t_tp, "consume_template", f"plog consume -e --format '%v\\n', {n:,} records, "
                                                      f"vs kcat -C -f '%s\\n'")):
        x = f.get(name)
        if x is None:
            rows.append(missing_row(b, t.key, t.figure, NOT_RUN, "bench_produce_consume gave no such figure", t))
            continue
        rate, kcat = x["plog_records_per_s"], x.get("kcat_records_per_s")
        if name == "consume_jsonl":
            met = rate >= 2_000_000
        elif kcat is None:
            rows.append(missing_row(b, t.key, t.figure, NOT_RUN, kcat_why, t))
            continue
        else:
            met = x["ratio_vs_kcat"] >= 3.0
        rows.append(row(b, t.key, label, rate, "records/s", peer="kcat from a local broker" if kcat else None,
                        peer_value=kcat, ratio=x.get("ratio_vs_kcat"), target=t, met=met,
                        python=_get(f, name + "_python", "plog_records_per_s")))
    for name in ("produce", "consume"):
        rows.append(row(b, f"produce_consume.{name}_rss", f"plog {name} peak RSS", f[name]["plog_peak_rss_mb"], "MB"))
    return rows + _write_side_rows(raw, f, (t_pk, t_keyed, t_bulk, t_rss), kcat_why)


def _write_side_rows(raw: dict, f: dict, targets: tuple, kcat_why: str) -> list[Row]:
    """Issue 24's produce figures (bench_produce_consume measures both paths itself)."""
    b, n = "produce_consume", raw["records"]
    t_pk, t_keyed, t_bulk, t_rss = targets
    p = f["produce"]
    rows = []
    if "kcat_produce_records_per_s" in p:
        rows.append(row(b, t_pk.key, f"plog produce --file, {n:,} 100-byte lines, vs kcat -P -X acks=all",
                        p["plog_records_per_s"], "records/s", peer="kcat to a local broker",
                        peer_value=p["kcat_produce_records_per_s"], ratio=p["ratio_vs_kcat_produce"], target=t_pk,
                        met=p["ratio_vs_kcat_produce"] >= 2.0, python=p.get("plog_python_records_per_s"),
                        note=f"per CPU-second: plog {p.get('plog_records_per_cpu_s')}, "
                             f"kcat {p.get('kcat_produce_records_per_cpu_s')}"))
        per_rep = p.get("ratio_vs_kcat_produce_per_rep")
        if per_rep:
            # Not a target: how far apart the repetitions the median is taken of lie.
            rows.append(row(b, "produce_consume.produce_vs_kcat_per_rep",
                            "plog produce --file ÷ kcat -P, each repetition (the median above is of these)",
                            ", ".join(f"{r:g}×" for r in per_rep)))
    else:
        rows.append(missing_row(b, t_pk.key, t_pk.figure, NOT_RUN, p.get("kcat_produce_missing") or kcat_why, t_pk))
    for t, name, label in ((t_keyed, "produce_keyed", f"plog produce --parse-key, {n:,} keyed lines, 12 partitions"),
                           (t_bulk, "produce_bulk_api", f"Producer.send_many, {n:,} records (in-process)")):
        x = f.get(name)
        if x is None:
            rows.append(missing_row(b, t.key, t.figure, NOT_RUN, "bench_produce_consume gave no such figure", t))
            continue
        rows.append(row(b, t.key, label, x["plog_records_per_s"], "records/s", target=t,
                        met=x["plog_records_per_s"] >= x["target_records_per_s"],
                        python=x.get("plog_python_records_per_s")))
    rss = max(p["plog_peak_rss_mb"], _get(f, "produce_keyed", "plog_peak_rss_mb", default=0) or 0)
    rows.append(row(b, t_rss.key, "plog produce peak RSS (--file and --parse-key)", rss, "MB", target=t_rss,
                    met=rss <= 150))
    return rows


def extract_maintenance(raw: dict, ctx: Context) -> list[Row]:
    b = "maintenance"
    rc, cp = raw["recovery"], raw["compaction"]
    t_rc, t_cp, t_rss, t_br, t_c200, t_cvk, t_crss = MAINT_TARGETS
    crc = rc["peer_crc32c_pass"]["gb_per_s"]
    peer_crc = "CRC-32C pass, same files"
    rows = [
        row(b, t_rc.key, f"plog recover --jobs 1, crashed {_gib(rc['bytes'])} log dir ({rc['partitions']} partitions)",
            rc["jobs_1"]["gb_per_s"], "GB/s", peer=peer_crc, peer_value=crc, ratio=rc["ratio_vs_crc_pass"],
            target=t_rc, met=rc["jobs_1"]["gb_per_s"] >= 2.0, python=_get(rc, "jobs_1_python", "gb_per_s")),
        row(b, "maintenance.recovery_jobs_2", "plog recover --jobs 2", rc["jobs_2"]["gb_per_s"], "GB/s",
            peer=peer_crc, peer_value=crc, ratio=_ratio(rc["jobs_2"]["gb_per_s"], crc),
            python=_get(rc, "jobs_2_python", "gb_per_s")),
        row(b, t_cp.key, f"plog compact, {_gib(cp['bytes'])} partition, 10% live keys", cp["mb_per_s"], "MB/s",
            peer="kafka-python decode", peer_value=cp["peer_kafka_python_decode"]["mb_per_s"],
            ratio=cp["ratio_vs_peer"], target=t_cp, met=cp["mb_per_s"] >= 100.0,
            python=_get(cp, "python", "mb_per_s")),
        row(b, t_rss.key, f"plog compact peak RSS, --buffer-size {cp['buffer_size_mb']} MiB", cp["peak_rss_mb"], "MB",
            target=t_rss, met=cp["rss_over_buffer_mb"] <= 50, note=f"{cp['rss_over_buffer_mb']} MB over the buffer"),
    ]
    rows += _compaction_rows_24(cp, ctx, (t_c200, t_cvk, t_crss))
    br = raw.get("broker_recovery")
    if br is None:
        rows.append(missing_row(b, t_br.key, t_br.figure, NOT_RUN, ctx.kafka or "run without --kafka", t_br))
    elif "error" in br:
        rows.append(missing_row(b, t_br.key, t_br.figure, ERROR, br["error"], t_br))
    else:
        # The goal is the whole run (`recover --all`, a process per core) against the broker's
        # own recovery; older runs measured --jobs 1 only.
        key = "plog_all" if "plog_all_seconds" in br else "plog"
        gbps = lambda k: round(br["bytes"] / br[k] / 1e9, 3) if k in br else None  # noqa: E731
        rows.append(row(b, t_br.key, f"plog recover {'--all' if key == 'plog_all' else '--jobs 1'} vs Kafka "
                        f"{br['kafka_version']} broker's recovery (\"Loaded N logs\"), same crashed {_gib(br['bytes'])}",
                        gbps(f"{key}_seconds"), "GB/s", peer="Kafka broker", peer_value=gbps("broker_seconds"),
                        ratio=br[f"{key}_speedup"], target=t_br, met=br[f"{key}_speedup"] >= 3.0,
                        python=gbps(f"{key}_python_seconds")))
    return rows


def _compaction_rows_24(cp: dict, ctx: Context, targets: tuple) -> list[Row]:
    """Issue 24's compaction figures: the rate, against a Kafka broker's log cleaner on an
    identical copy (its own reported rate), and the peak RSS, both paths."""
    b = "maintenance"
    t_c200, t_cvk, t_crss = targets
    label = f"plog compact, {_gib(cp['bytes'])} partition, 10% live keys, --buffer-size {cp['buffer_size_mb']} MiB"
    rows = [row(b, t_c200.key, label, cp["mb_per_s"], "MB/s", target=t_c200, met=cp["mb_per_s"] >= 200.0,
                python=_get(cp, "python", "mb_per_s"))]
    kc = cp.get("peer_kafka_cleaner")
    if kc is None:
        rows.append(missing_row(b, t_cvk.key, t_cvk.figure, NOT_RUN, ctx.kafka or "run without --kafka", t_cvk))
    elif "error" in kc:
        rows.append(missing_row(b, t_cvk.key, t_cvk.figure, ERROR, kc["error"], t_cvk))
    else:
        rows.append(row(b, t_cvk.key, f"plog compact ÷ Kafka {kc['kafka_version']} log cleaner's own rate "
                        "(log-cleaner.log), identical copy", cp["mb_per_s"], "MB/s", peer="Kafka log cleaner",
                        peer_value=kc["mb_per_s"], ratio=cp["ratio_vs_kafka_cleaner"], target=t_cvk,
                        met=cp["ratio_vs_kafka_cleaner"] >= 1.5, python=_get(cp, "python", "mb_per_s")))
    rows.append(row(b, t_crss.key, f"plog compact peak RSS, --buffer-size {cp['buffer_size_mb']} MiB",
                    cp["peak_rss_mb"], "MB", target=t_crss, met=cp["rss_over_buffer_mb"] <= 50,
                    note=f"{cp['rss_over_buffer_mb']} MB over the buffer", python=_get(cp, "python", "peak_rss_mb")))
    return rows


def extract_scan(raw: dict, ctx: Context) -> list[Row]:
    b = "scan"
    t_sp, t_ov, t_rate, t_par, t_l2 = SCAN_TARGETS
    d = raw["directory"]
    eng = raw["engine_1"]["records_per_s"]
    l2, s1, s2 = (raw[k]["records_per_s"] for k in ("local_2", "spark_local_1", "spark_local_2"))
    ov = raw["overhead_1gib"]
    size = f"{d['gib']:g} GiB, {d['records']:,} records"
    peer_eng = "engine scan, 1 process"
    parity = raw["parity"]
    bad = sorted(k for k, v in parity.items() if not v)
    return [
        row(b, t_rate.key, f"scan --spark stats, local[2], {size}", s2, "records/s", peer=peer_eng, peer_value=eng,
            ratio=raw["ratios"]["spark_local_2_vs_engine_1"], target=t_rate, met=s2 >= 5_000_000),
        row(b, t_sp.key, "Spark local[2] vs local[1]", s2, "records/s", peer="Spark local[1]", peer_value=s1,
            ratio=raw["ratios"]["spark_local_2_vs_local_1"], target=t_sp,
            met=raw["ratios"]["spark_local_2_vs_local_1"] >= 1.7),
        _overhead_row(b, t_ov, ov),
        row(b, t_l2.key, f"scan stats, 2 local processes (plog scan --jobs 2), {size}", l2, "records/s",
            peer=peer_eng, peer_value=eng, ratio=raw["ratios"]["local_2_vs_engine_1"], target=t_l2,
            met=l2 >= 10_000_000, python=_get(raw, "local_2_python", "records_per_s")),
        row(b, "scan.local_1", "scan stats, 1 local process (plog scan --jobs 1)", _get(raw, "local_1", "records_per_s"),
            "records/s", peer=peer_eng, peer_value=eng, python=_get(raw, "local_1_python", "records_per_s")),
        row(b, "scan.spark_local_1", "scan --spark, local[1]", s1, "records/s", peer=peer_eng, peer_value=eng,
            ratio=_ratio(s1, eng)),
        row(b, t_par.key, "local 2, Spark local[1]/[2] and the CLI equal the engine's scan",
            "identical" if not bad else "differs: " + ", ".join(bad), target=t_par, met=not bad),
    ] + _spark_cost_rows(b, raw)


def _overhead_row(b: str, target, ov: dict) -> Row:
    """The target row: a fresh session's first Spark job over the 2 local processes' median
    (bench_scan repeats the local scan 5 times: one slow local run must not decide), or over
    their one run in results from before the repeats."""
    if "spark_overhead_vs_median" in ov:
        over, peer, local = ov["spark_overhead_vs_median"], "2 local processes (median of 5)", \
            ov["local_2_median_seconds"]
    else:
        over, peer, local = ov["spark_overhead"], "2 local processes", ov["local_2"]["scan_seconds"]
    return row(b, target.key, "Spark local[2] overhead on 1 GiB, a fresh session's first job, scan s "
               "(start-up excluded)", ov["spark_local_2"]["scan_seconds"], "s", peer=peer, peer_value=local,
               ratio=round(1 + over, 3), target=target, met=over <= 0.20)


def _spark_cost_rows(b: str, raw: dict) -> list[Row]:
    """What Spark's own cost per job is (an empty job of the same tasks), the warm overhead,
    and the overhead on a larger input (bench_scan's ``spark_floor``, ``spark_overhead_full``)."""
    ov, floor, full = raw["overhead_1gib"], raw.get("spark_floor"), raw.get("spark_overhead_full")
    rows = []
    if "spark_local_2_warm_median_seconds" in ov:
        rows.append(row(b, "scan.spark_overhead_warm", "Spark local[2] on 1 GiB, the session's next jobs (median), s",
                        ov["spark_local_2_warm_median_seconds"], "s", peer="2 local processes (median)",
                        peer_value=ov["local_2_median_seconds"],
                        ratio=round(1 + ov["spark_warm_overhead_median"], 3)))
    if floor:
        rows.append(row(b, "scan.spark_floor", f"Spark's floor: an empty local[2] job of {floor['tasks']} tasks "
                        "(median of the session's next jobs), s", floor["warm_median_seconds"], "s",
                        peer="2 local processes' scan of 1 GiB (median)", peer_value=ov.get("local_2_median_seconds"),
                        ratio=floor["warm_share_of_local_2"],
                        note=f"first job {floor['cold_seconds']} s ({floor['cold_share_of_local_2']:.0%} of the scan)"))
    if full:
        rows.append(row(b, "scan.spark_overhead_full", f"Spark local[2] overhead on {full['gib']:g} GiB, scan s "
                        f"(start-up excluded{'; hard links of the 1 GiB, page cache' if full['hard_linked'] else ''})",
                        full["spark_local_2_scan_seconds"], "s", peer="2 local processes",
                        peer_value=full["local_2_scan_seconds"], ratio=round(1 + full["spark_overhead"], 3)))
    return rows


def extract_replication(raw: dict, ctx: Context) -> list[Row]:
    b = "replication"
    t_r, t_par, t_r24, t_cp = REPLICATION_TARGETS
    p, cu = raw["figures"]["produce"], raw["figures"]["catch_up"]
    py = raw.get("plog_python") or {}
    py_p, py_cu = py.get("produce") or {}, py.get("catch_up") or {}
    rf3 = f"produce RF 3 acks=all min.insync 2, {raw['records']:,} records"
    rows = [
        row(b, t_r.key, rf3, p["rf3"]["records_per_s"], "records/s", peer="RF 1 acks=all",
            peer_value=p["rf1"]["records_per_s"], ratio=p["ratio"], target=t_r, met=p["ratio"] >= 0.5,
            note=f"per CPU-second ratio {p['ratio_cpu']}", python=_get(py_p, "rf3", "records_per_s")),
    ]
    if py_p:
        rows.append(row(b, t_r24.key, rf3 + " (the native write side)", p["rf3"]["records_per_s"], "records/s",
                        peer="RF 1 acks=all", peer_value=p["rf1"]["records_per_s"], ratio=p["ratio"], target=t_r24,
                        met=p["ratio"] >= 0.5, python=_get(py_p, "rf3", "records_per_s"),
                        note=f"pure Python ratio {py_p.get('ratio')}"))
    rows.append(row(b, "replication.catch_up", f"follower catch-up after a restart, {cu['bytes_fetched'] / 1e6:,.0f} MB",
                    cu["mb_per_s"], "MB/s", note=f"{cu['fetches']} fetches, peak RSS {cu['peak_rss_mb']} MB",
                    python=py_cu.get("mb_per_s")))
    if "cp_mb_per_s" in cu:
        rows.append(row(b, t_cp.key, "follower catch-up after a restart ÷ cp -r of the leader's partition (page cache)",
                        cu["mb_per_s"], "MB/s", peer="cp", peer_value=cu["cp_mb_per_s"], ratio=cu["ratio_vs_cp"],
                        target=t_cp, met=cu["ratio_vs_cp"] >= 0.5, python=py_cu.get("mb_per_s")))
        rows.append(row(b, "replication.catch_up_vs_cp_sync",
                        "follower catch-up (fsynced at close) ÷ cp -r then sync (the copy made as durable)",
                        cu["mb_per_s"], "MB/s", peer="cp + sync", peer_value=cu["cp_sync_mb_per_s"],
                        ratio=_ratio(cu["mb_per_s"], cu["cp_sync_mb_per_s"]), python=py_cu.get("mb_per_s")))
        disk = cu.get("disk") or {}
        if disk.get("mb_per_s_busy"):
            # The catch-up ends durable, cp in the page cache: the disk's rate while busy, over
            # cp's, is the most the catch-up's ratio could be were the disk busy all its time.
            rows.append(row(b, "replication.catch_up_disk",
                            "the disk during the catch-up, MB/s while busy ÷ cp -r (the ratio's ceiling)",
                            disk["mb_per_s_busy"], "MB/s", peer="cp", peer_value=cu["cp_mb_per_s"],
                            ratio=_ratio(disk["mb_per_s_busy"], cu["cp_mb_per_s"]),
                            note=f"busy {disk['busy_share']:.0%} of the catch-up, {disk['written_mb']:,.0f} MB written",
                            python=(py_cu.get("disk") or {}).get("mb_per_s_busy")))
    la = raw["figures"].get("leader_append")
    if la:
        rows.append(row(b, "replication.leader_append",
                        f"leader append of producer batches, {la['records']:,} records in {la['batches']:,} batches, "
                        "no fsync", la["records_per_s"], "records/s",
                        python=_get(py, "leader_append", "records_per_s")))
    rows += [
        row(b, "replication.catch_up_rss", "follower catch-up peak RSS", cu["peak_rss_mb"], "MB",
            python=py_cu.get("peak_rss_mb")),
        row(b, t_par.key, "caught-up replica == leader (.log, leader-epoch-checkpoint, LEO, HW, ISR)",
            "identical" if cu["parity"] else "differs", target=t_par, met=bool(cu["parity"])),
    ]
    return rows


def extract_vs_kafka(raw: dict, ctx: Context) -> list[Row]:
    b = "vs_kafka"
    (t_small,) = VS_KAFKA_TARGETS
    figs = raw["figures"]
    kafka = f"Kafka {raw['kafka_version']}"
    rows: list[Row] = []

    def missing(name: str, specs: list[tuple[str, str, Target | None]], absent: str | None = None) -> bool:
        """Rows for a figure the run did not give (absent, skipped or failed); True if so."""
        x = figs.get(name)
        if x is None:
            reason, status = absent or "left out of this run (--only)", NOT_RUN
        elif "skipped" in x:
            reason, status = x["skipped"], NOT_RUN
        elif "failed" in x:
            reason, status = x["failed"], ERROR
        else:
            return False
        rows.extend(missing_row(b, key, label, status, reason, t) for key, label, t in specs)
        return True

    if not missing("dump_small", [(t_small.key, t_small.figure, t_small)]):
        x = figs["dump_small"]
        rows.append(row(b, t_small.key, f"dump --print-data-log, {x['bytes'] / 1e6:.2g} MB real segment, wall s "
                        "incl. start-up", x["plog"]["seconds"]["median"], "s", peer=f"{kafka} DumpLogSegments",
                        peer_value=x["kafka_dump_log_segments"]["seconds"]["median"],
                        ratio=x["plog_over_kafka_seconds"], target=t_small, met=x["plog_over_kafka_seconds"] < 1))
    # The report's default run leaves dump_large out (--only): bench_dump measures the same two
    # commands on the same kind of segment (bench_dump.build_segment) at 1 GiB.
    if not missing("dump_large", [("vs_kafka.dump_large", "dump --print-data-log, large segment", None)],
                   absent="bench_dump measures it (1 GiB, same tools)"):
        x = figs["dump_large"]
        rows.append(row(b, "vs_kafka.dump_large", f"dump --print-data-log, {_gib(x['bytes'])} segment",
                        x["plog"]["records_per_s"]["median"], "records/s", peer=f"{kafka} DumpLogSegments",
                        peer_value=x["kafka_dump_log_segments"]["records_per_s"]["median"],
                        ratio=x["plog_speed_vs_kafka"]))
    if not missing("verify", [("vs_kafka.verify", "plog verify --jobs 1 vs --verify-index-only", None)]):
        x = figs["verify"]
        size = f"{x['log_bytes'] / 1e6:,.0f} MB in {x['segment_bytes'] >> 20} MiB segments"
        rows.append(row(b, "vs_kafka.verify", f"plog verify --jobs 1 vs DumpLogSegments --verify-index-only, {size}, "
                        "wall s", x["plog_jobs_1"]["seconds"]["median"], "s",
                        peer=f"{kafka} --verify-index-only",
                        peer_value=x["kafka_verify_index_only"]["seconds"]["median"],
                        ratio=x["plog_jobs_1_over_kafka_verify_index_only_seconds"],
                        note="the two check different things: see bench_vs_kafka.py"))
        rows.append(row(b, "vs_kafka.verify_index_files", "plog verify --jobs 1 vs --verify-index-only on the index "
                        "files alone, wall s", x["plog_jobs_1"]["seconds"]["median"], "s",
                        peer=f"{kafka} index files only", peer_value=x["kafka_index_files_only"]["seconds"]["median"],
                        ratio=x["plog_jobs_1_over_kafka_index_files_only_seconds"]))
    if not missing("recovery", [("vs_kafka.recovery", "engine recovery vs the broker's, same unclean directory",
                                 None)]):
        x = figs["recovery"]
        inp, kb = x["input"], x["kafka_broker"]
        loaded = _get(kb, "loaded_logs_ms", "median")
        rows.append(row(b, "vs_kafka.recovery", f"recovery of a SIGKILLed broker's directory ({inp['segments']} "
                        f"segments, {inp['log_bytes'] / 1e6:,.0f} MB, from offset 0): LogManager open vs "
                        "\"Loaded N logs\", s", x["plog"]["open_seconds"]["median"], "s", peer=f"{kafka} broker",
                        peer_value=round(loaded / 1000, 3) if loaded is not None else None,
                        ratio=x.get("plog_open_over_kafka_loaded_logs"),
                        note="issue 7's 3x goal is measured by bench_maintenance (plog recover)"))
        rows.append(row(b, "vs_kafka.recovery_process", "same, whole process: plog open+close vs broker launch to "
                        "ready, s", x["plog"]["process_seconds"]["median"], "s", peer=f"{kafka} broker",
                        peer_value=_get(kb, "process_to_ready_seconds", "median"),
                        ratio=x.get("plog_process_over_kafka_process_to_ready")))
    return rows


def extract_startup(raw: dict, ctx: Context) -> list[Row]:
    b, f = "startup", raw["figures"]
    t_help, t_dump = STARTUP_TARGETS
    bare = f["python_bare"]["wall_s"]
    kafka = _get(raw, "peer", "kafka_dump_log", "wall_s")
    cpu = "CPU {} s".format
    return [
        row(b, t_help.key, "plog --help, wall s", f["help"]["wall_s"], "s", peer="python -c pass", peer_value=bare,
            ratio=_ratio(f["help"]["wall_s"], bare), target=t_help, met=f["help"]["wall_s"] < 0.5,
            note=cpu(f["help"]["cpu_s"])),
        row(b, t_dump.key, "plog dump --print-data-log of a one-batch corpus segment, wall s",
            f["dump_small"]["wall_s"], "s", peer="Kafka DumpLogSegments" if kafka is not None else None,
            peer_value=kafka, ratio=_ratio(f["dump_small"]["wall_s"], kafka), target=t_dump,
            met=f["dump_small"]["wall_s"] < 0.5, note=cpu(f["dump_small"]["cpu_s"])),
        row(b, "startup.completion_values", "plog completions values topic (a TAB press), wall s",
            f["completion_values"]["wall_s"], "s", peer="python -c pass", peer_value=bare,
            ratio=_ratio(f["completion_values"]["wall_s"], bare), note=cpu(f["completion_values"]["cpu_s"])),
    ]


def extract_schemas(raw: dict, ctx: Context) -> list[Row]:
    b = "schemas"
    t_avro, t_proto, t_where = SCHEMAS_TARGETS
    rows = []
    for t, name, peer in ((t_avro, "avro", "AvroDeserializer"), (t_proto, "protobuf", "ProtobufDeserializer")):
        x = raw.get(name)
        if x is None:
            rows.append(missing_row(b, t.key, t.figure, NOT_RUN, "bench_schemas ran without it (--only)", t))
            continue
        rows.append(row(b, t.key, f"consume -e --format jsonl --value-format auto, {x['records']:,} {name} records",
                        x["plog"]["records_per_s"], "records/s", peer=f"confluent-kafka {peer}",
                        peer_value=x["confluent_kafka"]["records_per_s"], ratio=x["ratio"], target=t,
                        met=x["ratio"] >= 2.0 and x["parity"], python=x["plog_python"]["records_per_s"]))
    w = raw.get("scan_where")
    if w is None:
        rows.append(missing_row(b, t_where.key, t_where.figure, NOT_RUN, "bench_schemas ran without it (--only)",
                                t_where))
    else:
        rate = w["plog"]["records_per_s"]
        rows.append(row(b, t_where.key, f"scan --mode search --where '{w['where']}', {w['records']:,} Avro records, "
                        f"--jobs {w['jobs']}", rate, "records/s", target=t_where,
                        met=rate >= 1_000_000 and w["parity"], python=w["plog_python"]["records_per_s"]))
    return rows


def extract_native(raw: dict, ctx: Context) -> list[Row]:
    """The native core against the pure-Python reference path (issue 23's first units): no
    targets of their own (the issue's targets are end-to-end figures); ratio native / reference."""
    b, f = "native", raw["figures"]
    size, small = _gib(raw["segment_bytes"]), _gib(f["walk_crc_unit_1kib_batches_gb_per_s"]["buffer_bytes"])
    specs = (
        ("native.walk_crc_iterator", f"batch walk + CRC-32C through BatchIterator, {size} of 16 KiB batches",
         "walk_crc_iterator_gb_per_s", "GB/s"),
        ("native.walk_crc_unit", f"batch walk + CRC-32C, native unit, {size} of 16 KiB batches",
         "walk_crc_unit_gb_per_s", "GB/s"),
        ("native.walk_crc_unit_1kib", f"batch walk + CRC-32C, native unit, {small} of 1 KiB batches",
         "walk_crc_unit_1kib_batches_gb_per_s", "GB/s"),
        ("native.decode", f"v2 record decode ({raw['records']:,} records)", "decode_records_per_s", "records/s"),
        ("native.heads", f"v2 record heads ({raw['records']:,} records)", "record_heads_per_s", "records/s"),
    )
    return [row(b, key, figure, f[name]["native"], unit, peer="pure Python", peer_value=f[name]["reference"],
                ratio=f[name]["ratio"], note="CPU time") for key, figure, name, unit in specs]


def _needs_confluent_kafka(ctx: Context) -> str | None:
    import importlib.util

    return None if importlib.util.find_spec("confluent_kafka") else "confluent-kafka is not installed (pip install -e '.[test]')"


def _needs_native(ctx: Context) -> str | None:
    import importlib.util

    return None if importlib.util.find_spec("plog._native") else "the native module plog._native is not built"


def _needs_corpus(ctx: Context) -> str | None:
    corpus = ROOT.parent / "shared" / "corpus"
    return None if corpus.is_dir() else f"the corpus is not at {corpus}"


@dataclass(frozen=True)
class Bench:
    """One ``bench_*.py``: how the report runs it and reads it.

    ``args`` are the default run's options, sized for the 20-minute budget; ``quick_args`` the
    smoke run's. ``json_flag`` is the option the script writes its JSON file with; ``timeout``
    (seconds) stops a hung benchmark, which then gives error rows. ``needs``
    returns why the benchmark cannot run on this machine (None: it can); ``extra_args`` adds
    options that depend on the machine (e.g. ``--kafka`` only when the jars are there)."""

    name: str
    args: tuple[str, ...]
    quick_args: tuple[str, ...]
    json_flag: str
    targets: tuple[Target, ...]
    extract: Callable[[dict, Context], list[Row]]
    needs: Callable[[Context], str | None] = lambda ctx: None
    extra_args: Callable[[Context], tuple[str, ...]] = lambda ctx: ()
    timeout: float = 900.0
    script: Path | None = None  # the file to run; default benchmarks/<name>.py
    # Run it a second time with PLOG_NATIVE=0 for the rows' ``python`` figures (benchmarks
    # that measure both paths themselves fill ``python`` in their ``extract``).
    python_pass: bool = False

    @property
    def short(self) -> str:
        return self.name.removeprefix("bench_")

    @property
    def path(self) -> Path:
        return self.script or HERE / f"{self.name}.py"

    def argv(self, quick: bool, ctx: Context, json_file: str) -> list[str]:
        return [sys.executable, str(self.path), *(self.quick_args if quick else self.args), *self.extra_args(ctx),
                self.json_flag, json_file]


def _needs_kafka_python(ctx: Context) -> str | None:
    return ctx.kafka_python


# The default sizes: the issues' where the 20-minute budget allows, smaller where it does not
# (each row's figure names the size it ran). Against the issues: dump 1 GiB, verify 4 GiB,
# produce/consume 1M records, storage and formats as specified; plog recover 1 GiB instead of
# 4 GiB and compaction 256 MiB instead of 1 GiB (both are per-byte rates), scan 1 GiB instead of
# 8 GiB (the overhead target is a 1 GiB figure anyway), one repetition where a benchmark's run is
# minutes long (storage: its fsync-per-call appends take minutes on a busy disk). bench_vs_kafka
# leaves out dump_large, which bench_dump measures at 1 GiB. On the 2-core VM at load 2-5 the
# whole report took 14.8 minutes, bench_scan 5.5 of them (its five Spark JVM start-ups and scans).
BENCHMARKS: tuple[Bench, ...] = (
    Bench("bench_formats", (), ("--quick",), "--json", FORMATS_TARGETS, extract_formats, _needs_kafka_python,
          python_pass=True),
    Bench("bench_storage", ("--reps", "1"), ("--quick",), "--json", STORAGE_TARGETS, extract_storage,
          python_pass=True),
    Bench("bench_dump", ("--size-mb", "1024"), ("--size-mb", "64"), "--json", DUMP_TARGETS, extract_dump,
          extra_args=lambda ctx: ("--no-kafka",) if ctx.kafka else ()),  # without Kafka: plog alone
    Bench("bench_verify", ("--size", "4G", "--small-size", "1G", "--reps", "3"),
          ("--size", "256M", "--small-size", "64M", "--reps", "1"), "--json", VERIFY_TARGETS, extract_verify,
          python_pass=True),
    # Three repetitions (medians): a produce run is a quarter of a second, and the first
    # repetition is the slowest for plog and kcat alike (2.5-3.0 M/s against 3.5-4.3 M/s for
    # the next two, kcat 1.96 against 2.36-2.45), after a sync and with the broker idle (2-4% of a
    # core after its warm-up): one run would report that outlier.
    Bench("bench_produce_consume", ("--records", "1000000", "--reps", "3"), ("--quick", "--reps", "1"), "--output",
          PC_TARGETS, extract_produce_consume, _needs_kafka_python,
          extra_args=lambda ctx: ("--kcat",) if not ctx.kafka else ()),  # kcat's broker: Kafka's jars
    Bench("bench_maintenance", ("--recovery-gib", "1", "--compact-mib", "256", "--reps", "1"), ("--quick",),
          "--output", MAINT_TARGETS, extract_maintenance, _needs_kafka_python,
          extra_args=lambda ctx: ("--kafka", KAFKA_VERSION) if not ctx.kafka else ()),
    Bench("bench_scan", ("--gib", "1"), ("--quick",), "--output", SCAN_TARGETS, extract_scan,
          lambda ctx: ctx.spark, timeout=1500.0),
    Bench("bench_replication", (), ("--quick",), "--output", REPLICATION_TARGETS, extract_replication),
    Bench("bench_vs_kafka", ("--only", "dump_small,verify,recovery", "--verify-mb", "64", "--recovery-mb", "128",
                             "--reps", "3", "--small-reps", "5"), ("--quick",), "--json", VS_KAFKA_TARGETS,
          extract_vs_kafka, lambda ctx: ctx.kafka or ctx.kafka_python, python_pass=True),
    Bench("bench_startup", (), ("--reps", "3"), "--json", STARTUP_TARGETS, extract_startup, _needs_corpus,
          python_pass=True),
    Bench("bench_native", ("--size-mb", "256"), ("--quick",), "--json", (), extract_native, _needs_native),
    Bench("bench_schemas", (), ("--quick",), "--json", SCHEMAS_TARGETS, extract_schemas, _needs_confluent_kafka),
)


# -- the machine ------------------------------------------------------------------------------------


def detect_context() -> Context:
    """What this machine can run: Java and Kafka's jars (as the interop suite caches them),
    pyspark, kafka-python. Never fetches anything."""
    import importlib.util

    ctx = Context()
    if importlib.util.find_spec("kafka") is None:
        ctx.kafka_python = "kafka-python is not installed (pip install -e '.[test]')"
    java_reason = None
    try:
        sys.path.insert(0, str(INTEROP))
        import kafka_broker
        import kafka_fetch

        try:
            kafka_broker.check_java_for(KAFKA_VERSION, kafka_broker.java_major())
        except kafka_broker.KafkaUnavailable as e:
            java_reason = str(e)
        if java_reason:
            ctx.kafka = java_reason
        elif not kafka_fetch.is_complete(KAFKA_VERSION):
            ctx.kafka = (f"the Kafka {KAFKA_VERSION} jars are not in {kafka_fetch.cache_dir(KAFKA_VERSION)} "
                         f"(tests/interop/fetch_kafka.sh {KAFKA_VERSION} fetches them)")
    except ImportError as e:  # the interop helpers are part of the repository; say so if they are gone
        ctx.kafka = java_reason = f"cannot import the interop helpers in {INTEROP}: {e}"
    finally:
        if sys.path and sys.path[0] == str(INTEROP):
            sys.path.pop(0)
    if importlib.util.find_spec("pyspark") is None:
        ctx.spark = "pyspark is not installed (pip install -e '.[spark]')"
    elif java_reason:
        ctx.spark = java_reason
    if os.environ.get("PLOG_NATIVE", "").strip() == "0":
        ctx.native = "PLOG_NATIVE=0 is set"
    else:
        ctx.native = _needs_native(ctx)
    return ctx


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1]) / (1 << 20), 1)
    except (OSError, StopIteration):
        pass
    commit = None
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cpus": os.cpu_count(), "memory_gib": mem,
            "python": platform.python_version(), "commit": commit}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# -- running --------------------------------------------------------------------------------------


def _tail(text: str, lines: int = 15, chars: int = 3000) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])[-chars:]


def _read_json(path: Path, stdout: str) -> dict | None:
    """The benchmark's JSON: the file it wrote, else the last JSON object on its stdout."""
    try:
        if path.stat().st_size:
            return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    start = stdout.rfind("\n{")
    for text in (stdout[start + 1:] if start >= 0 else None, stdout):
        if text and text.lstrip().startswith("{"):
            try:
                return json.loads(text)
            except ValueError:
                pass
    return None


def _one_line(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    msg = lines[-1] if lines else "no output"
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def failure_rows(bench: Bench, status: str, reason: str) -> list[Row]:
    """One row per target of ``bench`` (so no target goes missing), or one row if it has none."""
    if bench.targets:
        return [missing_row(bench.short, t.key, t.figure, status, reason, t) for t in bench.targets]
    return [missing_row(bench.short, f"{bench.short}.run", bench.short, status, reason)]


def rows_from_raw(bench: Bench, raw: dict, ctx: Context) -> list[Row]:
    """``bench.extract`` plus a row for each of its targets the figures did not cover
    (an extractor bug shows up as an error row, not as a missing target)."""
    try:
        rows = bench.extract(raw, ctx)
    except (KeyError, TypeError, ValueError, IndexError, StopIteration, ZeroDivisionError) as e:
        return failure_rows(bench, ERROR, f"cannot read its JSON: {type(e).__name__}: {e}")
    have = {r.key for r in rows}
    rows += [missing_row(bench.short, t.key, t.figure, ERROR, "its JSON has no figure for this target", t)
             for t in bench.targets if t.key not in have]
    return rows


def _run_child(bench: Bench, argv: list[str], env: dict | None = None) -> tuple[str, str, str | None]:
    """``(stdout, stderr, error)`` of one run of ``argv`` (error None when it exited 0)."""
    # A session of its own: on a timeout or Ctrl-C the benchmark and everything it started
    # (plog children, Kafka's JVMs, Spark) are stopped together.
    # Without PYTHONDONTWRITEBYTECODE (a developer's shell may set it): each plog child would
    # otherwise compile every module it imports, which a user's install never does.
    env = {k: v for k, v in (env or os.environ).items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=bench.timeout)
        error = None if proc.returncode == 0 else f"exited {proc.returncode}: {_one_line(stderr)}"
    except subprocess.TimeoutExpired:
        _stop(proc)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a grandchild outside the session still holds the pipes
            stdout, stderr = "", ""
        error = f"timed out after {bench.timeout:g} s"
    except BaseException:  # KeyboardInterrupt: stop the benchmark's whole session, then stop
        _stop(proc)
        proc.communicate()
        raise
    return stdout, stderr, error


def run_bench(bench: Bench, quick: bool, ctx: Context, workdir: Path) -> dict[str, Any]:
    """Run one benchmark as a child process; its entry in the report, ``status`` "ok", "not run"
    (a prerequisite is missing: not started) or "error" (crashed, timed out, or gave no JSON)."""
    entry: dict[str, Any] = {"name": bench.name, "argv": None, "seconds": 0.0, "load_average_at_start": load_average(),
                             "status": "ok", "raw": None, "rows": []}
    why = bench.needs(ctx)
    if why:
        entry.update(status=NOT_RUN, reason=why, rows=[asdict(r) for r in failure_rows(bench, NOT_RUN, why)])
        return entry
    json_file = workdir / f"{bench.name}.json"
    argv = bench.argv(quick, ctx, str(json_file))
    entry["argv"] = [os.path.relpath(a, ROOT) if a.startswith(str(ROOT) + os.sep) else a for a in argv]
    t0 = time.perf_counter()
    stdout, stderr, error = _run_child(bench, argv)
    entry["seconds"] = round(time.perf_counter() - t0, 1)
    raw = _read_json(json_file, stdout)
    entry["raw"] = raw
    rows: list[Row] = []
    if raw is not None:
        rows = rows_from_raw(bench, raw, ctx)
    if error:
        entry.update(status=ERROR, error=error, stderr_tail=_tail(stderr))
        reason = error if raw is not None else f"{error} (no JSON)"
        rows = rows or failure_rows(bench, ERROR, reason)
        if raw is not None:  # figures came out, but the benchmark failed afterwards (e.g. scan's parity)
            rows.append(missing_row(bench.short, f"{bench.short}.run", bench.short, ERROR, reason))
    elif raw is None:
        entry.update(status=ERROR, error="exited 0 without JSON output", stderr_tail=_tail(stderr))
        rows = failure_rows(bench, ERROR, entry["error"])
    elif any(r.met == ERROR for r in rows):
        entry.update(status=ERROR, error="; ".join(r.plog for r in rows if r.met == ERROR)[:1000])
    if bench.python_pass and ctx.native is None and entry["status"] == "ok":
        entry["python_pass"] = python_pass(bench, quick, ctx, workdir, rows)
    entry["rows"] = [asdict(r) for r in rows]
    return entry


def python_pass(bench: Bench, quick: bool, ctx: Context, workdir: Path, rows: list[Row]) -> dict[str, Any]:
    """Run ``bench`` again on the pure-Python path (``PLOG_NATIVE=0`` in its environment) and
    set each of ``rows``' ``python`` to the figure of the same key in that run. The first
    run's rows and verdicts stay as they are whatever this run does; its outcome is returned."""
    json_file = workdir / f"{bench.name}.python.json"
    env = dict(os.environ, PLOG_NATIVE="0")
    t0 = time.perf_counter()
    stdout, stderr, error = _run_child(bench, bench.argv(quick, ctx, str(json_file)), env)
    outcome: dict[str, Any] = {"seconds": round(time.perf_counter() - t0, 1), "status": "ok"}
    raw = _read_json(json_file, stdout)
    if error or raw is None:
        outcome.update(status=ERROR, error=error or "exited 0 without JSON output", stderr_tail=_tail(stderr))
        return outcome
    outcome["raw"] = raw
    figures = {r.key: r.plog for r in rows_from_raw(bench, raw, ctx) if r.met not in (ERROR, NOT_RUN)}
    for r in rows:
        value = figures.get(r.key)
        if r.python is None and isinstance(value, (int, float)) and isinstance(r.plog, (int, float)):
            r.python = value
    return outcome


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the child's session (it is the session leader), SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# -- rendering --------------------------------------------------------------------------------------


def fmt_value(v, unit: str = "") -> str:
    """A number as a table shows it: 3 significant digits, thousands separators, M for millions."""
    if v is None:
        return "—"
    if isinstance(v, bool) or isinstance(v, str):
        return str(v)
    if abs(v) >= 1_000_000 and unit.startswith("records"):
        text = f"{v / 1e6:.3g} M"
    elif abs(v) >= 1000:
        text = f"{round(v):,}"
    else:
        text = f"{v:.3g}"
    return f"{text} {unit}".strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_rows(rows: list[dict]) -> list[str]:
    out = ["| benchmark | figure | plog | pure Python | peer | ratio | target | met |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        plog = fmt_value(r["plog"], r["unit"])
        python = fmt_value(r.get("python"), r["unit"])
        if r["peer"]:
            peer = f"{r['peer']}: {fmt_value(r['peer_value'], r['unit'])}"
        else:
            peer = "—"
        ratio = f"{r['ratio']:.3g}×" if isinstance(r["ratio"], (int, float)) else "—"
        out.append("| " + " | ".join(_cell(c) for c in (r["benchmark"], r["figure"], plog, python, peer, ratio,
                                                         r["target"] or "—", r["met"])) + " |")
    return out


def _duration(s: float) -> str:
    m, s = divmod(round(s), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def _path_text(report: dict) -> str:
    why_not = (report.get("prerequisites") or {}).get("native")
    return f"pure Python too: {why_not}" if why_not else "the native core"


def render_markdown(report: dict, title: bool = True) -> str:
    """The table and its header lines (the README splice takes it without the title)."""
    m = report["machine"]
    lines = ["# plog benchmark report", ""] if title else []
    kind = "quick run (smoke sizes)" if report.get("quick") else "default sizes"
    if report.get("only"):
        kind += ", only " + ", ".join(report["only"])
    la, lb = report["load_average_at_start"], report["load_average_at_end"]
    lines.append(f"Measured {report['date']} on {m['cpus']} cores ({m['cpu']}, {m['memory_gib']} GiB RAM), "
                 f"Python {m['python']}, commit {m['commit']}: {kind}, {_duration(report['seconds'])} for the "
                 f"whole report; load average (1/5/15 min) {'/'.join(map(str, la))} at the start, "
                 f"{'/'.join(map(str, lb))} at the end (the machine is shared).")
    lines.append("")
    lines.append("Every figure comes from `python benchmarks/report.py`, which runs each `benchmarks/bench_*.py` "
                 "and writes `benchmarks/results/report.json` (raw figures) and this table. `plog` is plog's "
                 f"default path ({_path_text(report)}); `pure Python` is the same figure on the reference path "
                 "(`PLOG_NATIVE=0`), measured in the same run (— where a figure has no such run). `ratio` is "
                 "plog ÷ peer in the row's unit, measured in the same run: above 1 plog is faster for a rate, "
                 "below 1 for a time. `target` is the issue's, `met` says whether `plog` meets it in this run. "
                 "Where the 20-minute budget needs a smaller size than the issue's, the figure names the size "
                 "it ran.")
    lines.append("")
    lines += md_rows([r for b in report["benchmarks"] for r in b["rows"]])
    lines.append("")
    lines.append("Wall time per benchmark (1-minute load average at its start): " + ", ".join(
        f"{b['name'].removeprefix('bench_')} {_duration(b['seconds'])} ({b['load_average_at_start'][0]})"
        if b["status"] != NOT_RUN else f"{b['name'].removeprefix('bench_')} not run"
        for b in report["benchmarks"]) + ".")
    failed = [b for b in report["benchmarks"] if b["status"] == ERROR]
    if failed:
        lines.append("")
        lines += [f"- **{b['name']} failed**: {b.get('error', '')}" for b in failed]
    return "\n".join(lines) + "\n"


def splice_readme(text: str, table: str) -> str:
    """``text`` with the lines between the BEGIN and END marker lines replaced by ``table``.
    ReportError if the markers are missing, repeated or out of order."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, ln in enumerate(lines) if ln.strip() == BEGIN_MARKER]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == END_MARKER]
    for name, found in ((BEGIN_MARKER, begins), (END_MARKER, ends)):
        if len(found) != 1:
            raise ReportError(f"expected exactly one line {name!r}, found {len(found)}")
    b, e = begins[0], ends[0]
    if e < b:
        raise ReportError(f"{END_MARKER!r} comes before {BEGIN_MARKER!r}")
    body = table if table.endswith("\n") else table + "\n"
    return "".join(lines[: b + 1]) + body + "".join(lines[e:])


def _write(path: Path, text: str) -> None:
    """Write through a temporary file and a rename: a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # keep an existing file's mode (a README); a new one gets the umask's, not mkstemp's 0600
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def select(only: str | None) -> list[Bench]:
    if not only:
        return list(BENCHMARKS)
    by_name = {b.name: b for b in BENCHMARKS} | {b.short: b for b in BENCHMARKS}
    wanted = [n.strip().removesuffix(".py") for n in only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown or not wanted:
        raise ReportError(f"unknown benchmark(s) {', '.join(unknown) or '(none given)'}; "
                          f"known: {', '.join(b.short for b in BENCHMARKS)}")
    chosen = {by_name[n].name for n in wanted}
    return [b for b in BENCHMARKS if b.name in chosen]


def run_all(benches: list[Bench], quick: bool, ctx: Context, log=None) -> dict[str, Any]:
    """Run ``benches`` one after the other (progress lines on ``log``, default stderr)."""
    log = log or sys.stderr
    started = time.perf_counter()
    report: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(), "load_average_at_start": load_average(), "quick": quick,
        "only": [b.name for b in benches] if len(benches) < len(BENCHMARKS) else None,
        "prerequisites": asdict(ctx), "benchmarks": [],
    }
    with tempfile.TemporaryDirectory(prefix="plog-report-") as tmp:
        for i, bench in enumerate(benches, 1):
            print(f"[{i}/{len(benches)}] {bench.name} ...", file=log, flush=True)
            entry = run_bench(bench, quick, ctx, Path(tmp))
            report["benchmarks"].append(entry)
            status = {"ok": "", NOT_RUN: f" (not run: {entry.get('reason')})",
                      ERROR: f" (error: {entry.get('error')})"}[entry["status"]]
            print(f"[{i}/{len(benches)}] {bench.name} ... {entry['seconds']:.0f} s{status}", file=log, flush=True)
    report["load_average_at_end"] = load_average()
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="example: python benchmarks/report.py --quick --only formats,dump "
                                        "--json /tmp/r.json --md /tmp/r.md")
    ap.add_argument("--quick", action="store_true",
                    help="each benchmark's smoke sizes (minutes, not the full run's ~15)")
    ap.add_argument("--only", metavar="NAME,...", help="run only these (bench_dump or dump, comma-separated)")
    ap.add_argument("--json", default=str(RESULTS / "report.json"), help="JSON report (default: %(default)s)")
    ap.add_argument("--md", default=str(RESULTS / "report.md"), help="Markdown table (default: %(default)s)")
    ap.add_argument("--readme", metavar="FILE", help="replace the text between the BEGIN/END BENCHMARK REPORT "
                    "marker lines of FILE with the table")
    ap.add_argument("--from-json", metavar="FILE", help="run nothing: render --md/--readme from this JSON report")
    args = ap.parse_args(argv)
    try:
        readme = Path(args.readme) if args.readme else None
        if readme is not None:  # before twenty minutes of benchmarks, not after
            splice_readme(readme.read_text(), "")
        if args.from_json:
            report = json.loads(Path(args.from_json).read_text())
        else:
            benches = select(args.only)
            report = run_all(benches, args.quick, detect_context())
            _write(Path(args.json), json.dumps(report, indent=2) + "\n")
        md = render_markdown(report)
        _write(Path(args.md), md)
        if readme is not None:
            _write(readme, splice_readme(readme.read_text(), render_markdown(report, title=False)))
    except (ReportError, OSError, ValueError) as e:
        print(f"report.py: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ReportError) and str(e).startswith("unknown benchmark") else 1
    except KeyboardInterrupt:
        print("report.py: interrupted", file=sys.stderr)
        return 130
    failed = [b["name"] for b in report["benchmarks"] if b["status"] == ERROR]
    if failed:
        print(f"report.py: {len(failed)} benchmark(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

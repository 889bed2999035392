"""benchmarks/report.py: rows from every benchmark's recorded JSON, the Markdown table, the
README splice, failing and missing benchmarks, and that no bench file is left out.

The recorded JSON in tests/benchmark_fixtures/ is real output of each benchmark (smoke sizes),
so a benchmark changing its JSON shape breaks the extraction here, not in a 20-minute run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "benchmarks"
FIXTURES = Path(__file__).resolve().parent / "benchmark_fixtures"


def _load_report():
    spec = importlib.util.spec_from_file_location("plog_benchmark_report", BENCH_DIR / "report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


R = _load_report()
ALL_PRESENT = R.Context()  # Kafka, Spark and kafka-python all there
BY_NAME = {b.name: b for b in R.BENCHMARKS}


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def rows_of(name: str, raw: dict | None = None, ctx=ALL_PRESENT) -> dict[str, object]:
    rows = R.rows_from_raw(BY_NAME[name], fixture(name) if raw is None else raw, ctx)
    keys = [r.key for r in rows]
    assert len(keys) == len(set(keys)), keys
    return {r.key: r for r in rows}


# -- coverage ---------------------------------------------------------------------------------------


def test_every_bench_file_has_a_report_entry_and_a_fixture():
    files = {p.stem for p in BENCH_DIR.glob("bench_*.py")}
    assert files == set(BY_NAME), "a bench_*.py file without a BENCHMARKS entry in report.py (or the reverse)"
    assert {p.stem for p in FIXTURES.glob("bench_*.json")} == files
    for b in R.BENCHMARKS:
        assert b.path.is_file()
        assert b.json_flag in b.path.read_text(), f"{b.name} has no {b.json_flag} option"


def test_target_keys_are_unique_and_each_names_its_issue():
    keys = [t.key for b in R.BENCHMARKS for t in b.targets]
    assert len(keys) == len(set(keys))
    issues = {t.issue for b in R.BENCHMARKS for t in b.targets}
    assert issues == {2, 3, 4, 6, 7, 8, 9, 10, 23, 24, 25}  # issue 5 states figures, not targets
    for b in R.BENCHMARKS:
        for t in b.targets:
            assert t.key.startswith(b.short + ".") and f"(issue {t.issue})" in t.label()


def test_kafka_options_follow_what_the_machine_has():
    def argv(name, ctx, quick=False):
        return BY_NAME[name].argv(quick, ctx, "/tmp/out.json")

    assert argv("bench_maintenance", ALL_PRESENT)[-4:] == ["--kafka", R.KAFKA_VERSION, "--output", "/tmp/out.json"]
    assert "--no-kafka" not in argv("bench_dump", ALL_PRESENT)
    no_kafka = R.Context(kafka="no java")
    assert "--kafka" not in argv("bench_maintenance", no_kafka) and "--no-kafka" in argv("bench_dump", no_kafka)
    assert BY_NAME["bench_vs_kafka"].needs(no_kafka) == "no java"
    assert BY_NAME["bench_scan"].needs(R.Context(spark="no pyspark")) == "no pyspark"
    assert "--quick" in argv("bench_storage", ALL_PRESENT, quick=True)
    assert argv("bench_formats", ALL_PRESENT)[:2] == [sys.executable, str(BENCH_DIR / "bench_formats.py")]


# -- extraction -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_target_is_a_measured_row(name):
    rows = rows_of(name)
    bench = BY_NAME[name]
    for t in bench.targets:
        r = rows[t.key]
        assert r.met in (R.YES, R.NO), (t.key, r.plog)
        assert r.target == t.label() and r.issue == t.issue
        assert isinstance(r.plog, (int, float, str)) and r.plog is not None
    for r in rows.values():
        assert r.benchmark == bench.short
        assert r.met != R.ERROR, r
        if r.target is None:
            assert r.met in (R.NA, R.NOT_RUN)


# Each benchmark's own verdict in its JSON, for the rows that carry a target: the report must
# agree with it on the same figures.
OWN_VERDICTS = {
    "bench_formats": {"formats.encode": ("targets_met", "encode"), "formats.decode": ("targets_met", "decode"),
                      "formats.validate": ("targets_met", "validate")},
    "bench_storage": {"storage.append": ("targets_met", "append_no_fsync"), "storage.lookup": ("targets_met", "lookup"),
                      "storage.recovery": ("targets_met", "recovery")},
    "bench_verify": {"verify.engine": ("targets_met", "verify_single"),
                     "verify.cli_single": ("targets_met", "verify_single_cli"),
                     "verify.rss": ("targets_met", "peak_rss")},
    "bench_produce_consume": {"produce_consume.produce": ("targets_met", "produce"),
                              "produce_consume.consume": ("targets_met", "consume")},
    "bench_maintenance": {"maintenance.recovery": ("recovery", "met"), "maintenance.compaction": ("compaction", "met"),
                          "maintenance.vs_broker": ("broker_recovery", "met")},
    "bench_scan": {"scan.local2_vs_local1": ("targets", "spark_local_2_vs_local_1 >= 1.7"),
                   "scan.overhead": ("targets", "spark overhead on 1 GiB <= 20%"),
                   "scan.rate": ("targets", "spark_local_2 >= 5M records/s")},
    "bench_replication": {"replication.rf3_vs_rf1": ("targets_met", "produce_ratio"),
                          "replication.parity": ("targets_met", "catch_up_parity")},
    "bench_startup": {"startup.help": ("targets_met", "help"), "startup.dump_small": ("targets_met", "dump_small")},
}


@pytest.mark.parametrize("name", sorted(OWN_VERDICTS))
def test_verdicts_agree_with_the_benchmarks_own(name):
    raw, rows = fixture(name), rows_of(name)
    for key, path in OWN_VERDICTS[name].items():
        own = R._get(raw, *path)
        assert isinstance(own, bool), (key, path)
        assert rows[key].met == (R.YES if own else R.NO), key


def test_verdicts_follow_the_figures_not_the_fixture():
    raw = fixture("bench_formats")
    raw["figures"]["v2_decode_records_per_s"]["ratio"] = 2.99
    raw["figures"]["batch_crc_validation_gb_per_s"]["plog"] = 4.0
    rows = rows_of("bench_formats", raw)
    assert rows["formats.decode"].met == R.NO and rows["formats.decode"].ratio == 2.99
    assert rows["formats.validate"].met == R.YES  # "≥ 4 GB/s": the boundary counts


def test_formats_rows_carry_plog_peer_and_ratio():
    raw, rows = fixture("bench_formats"), rows_of("bench_formats")
    enc = raw["figures"]["v2_encode_records_per_s"]
    r = rows["formats.encode"]
    assert (r.plog, r.unit, r.peer, r.peer_value, r.ratio) == (enc["plog"], "records/s", "kafka-python",
                                                                enc["kafka_python"], enc["ratio"])
    assert r.target == "≥ 2× kafka-python (issue 2)"


def test_storage_rows():
    raw, rows = fixture("bench_storage"), rows_of("bench_storage")
    f = raw["figures"]
    assert rows["storage.append"].plog == f["append"]["none_no_fsync"]["records_per_s"]
    assert rows["storage.lookup"].plog == f["lookup"]["p99_ms"] and rows["storage.lookup"].unit == "ms"
    assert rows["storage.recovery"].plog == f["recovery"]["gb_per_s"]
    assert rows["storage.append_lz4_fsync"].met == R.NA and rows["storage.append_lz4_fsync"].peer is None


def test_dump_rows_with_and_without_kafka():
    raw, rows = fixture("bench_dump"), rows_of("bench_dump")
    assert rows["dump.rate"].peer_value == raw["kafka_dump_log_segments"]["records_per_s"]
    assert rows["dump.rate"].ratio == raw["plog_speed_vs_kafka"]
    vs = rows["dump.vs_kafka"]
    k_seconds = raw["kafka_dump_log_segments"]["seconds"]
    assert vs.unit == "s" and vs.ratio == pytest.approx(raw["plog"]["seconds"] / k_seconds, abs=1e-3)
    assert vs.met == (R.YES if vs.ratio < 1 else R.NO)
    # Both paths side by side, and issue 23's targets: 5x Kafka's tool, with and without payloads.
    assert rows["dump.rate"].python == raw["plog_python"]["records_per_s"]
    x5 = rows["dump.print_x5"]
    assert x5.ratio == raw["plog_speed_vs_kafka"] and x5.met == (R.YES if x5.ratio >= 5 else R.NO)
    deep = rows["dump.deep_x5"]
    assert deep.plog == raw["deep"]["plog"]["records_per_s"] and deep.python == raw["deep"]["plog_python"]["records_per_s"]
    assert deep.ratio == raw["deep_speed_vs_kafka"] and deep.peer_value == raw["deep"]["kafka_dump_log_segments"][
        "records_per_s"]
    # Without the jars bench_dump measures plog alone: the Kafka goals are "not run", with the reason.
    del raw["kafka_dump_log_segments"], raw["plog_speed_vs_kafka"]
    del raw["deep"]["kafka_dump_log_segments"], raw["deep_speed_vs_kafka"]
    rows = rows_of("bench_dump", raw, R.Context(kafka="no jars here"))
    for key in ("dump.vs_kafka", "dump.print_x5", "dump.deep_x5"):
        assert rows[key].met == R.NOT_RUN and rows[key].plog == "not run: no jars here"
    assert rows["dump.vs_kafka"].target is not None  # the target stays in the table
    assert rows["dump.rate"].met in (R.YES, R.NO) and rows["dump.rate"].peer is None


def test_verify_rows_find_the_jobs_figure():
    raw, rows = fixture("bench_verify"), rows_of("bench_verify")
    f = raw["figures"]
    assert rows["verify.engine"].plog == f["engine_single_gb_per_s"]["median"]
    assert rows["verify.engine"].peer_value == f["ceiling_crc32c_gb_per_s"]["median"]
    assert rows["verify.engine"].ratio == f["engine_vs_ceiling"]
    assert rows["verify.rss"].plog == max(f["cli_single_peak_rss_mb"], f["cli_jobs_peak_rss_mb"])
    assert "--jobs" in rows["verify.cli_jobs"].figure
    ceil = rows["verify.vs_ceiling"]
    assert ceil.ratio == f["engine_vs_ceiling"] and ceil.met == (R.YES if ceil.ratio >= 0.9 else R.NO)
    small = rows["verify.small_batches"]
    assert small.plog == f["small_batches"]["engine_single_gb_per_s"]["median"]
    assert small.met == (R.YES if small.plog >= 3 else R.NO) and "1,0" in small.figure  # ~1 KiB batches
    del f["small_batches"]
    assert rows_of("bench_verify", raw)["verify.small_batches"].met == R.NOT_RUN


def test_maintenance_broker_recovery_present_missing_failed():
    raw = fixture("bench_maintenance")
    r = rows_of("bench_maintenance", raw)["maintenance.vs_broker"]
    br = raw["broker_recovery"]
    # The goal is `plog recover --all` against the broker, on both paths.
    assert r.ratio == br["plog_all_speedup"] and r.unit == "GB/s" and "--all" in r.figure
    assert r.plog == pytest.approx(br["bytes"] / br["plog_all_seconds"] / 1e9, abs=1e-3)
    assert r.python == pytest.approx(br["bytes"] / br["plog_all_python_seconds"] / 1e9, abs=1e-3)
    assert r.met == (R.YES if br["plog_all_speedup"] >= 3 else R.NO)
    rc = rows_of("bench_maintenance", raw)["maintenance.recovery"]
    assert rc.python == raw["recovery"]["jobs_1_python"]["gb_per_s"]
    del raw["broker_recovery"]
    r = rows_of("bench_maintenance", raw, R.Context(kafka="no java"))["maintenance.vs_broker"]
    assert (r.met, r.plog) == (R.NOT_RUN, "not run: no java")
    raw["broker_recovery"] = {"error": "no 'Loaded N logs in X ms' line in the broker's log"}
    r = rows_of("bench_maintenance", raw)["maintenance.vs_broker"]
    assert r.met == R.ERROR and "Loaded N logs" in r.plog


def test_scan_rows_and_a_parity_failure():
    raw = fixture("bench_scan")
    rows = rows_of("bench_scan", raw)
    assert rows["scan.rate"].plog == raw["spark_local_2"]["records_per_s"]
    assert rows["scan.overhead"].ratio == pytest.approx(1 + raw["overhead_1gib"]["spark_overhead_vs_median"])
    assert rows["scan.parity"].plog == "identical" and rows["scan.parity"].met == R.YES
    raw["parity"]["spark_local_1"] = False
    rows = rows_of("bench_scan", raw)
    assert rows["scan.parity"].met == R.NO and "spark_local_1" in rows["scan.parity"].plog


def test_replication_rows():
    raw, rows = fixture("bench_replication"), rows_of("bench_replication")
    p = raw["figures"]["produce"]
    r = rows["replication.rf3_vs_rf1"]
    assert (r.plog, r.peer_value, r.ratio) == (p["rf3"]["records_per_s"], p["rf1"]["records_per_s"], p["ratio"])
    assert rows["replication.catch_up"].plog == raw["figures"]["catch_up"]["mb_per_s"]
    # The disk's rate while busy, over cp's: the ceiling of the catch-up's ratio, no target.
    cu = raw["figures"]["catch_up"]
    d = rows["replication.catch_up_disk"]
    assert (d.plog, d.peer_value, d.met) == (cu["disk"]["mb_per_s_busy"], cu["cp_mb_per_s"], R.NA)
    assert d.ratio == round(cu["disk"]["mb_per_s_busy"] / cu["cp_mb_per_s"], 3)
    assert d.python == raw["plog_python"]["catch_up"]["disk"]["mb_per_s_busy"] and "busy 82%" in d.note


def test_replication_without_disk_counters_has_no_disk_row():
    raw = fixture("bench_replication")
    for side in ("figures", "plog", "plog_python"):
        raw[side]["catch_up"]["disk"] = None  # tmpfs, overlay: no block device to read
    assert "replication.catch_up_disk" not in rows_of("bench_replication", raw)


def _load_bench(name: str):
    sys.path.insert(0, str(BENCH_DIR))  # (a bench script imports its neighbour workloads.py)
    try:
        spec = importlib.util.spec_from_file_location(f"plog_{name}", BENCH_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH_DIR))
    return module


def test_disk_counters_read_sectors_and_io_ticks(tmp_path, monkeypatch):
    """bench_replication's disk figures: /sys/dev/block/MAJ:MIN/stat read as the kernel's
    Documentation/block/stat.rst lays it out, and the activity between two readings."""
    import io

    B = _load_bench("bench_replication")
    st = os.stat(tmp_path)
    wanted = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat"
    line = "  10 0 800 5 20 0 409600 30 0 1500 35 0 0 0 0 0 0\n"  # 409,600 sectors, 1,500 ms busy

    def fake_open(path, *a, **k):
        if path != wanted:
            raise FileNotFoundError(path)
        return io.StringIO(line)

    monkeypatch.setattr(B, "open", fake_open, raising=False)
    assert B.disk_counters(tmp_path) == (409_600 * 512, 1_500)
    line = "1 2 3\n"  # a file too short to hold the fields: no figures rather than wrong ones
    assert B.disk_counters(tmp_path) is None
    monkeypatch.setattr(B, "open", lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError()), raising=False)
    assert B.disk_counters(tmp_path) is None  # tmpfs, overlay, not Linux

    a = B.disk_activity((100_000_000, 1_000), (400_000_000, 1_150), 0.2)
    assert a == {"written_mb": 300.0, "busy_seconds": 0.15, "busy_share": 0.75, "mb_per_s_busy": 2000.0}
    assert B.disk_activity(None, (1, 1), 0.2) is None
    idle = B.disk_activity((5, 7), (5, 7), 0.1)
    assert (idle["written_mb"], idle["busy_share"], idle["mb_per_s_busy"]) == (0.0, 0.0, None)


def test_produce_consume_rows():
    raw, rows = fixture("bench_produce_consume"), rows_of("bench_produce_consume")
    c = raw["figures"]["consume"]
    r = rows["produce_consume.consume"]
    assert (r.plog, r.peer_value, r.ratio) == (c["plog_records_per_s"], c["kafka_python_records_per_s"], c["ratio"])


def test_produce_vs_kcat_has_a_row_of_its_repetitions():
    raw = fixture("bench_produce_consume")
    r = rows_of("bench_produce_consume", raw)["produce_consume.produce_vs_kcat_per_rep"]
    assert (r.plog, r.met, r.target) == ("1.95×, 2.31×, 1.62×", "n/a", None)
    # An older JSON without them: no such row, the median's row as before.
    del raw["figures"]["produce"]["ratio_vs_kcat_produce_per_rep"]
    rows = rows_of("bench_produce_consume", raw)
    assert "produce_consume.produce_vs_kcat_per_rep" not in rows
    assert rows["produce_consume.produce_vs_kcat"].ratio == 1.95


def test_vs_kafka_rows_skipped_failed_and_left_out_figures():
    raw = fixture("bench_vs_kafka")
    rows = rows_of("bench_vs_kafka", raw)
    small = raw["figures"]["dump_small"]
    assert rows["vs_kafka.dump_small"].ratio == small["plog_over_kafka_seconds"]
    assert rows["vs_kafka.verify"].ratio == raw["figures"]["verify"]["plog_jobs_1_over_kafka_verify_index_only_seconds"]
    assert rows["vs_kafka.recovery"].ratio == raw["figures"]["recovery"]["plog_open_over_kafka_loaded_logs"]
    # What the report's default run gives: dump_large left out (bench_dump measures it), a
    # figure that failed, one that was skipped.
    del raw["figures"]["dump_large"]
    raw["figures"]["verify"] = {"failed": "RuntimeError: java ... exited 1"}
    raw["figures"]["recovery"] = {"skipped": "Kafka 4.3.1 unavailable: no java"}
    rows = rows_of("bench_vs_kafka", raw)
    assert rows["vs_kafka.dump_large"].plog == "not run: bench_dump measures it (1 GiB, same tools)"
    assert rows["vs_kafka.dump_large"].met == R.NOT_RUN
    assert rows["vs_kafka.verify"].met == R.ERROR and "exited 1" in rows["vs_kafka.verify"].plog
    assert rows["vs_kafka.recovery"].met == R.NOT_RUN and "no java" in rows["vs_kafka.recovery"].plog
    assert rows["vs_kafka.dump_small"].met in (R.YES, R.NO)


def test_startup_rows_with_and_without_the_kafka_peer():
    raw = fixture("bench_startup")
    rows = rows_of("bench_startup", raw)
    assert rows["startup.help"].plog == raw["figures"]["help"]["wall_s"] and rows["startup.help"].unit == "s"
    assert rows["startup.help"].peer_value == raw["figures"]["python_bare"]["wall_s"]
    assert rows["startup.dump_small"].peer_value == raw["peer"]["kafka_dump_log"]["wall_s"]
    raw["peer"]["kafka_dump_log"] = None
    r = rows_of("bench_startup", raw)["startup.dump_small"]
    assert r.peer is None and r.ratio is None and r.met in (R.YES, R.NO)


def test_an_unreadable_json_gives_error_rows_for_every_target():
    rows = R.rows_from_raw(BY_NAME["bench_storage"], {"benchmark": "storage"}, ALL_PRESENT)
    assert {r.key for r in rows} == {t.key for t in R.STORAGE_TARGETS}
    assert all(r.met == R.ERROR and "cannot read its JSON: KeyError" in r.plog for r in rows)


# -- rendering --------------------------------------------------------------------------------------


def sample_report(rows: list, status: str = "ok", **extra) -> dict:
    return {"date": "2026-11-21 14:00 UTC", "quick": False, "only": None, "seconds": 1000.4,
            "machine": {"platform": "Linux", "cpu": "Some CPU", "cpus": 2, "memory_gib": 23.4, "python": "3.11.7",
                        "commit": "abc1234"},
            "load_average_at_start": [1.5, 1.2, 1.0], "load_average_at_end": [3.25, 2.0, 1.5],
            "benchmarks": [{"name": "bench_x", "status": status, "seconds": 75.2, "load_average_at_start": [2.5, 2, 1],
                            "rows": [R.asdict(r) for r in rows], **extra}]}


def test_markdown_table():
    rows = R.rows_from_raw(BY_NAME["bench_formats"], fixture("bench_formats"), ALL_PRESENT)
    rows.append(R.missing_row("scan", "scan.rate", "scan a|b", R.NOT_RUN, "pyspark is not installed",
                              R.SCAN_TARGETS[2]))
    md = R.render_markdown(sample_report(rows))
    lines = md.splitlines()
    assert lines[0] == "# plog benchmark report"
    header = next(ln for ln in lines if ln.startswith("Measured "))
    for part in ("2026-11-21 14:00 UTC", "2 cores", "Some CPU", "16 min 40 s", "1.5/1.2/1.0", "3.25/2.0/1.5",
                 "commit abc1234"):
        assert part in header
    assert "`python benchmarks/report.py`" in md
    table = [ln for ln in lines if ln.startswith("|")]
    assert table[0] == "| benchmark | figure | plog | pure Python | peer | ratio | target | met |"
    assert len(table) == 2 + len(rows)
    enc = fixture("bench_formats")["figures"]["v2_encode_records_per_s"]
    assert table[2] == (f"| formats | v2 batch encode (20,000 records, 135 per batch) | {enc['plog']:,} records/s | "
                        f"— | kafka-python: {enc['kafka_python']:,} records/s | {enc['ratio']:.3g}× | "
                        f"≥ 2× kafka-python (issue 2) | {'yes' if enc['ratio'] >= 2 else 'no'} |")
    assert table[-1] == ("| scan | scan a\\|b | not run: pyspark is not installed | — | — | — | ≥ 5 M records/s "
                         "(issue 8) | not run |")
    assert all(ln.count(" | ") == 7 for ln in table[:1] + table[2:])  # a pipe inside a cell is escaped
    assert "`plog` is plog's default path (the native core)" in md
    assert "Wall time per benchmark (1-minute load average at its start): x 1 min 15 s (2.5)." in md


def test_markdown_lists_failed_benchmarks_and_the_splice_has_no_title():
    rows = R.failure_rows(BY_NAME["bench_dump"], R.ERROR, "exited 1: boom")
    report = sample_report(rows, status=R.ERROR, error="exited 1: boom")
    md = R.render_markdown(report, title=False)
    assert not md.startswith("#") and "- **bench_x failed**: exited 1: boom" in md
    assert md.count("| error |") == len(R.DUMP_TARGETS)


@pytest.mark.parametrize("value, unit, text", [
    (3_791_220, "records/s", "3.79 M records/s"), (801_407, "records/s", "801,407 records/s"),
    (0.5066, "ms", "0.507 ms"), (4.44, "GB/s", "4.44 GB/s"), (1234.6, "MB", "1,235 MB"), (None, "", "—"),
    ("identical", "", "identical"),
])
def test_value_format(value, unit, text):
    assert R.fmt_value(value, unit) == text


@pytest.mark.parametrize("n, text", [(1_073_736_000, "1 GiB"), (4 << 30, "4 GiB"), (268_434_000, "256 MiB"),
                                     (67_102_092, "64 MiB"), (1_040_556_475, "0.969 GiB")])
def test_size_names(n, text):
    assert R._gib(n) == text


# -- README splice ----------------------------------------------------------------------------------


README = f"""# plog

## Benchmarks

Intro stays.

{R.BEGIN_MARKER}
old table
| a | b |
{R.END_MARKER}

After stays.
"""


def test_splice_replaces_only_between_the_markers():
    out = R.splice_readme(README, "| new | table |\n")
    assert out == README.replace("old table\n| a | b |\n", "| new | table |\n")
    assert R.splice_readme(out, "| new | table |") == out  # idempotent, newline added


@pytest.mark.parametrize("text, message", [
    ("# plog\nno markers\n", "found 0"),
    (README.replace(R.END_MARKER, "x"), R.END_MARKER),
    (README + R.BEGIN_MARKER + "\n", "found 2"),
    (f"{R.END_MARKER}\n{R.BEGIN_MARKER}\n", "comes before"),
])
def test_splice_refuses_missing_or_broken_markers(text, message):
    with pytest.raises(R.ReportError, match=message.replace("*", r"\*")):
        R.splice_readme(text, "table")


def test_main_splices_from_a_json_report_and_refuses_a_readme_without_markers(tmp_path, capsys):
    rows = R.rows_from_raw(BY_NAME["bench_replication"], fixture("bench_replication"), ALL_PRESENT)
    src = tmp_path / "report.json"
    src.write_text(json.dumps(sample_report(rows)))
    readme, md = tmp_path / "README.md", tmp_path / "report.md"
    readme.write_text(README)
    readme.chmod(0o640)
    assert R.main(["--from-json", str(src), "--md", str(md), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "old table" not in text and "Intro stays." in text and "After stays." in text
    assert "| replication | produce RF 3" in text and "# plog benchmark report" not in text
    assert md.read_text().startswith("# plog benchmark report")
    assert readme.stat().st_mode & 0o777 == 0o640  # the README keeps its mode
    mask = os.umask(0)
    os.umask(mask)
    assert md.stat().st_mode & 0o777 == 0o666 & ~mask  # a new file gets the umask's, not 0600
    bare = tmp_path / "BARE.md"
    bare.write_text("# nothing here\n")
    assert R.main(["--from-json", str(src), "--md", str(md), "--readme", str(bare)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("report.py: error: ") and R.BEGIN_MARKER in err and len(err.splitlines()) == 1
    assert bare.read_text() == "# nothing here\n"


def test_unknown_benchmark_name_is_a_usage_error(capsys):
    assert R.main(["--only", "formats,nope", "--json", "/nonexistent/x.json"]) == 2
    assert "unknown benchmark(s) nope" in capsys.readouterr().err
    assert [b.name for b in R.select("dump,bench_formats.py")] == ["bench_formats", "bench_dump"]


# -- running children -------------------------------------------------------------------------------


def fake_bench(tmp_path, name: str, code: str, **kw):
    script = tmp_path / f"{name}.py"
    script.write_text("import json, os, sys, time\nout = sys.argv[sys.argv.index('--json') + 1]\n" + code)
    target = R.Target(f"{name}.fig", "a figure", "≥ 1", 99)

    def extract(raw, ctx):
        return [R.row(name, target.key, "a figure", raw["value"], "x", target=target, met=raw["value"] >= 1)]

    return R.Bench(name, (), (), "--json", (target,), extract, script=script, **kw)


def test_a_crashing_benchmark_gives_error_rows_and_the_report_completes(tmp_path, monkeypatch, capsys):
    ok = fake_bench(tmp_path, "bench_ok", "json.dump({'value': 2}, open(out, 'w'))\n")
    crash = fake_bench(tmp_path, "bench_crash",
                       "print('working', file=sys.stderr)\nraise RuntimeError('disk on fire')\n")
    late = fake_bench(tmp_path, "bench_late", "json.dump({'value': 0}, open(out, 'w'))\nsys.exit('parity failed')\n")
    missing = fake_bench(tmp_path, "bench_missing", "", needs=lambda ctx: "no pyspark here")
    monkeypatch.setattr(R, "BENCHMARKS", (ok, crash, late, missing))
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    assert R.main(["--json", str(out_json), "--md", str(out_md)]) == 1
    err = capsys.readouterr().err
    assert "[1/4] bench_ok ..." in err and "[2/4] bench_crash ... " in err and "disk on fire" in err
    assert "report.py: 2 benchmark(s) failed: bench_crash, bench_late" in err
    report = json.loads(out_json.read_text())
    entries = {b["name"]: b for b in report["benchmarks"]}
    assert entries["bench_ok"]["status"] == "ok" and entries["bench_ok"]["raw"] == {"value": 2}
    assert entries["bench_ok"]["rows"][0]["met"] == R.YES
    assert entries["bench_ok"]["argv"][-2] == "--json" and entries["bench_ok"]["seconds"] >= 0
    crashed = entries["bench_crash"]
    assert crashed["status"] == R.ERROR and "RuntimeError: disk on fire" in crashed["error"]
    assert "working" in crashed["stderr_tail"]
    assert [r["met"] for r in crashed["rows"]] == [R.ERROR]
    assert crashed["rows"][0]["target"] == "≥ 1 (issue 99)"  # the target stays in the table
    # Figures written before a failure are kept, with a row saying it failed.
    assert [r["met"] for r in entries["bench_late"]["rows"]] == [R.NO, R.ERROR]
    assert entries["bench_missing"]["status"] == R.NOT_RUN
    assert entries["bench_missing"]["rows"][0]["plog"] == "not run: no pyspark here"
    assert report["only"] is None and len(report["load_average_at_end"]) == 3
    md = out_md.read_text()
    assert "| not run: no pyspark here |" in md and "- **bench_crash failed**" in md


def test_a_hung_benchmark_is_stopped_at_its_timeout(tmp_path):
    hung = fake_bench(tmp_path, "bench_hung", "time.sleep(60)\n", timeout=0.5)
    entry = R.run_bench(hung, False, ALL_PRESENT, tmp_path)
    assert entry["status"] == R.ERROR and entry["error"] == "timed out after 0.5 s"
    assert entry["rows"][0]["met"] == R.ERROR and entry["rows"][0]["plog"] == "error: timed out after 0.5 s (no JSON)"


def test_the_python_pass_fills_the_pure_python_column(tmp_path):
    # The benchmark reports which path it ran on; the report runs it twice when asked to.
    bench = fake_bench(tmp_path, "bench_paths",
                       "json.dump({'value': 1 if os.environ.get('PLOG_NATIVE') == '0' else 3}, open(out, 'w'))\n",
                       python_pass=True)
    entry = R.run_bench(bench, False, ALL_PRESENT, tmp_path)
    row = entry["rows"][0]
    assert (row["plog"], row["python"], row["met"]) == (3, 1, R.YES)  # the verdict judges the default path
    assert entry["python_pass"]["status"] == "ok"
    md = R.render_markdown(sample_report([R.Row(**row)]))
    assert "| 3 x | 1 x |" in md
    # Without a native build both runs would be the same path: no second run.
    entry = R.run_bench(bench, False, R.Context(native="not built"), tmp_path)
    assert entry["rows"][0]["python"] is None and "python_pass" not in entry
    # A failing second run leaves the first run's figures alone and says why.
    broken = fake_bench(tmp_path, "bench_broken",
                        "if os.environ.get('PLOG_NATIVE') == '0': sys.exit('no')\n"
                        "json.dump({'value': 3}, open(out, 'w'))\n", python_pass=True)
    entry = R.run_bench(broken, False, ALL_PRESENT, tmp_path)
    assert entry["status"] == "ok" and entry["rows"][0]["python"] is None
    assert entry["python_pass"]["status"] == R.ERROR and "no" in entry["python_pass"]["error"]


def test_stdout_json_is_read_when_no_file_was_written(tmp_path):
    bench = fake_bench(tmp_path, "bench_stdout", "print('noise'); print(json.dumps({'value': 1}, indent=2))\n")
    entry = R.run_bench(bench, False, ALL_PRESENT, tmp_path)
    assert entry["status"] == "ok" and entry["raw"] == {"value": 1}

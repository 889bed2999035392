"""``plog scan --spark`` in this process (joining the suite's session) against the
single-process engine scan: identical stats, search results, verify findings; SQL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_run import plog
from conftest import corpus_top_dirs

pytestmark = pytest.mark.spark




@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    from spark_logs import build

    return build(tmp_path_factory.mktemp("spark-cli") / "logs")


def single_process(capsys, *args) -> tuple[int, str]:
    """The reference: the engine scan in one process, one unit per segment."""
    code, out, _err = plog(capsys, "scan", *args, "--jobs", "1", "--unit-size", "1TiB", "--quiet")
    return code, out


def on_spark(capsys, spark, *args) -> tuple[int, str, str]:
    assert spark is not None  # the suite's session is active: plog joins it
    return plog(capsys, "scan", "--spark", *args, "--quiet")


def test_stats_on_spark_equal_the_single_process_scan(capsys, spark):
    tops = [str(t) for t in corpus_top_dirs()]
    assert len(tops) >= 9
    want_code, want = single_process(capsys, *tops, "--format", "json")
    code, out, err = on_spark(capsys, spark, *tops, "--format", "json", "--unit-size", "1MiB")
    assert (code, err) == (want_code, ""), err
    assert json.loads(out) == json.loads(want)
    assert sum(p["records"] for p in json.loads(out)) > 900_000


def test_generated_stats_search_and_ranges(capsys, spark, generated):
    for extra in (("--topic", "orders", "--offset-range", "100:300"), ("--time-range", "@1700001800000:@1700003000000")):
        _c, want = single_process(capsys, str(generated), "--format", "json", *extra)
        code, out, _e = on_spark(capsys, spark, str(generated), "--format", "json", "--unit-size", "2KiB", *extra)
        assert code == 0 and json.loads(out) == json.loads(want), extra
    for extra in (("--key", "key-6", "--header", "trace=t1"), ("--key-hex", "fffe33", "--offset-range", "0:400")):
        _c, want = single_process(capsys, str(generated), *extra)
        code, out, _e = on_spark(capsys, spark, str(generated), "--unit-size", "2KiB", *extra)
        assert code == 0 and out == want and out.count("\n") > 0, extra


def test_search_everything_equals_every_record(capsys, spark, generated):
    _c, want = single_process(capsys, str(generated), "--value-contains", "")
    code, out, _e = on_spark(capsys, spark, str(generated), "--value-contains", "")
    assert code == 0 and out == want
    # a value-contains of nothing matches every non-null value
    from plog.engine.inspect.scan import scan_records

    assert out.count("\n") == sum(1 for r in scan_records([str(generated)]) if r.value is not None)


def test_search_to_parquet(capsys, spark, generated, tmp_path):
    import pyarrow.parquet as pq

    target = tmp_path / "errors.parquet"
    code, _out, _err = on_spark(capsys, spark, str(generated), "--value-contains", "ERROR", "--output", str(target))
    assert code == 0
    table = pq.read_table(target)
    _c, want = single_process(capsys, str(generated), "--value-contains", "ERROR")
    lines = [json.loads(line) for line in want.splitlines()]
    assert table.num_rows == len(lines) > 0
    got = sorted(zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(),
                     table.column("offset").to_pylist()))
    assert got == sorted((x["topic"], x["partition"], x["offset"]) for x in lines)
    assert table.schema.field("value").type == "binary"
    # refusing to overwrite, then replacing with --overwrite
    code, _out, err = plog(capsys, "scan", "--spark", str(generated), "--value-contains", "ERROR", "--output",
                           str(target))
    assert code == 1 and "exists" in err
    code, _out, _err = on_spark(capsys, spark, str(generated), "--key", "key-1", "--output", str(target),
                                "--overwrite")
    assert code == 0 and 0 < pq.read_table(target).num_rows < table.num_rows


def test_verify_on_spark_equals_plog_verify(capsys, spark, generated, tmp_path):
    damaged = Path(shutil.copytree(generated, tmp_path / "damaged"))
    seg = sorted((damaged / "orders-1").glob("*.log"))[1]
    data = bytearray(seg.read_bytes())
    data[200] ^= 0x40
    seg.write_bytes(bytes(data))
    for path, want_code in ((generated, 0), (damaged, 3)):
        vcode, vout, _ = plog(capsys, "verify", str(path), "--quiet")
        code, out, _ = on_spark(capsys, spark, str(path), "--mode", "verify")
        assert (code, out) == (vcode, vout) and code == want_code
        vcode, vout, _ = plog(capsys, "verify", str(path), "--quiet", "--format", "jsonl")
        code, out, _ = on_spark(capsys, spark, str(path), "--mode", "verify", "--format", "jsonl")
        assert (code, out) == (vcode, vout)


def test_damage_is_reported_the_same_on_spark(capsys, spark, generated, tmp_path):
    damaged = Path(shutil.copytree(generated, tmp_path / "damaged"))
    seg = sorted((damaged / "audit-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[300] ^= 0x01
    seg.write_bytes(bytes(data))
    _c, want = single_process(capsys, str(damaged), "--format", "json")
    code, out, _e = on_spark(capsys, spark, str(damaged), "--format", "json", "--unit-size", "2KiB")
    assert code == 3 and json.loads(out) == json.loads(want)
    audit = [p for p in json.loads(out) if p["topic"] == "audit"][0]
    assert audit["corrupt_batches"] == 1 and audit["problems"][0]["segment"] == str(seg)
    # search: the same records, exit 3 and the same one-line problem on stderr
    want_code, want_out, want_err = plog(capsys, "scan", str(damaged), "--value-contains", "ok", "--jobs", "1")
    code, out, err = plog(capsys, "scan", "--spark", str(damaged), "--value-contains", "ok", "--unit-size", "2KiB")
    assert (code, out) == (want_code, want_out) and code == 3 and out.count("\n") > 100
    problem = [line for line in want_err.splitlines() if line.startswith(f"plog scan: {seg}:")]
    assert problem and all(line in err.splitlines() for line in problem)


def test_sql(capsys, spark, generated):
    code, out, err = on_spark(capsys, spark, str(generated), "--sql",
                              "SELECT topic, partition, count(*) AS n, count(DISTINCT key) AS keys "
                              "FROM records GROUP BY topic, partition ORDER BY topic, partition", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["topic"], r["partition"], r["n"]) for r in rows] == [("audit", 0, 450), ("orders", 0, 450),
                                                                    ("orders", 1, 450), ("orders", 2, 450)]
    code, out, _ = on_spark(capsys, spark, str(generated), "--sql",
                            "SELECT codec, count(*) AS batches FROM batches GROUP BY codec ORDER BY codec",
                            "--format", "csv")
    assert code == 0 and out.splitlines() == ["codec,batches", "gzip,72", "lz4,72", "none,72", "snappy,72", "zstd,72"]
    # binary cells in JSON are plog's binary-safe form
    code, out, _ = on_spark(capsys, spark, str(generated), "--sql",
                            "SELECT key FROM records WHERE key = X'FFFE33' LIMIT 1", "--format", "json")
    assert code == 0 and json.loads(out) == [{"key": {"base64": "//4z"}}]


def test_sql_errors_are_one_line_usage_errors(capsys, spark, generated):
    code, out, err = on_spark(capsys, spark, str(generated), "--sql", "SELEC nonsense")
    assert code == 2 and out == "" and err.startswith("plog: error: SQL: ") and err.count("\n") == 1
    code, out, err = on_spark(capsys, spark, str(generated), "--sql", "SELECT nope FROM records")
    assert code == 2 and err.startswith("plog: error: SQL: ") and err.count("\n") == 1


def test_a_failing_spark_job_is_one_line(capsys, spark, generated):
    code, out, err = on_spark(capsys, spark, str(generated), "--sql",
                              "SELECT assert_true(offset < 0, 'no offset is negative') FROM records")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("plog: error: Spark job failed: ") and "no offset is negative" in err


def test_bad_paths_fail_before_spark_work(capsys, spark, tmp_path):
    code, _out, err = plog(capsys, "scan", "--spark", str(tmp_path / "missing"))
    assert code == 1 and err.count("\n") == 1 and "missing" in err


def test_stats_tasks_cover_about_a_gib_each():
    """The stats job's Spark partitions: about a GiB of log each, at least one per core, at
    most one per unit (a 128 MiB unit is less work than Spark's cost of a task)."""
    from plog.engine.inspect.scan_plan import ScanPlan, ScanUnit
    from plog.spark_tasks.jobs import stats_slices

    def plan(units: int, unit_bytes: int) -> ScanPlan:
        return ScanPlan([ScanUnit(i, (), unit_bytes) for i in range(units)], [], [], units * unit_bytes, 0)

    assert stats_slices(plan(8, 128 << 20), 2) == 2  # 1 GiB on 2 cores: one task per core
    assert stats_slices(plan(64, 128 << 20), 2) == 8  # 8 GiB: a GiB a task
    assert stats_slices(plan(64, 128 << 20), 100) == 64  # more cores than units: a unit a task
    assert stats_slices(plan(3, 1 << 20), 16) == 3
    assert stats_slices(plan(1, 0), 4) == 1


def test_stats_groups_balance_bytes_and_keep_every_unit_once():
    """Units of unequal sizes are dealt by bytes (Spark's parallelize would cut by count),
    each group in plan order, every unit in exactly one group."""
    from plog.engine.inspect.scan_plan import ScanPlan, ScanUnit
    from plog.spark_tasks.jobs import stats_groups

    def plan(*sizes: int) -> ScanPlan:
        return ScanPlan([ScanUnit(i, (), n) for i, n in enumerate(sizes)], [], [], sum(sizes), 0)

    def shape(groups):
        return [[u.index for u in g] for g in groups]

    # By count, [0, 1] and [2, 3] would be 200 against 20 bytes.
    assert shape(stats_groups(plan(100, 100, 10, 10), 2)) == [[0, 2], [1, 3]]
    assert shape(stats_groups(plan(10, 10, 10, 100), 2)) == [[0, 1, 2], [3]]
    assert shape(stats_groups(plan(5, 5, 5, 5, 5, 5, 5, 5), 2)) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert shape(stats_groups(plan(7), 4)) == [[0]]  # never an empty group
    sizes = [(i * 37) % 101 + 1 for i in range(64)]
    groups = stats_groups(plan(*sizes), 8)
    assert sorted(u.index for g in groups for u in g) == list(range(64))
    loads = [sum(u.size for u in g) for g in groups]
    assert max(loads) - min(loads) <= max(sizes)

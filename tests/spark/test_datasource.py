"""The ``plog`` data source against the engine's own scan: same rows, same order, every
record's content (checked exactly, or through per-segment CRC sums on the big corpus
directories), filters, batch level, schema."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from conftest import corpus_top_dirs
from plog.engine.inspect import scan as S

pytestmark = pytest.mark.spark




@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    from spark_logs import build

    return build(tmp_path_factory.mktemp("spark-ds") / "logs")


def frame(spark, path, **options):
    reader = spark.read.format("plog")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(str(path))


def rows_as_records(df) -> list[S.ScanRecord]:
    from plog.spark_tasks.jobs import _row_record

    return [_row_record(r) for r in df.collect()]


def test_schema_is_exact(spark, generated):
    from plog.spark_tasks.schema import spark_schema

    assert frame(spark, generated).schema == spark_schema("record")
    assert frame(spark, generated, level="batch").schema == spark_schema("batch")
    names = [f.name for f in spark_schema("record").fields]
    assert names == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
                     "base_offset", "producer_id", "producer_epoch", "base_sequence", "codec", "is_transactional",
                     "is_control", "segment", "position"]
    types = {f.name: f.dataType.simpleString() for f in spark_schema("record").fields}
    assert types["key"] == types["value"] == "binary"
    assert types["headers"] == "array<struct<key:string,value:binary>>"
    assert types["timestamp"] == "timestamp"


def test_generated_rows_equal_the_engine_scan_exactly(spark, generated):
    plan = S.plan_scan([str(generated)], unit_bytes=2048)
    assert any(len({(s.segment) for s in u.slices}) > 1 for u in plan.units) or len(plan.units) > 8
    split = [s for u in plan.units for s in u.slices if s.start > 0]
    assert split, "the generated segments must be split at index entries"
    got = rows_as_records(frame(spark, generated, unit_bytes=2048))
    want = list(S.scan_records([str(generated)]))
    assert len(want) == 4 * 450
    assert got == want
    codecs = {r.codec for r in got}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert any(r.key is None for r in got) and any(r.value is None for r in got)
    assert any(v is None for r in got for _k, v in r.headers)


def _fingerprints(records) -> dict:
    out: dict = {}
    for r in records:
        k = (r.topic, r.partition, r.segment)
        n, lo, hi, kc, vc, hc, ts = out.get(k, (0, None, None, 0, 0, 0, 0))
        hsum = sum(zlib.crc32(v or b"") + len(hk) for hk, v in r.headers)
        out[k] = (n + 1, r.offset if lo is None else min(lo, r.offset), r.offset if hi is None else max(hi, r.offset),
                  kc + zlib.crc32(r.key or b""), vc + zlib.crc32(r.value or b""), hc + hsum,
                  ts + (r.timestamp if r.timestamp >= 0 else 0))
    return out


def test_every_corpus_directory_reads_like_the_engine(spark):
    """All corpus directories in one query (one Spark job): per segment, the count, offset
    range and CRC sums of keys, values, headers and timestamps of every record."""
    from pyspark.sql import functions as F

    every = corpus_top_dirs()
    assert len(every) >= 9
    # The 700k-record directory is read at batch level below (its records are compared with
    # the engine through `plog scan --spark` stats in test_scan_spark.py): time.
    big = [t for t in every if t.name.startswith("dipendrasaini")]
    tops = [t for t in every if t not in big]
    df = spark.read.format("plog").option("paths", json.dumps([str(t) for t in tops])) \
        .option("unit_bytes", str(1 << 20)).load()
    header_sum = F.aggregate(F.coalesce("headers", F.array()), F.lit(0).cast("bigint"),
                             lambda acc, h: acc + F.crc32(F.coalesce(h["value"], F.lit(b""))) + F.length(h["key"]))
    agg = (df.groupBy("topic", "partition", "segment")
           .agg(F.count("*"), F.min("offset"), F.max("offset"),
                F.sum(F.crc32(F.coalesce("key", F.lit(b"")))), F.sum(F.crc32(F.coalesce("value", F.lit(b"")))),
                F.sum(header_sum),
                F.sum(F.coalesce(F.unix_millis("timestamp"), F.lit(0)))))
    got = {(r[0], r[1], r[2]): tuple(r[3:]) for r in agg.collect()}
    records = list(S.scan_records([str(t) for t in tops]))
    assert got == _fingerprints(records)
    assert sum(v[0] for v in got.values()) == len(records) > 200_000
    batches = spark.read.format("plog").option("level", "batch").load(str(big[0]))
    got = sorted(tuple(r) for r in batches.groupBy("topic", "partition", "segment")
                 .agg(F.sum("records"), F.min("base_offset"), F.max("last_offset"), F.count("*")).collect())
    want: dict = {}
    for unit in S.plan_scan([str(big[0])]).units:
        for b in S.unit_batches(unit):
            n, lo, hi, c = want.get((b.topic, b.partition, b.segment), (0, None, None, 0))
            want[(b.topic, b.partition, b.segment)] = (n + b.records, b.base_offset if lo is None else min(lo, b.base_offset),
                                                       max(hi or 0, b.last_offset), c + 1)
    assert got == sorted((*k, *v) for k, v in want.items())
    assert sum(g[3] for g in got) == 700_588


def test_batch_level_rows_equal_unit_batches(spark, generated):
    from plog.engine.inspect.scan import plan_scan, unit_batches

    got = [tuple(r) for r in frame(spark, generated, level="batch", unit_bytes=2048).collect()]
    want = [b for u in plan_scan([str(generated)]).units for b in unit_batches(u)]
    assert len(got) == len(want) == 4 * 90
    import datetime as dt

    def norm(row):
        row = list(row)
        for i in (5, 6):
            if isinstance(row[i], dt.datetime):
                row[i] = int(row[i].replace(tzinfo=dt.timezone.utc).timestamp() * 1000) \
                    if row[i].tzinfo is None else int(row[i].timestamp() * 1000)
        return tuple(row)

    assert [norm(r) for r in got] == [tuple(b) for b in want]


@pytest.mark.parametrize("options", [
    {"topics": "audit"},
    {"offset_lo": 100, "offset_hi": 250},
    {"time_lo": 1_700_000_000_000 + 30 * 60_000, "time_hi": 1_700_000_000_000 + 50 * 60_000},
    {"key": "key-7"},
    {"value_contains": "ERROR"},
    {"headers": json.dumps([["trace", "t3"]])},
    {"headers": json.dumps([["nullh", None]]), "topics": "orders"},
    {"key": json.dumps({"base64": "//4z"})},  # b"\xff\xfe3": binary keys in plog's JSON form
])
def test_options_filter_like_the_engine(spark, generated, options):
    flt = S.ScanFilter.from_options({k: str(v) for k, v in options.items()})
    want = list(S.scan_records([str(generated)], flt))
    assert want, "each filter must match something"
    got = rows_as_records(frame(spark, generated, unit_bytes=2048, **options))
    assert got == want


def test_offset_range_prunes_segments(generated):
    flt = S.ScanFilter(offset_lo=400, offset_hi=420)
    plan = S.plan_scan([str(generated)], flt)
    assert plan.pruned_segments > 0


def test_sql_over_the_source(spark, generated):
    frame(spark, generated).createOrReplaceTempView("plog_records_test")
    rows = spark.sql("SELECT topic, partition, count(*) AS n, max(offset) AS last FROM plog_records_test "
                     "GROUP BY topic, partition ORDER BY topic, partition").collect()
    assert [tuple(r) for r in rows] == [("audit", 0, 450, 449), ("orders", 0, 450, 449), ("orders", 1, 450, 449),
                                        ("orders", 2, 450, 449)]


def test_bad_options_are_one_line_errors(spark, generated):
    with pytest.raises(Exception) as e:
        frame(spark, generated, level="nonsense").schema
    assert "expected record or batch" in str(e.value)
    with pytest.raises(Exception) as e:
        frame(spark, generated / "missing").count()
    assert "missing" in str(e.value)
    with pytest.raises(Exception) as e:
        frame(spark, "hdfs://namenode/kafka").count()
    assert "only local paths" in str(e.value)

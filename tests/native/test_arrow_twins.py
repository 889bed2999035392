"""The Spark data source's native Arrow columns against the reference
(spark_tasks/arrow_batches.py): for every corpus partition, generated segments of every
shape, hypothesis-generated batches and hostile (mutated, re-sealed) segments, the
native RecordBatches hold exactly the reference's rows (schema included), or both paths
fail alike. Batches are compared as one table: the two paths cut batches at different
places (the native one at whole Kafka batches)."""

from __future__ import annotations

import os
import random
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import mutate, mutate_region, native_module, record_files  # noqa: E402,F401

pa = pytest.importorskip("pyarrow", reason="pyarrow is part of the test install (the spark extra)")

from conftest import corpus_log_dirs  # noqa: E402
from crc32c import crc32c  # noqa: E402
from plog.engine.inspect.scan import ScanFilter, plan_scan  # noqa: E402
from plog.formats import native  # noqa: E402
from plog.formats.control import ControlRecordType, encode_control_key, encode_control_value  # noqa: E402
from plog.formats.legacy import encode_legacy_batch  # noqa: E402
from plog.formats.record_batch import RECORDS_OFFSET, RecordBatch, encode_batch  # noqa: E402
from plog.spark_tasks import arrow_batches as AB  # noqa: E402
from plog.spark_tasks.schema import arrow_schema  # noqa: E402

SEED = int(os.environ.get("PLOG_FUZZ_SEED", random.randrange(1 << 30)))
#: Mutated segments per run (a longer campaign: PLOG_ARROW_MUTATIONS=100000).
MUTATIONS = int(os.environ.get("PLOG_ARROW_MUTATIONS", "300"))
SCHEMA = arrow_schema("record")
TS = 1_700_000_000_000

FILTERS = [
    None,
    ScanFilter(key=b"key-3"),
    ScanFilter(key=b"\xff\xfe"),
    ScanFilter(value_contains=b"ERROR", offset_lo=10, offset_hi=300),
    ScanFilter(value_contains=b""),
    ScanFilter(headers=(("trace", b"t1"),)),
    ScanFilter(headers=(("nullh", None), ("bin", b"\x00\xff"))),
    ScanFilter(headers=(("\udcff", b"x"),)),
    ScanFilter(time_lo=TS + 100_000, time_hi=TS + 2_000_000),
    ScanFilter(offset_lo=1 << 70),
]


def outcome(batches) -> tuple:
    """``("ok", table)`` with every batch checked against the schema, or the error's type
    and message (the reference's own failures: pyarrow refusing a value)."""
    try:
        got = list(batches)
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return type(e).__name__, str(e)
    for b in got:
        assert b.schema.equals(SCHEMA, check_metadata=True)
        assert b.num_rows > 0
    return "ok", pa.Table.from_batches(got, schema=SCHEMA).combine_chunks()


def same(module, unit, flt=None) -> tuple:
    ref = outcome(AB.reference_arrow_batches(unit, flt))
    nat = outcome(AB.native_arrow_batches(unit, flt, module))
    if ref[0] == "ok" and nat[0] == "ok":
        assert nat[1].equals(ref[1]), (unit, flt)
    else:
        assert nat == ref, (unit, flt)
    return ref


def same_dir(module, path, filters=(None,), **plan_options) -> int:
    rows = 0
    for flt in filters:
        for unit in plan_scan([str(path)], flt, **plan_options).units:
            got = same(module, unit, flt)
            rows += got[1].num_rows if got[0] == "ok" else 0
    return rows


def write_segment(root: Path, data: bytes, topic: str = "t", partition: int = 0) -> Path:
    folder = root / f"{topic}-{partition}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "00000000000000000000.log").write_bytes(data)
    return root


# -- the corpus and the Spark suite's generated logs --------------------------------------


@pytest.mark.parametrize("log_dir", corpus_log_dirs(), ids=lambda p: p.parent.name + "/" + p.name)
def test_corpus_partitions_agree(native_module, log_dir):
    filters = FILTERS if sum(f.stat().st_size for f in log_dir.rglob("*.log")) < (4 << 20) else (None,)
    same_dir(native_module, log_dir, filters)
    same_dir(native_module, log_dir, unit_bytes=64 << 10)  # split segments, packed units


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    from spark_logs import build

    return build(tmp_path_factory.mktemp("arrow-twins") / "logs")


def test_generated_logs_agree_under_every_filter(native_module, generated):
    assert same_dir(native_module, generated, FILTERS, unit_bytes=4096) > 0
    assert same_dir(native_module, generated) == 4 * 90 * 5


# -- generated segments of every shape --------------------------------------------------


def _records(n: int, seed: int) -> list:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = rnd.choice([None, b"", b"k%d" % i, b"\xff\xfe\x00" + bytes([i % 256])])
        value = rnd.choice([None, b"", b"v" * rnd.randrange(300), rnd.randbytes(20)])
        headers = rnd.choice([(), (("h", b"x"),), (("é", None), ("bin", b"\x00\xff"), ("", b""))])
        out.append((i, TS + rnd.randrange(-5000, 5000), key, value, headers))
    return out


def _shapes() -> bytes:
    """Every codec, CreateTime and LogAppendTime, transactional and control batches, the
    timestamps the schema makes null (-1, beyond microseconds), and v0/v1 entries between."""
    parts, offset = [], 0

    def add(records, **kwargs):
        nonlocal offset
        parts.append(encode_batch([(offset + r[0], *r[1:]) for r in records], base_offset=offset, **kwargs))
        offset += len(records)

    for codec in range(5):
        add(_records(20, codec), compression_codec=codec, producer_id=7, producer_epoch=1, base_sequence=offset)
    add(_records(5, 9), timestamp_type=1, log_append_time=TS + 7)
    add(_records(4, 10), producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True, compression_codec=4)
    marker = (0, TS, encode_control_key(ControlRecordType.COMMIT),
              encode_control_value(ControlRecordType.COMMIT, {"coordinatorEpoch": 3}))
    add([marker], producer_id=8, producer_epoch=0, is_transactional=True, is_control=True)
    add([(0, -1, b"a", b"b"), (1, (1 << 62), b"c", None), (2, 0, None, b"d")])
    for magic, codec in ((0, 0), (1, 0), (1, 1), (0, 2)):
        parts.append(encode_legacy_batch([(offset + i, TS + i, b"lk%d" % i, b"lv" * i) for i in range(3)], magic=magic,
                                         compression_codec=codec))
        offset += 3
    add(_records(30, 11), compression_codec=3)
    return b"".join(parts)


def test_every_shape_agrees(native_module, tmp_path):
    root = write_segment(tmp_path, _shapes())
    for flt in FILTERS + [ScanFilter(time_lo=0)]:
        for unit in plan_scan([str(root)], flt).units:
            assert same(native_module, unit, flt)[0] == "ok"
    unit, = plan_scan([str(root)]).units
    table = same(native_module, unit)[1]
    assert table.num_rows == 100 + 5 + 4 + 1 + 3 + 12 + 30
    assert table.column("timestamp").null_count >= 2  # -1 and 2**62 ms
    assert set(table.column("codec").to_pylist()) == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert table.column("is_control").to_pylist().count(True) == 1


def test_unusual_rows_go_to_the_reference(native_module, tmp_path):
    """A header key that is not UTF-8 (pyarrow refuses it on the reference path) and an
    offset beyond int64: the native builder hands the run back, both paths fail alike."""
    bad_key = b"\xff".decode("utf-8", "surrogateescape")
    data = (encode_batch([(0, TS, b"k", b"v")]) + encode_batch([(1, TS, b"k", b"v", ((bad_key, b"x"),))], base_offset=1)
            + encode_batch([(2, TS, b"k", b"v")], base_offset=2))
    unit, = plan_scan([str(write_segment(tmp_path / "a", data))]).units
    assert same(native_module, unit)[0] != "ok"
    assert same(native_module, unit, ScanFilter(offset_hi=1))[0] == "ok"  # the row filtered out: fine
    base = (1 << 63) - 5
    big = encode_batch([(base, TS, b"k", b"v"), (base + 9, TS, b"k", b"v")], base_offset=base)
    unit, = plan_scan([str(write_segment(tmp_path / "b", big))]).units
    assert same(native_module, unit)[0] != "ok"
    rows, why = native_module.arrow_record_columns(
        [(RecordBatch(memoryview(big)).records_payload(), 2, base, TS, None, 0, -1, -1, -1, "none",
          False, False, 0, 0)], [("t", 0, "s")], (None,) * 6 + ([],), True)
    assert rows is None and why == "an offset beyond int64"


def test_batches_stay_bounded(native_module, tmp_path, monkeypatch):
    parts = [encode_batch([(i * 50 + j, TS, b"k", b"x" * 1000) for j in range(50)], base_offset=i * 50)
             for i in range(40)]
    unit, = plan_scan([str(write_segment(tmp_path, b"".join(parts)))]).units
    monkeypatch.setattr(AB, "MAX_ROWS", 120)
    got = list(AB.native_arrow_batches(unit, None, native_module))
    assert [b.num_rows for b in got] == [150] * 13 + [50]  # 120 rows and one Kafka batch more at most
    monkeypatch.setattr(AB, "MAX_ROWS", 1 << 20)
    monkeypatch.setattr(AB, "MAX_BYTES", 200_000)
    assert max(b.num_rows for b in AB.native_arrow_batches(unit, None, native_module)) <= 250
    same(native_module, unit)


def test_where_filters_and_inactive_native_use_the_reference(native_module, generated, monkeypatch):
    unit = plan_scan([str(generated)]).units[0]
    flt = ScanFilter(where="value.level = 'ERROR'")
    same(native_module, unit, flt)
    monkeypatch.setattr(AB, "native_arrow_batches", None)  # never called on these paths
    list(AB.unit_arrow_batches(unit, flt, "batch"))
    monkeypatch.setattr(native, "active", lambda: False)  # an executor without the module
    got = outcome(AB.unit_arrow_batches(unit, None))
    assert got[0] == "ok", got
    assert got[1].equals(outcome(AB.reference_arrow_batches(unit, None))[1])


# -- hypothesis-generated batches -------------------------------------------------------

_bytes = st.one_of(st.none(), st.binary(max_size=40))
_header = st.tuples(st.text(max_size=6), _bytes)
_ts = st.one_of(st.just(-1), st.integers(0, 1 << 42), st.just(1 << 62))
_record = st.tuples(_ts, _bytes, _bytes, st.lists(_header, max_size=3))
_batch = st.tuples(st.lists(_record, min_size=1, max_size=8), st.sampled_from(range(5)), st.integers(0, 7),
                   st.integers(0, (1 << 62)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_batch, min_size=1, max_size=5), key=st.one_of(st.none(), st.binary(max_size=2)))
def test_generated_batches_agree(native_module, tmp_path_factory, batches, key):
    parts, offset = [], 0
    for records, codec, flags, base in batches:
        rows = [(offset + i, ts, k, v, tuple(h)) for i, (ts, k, v, h) in enumerate(records)]
        kwargs = {"timestamp_type": 1, "log_append_time": records[0][0]} if flags & 1 else {}
        parts.append(encode_batch(rows, base_offset=offset, compression_codec=codec, is_transactional=bool(flags & 2),
                                  producer_id=base % 1000 if flags & 4 else -1, **kwargs))
        offset += len(rows) + base % 3
    root = write_segment(tmp_path_factory.mktemp("gen"), b"".join(parts))
    unit, = plan_scan([str(root)]).units
    assert same(native_module, unit)[0] == "ok"
    same(native_module, unit, ScanFilter(key=key, time_lo=0))


# -- hostile segments ---------------------------------------------------------------------


def _reseal(batch: bytes, region: bytes, count: int) -> bytes:
    """``batch`` (uncompressed v2) with a new records region and count, length and CRC
    fixed: the mutation reaches the records decoder instead of failing the CRC check."""
    header = bytearray(batch[:RECORDS_OFFSET])
    struct.pack_into(">i", header, 8, RECORDS_OFFSET - 12 + len(region))
    struct.pack_into(">i", header, RECORDS_OFFSET - 4, count)
    body = bytes(header[21:]) + region
    struct.pack_into(">I", header, 17, crc32c(body))
    return bytes(header) + region


def _v2_batches(files: list[Path]) -> list[bytes]:
    out = []
    for path in files:
        data = path.read_bytes()
        pos, first = 0, len(out)
        while pos + RECORDS_OFFSET <= len(data) and len(out) - first < 200:
            size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
            if size < RECORDS_OFFSET or pos + size > len(data):
                break
            if data[pos + 16] == 2 and struct.unpack_from(">h", data, pos + 21)[0] & 7 == 0:
                out.append(data[pos:pos + size])
            pos += size
    return out


def test_hostile_segments_agree(native_module, corpus, tmp_path):
    print(f"PLOG_FUZZ_SEED={SEED}")
    rnd = random.Random(SEED)
    files = [p for p in record_files(corpus) if p.suffix == ".log" and p.stat().st_size < (8 << 20)]
    batches = _v2_batches(files)
    assert len(batches) > 100
    with_rows = 0
    for i in range(MUTATIONS):
        chosen = [rnd.choice(batches) for _ in range(rnd.randint(1, 4))]
        parts = []
        for b in chosen:
            if rnd.random() < 0.7:
                count = struct.unpack_from(">i", b, RECORDS_OFFSET - 4)[0]
                region, count = mutate_region(rnd, b[RECORDS_OFFSET:], count)
                b = _reseal(b, region, count)
            parts.append(b)
        data = b"".join(parts)
        if rnd.random() < 0.2:
            data = mutate(rnd, data, [0])
        root = write_segment(tmp_path / str(i), data)
        for unit in plan_scan([str(root)]).units:
            got = same(native_module, unit)
            with_rows += got[0] == "ok" and got[1].num_rows > 0
    # Many mutations leave no record to read (the batch does not decode: skipped), not all.
    assert MUTATIONS // 10 < with_rows < MUTATIONS


def test_the_builder_takes_any_region_and_checks_its_arguments(native_module):
    """Random regions and counts straight into the builder: every region that the reference
    decodes gives its rows, every other is skipped; malformed arguments are Python errors."""
    from plog.formats.default_record import reference_decode_records
    from plog.formats.errors import FormatError

    rnd = random.Random(SEED)
    good = bytes(encode_batch([(i, TS, b"k%d" % i, b"v", (("h", b"x"),)) for i in range(5)]))[RECORDS_OFFSET:]
    for _ in range(500):
        region, count = mutate_region(rnd, good, 5) if rnd.random() < 0.8 else (rnd.randbytes(40), rnd.randrange(-2, 9))
        try:
            want = len(reference_decode_records(region, count, 0, TS)) if count > 0 else 0
        except FormatError:
            want = 0
        item = (region, count, 0, TS, None, 0, -1, -1, -1, "none", False, False, 0, 0)
        rows, columns = native_module.arrow_record_columns([item], [("t", 0, "s")], (None,) * 6 + ([],), True)
        if rows is not None:
            assert rows == want
    item = (good, 5, 0, TS, None, 0, -1, -1, -1, "none", False, False, 0, 0)
    with pytest.raises(ValueError):
        native_module.arrow_record_columns([item[:-1]], [("t", 0, "s")], (None,) * 6 + ([],), True)
    with pytest.raises(TypeError):
        native_module.arrow_record_columns([(bytearray(good), *item[1:])], [("t", 0, "s")], (None,) * 6 + ([],), True)
    with pytest.raises(ValueError):
        native_module.arrow_record_columns([item], [("t", 0, "s")], (None,) * 5, True)
    rows, why = native_module.arrow_record_columns([(*item[:-1], 3)], [("t", 0, "s")], (None,) * 6 + ([],), True)
    assert rows is None and why == "a batch without its slice"

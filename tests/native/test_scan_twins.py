"""``plog scan`` statistics and searches on both paths: the native accumulator
(``plog._native.ScanStats``, native/src/scan_stats.rs, with engine/inspect/scan_stats.py's
``_slice_stats_native``) and the reference loop (``_slice_stats_reference``) give equal
:class:`PartitionStats`, every field (HyperLogLog registers, size histogram, producer list
and sketch, problems) included; the native search (``plog._native.ScanSearch``,
native/src/scan_search.rs, with engine/inspect/scan.py's ``_unit_records_native``) and the
reference (``_unit_records_reference``) give the same records and problems, in order, for
key, value, header, offset and time predicates (and ``--where`` on top of them):

* every corpus log directory, in whole-segment units and in small ones (segments cut at
  index entries), with and without offset/time ranges;
* generated segments with every codec, headers, null keys and values, binary keys,
  LogAppendTime, control and transactional batches, producer ids past the listed cap,
  v0/v1 messages (plain and compressed wrappers), empty batches;
* damage: CRC failures, torn tails, impossible headers, records regions that do not frame
  (uncompressed and compressed, CRC recomputed), chunk boundaries inside batches;
* hostile: random mutations of real and generated segments;
* the CLI: ``plog scan --format json`` and ``plog scan --key ...`` (JSON lines) print the
  same bytes on both paths.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from native_twins import mutate, mutate_region, native_module  # noqa: E402,F401

from cli_run import plog  # noqa: E402
from conftest import CORPUS, corpus_log_dirs  # noqa: E402
from plog.engine.inspect import scan, scan_filter, scan_plan, scan_stats  # noqa: E402
from plog.engine.inspect.scan import ScanFilter, merge_stats, plan_scan  # noqa: E402
from plog.engine.inspect.scan_stats import PartitionStats  # noqa: E402
from plog.formats.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD  # noqa: E402
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker  # noqa: E402
from crc32c import crc32c  # noqa: E402
from plog.formats.legacy import encode_legacy_batch  # noqa: E402
from plog.formats.record_batch import LOG_APPEND_TIME, encode_batch, encode_empty_batch  # noqa: E402

TS = 1_700_000_000_000
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

FILTERS = [
    None,
    ScanFilter(offset_lo=3, offset_hi=40),
    ScanFilter(time_lo=TS - 2, time_hi=TS + 3),
    ScanFilter(offset_lo=10, time_hi=TS + 1),
    ScanFilter(offset_hi=1 << 70),  # beyond int64: the reference compares Python ints
]


def _slice_both(s, flt) -> tuple[PartitionStats, PartitionStats]:
    native_st, reference_st = (PartitionStats(s.topic, s.partition, s.log_dir) for _ in range(2))
    scan_stats._slice_stats_native(s, native_st, flt)
    scan_stats._slice_stats_reference(s, reference_st, flt)
    return native_st, reference_st


SEARCHES = [
    ScanFilter(key=b"k"),
    ScanFilter(key=b""),
    ScanFilter(key=bytes(range(256)), offset_lo=2),
    ScanFilter(value_contains=b"vvv"),
    ScanFilter(value_contains=b""),
    ScanFilter(value_contains=b'"'),
    ScanFilter(headers=(("h", b"x"),)),
    ScanFilter(headers=(("null", None),), time_lo=TS - 3),
    ScanFilter(headers=(("h", b"x"), ("null", None))),
    ScanFilter(headers=(("\udcff", b"x"),)),  # an escaped byte: the key b"\xff"
    ScanFilter(headers=(("\ud800", b"x"),)),  # no bytes decode to it: the reference decides
    ScanFilter(time_lo=TS, time_hi=TS + 10),
    ScanFilter(offset_lo=5, offset_hi=30),
    ScanFilter(time_lo=TS + 9),  # LogAppendTime batches below it are skipped unread
    ScanFilter(key=b"k", offset_hi=1 << 64),  # beyond int64
    ScanFilter(),  # every record
]


#: The searches run on every corpus log directory (the reference decodes every record of
#: each: a few, with few and with many matches).
CORPUS_SEARCHES = [SEARCHES[0], SEARCHES[7], SEARCHES[12], ScanFilter(value_contains=b"e", time_lo=TS)]


def assert_search_twins(paths, flt, unit_bytes=None) -> list:
    """Every unit of the plan gives the same records and problems, in order, on both paths."""
    plan = plan_scan([str(p) for p in paths], flt, unit_bytes=unit_bytes)
    found = []
    for unit in plan.units:
        native_problems, reference_problems = [], []
        got = list(scan._unit_records_native(unit, flt, native_problems))
        assert got == list(scan._unit_records_reference(unit, flt, reference_problems)), flt
        assert native_problems == reference_problems
        found += got
    return found


def assert_twins(paths, flt=None, unit_bytes=None) -> list[PartitionStats]:
    """Every slice of the plan gives equal stats on both paths (and so does the merge)."""
    plan = plan_scan([str(p) for p in paths], flt, unit_bytes=unit_bytes)
    native_parts, reference_parts = [], []
    for unit in plan.units:
        for s in unit.slices:
            n, r = _slice_both(s, flt)
            assert n == r, (s, flt)
            assert n.to_dict() == r.to_dict()
            native_parts.append({(s.topic, s.partition, s.log_dir): n})
            reference_parts.append({(s.topic, s.partition, s.log_dir): r})
    merged = merge_stats(native_parts, plan.partitions)
    assert merged == merge_stats(reference_parts, plan.partitions)
    units = [scan_stats._unit_stats_native(unit, flt) for unit in plan.units]
    assert units == [scan_stats._unit_stats_reference(unit, flt) for unit in plan.units]
    assert merge_stats(units, plan.partitions) == merged
    return merged


# -- the corpus -------------------------------------------------------------------------------


LOG_DIRS = corpus_log_dirs() if CORPUS.is_dir() else []


@pytest.mark.parametrize("log_dir", LOG_DIRS, ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_log_dir(native_module, log_dir):
    merged = assert_twins([log_dir])
    assert_twins([log_dir], unit_bytes=64 << 10)  # segments cut at index entries
    for flt in FILTERS[1:]:
        assert_twins([log_dir], flt)
    assert any(st.records for st in merged) or not merged
    for flt in CORPUS_SEARCHES:
        assert_search_twins([log_dir], flt)


def test_the_corpus_is_there(corpus):
    assert len(LOG_DIRS) > 5


# -- generated segments ------------------------------------------------------------------------


KEYS = [b"k", b"", b"\x00\x01\xff\xfe", bytes(range(256)), "h\u00e9llo".encode(), None]


def _v2_batches(codec: int, offset: int = 0) -> tuple[list[bytes], int]:
    out = []
    for n in range(24):
        records = [(offset + i, (TS + n - i) if n % 6 else -1, KEYS[(n + i) % len(KEYS)],
                    None if i % 4 == 3 else b"v" * (n * 37 % 300), (("h", b"x"), ("null", None))[: n % 3])
                   for i in range(1 + n % 5)]
        transactional = n % 5 == 1
        log_append = n % 7 == 3
        out.append(encode_batch(
            records, base_offset=offset, compression_codec=codec,
            producer_id=n if n % 2 else -1, producer_epoch=1 if n % 2 else -1, base_sequence=n if n % 2 else -1,
            is_transactional=transactional, timestamp_type=LOG_APPEND_TIME if log_append else 0,
            log_append_time=TS + 9 if log_append else None))
        offset += len(records)
        if transactional:
            marker = (offset, TS, encode_control_key(ControlRecordType.COMMIT), encode_end_txn_marker(3), ())
            out.append(encode_batch([marker], base_offset=offset, producer_id=n, producer_epoch=1,
                                    is_transactional=True, is_control=True))
            offset += 1
        if n % 11 == 4:
            out.append(encode_empty_batch(base_offset=offset, last_offset=offset, producer_id=3,
                                          producer_epoch=0, base_sequence=0))
            offset += 1
    return out, offset


def _write_partition(root: Path, name: str, data: bytes) -> Path:
    folder = root / f"{name}-0"
    folder.mkdir(parents=True)
    (folder / "00000000000000000000.log").write_bytes(data)
    return folder


@pytest.mark.parametrize("codec", CODECS)
def test_generated_v2(native_module, tmp_path, codec):
    batches, _ = _v2_batches(codec)
    folder = _write_partition(tmp_path, "gen", b"".join(batches))
    for flt in FILTERS:
        assert_twins([folder], flt)
    [st] = assert_twins([folder])
    assert st.records > 50 and st.control_batches > 0 and st.transactional_batches > 0 and st.null_keys > 0
    assert not st.problems and not st.corrupt_batches
    hits = [len(assert_search_twins([folder], flt)) for flt in SEARCHES]
    assert all(hits[i] for i in (0, 1, 2, 3, 4, 6, 7, 8, 11, 12)) and hits[-1] == st.records


def test_the_native_loop_takes_the_batches(native_module, tmp_path):
    """Uncompressed data and control batches are counted natively, compressed ones come
    back to be decompressed (code 1), legacy entries go to the reference (code 2)."""
    plain = b"".join(_v2_batches(NONE)[0])
    acc = native_module.ScanStats()
    declined, valid_end, trailing, fault = acc.scan(plain, 0, len(plain), 0)
    assert (declined, valid_end, trailing, fault) == ([], len(plain), None, None)
    compressed = b"".join(_v2_batches(LZ4)[0])
    declined, *_ = native_module.ScanStats().scan(compressed, 0, len(compressed), 0)
    assert declined and {code for *_, code in declined} == {1}
    legacy = encode_legacy_batch([(0, TS, b"k", b"v")], magic=1)
    declined, *_ = native_module.ScanStats().scan(legacy, 0, len(legacy), 0)
    assert [code for *_, code in declined] == [2]


def test_generated_legacy_and_mixed(native_module, tmp_path):
    parts = []
    for magic in (0, 1):
        parts.append(encode_legacy_batch([(i, TS + i, KEYS[i % len(KEYS)], b"v" * i) for i in range(5)], magic=magic))
        for codec in (GZIP, SNAPPY, LZ4):
            parts.append(encode_legacy_batch([(5 + i, TS + i, b"k%d" % i, b"w") for i in range(3)], magic=magic,
                                             compression_codec=codec))
    legacy = b"".join(parts)
    v2, _ = _v2_batches(GZIP, offset=100)
    folder = _write_partition(tmp_path, "mixed", legacy + b"".join(v2))
    for flt in FILTERS:
        assert_twins([folder], flt)
    [st] = assert_twins([folder])
    assert set(st.magics) == {0, 1, 2}


def test_producer_ids_past_the_listed_cap(native_module, tmp_path):
    batches = [encode_batch([(i, TS, b"%d" % i, b"v", ())], base_offset=i, producer_id=(i * 7919) % 5000,
                            producer_epoch=0, base_sequence=0) for i in range(3000)]
    folder = _write_partition(tmp_path, "pids", b"".join(batches))
    [st] = assert_twins([folder])
    assert len(st.producer_ids) == scan_stats.MAX_PRODUCERS_LISTED
    assert_twins([folder], unit_bytes=32 << 10)


class _JsonText:
    """A schema resolver for plain JSON text (tests/schemas runs real Confluent framing)."""

    can_mask = False  # no batch-at-a-time --where: every record goes through render()

    @staticmethod
    def render(data: bytes, headers, is_key: bool):
        try:
            return json.dumps(json.loads(data)), None
        except ValueError:
            return None, "not JSON"


def test_search_with_where_on_top(native_module, tmp_path, monkeypatch):
    """``--where`` applies to the native matches (records whose value is JSON text)."""
    batches = [encode_batch([(i, TS, b"k%d" % (i % 3), b'{"n": %d}' % i, ())], base_offset=i) for i in range(40)]
    folder = _write_partition(tmp_path, "where", b"".join(batches))
    for flt in (ScanFilter(key=b"k1", where="value.n > 20"), ScanFilter(where="value.n < 3"),
                ScanFilter(value_contains=b"1", where="value.n >= 10", offset_hi=35)):
        monkeypatch.setitem(scan_filter._COMPILED, (flt.where, ()), (scan_filter.parse_where(flt.where), _JsonText))
        assert assert_search_twins([folder], flt)


# -- damage ---------------------------------------------------------------------------------


def _recrc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return batch


def _damaged(codec: int) -> bytes:
    batches = [bytearray(b) for b in _v2_batches(codec)[0]]
    batches[2][70] ^= 0xFF  # a CRC failure
    if codec == NONE:
        batches[4][62] ^= 0x40  # a records region that does not frame (CRC recomputed)
        _recrc(batches[4])
    else:
        batches[4][61:] = b"\xff" * (len(batches[4]) - 61)  # a stream that does not decompress
        _recrc(batches[4])
    struct.pack_into(">i", batches[6], 57, 1000)  # a count the region does not hold
    _recrc(batches[6])
    return b"".join(batches)


@pytest.mark.parametrize("codec", CODECS)
def test_damaged_segments(native_module, tmp_path, codec):
    data = _damaged(codec)
    folder = _write_partition(tmp_path, "torn", data + data[:100])  # and a torn tail
    [st] = assert_twins([folder])
    assert st.corrupt_batches == 3 and len(st.problems) == 4
    for flt in FILTERS[1:]:
        assert_twins([folder], flt)
    for flt in SEARCHES:
        assert_search_twins([folder], flt)
    # An impossible header in the middle ends the slice's walk (a problem, same on both).
    cut = bytearray(data)
    struct.pack_into(">i", cut, len(_v2_batches(codec)[0][0]) + 8, 3)
    folder = _write_partition(tmp_path, "impossible", bytes(cut))
    [st] = assert_twins([folder])
    assert any("not read" in p[2] for p in st.problems)
    assert_search_twins([folder], SEARCHES[0])


def test_chunk_boundaries_inside_batches(native_module, tmp_path, monkeypatch):
    """Chunks smaller than the batches: every entry is carried over to the next read."""
    data = _damaged(NONE) + b"".join(_v2_batches(SNAPPY, offset=500)[0])
    folder = _write_partition(tmp_path, "chunks", data + data[:30])
    expected = assert_twins([folder])
    hits = assert_search_twins([folder], SEARCHES[3])
    for size in (97, 1000, 4096):
        monkeypatch.setattr(scan_plan, "CHUNK_BYTES", size)
        assert assert_twins([folder]) == expected
        assert assert_search_twins([folder], SEARCHES[3]) == hits


def test_a_segment_that_disappears(native_module, tmp_path):
    folder = _write_partition(tmp_path, "gone", b"".join(_v2_batches(NONE)[0]))
    [unit] = plan_scan([str(folder)]).units
    shutil.rmtree(folder)
    n, r = _slice_both(unit.slices[0], None)
    assert n == r and "disappeared" in n.problems[0][2]
    native_problems, reference_problems = [], []
    assert list(scan._unit_records_native(unit, SEARCHES[0], native_problems)) == []
    assert list(scan._unit_records_reference(unit, SEARCHES[0], reference_problems)) == []
    assert native_problems == reference_problems and len(native_problems) == 1


# -- hostile bytes --------------------------------------------------------------------------


SEED = int(os.environ.get("PLOG_FUZZ_SEED", random.randrange(1 << 30)))
#: A short campaign here; ``PLOG_SCAN_MUTATIONS=100000 pytest tests/native/test_scan_twins.py
#: -k mutated`` runs a long one.
MUTATIONS = int(os.environ.get("PLOG_SCAN_MUTATIONS", 600))


def _sources() -> list[bytes]:
    found = sorted(p for p in CORPUS.rglob("*.log") if "vectors" not in p.parts and p.stat().st_size)
    out = [p.read_bytes()[:64 << 10] for p in found[:: max(1, len(found) // 12)]]
    out += [b"".join(_v2_batches(codec)[0]) for codec in CODECS]
    out.append(encode_legacy_batch([(i, TS, b"k", b"v") for i in range(4)], magic=1, compression_codec=GZIP))
    return out


def test_mutated_segments_agree(native_module, tmp_path, corpus):
    print(f"PLOG_FUZZ_SEED={SEED}")
    rnd = random.Random(SEED)
    sources = _sources()
    problems = 0
    folder = _write_partition(tmp_path, "m", b"")
    for _ in range(MUTATIONS):
        data = rnd.choice(sources)
        hot = [0] + [rnd.randrange(len(data)) for _ in range(4)]
        (folder / "00000000000000000000.log").write_bytes(mutate(rnd, data, hot))
        flt = rnd.choice(FILTERS)
        merged = assert_twins([folder], flt)
        problems += sum(len(st.problems) for st in merged)
        assert_search_twins([folder], rnd.choice(SEARCHES))
    assert problems > MUTATIONS // 4  # the mutations reach the damage paths


def _with_region(batch: bytes, region: bytes, count: int) -> bytes:
    """``batch`` (uncompressed v2) holding ``region`` and ``count``, with a valid CRC: the
    mutation reaches the records decoders instead of failing the checksum."""
    out = bytearray(batch[:61]) + region
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">i", out, 57, count)
    return bytes(_recrc(out))


def test_mutated_records_regions_agree(native_module, tmp_path):
    """Records regions mutated under a valid CRC (uncompressed batches, so the native
    framing and record decoding see them), one at a time among intact batches."""
    rnd = random.Random(SEED + 1)
    batches = _v2_batches(NONE)[0]
    data_batches = [i for i, b in enumerate(batches) if not b[22] & 0x20 and len(b) > 61]
    folder = _write_partition(tmp_path, "r", b"")
    corrupt = 0
    for _ in range(MUTATIONS):
        i = rnd.choice(data_batches)
        count = struct.unpack_from(">i", batches[i], 57)[0]
        region, count = mutate_region(rnd, batches[i][61:], count)
        mutated = list(batches)
        mutated[i] = _with_region(batches[i], region, count)
        (folder / "00000000000000000000.log").write_bytes(b"".join(mutated))
        [st] = assert_twins([folder], rnd.choice(FILTERS))
        corrupt += st.corrupt_batches
        assert_search_twins([folder], rnd.choice(SEARCHES))
    assert MUTATIONS // 8 < corrupt < MUTATIONS  # both the fault paths and the framing ones


# -- the CLI ---------------------------------------------------------------------------------


def _scan_both(capsys, monkeypatch, *args) -> tuple:
    monkeypatch.setattr(scan_stats, "_unit_stats", scan_stats._unit_stats_native)
    monkeypatch.setattr(scan, "_unit_records", scan._unit_records_native)
    native_run = plog(capsys, "scan", *args)
    monkeypatch.setattr(scan_stats, "_unit_stats", scan_stats._unit_stats_reference)
    monkeypatch.setattr(scan, "_unit_records", scan._unit_records_reference)
    reference_run = plog(capsys, "scan", *args)
    monkeypatch.undo()
    return native_run, reference_run


def test_cli_scan_output(native_module, capsys, monkeypatch, tmp_path):
    folder = _write_partition(tmp_path, "cli", _damaged(LZ4) + b"".join(_v2_batches(NONE, offset=900)[0]))
    for args in (("--format", "json"), (), ("--offset-range", "5:60", "--format", "json"), ("--key", "k"),
                 ("--value-contains", "vv", "--header", "h=x"), ("--key-hex", "0001fffe", "--jobs", "2")):
        native_run, reference_run = _scan_both(capsys, monkeypatch, str(folder), *args, "--quiet")
        assert native_run == reference_run
        assert native_run[1], args


@pytest.mark.parametrize("log_dir", LOG_DIRS[:4], ids=lambda p: str(p.relative_to(CORPUS)))
def test_cli_scan_corpus(native_module, capsys, monkeypatch, log_dir):
    native_run, reference_run = _scan_both(capsys, monkeypatch, str(log_dir), "--format", "json", "--quiet")
    assert native_run == reference_run and native_run[0] in (0, 3)

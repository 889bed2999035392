"""``plog.engine.inspect.scan``: plans, stats and record walks agree however the work is split.

* Every corpus log directory gives the same stats and the same records with whole-segment
  units and with tiny units (segments cut at checked index entries, slices bin-packed), in
  one process and in two, and the records equal an independent walk of the segments.
* A stale or garbage ``.index`` never cuts a segment inside a batch, and never moves an
  offset-filtered scan's start past records that match.
* Offset/time filters (pushed down to segment selection and start positions) give exactly
  the records a brute-force filter keeps, with non-monotonic CreateTime timestamps and
  legacy v0/v1 entries; record predicates likewise.
* Stats merge commutatively and associatively; the distinct-key sketch, null keys,
  control/transactional batches, producers, codecs and magics are counted.
* Damage (CRC failure, torn tail, impossible header, vanished file) is reported with the
  segment and position, never raised.
* Filters survive the Spark options round trip; search results are JSON lines that
  ``plog produce --input-format jsonl`` reads back.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import struct
import uuid
from pathlib import Path

import pytest
from conftest import CORPUS, corpus_log_dirs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plog.engine.storage import discovery
from plog.engine.storage.file_records import FileBatches
from plog.engine.clients.record_io import parse_jsonl
from plog.engine.errors import ScanError
from plog.engine.inspect.scan import (
    ScanFilter,
    ScanRecord,
    format_record_jsonl,
    merge_stats,
    plan_scan,
    scan_jsonl,
    scan_records,
    scan_stats,
    unit_records,
    unit_stats,
)
from plog.formats import compression
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker
from plog.formats.legacy import encode_legacy_batch
from plog.formats.record_batch import encode_batch

HUGE = 1 << 40  # unit size that keeps every segment whole and every partition in one unit
TS0 = 1_700_000_000_000


# -- helpers ---------------------------------------------------------------------------------------




def oracle(path) -> dict[tuple[str, int], dict]:
    """An independent walk: every current partition's segments read whole with FileBatches,
    CRC-valid batches decoded with ``records()``. Per (topic, partition): records as
    (topic, partition, offset, timestamp, key, value, headers), batch count, first batch
    base offset, last batch last offset."""
    out: dict[tuple[str, int], dict] = {}
    for info in discovery.partitions(str(path)):
        if info.kind != "current" or info.topic_partition is None:
            continue
        tp = (info.topic_partition.topic, info.topic_partition.partition)
        part = out.setdefault(tp, {"records": [], "batches": 0, "first": None, "last": None})
        for seg in info.segments:
            if seg.log is None:
                continue
            for batch in FileBatches(seg.log):
                if not batch.is_valid():
                    continue
                records = batch.records()
                part["batches"] += 1
                if part["first"] is None:
                    part["first"] = batch.base_offset
                part["last"] = batch.last_offset
                for r in records:
                    part["records"].append((tp[0], tp[1], r.offset, r.timestamp, _b(r.key), _b(r.value),
                                            tuple((k, _b(v)) for k, v in r.headers)))
    return out


def _b(data):
    return None if data is None else bytes(data)


def rows(records) -> list[tuple]:
    return [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def all_rows(path) -> list[tuple]:
    return [row for part in sorted(oracle(path).items()) for row in part[1]["records"]]


def stats_dicts(stats) -> list[dict]:
    return [s.to_dict() for s in stats]


def batch_starts(log: str | Path) -> set[int]:
    return {b.position for b in FileBatches(str(log))}


def seg_name(base: int) -> str:
    return f"{base:020d}"


def write_segment(part: Path, base: int, entries) -> Path:
    part.mkdir(parents=True, exist_ok=True)
    path = part / f"{seg_name(base)}.log"
    path.write_bytes(b"".join(entries))
    return path


def build_log(root: Path, topics: dict[tuple[str, int], list[bytes]], config: dict[str, str]) -> Path:
    """Append producer batches (base offset 0) with the engine's LogManager: real
    segments, offset and time indexes."""
    from plog.engine.storage.log_manager import LogManager

    config = {"plog.fsync.on.produce": "false", **config}
    with LogManager([root], cluster_id="scan-test") as lm:
        for tp, batches in topics.items():
            log = lm.get_or_create_log(tp, config=config, topic_id=uuid.UUID(int=11))
            for raw in batches:
                log.append_as_leader(raw)
    os.remove(root / ".lock")
    return root


def value_of(rng: random.Random, kind: str, n: int) -> bytes:
    """Values shaped to look like entry headers when read from the wrong position."""
    if kind == "zeros":
        return bytes(n)
    if kind == "ints":
        return b"".join(struct.pack(">qiiB", rng.randrange(0, 64), rng.randrange(14, 4000), 0, rng.choice((0, 1, 2)))
                        for _ in range(n // 17 + 1))[:n]
    if kind == "random":
        return rng.randbytes(n)
    return (b"text %d " % n) * (n // 8 + 1)


# -- 1. corpus: split parity and an independent oracle ---------------------------------------------


CORPUS_DIRS = corpus_log_dirs()


@pytest.mark.parametrize("log_dir", CORPUS_DIRS, ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_split_parity_and_oracle(corpus, log_dir):
    paths = [str(log_dir)]
    whole_plan = plan_scan(paths, unit_bytes=HUGE)
    assert all(s.start == 0 and s.end is None for u in whole_plan.units for s in u.slices)
    whole_stats = stats_dicts(scan_stats(paths, unit_bytes=HUGE))
    whole_records = list(scan_records(paths, unit_bytes=HUGE))
    assert whole_records, "every corpus log dir has records"

    # Tiny units: segments with an offset index are cut at (checked) index entries.
    tiny = plan_scan(paths, unit_bytes=4096)
    starts: dict[str, set[int]] = {}
    for u in tiny.units:
        for s in u.slices:
            if s.start:
                if s.segment not in starts:
                    starts[s.segment] = batch_starts(s.segment)
                assert s.start in starts[s.segment]
    segs_with_index = [seg for info in discovery.partitions(str(log_dir)) if info.kind == "current"
                       for seg in info.segments if seg.log and seg.index and os.path.getsize(seg.log) > 3 * 4096
                       and os.path.getsize(seg.index) >= 16]
    if segs_with_index:
        assert any(s.start > 0 for u in tiny.units for s in u.slices)

    # Stats in 2 processes and in 1, records in 1 and in 2. (Stats use 16 KiB rather than
    # 4 KiB units only for time: merging thousands of per-unit sketches costs ~1 ms each.)
    assert stats_dicts(scan_stats(paths, unit_bytes=16384, jobs=2)) == whole_stats
    assert stats_dicts(scan_stats(paths, unit_bytes=65536, jobs=1)) == whole_stats
    assert list(scan_records(paths, unit_bytes=4096, jobs=1)) == whole_records
    problems: list = []
    assert list(scan_records(paths, unit_bytes=65536, jobs=2, problems=problems)) == whole_records
    assert problems == []

    # The oracle: whole segments walked independently.
    expected = oracle(log_dir)
    got: dict[tuple[str, int], list] = {}
    for row in rows(whole_records):
        got.setdefault(row[:2], []).append(row)
    assert {tp for tp, part in expected.items() if part["records"]} == set(got)
    by_tp = {(d["topic"], d["partition"]): d for d in whole_stats}
    for tp, part in expected.items():
        assert got.get(tp, []) == part["records"], tp
        d = by_tp[tp]
        assert (d["records"], d["batches"], d["first_offset"], d["last_offset"]) == (
            len(part["records"]), part["batches"], part["first"], part["last"]), tp
        assert d["corrupt_batches"] == 0 and d["problems"] == []


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_search_as_json_lines(corpus, jobs):
    """scan_jsonl, the local search plog scan prints: the records scan_records finds, as
    format_record_jsonl lines, in one chunk per unit with matches, in 1 or 2 processes."""
    paths = [str(CORPUS_DIRS[0])]
    flt = ScanFilter(value_contains=b"e")
    want = b"".join(format_record_jsonl(r) for r in scan_records(paths, flt, unit_bytes=HUGE))
    assert want
    problems: list = []
    chunks = list(scan_jsonl(paths, flt, jobs=jobs, unit_bytes=4096, problems=problems))
    assert b"".join(chunks) == want and problems == []
    assert all(chunks) and len(chunks) <= len(plan_scan(paths, flt, unit_bytes=4096).units)


def test_corpus_known_facts(corpus):
    """A few numbers from the corpus README's independent header walk."""
    log_dir = CORPUS / "William0423__kafka/kafka-logs"
    by_tp = {(s.topic, s.partition): s.to_dict() for s in scan_stats([str(log_dir)], unit_bytes=16384)}
    d = by_tp[("__consumer_offsets", 28)]
    assert (d["records"], d["batches"], d["first_offset"], d["last_offset"]) == (8202, 8202, 0, 8201)
    assert d["codecs"] == {"none": 8202} and d["magic"] == {"2": 8202}
    txn = CORPUS / ("ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data/"
                    "_confluent-ksql-default__command_topic-0")
    (d,) = stats_dicts(scan_stats([str(txn)]))
    assert (d["records"], d["batches"], d["transactional_batches"], d["control_batches"],
            d["control_records"]) == (2, 2, 2, 1, 1)
    assert d["producer_ids"] == [0] and d["producers"] == 1


# -- 2. split safety -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_partition(tmp_path_factory) -> Path:
    """One partition, one ~0.5 MB segment of batches of mixed sizes, codecs and value shapes,
    with the engine's sparse offset index (an entry every 4096 bytes)."""
    rng = random.Random(20)
    batches = []
    for i in range(500):
        kind = ("zeros", "ints", "random", "text")[i % 4]
        n = rng.randrange(1, 6)
        codec = rng.choice((compression.NONE, compression.NONE, compression.GZIP, compression.LZ4))
        recs = [(j, TS0 + i * 10 + j, b"k%d" % (i % 37), value_of(rng, kind, rng.randrange(50, 900)))
                for j in range(n)]
        batches.append(encode_batch(recs, compression_codec=codec))
    root = build_log(tmp_path_factory.mktemp("big") / "logdir", {("big", 0): batches},
                     {"segment.bytes": str(64 << 20), "index.interval.bytes": "4096"})
    part = root / "big-0"
    assert len(list(part.glob("*.log"))) == 1
    assert os.path.getsize(part / f"{seg_name(0)}.index") >= 8 * 50
    return part


def check_slices(plan, log: Path) -> list:
    """Every slice starts at a batch; a segment's slices are contiguous and cover it."""
    starts = batch_starts(log)
    slices = [s for u in plan.units for s in u.slices if s.segment == str(log)]
    assert slices and slices[0].start == 0 and slices[-1].end is None
    for a, b in zip(slices, slices[1:]):
        assert a.end == b.start
    for s in slices:
        assert s.start == 0 or s.start in starts
        assert s.size == (os.path.getsize(log) if s.end is None else s.end) - s.start
    assert sum(s.size for s in slices) == os.path.getsize(log)
    return slices


@pytest.mark.parametrize("unit_bytes", [1, 4096, 20000, 100_000])
def test_split_cuts_only_at_batch_starts(big_partition, unit_bytes):
    log = big_partition / f"{seg_name(0)}.log"
    plan = plan_scan([str(big_partition)], unit_bytes=unit_bytes)
    slices = check_slices(plan, log)
    assert len(slices) >= os.path.getsize(log) // max(unit_bytes, 4096) // 4
    whole = list(scan_records([str(big_partition)], unit_bytes=HUGE))
    assert list(scan_records([str(big_partition)], plan=plan)) == whole
    assert stats_dicts(scan_stats([str(big_partition)], plan=plan)) == \
        stats_dicts(scan_stats([str(big_partition)], unit_bytes=HUGE))


def _rewrite_index(part: Path, entries: list[tuple[int, int]]) -> None:
    (part / f"{seg_name(0)}.index").write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in entries))


def _index_entries(part: Path) -> list[tuple[int, int]]:
    raw = (part / f"{seg_name(0)}.index").read_bytes()
    return [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw) - 7, 8)]


@pytest.fixture
def big_copy(big_partition, tmp_path) -> Path:
    return Path(shutil.copytree(big_partition, tmp_path / "big-0"))


# Stale entries: each real entry moved inside its batch (+23 lands on the lastOffsetDelta
# field, where the bytes read as a plausible v0 entry header), or garbage.
@pytest.mark.parametrize("damage", ["+1", "+7", "+16", "+23", "+35", "+61", "mid", "garbage", "huge-offsets",
                                    "past-end"])
def test_stale_or_garbage_index_never_cuts_mid_batch(big_copy, damage):
    part = big_copy
    log = part / f"{seg_name(0)}.log"
    size = os.path.getsize(log)
    expected_records = list(scan_records([str(part)], unit_bytes=HUGE))
    expected_stats = stats_dicts(scan_stats([str(part)], unit_bytes=HUGE))
    entries = _index_entries(part)
    sizes = {b.position: b.size_in_bytes for b in FileBatches(str(log))}
    rng = random.Random(damage)
    if damage.startswith("+"):
        entries = [(o, p + int(damage)) for o, p in entries]
    elif damage == "mid":
        entries = [(o, p + sizes[p] // 2) for o, p in entries]
    elif damage == "garbage":
        (part / f"{seg_name(0)}.index").write_bytes(rng.randbytes(8 * len(entries)))
        entries = None
    elif damage == "huge-offsets":  # any plausible header passes an offset check against these
        entries = [(0x7FFF0000 + i, rng.randrange(1, size)) for i in range(len(entries))]
        entries.sort(key=lambda e: e[1])
    else:
        entries = [(o, p + size) for o, p in entries]
    if entries is not None:
        _rewrite_index(part, entries)
    for unit_bytes in (1, 4096, 30000):
        plan = plan_scan([str(part)], unit_bytes=unit_bytes)
        check_slices(plan, log)
        problems: list = []
        assert list(scan_records([str(part)], plan=plan, problems=problems)) == expected_records
        assert problems == []
        assert stats_dicts(scan_stats([str(part)], plan=plan)) == expected_stats


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_index_entries_never_cut_mid_batch(big_copy, data):
    part = big_copy  # every example rewrites the whole index
    log = part / f"{seg_name(0)}.log"
    size = os.path.getsize(log)
    positions = sorted(set(data.draw(st.lists(st.integers(1, size + 100), min_size=1, max_size=200))))
    offsets = data.draw(st.sampled_from(["ascending", "huge", "zero"]))
    if offsets == "ascending":
        entries = [(i * 3, p) for i, p in enumerate(positions)]
    elif offsets == "huge":
        entries = [(0x7FFF0000 + i, p) for i, p in enumerate(positions)]
    else:
        entries = [(0, p) for p in positions]
    _rewrite_index(part, entries)
    unit_bytes = data.draw(st.sampled_from([1, 512, 4096, 65536]))
    check_slices(plan_scan([str(part)], unit_bytes=unit_bytes), log)
    lo = data.draw(st.integers(0, 2000))
    plan = plan_scan([str(part)], ScanFilter(offset_lo=lo), unit_bytes=unit_bytes)
    starts = batch_starts(log)
    assert all(s.start == 0 or s.start in starts for u in plan.units for s in u.slices)


# -- 3. filter pushdown ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def filtered_dir(tmp_path_factory) -> Path:
    """A log dir with several segments per partition (engine-written, with indexes):
    ``ev-0``/``ev-1`` with CreateTime timestamps that go back and forth across batches and
    within them, ``lat-0`` with LogAppendTime, and ``legacy-0`` (raw, no indexes) mixing
    v1 compressed wrappers, v0 messages and v2 batches over two segments."""
    rng = random.Random(3)
    topics: dict[tuple[str, int], list[bytes]] = {}
    for p in range(2):
        batches = []
        for i in range(120):
            base_ts = TS0 + i * 1000 + rng.randrange(-4000, 4000)  # not monotonic across batches
            n = rng.randrange(1, 5)
            recs = [(j, base_ts + rng.randrange(-1500, 1500), b"k%d" % rng.randrange(20),
                     rng.randbytes(rng.randrange(20, 200))) for j in range(n)]
            batches.append(encode_batch(recs, compression_codec=rng.choice((0, 0, compression.SNAPPY))))
        topics[("ev", p)] = batches
    root = build_log(tmp_path_factory.mktemp("filtered") / "logdir", topics,
                     {"segment.bytes": "6000", "index.interval.bytes": "400"})
    build_log(root, {("lat", 0): [encode_batch([(j, TS0, b"l", b"x" * 100) for j in range(3)])
                                  for _ in range(60)]},
              {"segment.bytes": "4000", "index.interval.bytes": "300", "message.timestamp.type": "LogAppendTime"})
    legacy = root / "legacy-0"
    write_segment(legacy, 0, [
        encode_legacy_batch([(o, TS0 + 7 - o, b"a%d" % o, b"gz%d" % o) for o in range(0, 10)], magic=1,
                            compression_codec=compression.GZIP),
        encode_legacy_batch([(o, TS0 + 50 - o, b"b%d" % o, b"sn%d" % o) for o in range(10, 15)], magic=1,
                            compression_codec=compression.SNAPPY),
        encode_legacy_batch([(o, -1, b"c%d" % o, b"v0-%d" % o) for o in range(15, 18)], magic=0),
        encode_legacy_batch([(o, -1, None, b"v0z%d" % o) for o in range(18, 21)], magic=0,
                            compression_codec=compression.GZIP),
        encode_legacy_batch([(o, TS0 + o, b"d%d" % o, b"v1-%d" % o) for o in range(21, 24)], magic=1),
    ])
    write_segment(legacy, 24, [encode_batch([(o, TS0 + 30 - o, b"e", b"v2-%d" % o) for o in range(24, 30)],
                                            base_offset=24)])
    for p in range(2):
        assert len(list((root / f"ev-{p}").glob("*.log"))) >= 5
    assert len(list((root / "lat-0").glob("*.log"))) >= 3
    return root


def brute_force(all_records, offset_lo=None, offset_hi=None, time_lo=None, time_hi=None) -> list[tuple]:
    return [r for r in all_records
            if (offset_lo is None or r[2] >= offset_lo) and (offset_hi is None or r[2] < offset_hi)
            and (time_lo is None or r[3] >= time_lo) and (time_hi is None or r[3] < time_hi)]


@pytest.fixture(scope="module")
def filtered_all(filtered_dir) -> list[tuple]:
    return all_rows(filtered_dir)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_offset_and_time_filters_equal_brute_force(filtered_dir, filtered_all, data):
    timestamps = sorted({r[3] for r in filtered_all})
    max_offset = max(r[2] for r in filtered_all)
    offset = st.none() | st.integers(-1, 40) | st.integers(-1, max_offset + 2)  # legacy-0 holds 0..29
    time = st.none() | st.sampled_from(timestamps).flatmap(lambda t: st.sampled_from([t - 1, t, t + 1]))
    bounds = dict(offset_lo=data.draw(offset), offset_hi=data.draw(offset),
                  time_lo=data.draw(time), time_hi=data.draw(time))
    flt = ScanFilter(**bounds)
    expected = brute_force(filtered_all, **bounds)
    unit_bytes = data.draw(st.sampled_from([HUGE, 1500]))
    assert rows(scan_records([str(filtered_dir)], flt, unit_bytes=unit_bytes)) == expected
    counts: dict = {}
    for r in expected:
        counts[r[:2]] = counts.get(r[:2], 0) + 1
    stats = scan_stats([str(filtered_dir)], flt, unit_bytes=unit_bytes)
    assert {(s.topic, s.partition): s.records for s in stats if s.records} == counts


def test_legacy_wrappers_with_offset_ranges(filtered_dir, filtered_all):
    legacy = [r for r in filtered_all if r[0] == "legacy"]
    assert [r[2] for r in legacy] == list(range(30))
    for lo, hi in [(None, 5), (3, 8), (12, 13), (16, 20), (19, 25), (None, 1)]:
        flt = ScanFilter(offset_lo=lo, offset_hi=hi)
        want = brute_force(legacy, lo, hi)
        assert rows(scan_records([str(filtered_dir / "legacy-0")], flt)) == want, (lo, hi)
        (st_,) = scan_stats([str(filtered_dir / "legacy-0")], flt)
        assert st_.records == len(want), (lo, hi)


def _segments(part: Path) -> list[tuple[int, Path]]:
    return sorted((int(p.stem), p) for p in part.glob("*.log"))


def test_offset_range_prunes_whole_segments_and_starts_inside_one(filtered_dir, filtered_all):
    part = filtered_dir / "ev-0"
    segs = _segments(part)
    lo = segs[2][0] + 7  # inside the third segment
    hi = segs[3][0] + 1  # one record into the fourth
    flt = ScanFilter(offset_lo=lo, offset_hi=hi)
    plan = plan_scan([str(part)], flt, unit_bytes=HUGE)
    assert plan.pruned_segments == len(segs) - 2  # the first two and all after the fourth
    slices = [s for u in plan.units for s in u.slices]
    assert [s.base_offset for s in slices] == [segs[2][0], segs[3][0]]
    assert slices[0].start > 0 and slices[0].start in batch_starts(slices[0].segment)  # index pushdown
    want = brute_force([r for r in filtered_all if r[:2] == ("ev", 0)], lo, hi)
    assert rows(scan_records([str(part)], flt, plan=plan)) == want and len(want) == hi - lo


def test_time_range_prunes_closed_segments_by_their_largest_timestamp(filtered_dir, filtered_all):
    part = filtered_dir / "ev-1"
    segs = _segments(part)
    recs = [r for r in filtered_all if r[:2] == ("ev", 1)]
    seg0_max = max(r[3] for r in recs if segs[0][0] <= r[2] < segs[1][0])
    flt = ScanFilter(time_lo=seg0_max + 1)
    plan = plan_scan([str(part)], flt, unit_bytes=HUGE)
    pruned_bases = {b for b, _ in segs} - {s.base_offset for u in plan.units for s in u.slices}
    assert plan.pruned_segments == len(pruned_bases) >= 1 and segs[0][0] in pruned_bases
    assert rows(scan_records([str(part)], flt, plan=plan)) == brute_force(recs, time_lo=seg0_max + 1)
    # Timestamps really are out of order: a later batch has an earlier timestamp.
    assert any(b[3] < a[3] for a, b in zip(recs, recs[1:]))


def test_garbage_offset_index_does_not_lose_records_of_an_offset_range(filtered_dir, filtered_all, tmp_path):
    part = Path(shutil.copytree(filtered_dir / "ev-0", tmp_path / "ev-0"))
    segs = _segments(part)
    base = segs[2][0]
    index = part / f"{seg_name(base)}.index"
    n = os.path.getsize(index) // 8
    assert n >= 3
    rng = random.Random(5)
    want = brute_force([r for r in filtered_all if r[:2] == ("ev", 0)], base + 9)
    for entries in (
        [(1 + i, p + 23) for i, (_o, p) in enumerate(_read_entries(index))],  # mid-batch positions
        [(1 + i, 10 ** 6 + i) for i in range(n)],  # positions past the end
        [(1 + i, rng.randrange(1, os.path.getsize(part / f"{seg_name(base)}.log"))) for i in range(n)],
    ):
        index.write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in entries))
        problems: list = []
        got = rows(scan_records([str(part)], ScanFilter(offset_lo=base + 9), unit_bytes=HUGE, problems=problems))
        assert got == want and problems == []


def _read_entries(index: Path) -> list[tuple[int, int]]:
    raw = index.read_bytes()
    return [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw) - 7, 8)]


def test_topics_filter(filtered_dir, filtered_all):
    flt = ScanFilter(topics=frozenset({"lat", "legacy"}))
    plan = plan_scan([str(filtered_dir)], flt)
    assert {tp[0] for tp in plan.partitions} == {"lat", "legacy"}
    assert rows(scan_records([str(filtered_dir)], flt)) == [r for r in filtered_all if r[0] in ("lat", "legacy")]
    lat = [r for r in filtered_all if r[0] == "lat"]
    assert {r[3] for r in lat} != {TS0}  # LogAppendTime replaced the producer's timestamps


# -- 4. record predicates --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def predicate_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pred") / "logdir"
    rng = random.Random(4)
    entries = []
    offset = 0
    for i in range(40):
        recs = []
        for _j in range(rng.randrange(1, 6)):
            key = rng.choice([None, b"alpha", b"beta", b"\xff\xfe", b""])
            value = rng.choice([None, b"", b"hello world", b"needle in hay", b"\x00needle\xff", b"plain"])
            headers = tuple(rng.sample([("trace", b"t1"), ("trace", b"t2"), ("null", None), ("bin", b"\x80\x81"),
                                        ("empty", b"")], rng.randrange(0, 4)))
            recs.append((offset, TS0 + offset, key, value, headers))
            offset += 1
        entries.append(encode_batch(recs, base_offset=recs[0][0],
                                    compression_codec=rng.choice((0, compression.ZSTD))))
    write_segment(root / "pred-0", 0, entries)
    return root


PREDICATES = [
    dict(key=b"alpha"),
    dict(key=b"\xff\xfe"),
    dict(key=b""),
    dict(value_contains=b"needle"),
    dict(value_contains=b""),
    dict(headers=(("trace", b"t1"),)),
    dict(headers=(("null", None),)),
    dict(headers=(("bin", b"\x80\x81"), ("trace", b"t2"))),
    dict(headers=(("empty", b""),)),
    dict(key=b"beta", value_contains=b"needle", headers=(("trace", b"t2"),)),
    dict(key=b"alpha", offset_lo=20, time_hi=TS0 + 150),
]


def _keeps(row, key=None, value_contains=None, headers=(), **bounds) -> bool:
    if not brute_force([row], **bounds):
        return False
    if key is not None and row[4] != key:
        return False
    if value_contains is not None and (row[5] is None or value_contains not in row[5]):
        return False
    return all((hk, hv) in row[6] for hk, hv in headers)


@pytest.mark.parametrize("pred", PREDICATES, ids=lambda p: ",".join(sorted(p)))
def test_record_predicates_equal_brute_force(predicate_dir, pred):
    everything = all_rows(predicate_dir)
    want = [r for r in everything if _keeps(r, **pred)]
    assert 0 < len(want) < len(everything)
    flt = ScanFilter(**pred)
    assert rows(scan_records([str(predicate_dir)], flt)) == want
    assert rows(scan_records([str(predicate_dir)], flt, unit_bytes=1, jobs=2)) == want
    if not {"offset_lo", "time_hi"} & set(pred):
        # Stats describe partitions: record predicates are not applied to them.
        (s,) = scan_stats([str(predicate_dir)], flt)
        assert s.records == len(everything)


# -- 5. stats semantics ----------------------------------------------------------------------------


def test_merge_is_commutative_and_associative(filtered_dir, tmp_path):
    root = Path(shutil.copytree(filtered_dir, tmp_path / "logdir"))
    log = root / "ev-1" / f"{seg_name(0)}.log"
    third = list(FileBatches(str(log)))[2].position
    buf = bytearray(log.read_bytes())
    buf[third + 70] ^= 0x40  # inside the third batch's records: a CRC failure, so problems are merged too
    log.write_bytes(bytes(buf))
    paths = [str(root)]
    whole = stats_dicts(scan_stats(paths, unit_bytes=HUGE))
    assert any(d["problems"] for d in whole)
    plan = plan_scan(paths, unit_bytes=700)
    parts = [unit_stats(u) for u in plan.units]
    assert len(parts) > 20

    def merged(seq):
        return stats_dicts(merge_stats(copy.deepcopy(seq), plan.partitions))

    assert merged(parts) == whole
    assert merged(parts[::-1]) == whole
    shuffled = parts[:]
    random.Random(1).shuffle(shuffled)
    assert merged(shuffled) == whole

    def tree(seq):
        seq = copy.deepcopy(seq)
        while len(seq) > 1:
            nxt = []
            for a, b in zip(seq[::2], seq[1::2]):
                for tp, s in b.items():
                    a[tp] = a[tp].merge(s) if tp in a else s
                nxt.append(a)
            if len(seq) % 2:
                nxt.append(seq[-1])
            seq = nxt
        return merged(seq)

    assert tree(parts) == whole
    assert tree(shuffled[::-1]) == whole
    # Pairwise: a.merge(b) == b.merge(a)
    flat = [s for part in parts for s in part.values()]
    by_tp: dict = {}
    for s in flat:
        by_tp.setdefault((s.topic, s.partition, s.log_dir), []).append(s)
    for group in by_tp.values():
        for a, b in zip(group, group[1:]):
            assert copy.deepcopy(a).merge(b).to_dict() == copy.deepcopy(b).merge(a).to_dict()


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_merge_in_any_order_and_grouping(filtered_dir, data):
    paths = [str(filtered_dir)]
    unit_bytes = data.draw(st.sampled_from([3000, 20000]))
    plan = plan_scan(paths, unit_bytes=unit_bytes)
    parts = [unit_stats(u) for u in plan.units]
    order = data.draw(st.permutations(range(len(parts))))
    cut = data.draw(st.integers(0, len(parts)))
    left = merge_stats([copy.deepcopy(parts[i]) for i in order[:cut]])
    right = merge_stats([copy.deepcopy(parts[i]) for i in order[cut:]])
    combined = merge_stats([{(s.topic, s.partition, s.log_dir): s for s in right},
                            {(s.topic, s.partition, s.log_dir): s for s in left}], plan.partitions)
    assert stats_dicts(combined) == stats_dicts(scan_stats(paths, unit_bytes=HUGE))


def _records_with_keys(keys) -> list[bytes]:
    out = []
    for start in range(0, len(keys), 1000):
        chunk = keys[start:start + 1000]
        out.append(encode_batch([(start + j, TS0, k, b"v") for j, k in enumerate(chunk)], base_offset=start))
    return out


def test_distinct_keys_estimate(tmp_path):
    root = tmp_path / "logdir"
    write_segment(root / "many-0", 0, _records_with_keys([b"key-%d" % i for i in range(50_000)]))
    small = (0, 1, 2, 3, 10, 50, 100)
    for n in small:
        keys = [b"s%d" % (i % n) if n else None for i in range(max(n * 3, 5))]
        write_segment(root / f"small-{n}", 0, _records_with_keys(keys))
    write_segment(root / "dup-0", 0, _records_with_keys([b"same-%d" % (i % 7) for i in range(20_000)]))
    by_tp = {(s.topic, s.partition): s.to_dict() for s in scan_stats([str(root)], unit_bytes=1 << 16)}
    many = by_tp[("many", 0)]["distinct_keys_estimate"]
    assert abs(many - 50_000) <= 0.05 * 50_000, many
    for n in small:
        d = by_tp[("small", n)]
        assert abs(d["distinct_keys_estimate"] - n) <= 2, (n, d["distinct_keys_estimate"])
        assert d["null_keys"] == (5 if n == 0 else 0)
    assert by_tp[("dup", 0)]["distinct_keys_estimate"] == 7
    # The sketch is split-invariant: tiny units give the same estimate.
    split = {(s.topic, s.partition): s.to_dict() for s in scan_stats([str(root)], unit_bytes=2000)}
    assert split == by_tp


@pytest.fixture(scope="module")
def kinds_dir(tmp_path_factory) -> Path:
    """One partition with every kind of entry: v2 batches of each codec, null keys, an
    idempotent producer, a transaction with its COMMIT marker, an aborted one, and legacy
    v0/v1 messages (plain and compressed)."""
    root = tmp_path_factory.mktemp("kinds") / "logdir"
    e = []
    e.append(encode_legacy_batch([(0, -1, b"a", b"v0"), (1, -1, None, b"v0")], magic=0))
    e.append(encode_legacy_batch([(2, TS0, b"b", b"v1"), (3, TS0 + 1, b"c", b"v1")], magic=1,
                                 compression_codec=compression.GZIP))
    e.append(encode_legacy_batch([(4, TS0 + 2, None, b"v1")], magic=1))
    o = 5
    for codec in (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        e.append(encode_batch([(o + j, TS0 + 10 + j, b"k%d" % j if j else None, b"x" * 50) for j in range(4)],
                              base_offset=o, compression_codec=codec, producer_id=500 + codec, producer_epoch=0,
                              base_sequence=0))
        o += 4
    # A transaction of producer 77 and its commit marker, and an aborted one of producer 78.
    e.append(encode_batch([(o + j, TS0 + 100, b"t", b"txn") for j in range(3)], base_offset=o, producer_id=77,
                          producer_epoch=1, base_sequence=0, is_transactional=True))
    o += 3
    e.append(encode_batch([(o, TS0 + 101, encode_control_key(ControlRecordType.COMMIT), encode_end_txn_marker(5))],
                          base_offset=o, producer_id=77, producer_epoch=1, is_transactional=True, is_control=True))
    o += 1
    e.append(encode_batch([(o, TS0 + 102, b"t", b"aborted")], base_offset=o, producer_id=78, producer_epoch=0,
                          base_sequence=0, is_transactional=True))
    o += 1
    e.append(encode_batch([(o, TS0 + 103, encode_control_key(ControlRecordType.ABORT), encode_end_txn_marker(5))],
                          base_offset=o, producer_id=78, producer_epoch=0, is_transactional=True, is_control=True))
    write_segment(root / "kinds-0", 0, e)
    return root


def test_stats_count_every_kind_of_entry(kinds_dir):
    (d,) = stats_dicts(scan_stats([str(kinds_dir)]))
    assert d["records"] == 5 + 20 + 3 + 1 + 1 + 1
    assert d["batches"] == 4 + 9  # a plain v0/v1 message is one entry, the compressed v1 wrapper one
    assert d["magic"] == {"0": 2, "1": 2, "2": 9}
    assert d["codecs"] == {"gzip": 2, "lz4": 1, "none": 8, "snappy": 1, "zstd": 1}
    assert d["null_keys"] == 2 + 5  # v0/v1 null keys and the first record of each codec batch
    assert (d["transactional_batches"], d["control_batches"], d["control_records"]) == (4, 2, 2)
    assert d["producer_ids"] == [77, 78, 500, 501, 502, 503, 504] and d["producers"] == 7
    assert (d["first_offset"], d["last_offset"]) == (0, 30)
    # Record timestamps: v0 has none; control records are counted but not described.
    assert (d["min_timestamp"], d["max_timestamp"]) == (TS0, TS0 + 102)
    assert d["corrupt_batches"] == 0 and d["problems"] == []
    assert sum(by for by in d["record_size"]["histogram"].values()) == d["records"] - d["control_records"]
    assert d["bytes"] == os.path.getsize(kinds_dir / "kinds-0" / f"{seg_name(0)}.log")
    recs = list(scan_records([str(kinds_dir)]))
    assert [r.offset for r in recs] == list(range(31))
    assert [r.is_control for r in recs].count(True) == 2
    assert [r.codec for r in recs[:5]] == ["none", "none", "gzip", "gzip", "none"]
    assert [r.timestamp_type for r in recs[:5]] == [-1, -1, 0, 0, 0] and recs[0].timestamp == -1


@pytest.mark.parametrize("bounds", [
    dict(time_hi=TS0 + 101), dict(time_lo=TS0 + 101), dict(time_lo=TS0 + 102, time_hi=TS0 + 103),
    dict(offset_lo=25, offset_hi=29), dict(offset_lo=28), dict(offset_hi=3), dict(offset_lo=1, time_lo=TS0),
])
def test_stats_under_a_range_count_what_a_search_returns(kinds_dir, bounds):
    """Offset/time ranges apply to stats record by record, control records included."""
    flt = ScanFilter(**bounds)
    found = list(scan_records([str(kinds_dir)], flt))
    assert [r.offset for r in found] == [r[2] for r in brute_force(all_rows(kinds_dir), **bounds)]
    (d,) = stats_dicts(scan_stats([str(kinds_dir)], flt))
    assert d["records"] == len(found)
    assert d["control_records"] == sum(r.is_control for r in found)
    assert d["control_batches"] == len({r.position for r in found if r.is_control})


# -- 6. damage -------------------------------------------------------------------------------------


@pytest.fixture
def ten_batches(tmp_path) -> tuple[Path, Path, list[int]]:
    entries = [encode_batch([(i * 3 + j, TS0 + i, b"k%d" % j, b"value-%d" % (i * 3 + j) * 5) for j in range(3)],
                            base_offset=i * 3) for i in range(10)]
    log = write_segment(tmp_path / "logdir" / "dmg-0", 0, entries)
    positions = [sum(len(x) for x in entries[:i]) for i in range(10)]
    return tmp_path / "logdir", log, positions


def test_crc_failure_is_counted_and_the_rest_is_read(ten_batches):
    root, log, pos = ten_batches
    buf = bytearray(log.read_bytes())
    buf[pos[4] + 80] ^= 0x01
    log.write_bytes(bytes(buf))
    (d,) = stats_dicts(scan_stats([str(root)]))
    assert (d["corrupt_batches"], d["batches"], d["records"]) == (1, 9, 27)
    (p,) = d["problems"]
    assert p["segment"] == str(log) and p["position"] == pos[4] and "CRC" in p["message"]
    problems: list = []
    got = list(scan_records([str(root)], problems=problems))
    assert [r.offset for r in got] == [o for o in range(30) if not 12 <= o < 15]
    assert [(q.segment, q.position) for q in problems] == [(str(log), pos[4])]


def test_torn_tail_is_reported_as_trailing_bytes(ten_batches):
    root, log, pos = ten_batches
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.truncate(size - 10)
    (d,) = stats_dicts(scan_stats([str(root)]))
    assert (d["batches"], d["records"], d["corrupt_batches"]) == (9, 27, 0)
    (p,) = d["problems"]
    assert p["position"] == pos[9] and "trailing bytes" in p["message"] and p["segment"] == str(log)
    problems: list = []
    assert len(list(scan_records([str(root)], problems=problems))) == 27
    assert len(problems) == 1 and "trailing bytes" in problems[0].message


@pytest.mark.parametrize("garbage", ["size", "magic"])
def test_impossible_header_mid_file_ends_the_walk_with_its_position(ten_batches, garbage):
    root, log, pos = ten_batches
    buf = bytearray(log.read_bytes())
    if garbage == "size":
        struct.pack_into(">i", buf, pos[6] + 8, 5)
    else:
        buf[pos[6] + 16] = 9
    log.write_bytes(bytes(buf))
    (d,) = stats_dicts(scan_stats([str(root)]))
    assert (d["batches"], d["records"]) == (6, 18)
    (p,) = d["problems"]
    assert p["position"] == pos[6] and p["segment"] == str(log) and "is not read" in p["message"]
    problems: list = []
    assert len(list(scan_records([str(root)], problems=problems))) == 18
    assert [q.position for q in problems] == [pos[6]]


def test_segment_disappearing_between_plan_and_run_is_a_problem(ten_batches):
    root, log, _pos = ten_batches
    plan = plan_scan([str(root)])
    os.remove(log)
    (d,) = stats_dicts(scan_stats([str(root)], plan=plan))
    assert d["records"] == 0 and "disappeared" in d["problems"][0]["message"]
    assert d["problems"][0]["segment"] == str(log)
    problems: list = []
    assert list(scan_records([str(root)], plan=plan, problems=problems)) == []
    assert len(problems) == 1 and "disappeared" in problems[0].message
    problems = []
    assert list(unit_records(plan.units[0], None, problems)) == [] and problems


# -- 7. filters as Spark options -------------------------------------------------------------------


def test_filter_options_round_trip():
    flt = ScanFilter(topics=frozenset({"a", "b.c"}), offset_lo=-5, offset_hi=10, time_lo=0, time_hi=TS0,
                     key=b"\xff\x00k", value_contains=b"\x80needle",
                     headers=(("h", b"\xfe"), ("n", None), ("u", b"text"), ("", b""), ("\udcff", b"x")))
    opts = flt.to_options()
    assert all(isinstance(v, str) for v in opts.values())
    assert ScanFilter.from_options(opts) == flt
    assert ScanFilter.from_options(ScanFilter().to_options()) == ScanFilter()
    # What a PySpark user writes by hand: plain text.
    assert ScanFilter.from_options({"topics": " x , y ", "key": "user-1", "value_contains": "err",
                                    "offset_lo": "3"}) == \
        ScanFilter(topics=frozenset({"x", "y"}), key=b"user-1", value_contains=b"err", offset_lo=3)


@settings(max_examples=100, deadline=None)
@given(key=st.none() | st.binary(max_size=20), value=st.none() | st.binary(max_size=20),
       headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3),
       lo=st.none() | st.integers(-(1 << 63), (1 << 63) - 1))
def test_filter_options_round_trip_any_bytes(key, value, headers, lo):
    flt = ScanFilter(key=key, value_contains=value, headers=tuple(headers), offset_lo=lo)
    assert ScanFilter.from_options(flt.to_options()) == flt


@pytest.mark.parametrize("options", [
    {"offset_lo": "abc"}, {"offset_hi": "1.5"}, {"time_lo": "yesterday"}, {"time_hi": "0x10"},
    {"headers": "not json"}, {"headers": '[["k"]]'}, {"headers": '[["k", 5]]'}, {"headers": '{"k": "v"}'},
    {"key": '{"base64": "!!!"}'},
])
def test_bad_option_values_raise_scan_error(options):
    with pytest.raises(ScanError):
        ScanFilter.from_options(options)


# -- 8. JSON lines ---------------------------------------------------------------------------------


def test_format_record_jsonl_parses_back(predicate_dir, kinds_dir):
    recs = list(scan_records([str(predicate_dir), str(kinds_dir)]))
    extra = ScanRecord("t", 0, 5, -1, -1, b"\xc3\x28", b"\xff\x00ok", (("\udcc3bad", b"\xfe"), ("n", None)),
                       5, -1, -1, -1, "none", False, False, "/x/t-0/00000000000000000000.log", 0)
    recs.append(extra)
    assert any(r.value is not None and not _utf8(r.value) for r in recs)
    for n, rec in enumerate(recs, 1):
        line = format_record_jsonl(rec)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        obj = json.loads(line)
        assert (obj["topic"], obj["partition"], obj["offset"], obj["timestamp"]) == (
            rec.topic, rec.partition, rec.offset, rec.timestamp)
        assert (obj["segment"], obj["position"], obj["base_offset"], obj["producer_id"], obj["codec"]) == (
            rec.segment, rec.position, rec.base_offset, rec.producer_id, rec.codec)
        if rec.value is not None and not _utf8(rec.value):
            assert set(obj["value"]) == {"base64"}
        back = parse_jsonl(line, n)
        assert back is not None
        assert (back.key, back.value, tuple(back.headers)) == (rec.key, rec.value, rec.headers)
        assert back.timestamp == (None if rec.timestamp == -1 else rec.timestamp)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("text", ['"unterminated', '{"hex": "00"}', '{"id":1}', "plain"])
def test_hand_written_option_values_that_are_not_plogs_json_forms_are_text(text):
    assert ScanFilter.from_options({"key": text}).key == text.encode()
    assert ScanFilter.from_options({"value_contains": text}).value_contains == text.encode()

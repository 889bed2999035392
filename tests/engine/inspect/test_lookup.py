"""``lookup_offset`` / ``lookup_timestamp`` against a linear-scan oracle.

The oracle reads every batch and record of a partition in offset order and answers
directly: an offset lives in the first batch whose last offset >= it (its first record at
or after it is the answer's record); ListOffsets for a timestamp T is the first record, in
offset order, at or after the log start offset with timestamp >= T. Every offset of the
small multi-segment corpus partitions is checked; large ones are sampled, always with every
segment's boundaries. A synthetic partition written by the engine adds what the corpus
lacks: gaps inside and between batches, empty batches, a gap at a segment's end,
non-monotonic timestamps, LogAppendTime, legacy v1 entries, a log start offset inside the
log, and a preallocated (zero-padded) index.
"""

from __future__ import annotations

import bisect
import os
import random
import shutil
from dataclasses import dataclass

import pytest

from conftest import CORPUS
from plog.engine.inspect import lookup as lk
from plog.engine.storage.discovery import partitions as discover
from plog.engine.errors import LogDirError, OffsetOutOfRangeError
from plog.engine.storage.file_records import FileBatches
from plog.formats.indexes import (
    OFFSET_INDEX_ENTRY_SIZE,
    OFFSET_INDEX_KEY,
    TIME_INDEX_ENTRY_SIZE,
    TIME_INDEX_KEY,
    largest_lower_bound_slot,
)

FULL_OFFSETS = 20_000  # a multi-segment partition with at most this many offsets is checked whole
SAMPLED_OFFSETS = 300  # random offsets in a larger (or single-segment) partition, plus boundaries
SAMPLED_TIMESTAMPS = 60


# -- the oracle --------------------------------------------------------------------------


@dataclass
class Oracle:
    """Every batch and record of a partition, in offset order."""

    view: lk.PartitionView
    batches: list  # (segment base, position, base offset, last offset)
    last_offsets: list
    record_offsets: list
    record_ts: list
    record_where: list  # (segment base, batch position)

    @classmethod
    def build(cls, view: lk.PartitionView) -> "Oracle":
        batches, last_offsets, offs, tss, where = [], [], [], [], []
        for seg in view.segments:
            for b in FileBatches(seg.log):
                batches.append((seg.base_offset, b.position, b.base_offset, b.last_offset))
                last_offsets.append(b.last_offset)
                for r in b.records():
                    offs.append(r.offset)
                    tss.append(r.timestamp)
                    where.append((seg.base_offset, b.position))
        return cls(view, batches, last_offsets, offs, tss, where)

    def offset(self, n: int):
        """(batch, first record offset >= n, its timestamp)."""
        batch = self.batches[bisect.bisect_left(self.last_offsets, n)]
        i = bisect.bisect_left(self.record_offsets, n)
        rec = (self.record_offsets[i], self.record_ts[i], self.record_where[i]) if i < len(self.record_offsets) else None
        return batch, rec

    def live_records(self):
        """Indexes of records in segments not wholly below the log start offset."""
        live = {self.view.bases[i] for i in self.view.live_segments()}
        return [i for i, (seg, _pos) in enumerate(self.record_where) if seg in live]

    def timestamp(self, t: int):
        """ListOffsets: (offset, timestamp) of the first record with ts >= t, or None."""
        start = self.view.log_start_offset
        for i in self._live:
            if self.record_offsets[i] >= start and self.record_ts[i] >= t:
                return self.record_offsets[i], self.record_ts[i]
        return None

    def prepare_timestamps(self) -> None:
        self._live = self.live_records()
        # Prefix maxima over the eligible records make the first-match search a bisect.
        start = self.view.log_start_offset
        self._eligible = [i for i in self._live if self.record_offsets[i] >= start]
        self._prefix = []
        best = None
        for i in self._eligible:
            ts = self.record_ts[i]
            best = ts if best is None or ts > best else best
            self._prefix.append(best)

    def timestamp_fast(self, t: int):
        k = bisect.bisect_left(self._prefix, t)
        if k == len(self._prefix):
            return None
        i = self._eligible[k]
        return self.record_offsets[i], self.record_ts[i]

    def max_timestamp(self):
        live = self._live
        if not live:
            return None
        best = max(self.record_ts[i] for i in live)
        if best < 0:
            return None
        i = next(i for i in live if self.record_ts[i] == best)
        return self.record_offsets[i], best


def check_offset(view: lk.PartitionView, oracle: Oracle, n: int, decode: bool = False) -> None:
    r = lk.lookup_offset(view, n, decode=decode)
    batch, rec = oracle.offset(n)
    got = (r.batch.segment_base_offset, r.batch.position, r.batch.base_offset, r.batch.last_offset)
    assert got == batch, f"offset {n}: {got} != oracle {batch}"
    assert r.segment_base_offset == batch[0]
    if rec is None:
        assert r.record_offset is None
    else:
        assert r.record_offset == rec[0], f"offset {n}: record {r.record_offset} != {rec[0]}"
        assert (r.record_segment_base_offset, r.record_batch_position) == rec[2]
        if r.record_timestamp is not None or decode:
            assert r.record_timestamp == rec[1]


def check_timestamp(view: lk.PartitionView, oracle: Oracle, t: int) -> None:
    r = lk.lookup_timestamp(view, t)
    want = oracle.timestamp_fast(t)
    got = (r.offset, r.timestamp) if r.found else None
    assert got == want, f"timestamp {t}: {got} != oracle {want}"


def offsets_to_check(view: lk.PartitionView, oracle: Oracle, full: bool, rng: random.Random) -> list[int]:
    start, end = view.log_start_offset, view.log_end_offset
    if full and end - start <= FULL_OFFSETS:
        return list(range(start, end))
    picked = set(range(start, min(end, start + 30))) | set(range(max(start, end - 30), end))
    for base in view.bases:  # every segment's boundaries
        picked.update(o for o in range(base - 3, base + 4) if start <= o < end)
    per_segment: dict = {}
    for seg, pos, b, last in oracle.batches:  # the first and last batches of each segment
        per_segment.setdefault(seg, []).append((b, last))
    for lst in per_segment.values():
        for b, last in lst[:5] + lst[-5:]:
            picked.update(o for o in (b - 1, b, b + 1, last - 1, last, last + 1) if start <= o < end)
    for o in oracle.record_offsets[:: max(1, len(oracle.record_offsets) // 50)]:
        picked.update(x for x in (o - 1, o, o + 1) if start <= x < end)
    picked.update(rng.randrange(start, end) for _ in range(SAMPLED_OFFSETS))
    return sorted(picked)


def timestamps_to_check(oracle: Oracle, rng: random.Random, limit: int | None = SAMPLED_TIMESTAMPS) -> list[int]:
    distinct = sorted({t for t in oracle.record_ts if t >= 0})
    if not distinct:
        return [0, 1]
    chosen = distinct if limit is None or len(distinct) <= limit else \
        distinct[:5] + distinct[-5:] + rng.sample(distinct, limit)
    out = {0, distinct[0] - 1, distinct[-1] + 1, distinct[-1] + 10**6}
    for t in chosen:
        out.update((t - 1, t, t + 1))
    return sorted(t for t in out if t >= 0)


# -- corpus partitions -------------------------------------------------------------------


def corpus_partitions() -> list[tuple[str, bool]]:
    """(path, multi-segment) of every corpus partition with several segments or a
    non-empty offset index."""
    if not CORPUS.is_dir():
        return []
    found = []
    for top in sorted(CORPUS.iterdir()):
        if top.name == "vectors" or not top.is_dir():
            continue
        for p in discover(str(top)):
            segs = [s for s in p.segments if s.log]
            if not segs:
                continue
            indexed = any(s.index and os.path.getsize(s.index) for s in segs)
            if len(p.segments) > 1 or indexed:
                found.append((p.path, len(p.segments) > 1))
    return found


PARTITIONS = corpus_partitions()
MULTI = [p for p, multi in PARTITIONS if multi]


def _id(path: str) -> str:
    return os.path.relpath(path, CORPUS)


def test_corpus_has_multi_segment_partitions(corpus):
    assert len(MULTI) >= 9  # __cluster_metadata-0, __consumer_offsets-17/19, 7 invoice replicas
    assert len(PARTITIONS) > len(MULTI)


@pytest.mark.parametrize("path", MULTI, ids=_id)
def test_offsets_and_timestamps_of_multi_segment_partitions(corpus, path):
    view = lk.open_partition(path)
    oracle = Oracle.build(view)
    rng = random.Random(path)
    offsets = offsets_to_check(view, oracle, full=True, rng=rng)
    for n in offsets:
        check_offset(view, oracle, n)
    for n in offsets[:: max(1, len(offsets) // 40)]:  # a few with the records decoded
        check_offset(view, oracle, n, decode=True)
    oracle.prepare_timestamps()
    for t in timestamps_to_check(oracle, rng):
        check_timestamp(view, oracle, t)
    _check_special_timestamps(view, oracle)


@pytest.mark.parametrize("path", [p for p, multi in PARTITIONS if not multi], ids=_id)
def test_single_segment_partitions_with_an_index(corpus, path):
    view = lk.open_partition(path)
    oracle = Oracle.build(view)
    rng = random.Random(path)
    offsets = offsets_to_check(view, oracle, full=False, rng=rng)
    for n in rng.sample(offsets, min(len(offsets), 150)):
        check_offset(view, oracle, n)
    oracle.prepare_timestamps()
    for t in rng.sample(timestamps_to_check(oracle, rng, limit=40), 25):
        check_timestamp(view, oracle, t)
    _check_special_timestamps(view, oracle)


def _check_special_timestamps(view, oracle) -> None:
    r = lk.lookup_timestamp(view, lk.EARLIEST_TIMESTAMP)
    assert (r.found, r.offset, r.timestamp) == (True, view.log_start_offset, -1)
    r = lk.lookup_timestamp(view, lk.LATEST_TIMESTAMP)
    assert (r.found, r.offset, r.timestamp) == (True, view.log_end_offset, -1)
    r = lk.lookup_timestamp(view, lk.MAX_TIMESTAMP)
    assert ((r.offset, r.timestamp) if r.found else None) == oracle.max_timestamp()


def test_log_end_offsets_match_a_full_scan(corpus):
    for path, _multi in PARTITIONS:
        view = lk.open_partition(path)
        last = None
        for seg in view.segments:
            for b in FileBatches(seg.log):
                last = b.next_offset
        assert view.log_end_offset == (last if last is not None else view.segments[-1].base_offset), path


def test_out_of_range_offsets(corpus):
    view = lk.open_partition(MULTI[0])
    for bad in (view.log_start_offset - 1, view.log_end_offset, view.log_end_offset + 10):
        if bad < 0:
            continue
        with pytest.raises(OffsetOutOfRangeError, match=rf"offset {bad} is out of range \["):
            lk.lookup_offset(view, bad)


def test_compacted_partition_answers_the_next_available_offset(corpus):
    path = CORPUS / "ArthurArutunyan04__Backend_labs/kafka-data/__consumer_offsets-19"
    r = lk.lookup_offset(str(path), 5)
    # The only .log starts at 186795 (compacted); 258527's .log is missing from the snapshot.
    assert (r.log_start_offset, r.log_end_offset) == (0, 258527)
    assert r.batch.position == 0 and r.batch.base_offset == 186795
    assert r.record_offset == 186795 and not r.exact
    assert any(s.name == "note" and "00000000000000258527" in s.text for s in r.steps)


# -- the binary search -------------------------------------------------------------------


def _index_files(suffix: str) -> list[str]:
    out = []
    for path, _multi in PARTITIONS:
        out += [os.path.join(path, f) for f in sorted(os.listdir(path))
                if f.endswith(suffix) and os.path.getsize(os.path.join(path, f))]
    return out


@pytest.mark.parametrize("suffix,size,key", [(".index", OFFSET_INDEX_ENTRY_SIZE, OFFSET_INDEX_KEY),
                                             (".timeindex", TIME_INDEX_ENTRY_SIZE, TIME_INDEX_KEY)])
def test_pread_search_equals_the_buffer_search(corpus, suffix, size, key):
    files = _index_files(suffix)
    assert files
    for path in files:
        data = open(path, "rb").read()
        entries = len(data) // size
        keys = [key.field.unpack_from(data, i * size + key.field_offset)[0] for i in range(entries)]
        targets = {keys[0] - 1, keys[-1] + 1} | {k + d for k in keys[:: max(1, entries // 60)] for d in (-1, 0, 1)}
        with lk.IndexFile(path, size, 0) as idx:
            assert (idx.slots, idx.entries) == (entries, entries)
            for t in sorted(targets):
                probes: list = []
                got = lk.largest_lower_bound(idx, t, key, probes)
                assert got == largest_lower_bound_slot(data, entries, t, key), (path, t)
                assert len(probes) <= 3 + entries.bit_length()


def test_index_file_stops_at_a_preallocated_zero_tail(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    entries = [(5, 4200), (9, 8400), (30, 12700)]
    path.write_bytes(b"".join(int.to_bytes(r, 4, "big") + int.to_bytes(p, 4, "big") for r, p in entries))
    with open(path, "r+b") as f:
        f.truncate(10485760)  # what a broker that crashed (or is running) leaves
    with lk.IndexFile(str(path), OFFSET_INDEX_ENTRY_SIZE, 100) as idx:
        assert (idx.slots, idx.entries, idx.zero_tail) == (1310720, 3, 1310717)
        assert idx.last_offset_entry() == (130, 12700)
        assert lk.largest_lower_bound(idx, 29, OFFSET_INDEX_KEY) == 1
    with lk.IndexFile(str(tmp_path / "missing.index"), OFFSET_INDEX_ENTRY_SIZE, 0) as idx:
        assert idx.missing and idx.entries == 0


# -- a synthetic partition with every shape the corpus lacks ------------------------------


def _records(offsets, ts0, step=7, value=b"v" * 40):
    return [(o, ts0 + ((o * step) % 23) - 5, b"k%d" % o, value) for o in offsets]


def write_synthetic_partition(log_dir, name="synth-0", *, log_start: int | None = None) -> str:
    """A partition of several segments written through the engine (follower appends, so
    Kafka's index rules apply), with gaps, empty batches and mixed formats."""
    from plog.engine.storage.log_config import LogConfig
    from plog.engine.storage.log import Log
    from plog.formats.legacy import encode_legacy_batch
    from plog.formats.record_batch import encode_batch, encode_empty_batch
    from plog.formats.records import LOG_APPEND_TIME

    part = os.path.join(log_dir, name)
    os.makedirs(part)
    cfg = LogConfig(segment_bytes=2500, index_interval_bytes=300)
    ts0 = 1_700_000_000_000
    batches = [
        encode_legacy_batch(_records([0], ts0), magic=1),
        encode_legacy_batch(_records([1, 2, 3], ts0), magic=1, compression_codec=1),
        encode_batch(_records(range(4, 10), ts0), base_offset=4),
        encode_batch(_records([10, 12, 15], ts0), base_offset=10, last_offset_delta=7),  # gaps inside, tail gap
        encode_empty_batch(base_offset=18, last_offset=20, max_timestamp=ts0 + 3),  # all removed
        encode_batch(_records([25, 26], ts0), base_offset=25),  # gap 21..24 between batches
    ]
    rolls = set()  # base offsets to roll a new segment at before appending
    nxt = 27
    for i in range(30):
        offs = list(range(nxt, nxt + 5)) if i % 4 else [nxt, nxt + 2, nxt + 4]
        kw = {"compression_codec": 1 if i % 3 == 0 else 0}
        if i % 5 == 4:
            kw.update(timestamp_type=LOG_APPEND_TIME, log_append_time=ts0 + 50 + i)
        batches.append(encode_batch(_records(offs, ts0 + i, step=i + 3), base_offset=nxt,
                                    last_offset_delta=4, partition_leader_epoch=i // 10, **kw))
        nxt += 5 if i != 12 else 40
        if i == 12:  # a gap at a segment's end: the next segment starts at the next batch
            rolls.add(nxt)
    with Log.open(part, cfg) as log:
        for raw in batches:
            base = int.from_bytes(raw[:8], "big")
            if base in rolls:
                log.roll(base)
            log.append_as_follower(raw)
    if log_start is not None:
        with open(os.path.join(log_dir, "log-start-offset-checkpoint"), "w") as f:
            f.write(f"0\n1\nsynth 0 {log_start}\n")
    return part


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> str:
    return write_synthetic_partition(str(tmp_path_factory.mktemp("logdir")))


def _exhaustive(path: str) -> lk.PartitionView:
    view = lk.open_partition(path)
    oracle = Oracle.build(view)
    for n in range(view.log_start_offset, view.log_end_offset):
        check_offset(view, oracle, n, decode=n % 2 == 0)
    oracle.prepare_timestamps()
    for t in timestamps_to_check(oracle, random.Random(0), limit=None):
        check_timestamp(view, oracle, t)
        assert oracle.timestamp(t) == oracle.timestamp_fast(t)  # the oracle's own shortcut
    _check_special_timestamps(view, oracle)
    return view


def test_synthetic_partition_every_offset_and_timestamp(synthetic):
    view = _exhaustive(synthetic)
    assert len(view.segments) >= 4
    assert any(os.path.getsize(s.index) > 8 for s in view.segments if s.index)
    # the jump after batch 12 leaves offsets that only the next segment answers
    r = lk.lookup_offset(view, 11)
    assert r.batch.base_offset == 10 and r.record_offset == 12 and not r.exact
    r = lk.lookup_offset(view, 19)  # inside the empty batch: the next record is in a later batch
    assert r.batch.records_count == 0 and r.record_offset == 25
    r = lk.lookup_offset(view, 2)  # inside the legacy gzip wrapper
    assert r.batch.magic == 1 and r.batch.codec == "gzip" and r.batch.base_offset == 1 and r.exact


def test_a_gap_at_a_segment_end_moves_to_the_next_segment(synthetic):
    view = lk.open_partition(synthetic)
    for n in range(view.log_start_offset, view.log_end_offset):
        i = view.floor_segment(n)
        r = lk.lookup_offset(view, n, decode=False)
        if r.segment_base_offset != view.bases[i]:
            assert [s.name for s in r.steps].count("scan") == 2
            assert "Kafka reads the next segment" in [s for s in r.steps if s.name == "scan"][0].text
            break
    else:
        pytest.fail("no offset fell in a gap at a segment's end")


def test_log_start_offset_from_the_checkpoint(tmp_path):
    part = write_synthetic_partition(str(tmp_path), log_start=140)
    view = _exhaustive(part)
    assert view.log_start_offset == 140 and view.log_start_source == "log-start-offset-checkpoint"
    with pytest.raises(OffsetOutOfRangeError):
        lk.lookup_offset(view, 139)
    assert view.live_segments()[0] > 0  # earlier segments are skipped by timestamp lookups


def test_preallocated_indexes_give_the_same_answers(tmp_path, synthetic):
    part = os.path.join(tmp_path, "synth-0")
    shutil.copytree(synthetic, part)
    last = sorted(f for f in os.listdir(part) if f.endswith(".index"))[-1]
    for suffix, size in ((".index", 10485760), (".timeindex", 10485756)):
        with open(os.path.join(part, last.replace(".index", suffix)), "r+b") as f:
            f.truncate(size)
    view = _exhaustive(part)
    seg = view.segments[-1]
    with lk.IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
        assert idx.zero_tail > 0


def test_steps_describe_the_search(synthetic):
    view = lk.open_partition(synthetic)
    n = view.bases[1] + 12
    r = lk.lookup_offset(view, n)
    names = [s.name for s in r.steps]
    assert names[:3] == ["partition", "log-start-offset", "log-end-offset"]
    assert names[3:] == ["segment", "offset-index", "scan", "batch", "record"]
    probe = r.index
    assert probe.kind == "offset" and probe.target == n and probe.probes
    assert probe.slot >= 0 and probe.entry[0] <= n and probe.entry[1] == r.scan_start_position
    t = lk.lookup_timestamp(view, r.record_timestamp)
    assert [s.name for s in t.steps][-4:] == ["time-index", "offset-index", "scan", "answer"]
    assert t.time_index.kind == "time" and t.offset_index.kind == "offset"


def test_one_segment_file_and_log_dir_paths(corpus, synthetic):
    view = lk.open_partition(synthetic)
    seg = view.segments[1]
    one = lk.open_partition(seg.index)  # any file of the segment names it
    assert one.single_segment and one.segments == [seg]
    end = [b.next_offset for b in FileBatches(seg.log)][-1]
    assert (one.log_start_offset, one.log_end_offset) == (seg.base_offset, end)
    r = lk.lookup_offset(seg.log, seg.base_offset + 1)
    assert r.segment_base_offset == seg.base_offset
    with pytest.raises(OffsetOutOfRangeError):
        lk.lookup_offset(seg.log, end)

    logs = CORPUS / "dipendrasaini__kafka-learnning-series/tmp"
    r = lk.lookup_offset(str(logs / "kafka-logs-2"), 31000, topic="invoice", partition=1)
    assert r.partition_path.endswith("kafka-logs-2/invoice-1") and r.batch.last_offset >= 31000
    with pytest.raises(LogDirError, match="in 3 folders"):
        lk.open_partition(str(logs), "invoice", 0)
    with pytest.raises(LogDirError, match="--topic and --partition"):
        lk.open_partition(str(logs / "kafka-logs-2"))
    with pytest.raises(LogDirError, match="no folder for partition invoice-9"):
        lk.open_partition(str(logs), "invoice", 9)


def test_offset_and_timestamp_specs(synthetic):
    view = lk.open_partition(synthetic)
    assert lk.resolve_offset(view, "earliest") == view.log_start_offset
    assert lk.resolve_offset(view, "-1") == view.log_end_offset - 1
    assert lk.resolve_offset(view, "+3") == view.log_start_offset + 3
    assert lk.resolve_offset(view, "17") == 17
    with pytest.raises(ValueError):
        lk.resolve_offset(view, "x")
    assert lk.parse_timestamp("earliest") == -2 and lk.parse_timestamp("latest") == -1
    assert lk.parse_timestamp("max") == -3 and lk.parse_timestamp("-3") == -3
    assert lk.parse_timestamp("1700000000000") == lk.parse_timestamp("@1700000000000") == 1700000000000
    assert lk.parse_timestamp("@2023-11-14T22:13:20Z") == 1700000000000
    assert lk.parse_timestamp("@2023-11-14T22:13:20") == 1700000000000  # UTC when no zone is given
    assert lk.parse_timestamp("@2023-11-15T00:13:20.5+02:00") == 1700000000500
    assert lk.parse_timestamp("@-15m", now_ms=1_000_000_000) == 1_000_000_000 - 900_000
    for bad in ("@yesterday", "", "@-15x", "1.5"):
        with pytest.raises(ValueError):
            lk.parse_timestamp(bad)
    with pytest.raises(ValueError):
        lk.lookup_timestamp(view, -7)


def test_a_damaged_last_index_entry_does_not_change_the_log_end_offset(tmp_path, synthetic):
    part = os.path.join(tmp_path, "synth-0")
    shutil.copytree(synthetic, part)
    good = lk.open_partition(part).log_end_offset
    seg = lk.open_partition(part).segments[-1]
    size = os.path.getsize(seg.index)
    assert size >= OFFSET_INDEX_ENTRY_SIZE
    with open(seg.index, "r+b") as f:  # the last entry now points 5 bytes into its batch
        f.seek(size - 4)
        position = int.from_bytes(f.read(4), "big")
        f.seek(size - 4)
        f.write((position + 5).to_bytes(4, "big"))
    assert lk.open_partition(part).log_end_offset == good


def test_lookup_reads_offsets_and_times_in_the_one_offset_language(synthetic):
    """lookup parses with engine.offset_spec: its keywords, @-<duration> of several units,
    ISO-8601 without the @; a time is not an offset."""
    view = lk.open_partition(synthetic)
    assert lk.resolve_offset(view, "beginning") == lk.resolve_offset(view, "earliest") == view.log_start_offset
    assert lk.resolve_offset(view, "LATEST") == lk.resolve_offset(view, "end") == view.log_end_offset
    assert lk.parse_timestamp("@-1h30m", now_ms=10_000_000) == 10_000_000 - 5_400_000
    assert lk.parse_timestamp("2023-11-14T22:13:20Z") == 1700000000000
    for not_an_offset in ("@1700000000000", "committed", "x"):
        with pytest.raises(ValueError, match="expected N, [+]N, -N .*, earliest or latest"):
            lk.resolve_offset(view, not_an_offset)

"""The log cleaner against an oracle, Kafka's byte-level rules, and crashes at every step.

The oracle is a plain list of every data record written (offset, key, value, timestamp,
transaction) and the clock of each clean. After a clean whose first uncleanable offset is
``fu`` at time ``now``, the records that must survive are:

* every record at or past ``fu`` (nothing there is touched);
* below ``fu``: records of aborted transactions never; key-less records never; otherwise
  the record holding the highest offset of its key among the non-aborted records below
  ``fu``; a tombstone only while ``now`` is before its delete horizon, which is set (to the
  clean's time + delete.retention.ms) by the first clean that keeps it.

Several rounds forced by a tiny offset map must give the same records as one round.
After every clean, ``verify`` finds no error and a reload after a simulated crash
(``had_clean_shutdown=False``) reads the same records.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plog.engine.maintenance import cleaner as cleaner_mod
from plog.engine.errors import CleanerBufferTooSmallError
from plog.engine.maintenance.cleaner import clean_log, explain_compaction, group_segments_by_size
from plog.engine.maintenance.cleaner_manager import log_to_clean
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log import load_log
from plog.engine.storage.log import Log
from plog.engine.inspect.verify import verify_path
from plog.formats.batches import iter_batches
from plog.formats.record_batch import DELETE_HORIZON_FLAG_MASK, encode_batch

T0 = 1_700_000_000_000
RETENTION = 10_000


# ---------------------------------------------------------------------------------------
# Helpers


class Clock:
    def __init__(self, now: int = T0):
        self.now = now

    def __call__(self) -> int:
        return self.now


def compact_config(**props) -> LogConfig:
    base = {"cleanup.policy": "compact", "delete.retention.ms": RETENTION, "min.cleanable.dirty.ratio": 0.01,
            "segment.bytes": 400, "file.delete.delay.ms": 0}
    base.update(props)
    return LogConfig.from_properties(base)


def data_records(log: Log) -> list[tuple]:
    """(offset, key, value, timestamp, headers) of every data record on disk, in order."""
    out = []
    for seg in log.segments:
        for batch in seg.batches():
            if batch.is_control:
                continue
            for r in batch.records():
                out.append((r.offset, r.key, r.value, r.timestamp, r.headers))
    return out


def all_batches(log: Log) -> list[tuple[int, bytes]]:
    out = []
    for seg in log.segments:
        for batch in seg.batches():
            out.append((batch.base_offset, bytes(batch.buffer)))
    return out


def errors_of(directory: Path) -> list:
    return [f for f in verify_path(str(directory)) if f.severity == "error"]


def reload(directory: Path, config: LogConfig, clock=None) -> Log:
    return load_log(directory, config, had_clean_shutdown=False, time_source=clock)


@dataclass
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    txn: "Txn | None" = None
    horizon: int | None = None  # the tombstone's delete horizon once a clean kept it

    def tup(self):
        return (self.offset, self.key, self.value, self.timestamp, ())


@dataclass
class Txn:
    pid: int
    outcome: str | None = None


@dataclass
class Model:
    """The oracle: every data record written, and what each clean leaves."""

    records: list[Rec] = field(default_factory=list)

    def survivors(self) -> list[tuple]:
        return [r.tup() for r in self.records]

    def apply_clean(self, fu: int, now: int, retention: int) -> None:
        below = [r for r in self.records if r.offset < fu]
        above = [r for r in self.records if r.offset >= fu]
        live = [r for r in below if not (r.txn is not None and r.txn.outcome == "abort") and r.key is not None]
        latest: dict[bytes, int] = {}
        for r in live:
            latest[r.key] = max(latest.get(r.key, -1), r.offset)
        kept = []
        for r in live:
            if r.offset != latest[r.key]:
                continue
            if r.value is None:
                if r.horizon is not None and now >= r.horizon:
                    continue
                if r.horizon is None:
                    r.horizon = now + retention
            kept.append(r)
        self.records = kept + above


class Writer:
    """Drives a compacted log like producers and a transaction coordinator, and keeps the model."""

    def __init__(self, directory: Path, config: LogConfig, clock: Clock):
        self.dir = directory
        self.config = config
        self.clock = clock
        self.log = Log.open(directory, config, time_source=clock)
        self.model = Model()
        self.seq: dict[int, int] = {}
        self.open: dict[int, Txn] = {}
        self.checkpoint: int | None = None

    def send(self, pid: int, items: list[tuple[bytes | None, bytes | None]], *, transactional: bool = False):
        ts = self.clock.now
        recs = [(i, ts + i, k, v) for i, (k, v) in enumerate(items)]
        kw = {}
        if pid >= 0:
            kw = dict(producer_id=pid, producer_epoch=0, base_sequence=self.seq.get(pid, 0),
                      is_transactional=transactional)
            self.seq[pid] = self.seq.get(pid, 0) + len(items)
        info = self.log.append_as_leader(encode_batch(recs, **kw))
        txn = None
        if transactional:
            txn = self.open.get(pid)
            if txn is None:
                txn = self.open[pid] = Txn(pid)
        for i, (k, v) in enumerate(items):
            self.model.records.append(Rec(info.first_offset + i, k, v, ts + i, txn))
        return info

    def end(self, pid: int, commit: bool):
        info = self.log.append_end_txn_marker(pid, 0, commit=commit, coordinator_epoch=1)
        txn = self.open.pop(pid, None)
        if txn is not None:
            txn.outcome = "commit" if commit else "abort"
        return info

    def expected_first_uncleanable(self) -> int:
        log = self.log
        firsts = [r.offset for r in self.model.records if r.txn is not None and r.txn.outcome is None]
        lso = min(firsts) if firsts else log.log_end_offset
        raw = min(lso, log.active_segment.base_offset)
        lag = self.config.min_compaction_lag_ms
        if lag > 0:
            young = [s.base_offset for s in list(log.segments)[:-1]
                     if s.largest_timestamp > self.clock.now - lag and s.base_offset >= (self.checkpoint or 0)]
            raw = min([raw, *young])
        return max(b for b in log.segments.base_offsets if b <= raw)

    def clean(self, **kw):
        kw.setdefault("force", True)
        before = self.log.log_end_offset
        expected_fu = self.expected_first_uncleanable()
        result = clean_log(self.log, first_dirty_offset=self.checkpoint, now=self.clock.now, **kw)
        if result.cleaned:
            assert result.first_uncleanable_offset == expected_fu
            self.model.apply_clean(result.first_uncleanable_offset, self.clock.now, self.config.delete_retention_ms)
            assert result.checkpoint_offset == result.first_uncleanable_offset  # unlimited rounds finish
        self.checkpoint = result.checkpoint_offset
        assert self.log.log_end_offset == before
        return result


# ---------------------------------------------------------------------------------------
# The oracle under random workloads

KEYS = [b"k%d" % i for i in range(6)]

item = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=12)))
op = st.one_of(
    st.tuples(st.just("send"), st.sampled_from([-1, 1, 2]), st.lists(item, min_size=1, max_size=3)),
    st.tuples(st.just("txn"), st.sampled_from([10, 11]), st.lists(item, min_size=1, max_size=3)),
    st.tuples(st.just("end"), st.sampled_from([10, 11]), st.booleans()),
    st.tuples(st.just("clean"), st.integers(0, 2 * RETENTION)),
    st.tuples(st.just("roll"), st.none()),
    st.tuples(st.just("roll"), st.none()),
)


def run_workload(tmp_path: Path, ops, segment_bytes: int, buffer_size: int) -> Writer:
    clock = Clock()
    w = Writer(tmp_path / "topic-0", compact_config(**{"segment.bytes": segment_bytes}), clock)
    for o in ops:
        clock.now += 7
        kind = o[0]
        if kind == "send":
            w.send(o[1], o[2])
        elif kind == "txn":
            w.send(o[1], o[2], transactional=True)
        elif kind == "end":
            if o[1] in w.open:
                w.end(o[1], o[2])
        elif kind == "roll":
            if w.log.active_segment.size:
                w.log.roll()
        else:
            clock.now += o[1]
            w.clean(buffer_size=buffer_size)
            assert data_records(w.log) == w.model.survivors()
    # Two closing cleans of fresh dirty data: the first gives every kept tombstone a
    # horizon, the second runs past it.
    for dt in (RETENTION // 2, 2 * RETENTION):
        clock.now += dt
        w.send(-1, [(b"end", b"%d" % dt)])
        w.log.roll()
        w.clean(buffer_size=buffer_size)
        assert data_records(w.log) == w.model.survivors()
    return w


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=60), segment_bytes=st.sampled_from([150, 300, 1000]))
def test_random_workloads_match_the_oracle(tmp_path_factory, ops, segment_bytes):
    tmp = tmp_path_factory.mktemp("w")
    w = run_workload(tmp, ops, segment_bytes, 1 << 16)
    expected = w.model.survivors()
    assert errors_of(w.dir) == []
    w.log.close()
    again = reload(w.dir, w.config)
    try:
        assert data_records(again) == expected
    finally:
        again.close()
    assert errors_of(w.dir) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(ops=st.lists(op.filter(lambda o: o[0] != "clean"), min_size=5, max_size=60))
def test_several_rounds_with_a_tiny_map_equal_one_round(tmp_path_factory, ops):
    tmp = tmp_path_factory.mktemp("r")
    clock = Clock()
    w = Writer(tmp / "topic-0", compact_config(), clock)
    for o in ops:
        clock.now += 3
        if o[0] == "send":
            w.send(o[1], o[2])
        elif o[0] == "txn":
            w.send(o[1], o[2], transactional=True)
        elif o[0] == "end" and o[1] in w.open:
            w.end(o[1], o[2])
        elif o[0] == "roll" and w.log.active_segment.size:
            w.log.roll()
    w.log.close()
    other = tmp / "copy-0"
    shutil.copytree(w.dir, other)
    big = Log.open(w.dir, w.config, time_source=clock)
    small = Log.open(other, w.config, time_source=clock)
    try:
        r1 = clean_log(big, first_dirty_offset=None, now=clock.now, force=True, buffer_size=1 << 20)
        # 4 slots, 3 keys per round: batches hold at most 3 distinct keys.
        r2 = clean_log(small, first_dirty_offset=None, now=clock.now, force=True, buffer_size=24 * 4)
        assert r1.cleaned == r2.cleaned
        if r1.cleaned:
            assert r1.rounds == 1
            assert r1.checkpoint_offset == r2.checkpoint_offset
        assert data_records(big) == data_records(small)
    finally:
        big.close()
        small.close()
    assert errors_of(w.dir) == [] and errors_of(other) == []


# ---------------------------------------------------------------------------------------
# Exact details


def test_untouched_batches_are_copied_byte_for_byte(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    for i in range(40):
        w.send(-1, [(b"same", b"v%d" % i)] if i % 2 else [(b"q%d" % i, b"x" * 10)])
    w.log.roll()
    before = dict(all_batches(w.log))
    w.clean()
    after = dict(all_batches(w.log))
    unique = [o for o, raw in before.items() if b"q" in raw[61:]]
    assert unique and all(after[o] == before[o] for o in unique)
    dups = [o for o in before if o not in unique]
    assert [o for o in dups if o in after] == [dups[-1]]
    assert data_records(w.log) == w.model.survivors()


def test_a_rebuilt_tombstone_batch_gets_the_delete_horizon(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    w.send(-1, [(b"a", b"1"), (b"b", b"2")])
    info = w.send(-1, [(b"a", None), (b"c", b"3"), (b"b", b"4")])
    w.log.roll()
    clock.now += 5000
    result = w.clean()
    assert result.stats.tombstones_given_horizon == 1
    batches = {o: raw for o, raw in all_batches(w.log)}
    raw = batches[info.first_offset]
    attributes, = struct.unpack_from(">h", raw, 21)
    base_ts, = struct.unpack_from(">q", raw, 27)
    assert attributes & DELETE_HORIZON_FLAG_MASK
    assert base_ts == clock.now + RETENTION
    batch = next(iter(iter_batches(raw)))
    assert batch.is_valid() and batch.delete_horizon_ms == clock.now + RETENTION
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch.records()] == [
        (info.first_offset, b"a", None, T0), (info.first_offset + 1, b"c", b"3", T0 + 1),
        (info.first_offset + 2, b"b", b"4", T0 + 2)]
    # A later clean (of new dirty data) before the horizon keeps it byte for byte; after
    # the horizon it goes.
    clock.now += RETENTION - 1
    w.send(-1, [(b"z", b"1")])
    w.log.roll()
    w.clean()
    assert dict(all_batches(w.log))[info.first_offset] == raw
    clock.now += 1
    w.send(-1, [(b"z", b"2")])
    w.log.roll()
    result = w.clean()
    assert result.stats.tombstones_expired == 1
    assert [r[1] for r in data_records(w.log)] == [b"c", b"b", b"z"]
    assert data_records(w.log) == w.model.survivors()


def test_the_last_batch_of_an_active_producer_stays_as_an_empty_header(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    info = w.send(7, [(b"a", b"1"), (b"b", b"2")])
    w.send(-1, [(b"a", b"3"), (b"b", b"4")])
    w.log.roll()
    result = w.clean()
    assert result.stats.empty_batches_retained == 1
    raw = dict(all_batches(w.log))[info.first_offset]
    assert len(raw) == 61
    (base, length, ple, magic, _crc, attributes, last_delta, base_ts, max_ts, pid, epoch, seq,
     count) = struct.unpack(">qiibIhiqqqhii", raw)
    assert (base, length, magic, attributes, last_delta, base_ts, pid, epoch, seq, count) == \
        (info.first_offset, 49, 2, 0, 1, -1, 7, 0, 0, 0)
    assert max_ts == T0 + 1 and ple == 0
    assert next(iter(iter_batches(raw))).is_valid()
    assert data_records(w.log) == w.model.survivors()
    w.log.close()
    again = reload(w.dir, w.config)
    try:
        # The producer's sequence survives the reload: its next batch (seq 2) is accepted.
        again.append_as_leader(encode_batch([(0, T0, b"z", b"z")], producer_id=7, producer_epoch=0, base_sequence=2))
    finally:
        again.close()


def test_key_less_records_are_dropped(tmp_path):
    directory = tmp_path / "t-0"
    plain = Log.open(directory, LogConfig.from_properties({"segment.bytes": 300}))
    plain.append_as_leader(encode_batch([(0, T0, None, b"n1"), (1, T0, b"k", b"v1")]))
    plain.append_as_leader(encode_batch([(0, T0, None, b"n2")]))
    plain.append_as_leader(encode_batch([(0, T0, b"k", b"v2")]))
    plain.roll()
    plain.close()
    log = Log.open(directory, compact_config())
    try:
        result = clean_log(log, first_dirty_offset=None, now=T0, force=True)
        assert result.stats.keyless_records_removed == 2
        assert [(r[0], r[1], r[2]) for r in data_records(log)] == [(3, b"k", b"v2")]
    finally:
        log.close()
    assert errors_of(directory) == []


def check_groups(groups, segments, max_size, max_index):
    assert [s for g in groups for s in g] == segments
    for i, g in enumerate(groups):
        sizes = (sum(s.size for s in g), sum(s.offset_index.size_in_bytes for s in g),
                 sum(s.time_index.size_in_bytes for s in g))
        assert len(g) == 1 or (sizes[0] <= max_size and sizes[1] <= max_index and sizes[2] <= max_index)
        if i + 1 < len(groups):  # greedy: the next segment did not fit
            nxt = groups[i + 1][0]
            assert (sizes[0] + nxt.size > max_size or sizes[1] + nxt.offset_index.size_in_bytes > max_index
                    or sizes[2] + nxt.time_index.size_in_bytes > max_index)


def test_grouping_respects_segment_bytes_and_index_sizes(tmp_path):
    clock = Clock()
    cfg = compact_config(**{"segment.bytes": 500, "index.interval.bytes": 100})
    w = Writer(tmp_path / "t-0", cfg, clock)
    for i in range(200):
        w.send(-1, [(b"k%d" % (i % 50), b"v" * (i % 13))])
    segments = list(w.log.segments)[:-1]
    assert all(s.offset_index.size_in_bytes > 0 for s in segments)
    end = w.log.active_segment.base_offset
    by_bytes = group_segments_by_size(segments, 1600, 10 << 20, end)
    check_groups(by_bytes, segments, 1600, 10 << 20)
    assert 1 < len(by_bytes) < len(segments)
    index_limit = max(s.offset_index.size_in_bytes + s.time_index.size_in_bytes for s in segments) * 2
    by_index = group_segments_by_size(segments, 1 << 30, index_limit, end)
    check_groups(by_index, segments, 1 << 30, index_limit)
    assert 1 < len(by_index) < len(segments)
    # Cleaning with a larger segment.bytes merges segments; the result is still valid.
    w.log.close()
    merged = Log.open(w.dir, compact_config(**{"segment.bytes": 1600, "index.interval.bytes": 100}),
                      time_source=clock)
    try:
        result = clean_log(merged, first_dirty_offset=None, now=clock.now, force=True)
        assert [g.segments for g in result.groups] == [[s.base_offset for s in g] for g in by_bytes]
        assert len(merged.segments) == len(by_bytes) + 1
        w.model.apply_clean(end, clock.now, RETENTION)
        assert data_records(merged) == w.model.survivors()
    finally:
        merged.close()
    assert errors_of(w.dir) == []


class FakeIndex:
    def __init__(self, size):
        self.size_in_bytes = size


class FakeSegment:
    def __init__(self, base, size):
        self.base_offset, self.size = base, size
        self.offset_index = self.time_index = FakeIndex(0)


def test_grouping_keeps_offsets_within_31_bits_of_the_group_base():
    big = 1 << 31
    segs = [FakeSegment(0, 10), FakeSegment(100, 10), FakeSegment(big - 50, 10), FakeSegment(big + 10, 0),
            FakeSegment(big + 20, 10)]
    groups = group_segments_by_size(segs, 1 << 30, 1 << 20, big + 40)
    # 100 joins 0 (next base - 1 = 2^31-51 fits); big-50 cannot (its last offset would be 2^31+9);
    # the empty segment joins whatever its offsets; big+20 fits big-50's group (last = big+39).
    assert [[s.base_offset for s in g] for g in groups] == [[0, 100], [big - 50, big + 10, big + 20]]


def test_aborted_data_goes_and_its_marker_follows_after_the_horizon(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    w.send(10, [(b"a", b"aborted")], transactional=True)
    w.send(-1, [(b"b", b"plain")])
    marker = w.end(10, commit=False)
    w.send(-1, [(b"c", b"after")])
    w.log.roll()
    r1 = w.clean()
    assert r1.stats.aborted_records_removed == 1
    assert data_records(w.log) == w.model.survivors()
    # The producer's last batch (the aborted one) stays as an empty header; the marker stays,
    # and the cleaned segment's txnindex still lists the abort.
    txns = [t for seg in w.log.segments for t in seg.txn_index.all_aborted_txns()]
    assert [(t.producer_id, t.last_offset) for t in txns] == [(10, marker.first_offset)]
    clock.now += 1
    w.send(-1, [(b"d", b"1")])
    w.log.roll()
    r2 = w.clean()
    assert r2.cleaned and r2.stats.txn_markers_given_horizon == 0  # the txn's empty batch is still seen
    assert [t.last_offset for seg in w.log.segments for t in seg.txn_index.all_aborted_txns()] == \
        [marker.first_offset]
    assert data_records(w.log) == w.model.survivors()
    assert errors_of(w.dir) == []


def test_an_abort_marker_of_a_finished_producer_is_removed_after_its_horizon(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    w.send(10, [(b"a", b"aborted")], transactional=True)
    marker = w.end(10, commit=False)
    w.send(-1, [(b"c", b"after")])
    w.log.roll()
    w.log.producer_state._producers.pop(10)  # the producer expired (producer.id.expiration.ms)
    w.clean()
    markers = [(b.base_offset, b.delete_horizon_ms) for s in w.log.segments for b in s.batches() if b.is_control]
    assert markers == [(marker.first_offset, None)]
    clock.now += 1
    w.send(-1, [(b"d", b"1")])
    w.log.roll()
    r2 = w.clean()
    assert r2.stats.txn_markers_given_horizon == 1
    markers = [(b.base_offset, b.delete_horizon_ms) for s in w.log.segments for b in s.batches() if b.is_control]
    assert markers == [(marker.first_offset, clock.now + RETENTION)]
    assert [t for s in w.log.segments for t in s.txn_index.all_aborted_txns()] == []
    clock.now += RETENTION
    w.send(-1, [(b"d", b"2")])
    w.log.roll()
    r3 = w.clean()
    assert r3.stats.txn_markers_removed == 1
    assert [b for s in w.log.segments for b in s.batches() if b.is_control] == []
    assert data_records(w.log) == w.model.survivors()
    assert errors_of(w.dir) == []


def test_an_open_transaction_bounds_the_clean_at_the_last_stable_offset(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    for i in range(10):
        w.send(-1, [(b"a", b"%d" % i)])
    open_info = w.send(11, [(b"a", b"open")], transactional=True)
    for i in range(10):
        w.send(-1, [(b"a", b"later%d" % i)])
    w.log.roll()
    ltc = log_to_clean(w.log, first_dirty_offset=None, now=clock.now)
    assert ltc.last_stable_offset == open_info.first_offset and ltc.uncleanable_bound == "last-stable-offset"
    assert ltc.first_uncleanable_offset <= open_info.first_offset
    w.clean()
    assert data_records(w.log) == w.model.survivors()
    assert any(r[2] == b"open" for r in data_records(w.log))


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(**{"min.compaction.lag.ms": 1000}), clock)
    for i in range(30):
        w.send(-1, [(b"a", b"%d" % i)])
        clock.now += 100
    w.log.roll()
    ltc = log_to_clean(w.log, first_dirty_offset=None, now=clock.now)
    young = [s for s in w.log.segments if s.largest_timestamp > clock.now - 1000]
    assert ltc.uncleanable_bound == "min-compaction-lag"
    assert ltc.first_uncleanable_offset == young[0].base_offset
    w.clean()
    assert data_records(w.log) == w.model.survivors()
    kept_young = [r for r in data_records(w.log) if r[0] >= young[0].base_offset]
    assert len(kept_young) == len([r for r in w.model.records if r.offset >= young[0].base_offset]) > 1


def test_cleanability_ratio_reset_and_max_compaction_lag(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(**{"min.cleanable.dirty.ratio": 0.9}), clock)
    for i in range(20):
        w.send(-1, [(b"a", b"%d" % i)])
    w.log.roll()
    for i in range(3):
        w.send(-1, [(b"b", b"%d" % i)])
    w.log.roll()
    mid = w.log.segments.base_offsets[-2]
    ltc = log_to_clean(w.log, first_dirty_offset=mid, now=clock.now)
    assert ltc.clean_bytes == sum(s.size for s in w.log.segments if s.base_offset < mid)
    assert ltc.cleanable_bytes == w.log.segments.get(mid).size
    assert ltc.dirty_ratio == pytest.approx(ltc.cleanable_bytes / ltc.total_bytes)
    assert not ltc.qualifies and "<= min.cleanable.dirty.ratio" in ltc.reason
    files = sorted(os.listdir(w.dir))
    result = clean_log(w.log, first_dirty_offset=mid, now=clock.now)
    assert not result.cleaned and result.checkpoint_offset == mid and sorted(os.listdir(w.dir)) == files
    # A checkpoint beyond the log end offset is reset to the log start offset.
    reset = log_to_clean(w.log, first_dirty_offset=10_000, now=clock.now)
    assert reset.first_dirty_offset == 0 and "above the log end offset" in reset.first_dirty_reset
    assert reset.qualifies  # everything is dirty again
    # max.compaction.lag.ms: a dirty segment older than the lag must be cleaned now.
    lagged = Log.open(w.dir, compact_config(**{"min.cleanable.dirty.ratio": 0.9, "max.compaction.lag.ms": 100}))
    w.log.close()
    try:
        ltc = log_to_clean(lagged, first_dirty_offset=mid, now=clock.now + 1000)
        assert ltc.needs_compaction_now and ltc.qualifies and ltc.max_compaction_delay_ms > 0
    finally:
        lagged.close()


def test_a_too_small_buffer_is_reported(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    w.send(-1, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    w.send(-1, [(b"a", b"1")])
    w.log.roll()
    with pytest.raises(CleanerBufferTooSmallError):
        clean_log(w.log, first_dirty_offset=None, now=clock.now, force=True, buffer_size=24)
    assert not [n for n in os.listdir(w.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
    # One key per round still progresses: each put moves the map's latest offset (as in Kafka).
    result = w.clean(buffer_size=24 * 2)
    assert result.round_end_offsets == [1, 2, 3, 4]
    assert data_records(w.log) == w.model.survivors()


def test_explain_predicts_the_clean_and_writes_nothing(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    for i in range(60):
        w.send(-1, [(b"k%d" % (i % 7), None if i % 11 == 0 else b"v%d" % i)])
    w.send(10, [(b"x", b"aborted")], transactional=True)
    w.end(10, commit=False)
    w.log.roll()
    state = {n: os.stat(w.dir / n).st_mtime_ns for n in os.listdir(w.dir)}
    plan = explain_compaction(w.log, first_dirty_offset=None, now=clock.now, buffer_size=24 * 4)
    assert {n: os.stat(w.dir / n).st_mtime_ns for n in os.listdir(w.dir)} == state
    assert plan.would_clean and plan.rounds_needed > 1 and plan.distinct_dirty_keys == 7
    lines = plan.explain_lines()
    assert any("rounds" in line for line in lines) and plan.to_dict()["stats"]["records_read"] > 0
    result = clean_log(w.log, first_dirty_offset=None, now=clock.now, force=True, buffer_size=24 * 4)
    assert result.rounds == plan.rounds_needed
    again = explain_compaction(w.log, first_dirty_offset=None, now=clock.now)  # nothing more to remove
    assert again.stats.records_removed == 0
    w.log.close()


def test_explain_numbers_equal_a_one_round_clean(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(), clock)
    for i in range(50):
        w.send(-1, [(b"k%d" % (i % 5), None if i % 9 == 0 else b"v%d" % i)])
    w.send(10, [(b"x", b"aborted")], transactional=True)
    w.end(10, commit=False)
    w.log.roll()
    plan = explain_compaction(w.log, first_dirty_offset=None, now=clock.now)
    seen = []
    result = w.clean(progress=seen.append)
    predicted = {k: v for k, v in plan.stats.to_dict().items() if not k.startswith("map_")}
    assert predicted == {k: v for k, v in result.stats.to_dict().items() if not k.startswith("map_")}
    assert predicted["records_removed"] > 0 and predicted["aborted_records_removed"] == 1
    assert [g.base_offset for g in plan.groups] == [s.base_offset for s in list(w.log.segments)[:-1]]
    assert sum(seen) == result.stats.map_bytes_read + result.stats.bytes_read > 0


# ---------------------------------------------------------------------------------------
# Crash safety


class Crash(BaseException):
    pass


def build_crash_log(directory: Path, clock: Clock) -> Writer:
    w = Writer(directory, compact_config(**{"segment.bytes": 300}), clock)
    for i in range(36):
        w.send(-1, [(b"k%d" % (i % 6), None if i % 7 == 3 else b"value-%d" % i)])
    w.send(10, [(b"t", b"aborted")], transactional=True)
    w.end(10, commit=False)
    w.send(-1, [(b"last", b"x")])
    w.log.roll()
    w.log.close()
    return w


@pytest.mark.parametrize("delete_delay", [0, 60000])
def test_a_crash_at_any_step_leaves_each_group_old_or_new(tmp_path, monkeypatch, delete_delay):
    """Kill the clean at every rename, unlink, chunk append (io buffer of 512 bytes: several
    per group) and phase boundary in turn; the
    loader must turn what is on disk into a valid log that keeps every record of the clean's
    result and nothing the old log did not have.

    Usually the records are, group by group, the old ones or the cleaned ones. As in Kafka,
    a kill after a group's ``.swap`` files exist but before the old files are renamed can
    also leave old segments at the group's end whose base is past the last retained batch
    (the loader only deletes old files inside the swap segment's offset range): their
    records were all superseded, so they come back as uncleaned duplicates, nothing lost."""
    clock = Clock()
    src = tmp_path / "src" / "t-0"
    build_crash_log(src, clock)
    cfg = compact_config(**{"segment.bytes": 600})  # groups of 2 source segments
    clock.now += 1000

    old_log = Log.open(src, cfg, time_source=clock)
    old = data_records(old_log)
    old_log.close()
    ref_dir = tmp_path / "ref" / "t-0"
    shutil.copytree(src, ref_dir)
    ref = Log.open(ref_dir, cfg, time_source=clock)
    ref_result = clean_log(ref, first_dirty_offset=None, now=clock.now, force=True, file_delete_delay_ms=delete_delay)
    new = data_records(ref)
    ref.close()
    bounds = [g.base_offset for g in ref_result.groups] + [ref_result.checkpoint_offset]
    assert len(ref_result.groups) >= 3 and any(len(g.segments) > 1 for g in ref_result.groups)
    # The acceptable states: the first k groups swapped in, the others not yet.
    states = [[r for r in new if r[0] < b] + [r for r in old if r[0] >= b] for b in bounds]
    assert states[0] == old and states[-1] == new

    real_replace, real_unlink = os.replace, os.unlink
    seen_states = set()
    steps = []
    step = 0
    while True:
        step += 1
        work = tmp_path / f"crash{step}" / "t-0"
        shutil.copytree(src, work)
        log = Log.open(work, cfg, time_source=clock)
        counter = {"n": 0}

        def tick(*_a):
            counter["n"] += 1
            if counter["n"] == step:
                raise Crash()

        # Only operations that change the directory are crash points.
        def replace(a, b, **kw):
            if os.path.exists(a):
                tick()
            return real_replace(a, b, **kw)

        def unlink(p, **kw):
            if os.path.exists(p):
                tick()
            return real_unlink(p, **kw)

        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "unlink", unlink)
        crashed = False
        try:
            clean_log(log, first_dirty_offset=None, now=clock.now, force=True, file_delete_delay_ms=delete_delay,
                      io_buffer_size=512, _hook=tick)
            steps.append(counter["n"])
        except Crash:
            crashed = True
        finally:
            monkeypatch.setattr(os, "replace", real_replace)
            monkeypatch.setattr(os, "unlink", real_unlink)
        # The killed process's state is abandoned; a new one loads what is on disk.
        again = reload(work, cfg, clock)
        try:
            got = data_records(again)
            assert set(new) <= set(got) <= set(old), (step, sorted(os.listdir(work)))
            assert [r[0] for r in got] == sorted({r[0] for r in got})
            if got in states:
                seen_states.add(states.index(got))
        finally:
            again.close()
        assert errors_of(work) == [], step
        if not crashed:
            break
        shutil.rmtree(work.parent)
    assert seen_states == {states.index(st) for st in states} and step > 20 and steps == [step - 1]


def test_cleaned_leftovers_from_an_earlier_crash_are_replaced(tmp_path):
    clock = Clock()
    w = build_crash_log(tmp_path / "t-0", clock)
    (w.dir / "00000000000000000000.log.cleaned").write_bytes(b"garbage")
    log = Log.open(w.dir, w.config, time_source=clock)  # the loader deletes .cleaned files
    try:
        (w.dir / "00000000000000000000.log.cleaned").write_bytes(b"garbage")  # and the cleaner too
        result = clean_log(log, first_dirty_offset=None, now=clock.now, force=True)
        assert result.cleaned
    finally:
        log.close()
    assert errors_of(w.dir) == []


def test_deleted_files_are_left_for_the_caller_with_a_delay(tmp_path):
    clock = Clock()
    w = build_crash_log(tmp_path / "t-0", clock)
    log = Log.open(w.dir, compact_config(**{"segment.bytes": 700}), time_source=clock)
    try:
        result = clean_log(log, first_dirty_offset=None, now=clock.now, force=True, file_delete_delay_ms=60000)
        left = sorted(n for n in os.listdir(w.dir) if n.endswith(".deleted"))
        assert left and set(result.deleted_files) == set(left)
        assert any(n.endswith(".snapshot.deleted") for n in left)
    finally:
        log.close()
    again = reload(w.dir, w.config, clock)  # the loader sweeps them
    again.close()
    assert not [n for n in os.listdir(w.dir) if n.endswith(".deleted")]


def test_module_has_no_print():
    assert "print(" not in Path(cleaner_mod.__file__).read_text()


record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=200)),
    st.one_of(st.none(), st.binary(max_size=300), st.just(b"v" * 9000)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=8), st.sampled_from([0, 1, 3, 4]), st.integers(0, 1 << 40))
def test_scan_keys_agrees_with_the_decoder(records, codec, base):
    raw = encode_batch([(base + i * 3, T0 - 5000 + i * 100_000, k, v, tuple(h)) for i, (k, v, h) in enumerate(records)],
                       base_offset=base, compression_codec=codec)
    batch = next(iter(iter_batches(raw)))
    assert cleaner_mod.scan_keys(batch) == [(r.offset, r.key, r.value is not None) for r in batch.records()]


def test_a_compressed_batch_is_rebuilt_with_its_codec(tmp_path):
    clock = Clock()
    w = Writer(tmp_path / "t-0", compact_config(**{"segment.bytes": 4000}), clock)
    raw = encode_batch([(i, T0 + i, b"k%d" % (i % 3), b"value-%d" % i, (("h", b"x"),)) for i in range(9)],
                       compression_codec=4)
    info = w.log.append_as_leader(raw)
    w.log.append_as_leader(encode_batch([(0, T0, b"k0", b"newer")]))
    w.log.roll()
    w.clean()
    batch = next(b for s in w.log.segments for b in s.batches() if b.base_offset == info.first_offset)
    assert batch.compression == 4 and batch.last_offset == info.last_offset and batch.is_valid()
    assert [(r.offset, r.key, r.headers) for r in batch.records()] == [(7, b"k1", (("h", b"x"),)),
                                                                       (8, b"k2", (("h", b"x"),))]
    assert errors_of(w.dir) == []

"""Hypothesis round trips: v2 batches and legacy messages, every codec."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from plog.formats.batches import iter_batches
from plog.formats.legacy import encode_legacy_batch
from plog.formats.record_batch import encode_batch
from plog.formats.records import CREATE_TIME, LOG_APPEND_TIME

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=12), maybe_bytes)
timestamps = st.one_of(st.just(-1), st.integers(0, 2**62))


@st.composite
def v2_records(draw):
    base = draw(st.integers(0, 2**62))
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
    offsets, o = [], base
    for g in gaps:
        offsets.append(o)
        o += g
    ts0 = draw(st.integers(2**20, 2**40))
    recs = [(off, ts0 + draw(st.integers(-(2**20), 2**20)), draw(maybe_bytes), draw(maybe_bytes),
             tuple(draw(st.lists(header, max_size=4)))) for off in offsets]
    return base, recs


@settings(max_examples=150, deadline=None)
@given(v2_records(), st.sampled_from([0, 1, 2, 3, 4]), st.integers(-1, 2**31 - 1), st.integers(-1, 32767),
       st.integers(-1, 2**31 - 1), st.booleans(), st.integers(-1, 2**31 - 1), st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]))
def test_v2_round_trip(data, codec, pid, epoch, seq, txn, ple, ts_type):
    base, recs = data
    lat = recs[0][1] + 5 if ts_type == LOG_APPEND_TIME else None
    raw = encode_batch(recs, base_offset=base, compression_codec=codec, producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=txn, partition_leader_epoch=ple, timestamp_type=ts_type,
                       log_append_time=lat)
    (b,) = list(iter_batches(raw))
    assert b.is_valid() and b.compression == codec
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional, b.partition_leader_epoch) == (
        pid, epoch, seq, txn, ple)
    assert b.base_offset == base and b.last_offset == recs[-1][0] and b.records_count == len(recs)
    got = b.records()
    if ts_type == LOG_APPEND_TIME:
        assert all(r.timestamp == lat for r in got)
        assert [(r[0], r[2], r[3], r[4]) for r in got] == [(r[0], r[2], r[3], r[4]) for r in recs]
    else:
        assert b.max_timestamp == max(r[1] for r in recs)
        assert [tuple(r) for r in got] == recs
    # Re-encoding what was decoded gives the same bytes (the encoder is deterministic).
    again = encode_batch(got if ts_type == CREATE_TIME else recs, base_offset=base, compression_codec=codec,
                         producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn,
                         partition_leader_epoch=ple, timestamp_type=ts_type, log_append_time=lat)
    assert again == raw


@st.composite
def legacy_records(draw):
    magic = draw(st.sampled_from([0, 1]))
    base = draw(st.integers(0, 2**40))
    n = draw(st.integers(1, 30))
    recs = [(base + i, draw(st.integers(0, 2**40)) if magic else -1, draw(maybe_bytes), draw(maybe_bytes))
            for i in range(n)]
    return magic, recs


@settings(max_examples=150, deadline=None)
@given(legacy_records(), st.sampled_from([0, 1, 2, 3]))
def test_legacy_round_trip(data, codec):
    magic, recs = data
    raw = encode_legacy_batch(recs, magic=magic, compression_codec=codec)
    batches = list(iter_batches(raw))
    assert all(b.is_valid() for b in batches)
    got = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records()]
    assert got == recs
    if codec:
        assert len(batches) == 1 and batches[0].last_offset == recs[-1][0]

"""Roll conditions, LogAppendTime, durability, idempotence and the loader's temp-file passes."""

from __future__ import annotations

import os
import shutil

import pytest

from plog.engine.storage.log_config import LogConfig
from plog.engine.errors import OutOfOrderSequenceError
from plog.engine.storage.log import Log
from plog.formats.batches import iter_batches
from plog.formats.record_batch import encode_batch
from plog.formats.records import LOG_APPEND_TIME

TS = 1700000000000


class Clock:
    def __init__(self, now=TS):
        self.now = now

    def __call__(self):
        return self.now


def batch(n=2, ts=TS, **kw):
    return encode_batch([(i, ts + i, b"k%d" % i, b"value") for i in range(n)], **kw)


def test_time_based_roll_uses_first_batch_timestamp_and_jitter(tmp_path):
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000), time_source=clock)
    log.append_as_leader(batch(ts=TS))
    log.append_as_leader(batch(ts=TS + 999))  # within segment.ms of the first batch
    assert len(log.segments) == 1
    log.append_as_leader(batch(ts=TS + 1002))  # 1002 + 1 - TS > 1000: roll
    assert log.segments.base_offsets == [0, 4]
    log.close()


def test_roll_when_the_offset_index_is_full(tmp_path):
    # 6 offset-index slots (4 time-index slots, never filled: timestamps do not grow);
    # with index.interval.bytes 0 every append after the first adds an entry.
    log = Log.open(tmp_path / "t-0", LogConfig(segment_index_bytes=48, index_interval_bytes=0))
    for _ in range(20):
        log.append_as_leader(batch())
    assert len(log.segments) == 3
    for seg in list(log.segments)[:-1]:
        assert seg.offset_index.entries == 6 and seg.time_index.entries == 1


def test_a_full_time_index_rolls_first(tmp_path):
    # 24 bytes: 3 offset slots but 2 time slots, one of them kept for the roll entry.
    log = Log.open(tmp_path / "t-0", LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    for i in range(6):
        log.append_as_leader(batch(ts=TS + i))
    assert [s.offset_index.entries for s in list(log.segments)[:-1]] == [1, 1]
    log.close()


def test_roll_when_relative_offset_would_overflow(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(batch())
    far = (1 << 31) + 10
    log.append_as_follower(encode_batch([(far, TS, b"k", b"v")], base_offset=far))
    assert log.segments.base_offsets == [0, far]
    assert log.log_end_offset == far + 1
    log.close()


def test_log_append_time_assigns_timestamps(tmp_path):
    clock = Clock(TS + 5000)
    log = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), time_source=clock)
    info = log.append_as_leader(batch(3))
    assert info.log_append_time == TS + 5000
    (b,) = list(iter_batches(log.read(0).records))
    assert b.is_valid() and b.timestamp_type == LOG_APPEND_TIME and b.max_timestamp == TS + 5000
    assert [r.timestamp for r in b.records()] == [TS + 5000] * 3
    log.close()


def test_fsync_on_produce_moves_the_recovery_point(tmp_path):
    log = Log.open(tmp_path / "a-0", LogConfig())
    log.append_as_leader(batch())
    assert log.recovery_point == log.log_end_offset == 2
    log.close()
    lazy = Log.open(tmp_path / "b-0", LogConfig(fsync_on_produce=False, flush_messages=5))
    lazy.append_as_leader(batch(2))
    assert lazy.recovery_point == 0  # Kafka's default: the page cache, nothing fsynced yet
    lazy.append_as_leader(batch(3))  # 5 unflushed messages reach flush.messages
    assert lazy.recovery_point == 5
    lazy.close()


def test_idempotent_retry_is_acknowledged_not_written(tmp_path):
    import time

    now = int(time.time() * 1000)  # producers idle for over a day expire on load, as in Kafka

    def batch(n, **kw):
        return encode_batch([(i, now + i, b"k%d" % i, b"value") for i in range(n)], **kw)

    log = Log.open(tmp_path / "t-0", LogConfig())
    first = log.append_as_leader(batch(3, producer_id=9, producer_epoch=0, base_sequence=0))
    again = log.append_as_leader(batch(3, producer_id=9, producer_epoch=0, base_sequence=0))
    assert again.duplicate and (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(1, producer_id=9, producer_epoch=0, base_sequence=7))
    nxt = log.append_as_leader(batch(2, producer_id=9, producer_epoch=0, base_sequence=3))
    assert nxt.first_offset == 3
    log.close()
    # The producer state survives a restart through the snapshot taken at close.
    log = Log.open(tmp_path / "t-0", LogConfig())
    assert log.append_as_leader(batch(2, producer_id=9, producer_epoch=0, base_sequence=3)).duplicate
    log.close()


def test_aborted_transaction_is_indexed(tmp_path):
    # The marker takes the broker's clock; keep it next to the data so no time roll happens.
    log = Log.open(tmp_path / "t-0", LogConfig(), time_source=Clock(TS + 10))
    log.append_as_leader(batch(2, producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True))
    log.append_end_txn_marker(5, 0, commit=False)
    txns = log.active_segment.txn_index.all_aborted_txns()
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in txns] == [(5, 0, 2, 3)]
    log.close()
    # A full recovery rebuilds the same transaction index.
    os.unlink(tmp_path / "t-0" / "00000000000000000000.txnindex")
    log = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=False, time_source=Clock(TS + 10))
    txns = log.active_segment.txn_index.all_aborted_txns()
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in txns] == [(5, 0, 2, 3)]
    log.close()


def test_loader_completes_swaps_and_drops_temp_files(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, LogConfig(segment_bytes=200))
    for _ in range(6):
        log.append_as_leader(batch())
    bases = log.segments.base_offsets
    log.close()
    assert len(bases) >= 3
    first, second = bases[0], bases[1]
    p = lambda base, suffix: d / f"{base:020d}{suffix}"  # noqa: E731
    # An interrupted compaction: the first segment's replacement is ready as .swap,
    # the old files are still there; a stray .cleaned and a .deleted are left too.
    for suffix in (".log", ".index", ".timeindex"):
        if p(first, suffix).exists():
            shutil.copy(p(first, suffix), str(p(first, suffix)) + ".swap")
    shutil.copy(p(second, ".log"), str(p(second, ".log")) + ".deleted")
    (d / f"{bases[-1] + 100:020d}.log.cleaned").write_bytes(b"partial")
    (d / f"{second:020d}.timeindex.orphan").write_bytes(b"")
    log = Log.open(d, LogConfig(segment_bytes=200))
    names = os.listdir(d)
    assert not any(n.endswith((".swap", ".cleaned", ".deleted")) for n in names)
    assert log.segments.base_offsets == bases and log.log_end_offset == 12
    assert any("swap" in a for a in log.load_report.actions)
    log.close()


def test_offline_open_changes_nothing(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, LogConfig(segment_bytes=300))
    for _ in range(5):
        log.append_as_leader(batch())
    log.close()
    before = {n: (d / n).read_bytes() for n in os.listdir(d)}
    ro = Log.open(d, LogConfig(), writable=False, had_clean_shutdown=False)
    assert ro.log_end_offset == 10 and [r.offset for r in ro.read_records()] == list(range(10))
    ro.close()
    assert {n: (d / n).read_bytes() for n in os.listdir(d)} == before
